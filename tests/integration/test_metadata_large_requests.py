"""A Metadata request naming a great many topics does not hold the broker's event loop:
other clients are answered while it is, and its answer is the one Kafka gives.

The broker runs in this process (its real listener, real sockets), with its Metadata
handler observed — the real handler, called through a wrapper that marks when it
starts and ends — so a test can tell whether another client was answered *while* it ran.
"""

from __future__ import annotations

import asyncio
import dataclasses
import struct
import threading
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_response_schema
from tests.rawclient import read_response_async, request_frame

from samsa.broker.config import BrokerConfig
from samsa.broker.handlers.metadata import ErrorEntries, encode_entity
from samsa.broker.server import Broker
from samsa.errors import ErrorCode
from samsa.protocol.build import nested_class
from samsa.protocol.codec import RequestHeader
from samsa.protocol.wire import encode_uvarint

METADATA, API_VERSIONS = 3, 18
VERSION = 12
TOPICS = 200_000


def _metadata_frame(names: list[str], correlation_id: int) -> bytes:
    """A Metadata v12 request naming ``names``, none to be created, written directly (kio's
    encoder takes seconds for 200,000 topics); checked against kio's in a test below."""
    header = struct.pack(">hhih", METADATA, VERSION, correlation_id, 4) + b"test" + b"\0"
    topics = [encode_uvarint(len(names) + 1)]
    for name in names:
        encoded = name.encode()
        topics += [bytes(16), encode_uvarint(len(encoded) + 1), encoded, b"\0"]
    body = b"".join([header, *topics, b"\0\0\0"])  # no creation, no operations, no tags
    return struct.pack(">i", len(body)) + body


def test_the_metadata_frame_written_here_is_the_one_kio_writes() -> None:
    names = ["a", "topic-" + "x" * 200]
    values = {"topics": [{"name": n, "topic_id": None} for n in names],
              "allow_auto_topic_creation": False,
              "include_topic_authorized_operations": False}  # fmt: skip
    assert _metadata_frame(names, 7) == request_frame(
        METADATA, VERSION, values, correlation_id=7, client_id="test"
    )


@pytest.mark.parametrize("version", range(14))
@pytest.mark.parametrize(
    "code", [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.TOPIC_AUTHORIZATION_FAILED]
)
def test_an_error_entry_is_encoded_as_kio_encodes_it(version: int, code: int) -> None:
    try:
        response_cls = load_response_schema(METADATA, version)
    except Exception:
        pytest.skip(f"kio has no Metadata v{version}")
    topic_class = nested_class(response_cls, "topics")
    entries = ErrorEntries()
    for name in ["", "t", "déjà-vu", "n" * 300]:
        expected = encode_entity(topic_class, {"error_code": code, "name": name})
        assert entries.of(topic_class, code, name) == expected


def test_other_clients_are_answered_while_a_metadata_request_of_200k_topics_is(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        config = BrokerConfig.from_props(
            {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data")}
        )
        broker = Broker(config)
        started, finished = asyncio.Event(), asyncio.Event()
        registered = broker.registry._entries[METADATA]

        async def observed(header: RequestHeader, body: Any) -> Any:
            started.set()
            try:
                return await registered.handler(header, body)
            finally:
                finished.set()

        broker.registry._entries[METADATA] = dataclasses.replace(registered, handler=observed)
        await broker.start()
        try:
            port = broker.bound[0].port
            big_reader, big_writer = await asyncio.open_connection("127.0.0.1", port)
            small_reader, small_writer = await asyncio.open_connection("127.0.0.1", port)
            names = [f"missing-{i:06d}" for i in range(TOPICS)]
            big_writer.write(_metadata_frame(names, 1))
            await asyncio.wait_for(started.wait(), 60)

            small_writer.write(request_frame(API_VERSIONS, 3, {}, correlation_id=2))
            versions = await asyncio.wait_for(
                read_response_async(small_reader, API_VERSIONS, 3), 60
            )
            assert versions.error_code == ErrorCode.NONE
            assert not finished.is_set(), "answered only after the Metadata handler ended"

            metadata = await asyncio.wait_for(
                read_response_async(big_reader, METADATA, VERSION), 60
            )
            assert [t.name for t in metadata.topics] == names
            assert {t.error_code for t in metadata.topics} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
            for writer in (big_writer, small_writer):
                writer.close()
        finally:
            await broker.stop()

    asyncio.run(run())


def test_a_request_of_megabytes_is_decoded_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Decoding a frame of tens of megabytes takes seconds: the loop must not wait for it.
    # The real decoder runs; a wrapper notes on which thread it ran for which frame size.
    from samsa.broker.network import connection

    decoded_on: dict[int, int] = {}
    real = connection.decode_request

    def noted(frame: bytes) -> Any:
        decoded_on[len(frame)] = threading.get_ident()
        return real(frame)

    monkeypatch.setattr(connection, "decode_request", noted)

    async def run() -> None:
        config = BrokerConfig.from_props(
            {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data")}
        )
        broker = Broker(config)
        await broker.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", broker.bound[0].port)
            big = _metadata_frame([f"missing-{i:06d}" for i in range(60_000)], 1)
            assert len(big) > 1 << 20
            writer.write(big + request_frame(API_VERSIONS, 3, {}, correlation_id=2))
            metadata = await asyncio.wait_for(read_response_async(reader, METADATA, VERSION), 60)
            assert len(metadata.topics) == 60_000
            versions = await asyncio.wait_for(read_response_async(reader, API_VERSIONS, 3), 60)
            assert versions.error_code == ErrorCode.NONE
            writer.close()
        finally:
            await broker.stop()

    asyncio.run(run())
    loop_thread = threading.get_ident()  # asyncio.run ran the loop on this thread
    sizes = sorted(decoded_on)
    assert decoded_on[sizes[-1]] != loop_thread  # the Metadata frame
    assert decoded_on[sizes[0]] == loop_thread  # the small ApiVersions frame
