"""What a client is told of an error: the broker's message without its file paths."""

from __future__ import annotations

from samsa.broker.api import client_message, error_fields
from samsa.errors import ErrorCode, InvalidConfigError, KafkaStorageError


def test_an_os_error_escaping_a_handler_names_only_the_file() -> None:
    exc = OSError(36, "File name too long", "/srv/samsa/data/t-0", None, "/srv/samsa/data/t-0.x")
    assert client_message(exc) == "OSError: [Errno 36] File name too long: '…/t-0' -> '…/t-0.x'"


def test_a_storage_error_is_answered_with_its_code_and_no_path() -> None:
    exc = KafkaStorageError("append to /var/lib/samsa/t-0/00000000000000000000.log failed")
    assert error_fields(exc) == {
        "error_code": ErrorCode.KAFKA_STORAGE_ERROR,
        "error_message": f"[{exc.code.name}] append to …/00000000000000000000.log failed",
    }


def test_messages_without_paths_are_unchanged() -> None:
    for exc in (
        ZeroDivisionError("a handler bug"),
        InvalidConfigError("listeners: PLAINTEXT://host:9092 is not allowed here"),
        InvalidConfigError("1/2 of the replicas, v0/v1 records, a / b"),
    ):
        whole = str(exc) if isinstance(exc, InvalidConfigError) else f"{type(exc).__name__}: {exc}"
        assert client_message(exc) == whole
