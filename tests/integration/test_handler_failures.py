"""The dispatch boundary: a handler that raises gets its request answered, and logged once.

The broker runs in this process (its real listener, real sockets), so a
handler that fails can be plugged into its registry for an API key samsa does
not serve: UpdateFeatures (57), whose response has a top-level error code and
message, and AlterReplicaLogDirs (34), whose response has none.
"""

from __future__ import annotations

import asyncio
import io
import logging
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.serial import entity_writer
from tests.rawclient import read_response_async

from samsa.broker.config import BrokerConfig
from samsa.broker.server import Broker
from samsa.errors import for_code
from samsa.protocol.build import build
from samsa.protocol.codec import RequestHeader

UPDATE_FEATURES, ALTER_REPLICA_LOG_DIRS = 57, 34
UNKNOWN_SERVER_ERROR = -1
NOT_CONTROLLER = 41


async def _failing_handler(header: RequestHeader, body: Any) -> Any:
    raise ZeroDivisionError("a handler bug")


def _frame(api_key: int, version: int, correlation_id: int) -> bytes:
    request_cls = load_request_schema(api_key, version)
    header_cls = request_cls.__header_schema__
    buffer = io.BytesIO()
    entity_writer(header_cls)(
        buffer,
        build(header_cls, {"request_api_key": api_key, "request_api_version": version,
                           "correlation_id": correlation_id, "client_id": "test"}),
    )  # fmt: skip
    entity_writer(request_cls)(buffer, build(request_cls, {}))
    payload = buffer.getvalue()
    return struct.pack(">i", len(payload)) + payload


def _with_broker(
    tmp_path: Path,
    handler: Callable[[RequestHeader, Any], Awaitable[Any]],
    scenario: Callable[[int], Awaitable[None]],
) -> None:
    async def run() -> None:
        config = BrokerConfig.from_props(
            {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data")}
        )
        broker = Broker(config)
        broker.registry.add(UPDATE_FEATURES, 0, 1, handler)
        broker.registry.add(ALTER_REPLICA_LOG_DIRS, 1, 2, handler)
        await broker.start()
        try:
            await asyncio.wait_for(scenario(broker.bound[0].port), 30)
        finally:
            await broker.stop()

    asyncio.run(run())


def test_a_handler_that_raises_is_answered_with_unknown_server_error(tmp_path: Path) -> None:
    async def scenario(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for correlation_id in (1, 2):  # the connection stays usable
            writer.write(_frame(UPDATE_FEATURES, 1, correlation_id))
            response = await read_response_async(reader, UPDATE_FEATURES, 1)
            assert response.error_code == UNKNOWN_SERVER_ERROR
            assert response.error_message == "ZeroDivisionError: a handler bug"
        writer.close()

    _with_broker(tmp_path, _failing_handler, scenario)


def test_a_kafka_error_escaping_a_handler_is_answered_with_its_own_code(tmp_path: Path) -> None:
    async def raises_not_controller(header: RequestHeader, body: Any) -> Any:
        raise for_code(NOT_CONTROLLER)("not the controller")

    async def scenario(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_frame(UPDATE_FEATURES, 1, 1))
        response = await read_response_async(reader, UPDATE_FEATURES, 1)
        assert response.error_code == NOT_CONTROLLER
        writer.close()

    _with_broker(tmp_path, raises_not_controller, scenario)


def test_a_handler_that_raises_without_an_error_code_to_answer_closes_the_connection(
    tmp_path: Path,
) -> None:
    async def scenario(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_frame(ALTER_REPLICA_LOG_DIRS, 1, 1))
        assert await reader.read() == b""  # closed, with nothing sent
        writer.close()

    _with_broker(tmp_path, _failing_handler, scenario)


def test_repeated_handler_failures_log_one_warning_per_connection_and_one_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario(port: int) -> None:
        for _ in range(3):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            for correlation_id in range(50):
                writer.write(_frame(UPDATE_FEATURES, 1, correlation_id))
            for _ in range(50):
                await read_response_async(reader, UPDATE_FEATURES, 1)
            writer.close()

    with caplog.at_level(logging.WARNING, logger="samsa.broker.server"):
        _with_broker(tmp_path, _failing_handler, scenario)
    failures = [r for r in caplog.records if "a handler bug" in r.getMessage()]
    assert len(failures) == 3
    assert sum(r.exc_info is not None for r in failures) == 1
