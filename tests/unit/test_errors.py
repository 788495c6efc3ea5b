"""The exception tree and Kafka's error-code table."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode as KioErrorCode

import samsa.errors
from samsa.errors import (
    CompressionError,
    ConfigError,
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaError,
    KafkaStorageError,
    LogClosedError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    RecordFormatError,
    SamsaError,
    StorageError,
    TruncatedBatchError,
    UnknownServerError,
    UnsupportedCompressionTypeError,
    for_code,
)

# Every code Kafka 4 defines (up to SHARE_SESSION_LIMIT_REACHED, 133), and UNKNOWN_SERVER_ERROR.
KAFKA_CODES = [-1, *range(1, 134)]


def test_error_code_names_every_kafka_code_as_kafka_does() -> None:
    assert {code.value: code.name for code in ErrorCode} == {
        code.value: code.name.upper() for code in KioErrorCode
    }


def test_error_classes_are_retriable_exactly_where_kafkas_are() -> None:
    for code in KioErrorCode:
        if code.value != 0:
            assert for_code(code.value).retriable is code.retriable, code.name


def test_every_error_class_carries_its_code_as_an_error_code() -> None:
    for cls in map(for_code, KAFKA_CODES):
        assert isinstance(cls.code, ErrorCode)
        assert cls.name == cls.code.name


def test_for_code_maps_every_kafka_code_to_a_class_with_that_code() -> None:
    assert {code: for_code(code).code for code in KAFKA_CODES} == {c: c for c in KAFKA_CODES}


def test_every_kafka_code_has_its_own_class() -> None:
    classes = {for_code(code) for code in KAFKA_CODES}
    assert len(classes) == len(KAFKA_CODES)


def test_every_kafka_code_has_its_own_name() -> None:
    names = {for_code(code).name for code in KAFKA_CODES}
    assert len(names) == len(KAFKA_CODES)


def test_every_error_class_is_importable_from_samsa_errors() -> None:
    for cls in map(for_code, KAFKA_CODES):
        assert getattr(samsa.errors, cls.__name__) is cls
        assert cls.__module__ == "samsa.errors"


def test_every_error_class_name_ends_in_a_single_error() -> None:
    for name in (for_code(code).__name__ for code in KAFKA_CODES):
        assert name.endswith("Error"), name
        assert not name.endswith("ErrorError"), name


def test_every_error_class_says_when_it_is_raised() -> None:
    for cls in map(for_code, KAFKA_CODES):
        assert cls.__doc__, cls


@pytest.mark.parametrize(
    ("code", "name"),
    [
        (-1, "UNKNOWN_SERVER_ERROR"),
        (1, "OFFSET_OUT_OF_RANGE"),
        (2, "CORRUPT_MESSAGE"),
        (3, "UNKNOWN_TOPIC_OR_PARTITION"),
        (6, "NOT_LEADER_OR_FOLLOWER"),
        (10, "MESSAGE_TOO_LARGE"),
        (35, "UNSUPPORTED_VERSION"),
        (47, "INVALID_PRODUCER_EPOCH"),
        (87, "INVALID_RECORD"),
        (127, "VOTER_NOT_FOUND"),
    ],
)
def test_error_classes_carry_kafkas_names(code: int, name: str) -> None:
    assert for_code(code).name == name


@pytest.mark.parametrize(
    ("code", "retriable", "invalid_metadata"),
    [
        (2, True, False),  # CORRUPT_MESSAGE
        (3, True, True),  # UNKNOWN_TOPIC_OR_PARTITION
        (6, True, True),  # NOT_LEADER_OR_FOLLOWER
        (7, True, False),  # REQUEST_TIMED_OUT
        (10, False, False),  # MESSAGE_TOO_LARGE
        (13, True, True),  # NETWORK_EXCEPTION
        (15, True, False),  # COORDINATOR_NOT_AVAILABLE
        (19, True, False),  # NOT_ENOUGH_REPLICAS
        (29, False, False),  # TOPIC_AUTHORIZATION_FAILED
        (45, False, False),  # OUT_OF_ORDER_SEQUENCE_NUMBER
        (56, True, True),  # KAFKA_STORAGE_ERROR
        (74, True, True),  # FENCED_LEADER_EPOCH
        (84, True, True),  # ELECTION_NOT_NEEDED: an InvalidMetadataException in Kafka
        (75, True, False),  # UNKNOWN_LEADER_EPOCH: retry without refreshing metadata
        (76, False, False),  # UNSUPPORTED_COMPRESSION_TYPE
        (-1, False, False),  # UNKNOWN_SERVER_ERROR
    ],
)
def test_error_classes_carry_kafkas_retriable_and_invalid_metadata_flags(
    code: int, retriable: bool, invalid_metadata: bool
) -> None:
    cls = for_code(code)
    assert (cls.retriable, cls.invalid_metadata) == (retriable, invalid_metadata)


def test_only_retriable_errors_ask_for_a_metadata_refresh() -> None:
    for cls in map(for_code, KAFKA_CODES):
        assert cls.retriable or not cls.invalid_metadata, cls


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        (-1, UnknownServerError),
        (1, OffsetOutOfRangeError),
        (2, CorruptRecordError),
        (10, MessageTooLargeError),
        (32, InvalidTimestampError),
        (56, KafkaStorageError),
        (76, UnsupportedCompressionTypeError),
        (87, InvalidRecordError),
    ],
)
def test_for_code_returns_the_class_samsa_raises(code: int, cls: type[KafkaError]) -> None:
    assert for_code(code) is cls


def test_for_code_zero_raises_value_error() -> None:
    with pytest.raises(ValueError):
        for_code(0)


@pytest.mark.parametrize("code", [-2, 134, 999, 32767])
def test_for_code_of_an_unknown_code_returns_unknown_server_error(code: int) -> None:
    assert for_code(code) is UnknownServerError


def test_corrupt_record_error_is_both_a_kafka_error_and_a_record_format_error() -> None:
    assert issubclass(CorruptRecordError, KafkaError)
    assert issubclass(CorruptRecordError, RecordFormatError)


def test_truncated_batch_error_is_a_corrupt_record_error_with_its_code() -> None:
    assert issubclass(TruncatedBatchError, CorruptRecordError)
    assert TruncatedBatchError.code == 2


@pytest.mark.parametrize(
    "cls",
    [
        ConfigError,
        RecordFormatError,
        CompressionError,
        StorageError,
        LogClosedError,
        KafkaError,
    ],
)
def test_every_exception_family_derives_from_samsa_error(cls: type[Exception]) -> None:
    assert issubclass(cls, SamsaError)


def test_every_kafka_error_class_derives_from_kafka_error() -> None:
    for cls in map(for_code, KAFKA_CODES):
        assert issubclass(cls, KafkaError), cls


def test_log_closed_error_is_a_storage_error() -> None:
    assert issubclass(LogClosedError, StorageError)


def test_kafka_error_is_caught_by_its_code_class() -> None:
    with pytest.raises(for_code(6)) as info:
        raise for_code(6)("partition moved")
    assert info.value.code == 6
    assert info.value.retriable


def test_kafka_error_message_is_prefixed_with_its_kafka_name() -> None:
    assert str(MessageTooLargeError("batch of 2000000 bytes")) == (
        "[MESSAGE_TOO_LARGE] batch of 2000000 bytes"
    )


def test_kafka_error_without_detail_prints_its_kafka_name() -> None:
    assert str(CorruptRecordError()) == "[CORRUPT_MESSAGE]"
