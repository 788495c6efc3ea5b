"""A minimal Kafka request/response exchange for tests: any API, any version, from a dict."""

from __future__ import annotations

import asyncio
import io
import socket
import struct
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from samsa.protocol.build import build
from samsa.protocol.legacy import (
    decode_legacy_response,
    encode_legacy_request,
    legacy_version,
)

HANG_S = 30  # socket timeout: only detects a broker that never answers
CREATE_TOPICS = 19


def exchange(bootstrap: str, api_key: int, version: int, values: dict[str, Any]) -> Any:
    """Send one request built from ``values`` and return the decoded kio response (for a
    version kio lacks, the response in its old layout as nested dicts)."""
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=HANG_S) as sock:
        sock.sendall(request_frame(api_key, version, values))
        return read_response(sock, api_key, version)


def create_topic(bootstrap: str, topic: str) -> None:
    """Create ``topic`` with one partition (CreateTopics v0), asserting it was created."""
    response = exchange(bootstrap, CREATE_TOPICS, 0, {
        "topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1}],
        "timeout": 10_000,
    })  # fmt: skip
    assert [t["error_code"] for t in response["topics"]] == [0]


def request_frame(
    api_key: int,
    version: int,
    values: dict[str, Any],
    correlation_id: int = 1,
    client_id: str = "rawclient",
) -> bytes:
    """A size-prefixed request frame built from ``values`` (fields left out get defaults)."""
    legacy = legacy_version(api_key, version)
    if legacy is not None:
        client_id = b"rawclient"
        payload = struct.pack(">hhih", api_key, version, correlation_id, len(client_id))
        payload += client_id + encode_legacy_request(legacy, values)
        return struct.pack(">i", len(payload)) + payload
    request_cls = load_request_schema(api_key, version)
    body = io.BytesIO()
    header_cls = request_cls.__header_schema__
    entity_writer(header_cls)(
        body,
        build(header_cls, {"request_api_key": api_key, "request_api_version": version,
                           "correlation_id": correlation_id, "client_id": client_id}),
    )  # fmt: skip
    entity_writer(request_cls)(body, build(request_cls, values))
    payload = body.getvalue()
    return struct.pack(">i", len(payload)) + payload


def read_response(sock: socket.socket, api_key: int, version: int) -> Any:
    """Read one response frame from ``sock`` and return it decoded."""
    return read_response_with_id(sock, api_key, version)[1]


def read_response_with_id(sock: socket.socket, api_key: int, version: int) -> tuple[int, Any]:
    """Read one response frame from ``sock``: its correlation id and the decoded response."""
    size = struct.unpack(">i", recv_exactly(sock, 4))[0]
    return decode_response(recv_exactly(sock, size), api_key, version)


async def read_response_async(reader: asyncio.StreamReader, api_key: int, version: int) -> Any:
    """Read one response frame from ``reader`` and return it decoded."""
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return decode_response(await reader.readexactly(size), api_key, version)[1]


def decode_response(frame: bytes, api_key: int, version: int) -> tuple[int, Any]:
    """A response frame (without its size): its correlation id and the decoded response."""
    legacy = legacy_version(api_key, version)
    if legacy is not None:  # response header v0
        return struct.unpack_from(">i", frame)[0], decode_legacy_response(legacy, frame[4:])
    response_cls = load_response_schema(api_key, version)
    header, header_size = entity_reader(response_cls.__header_schema__)(frame, 0)
    response, _ = entity_reader(response_cls)(frame, header_size)
    return int(header.correlation_id), response


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        data += chunk
    return bytes(data)
