"""decode_produce_request: Produce bodies read as kio reads them, records left in the frame."""

from __future__ import annotations

import io
import struct
import uuid
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.serial import entity_writer

from samsa.protocol.build import build
from samsa.protocol.codec import decode_request
from samsa.protocol.produce_request import decode_produce_request
from samsa.records import RecordBatchBuilder

VERSIONS = range(3, 14)


def batch(*values: bytes) -> bytes:
    builder = RecordBatchBuilder()
    for value in values:
        builder.append(value)
    return bytes(builder.build())


def frame(version: int, body: dict[str, Any], client_id: str | None = "producer-1") -> bytes:
    """A Produce request frame without its size prefix, written by kio."""
    request_cls = load_request_schema(0, version)
    header_cls = request_cls.__header_schema__
    out = io.BytesIO()
    header = {"request_api_key": 0, "request_api_version": version, "correlation_id": 42,
              "client_id": client_id}  # fmt: skip
    entity_writer(header_cls)(out, build(header_cls, header))
    entity_writer(request_cls)(out, build(request_cls, body))
    return out.getvalue()


def topic(version: int, name: str, partitions: list[dict[str, Any]]) -> dict[str, Any]:
    if version >= 13:
        return {"topic_id": uuid.uuid5(uuid.NAMESPACE_DNS, name), "partition_data": partitions}
    return {"name": name, "partition_data": partitions}


def request_body(version: int) -> dict[str, Any]:
    return {
        "transactional_id": "txn-é",
        "acks": -1,
        "timeout": 1500,
        "topic_data": [
            topic(
                version,
                "orders",
                [{"index": 0, "records": batch(b"a", b"bb")}, {"index": 3, "records": None}],
            ),
            topic(version, "payments", [{"index": 1, "records": batch(b"c" * 300)}]),
        ],
    }


@pytest.mark.parametrize("version", VERSIONS)
def test_a_produce_request_reads_as_kio_reads_it(version: int) -> None:
    data = frame(version, request_body(version))
    assert decode_produce_request(data) == decode_request(data)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_request_without_transactional_id_or_client_id_reads_as_kio_reads_it(
    version: int,
) -> None:
    body = request_body(version) | {"transactional_id": None}
    data = frame(version, body, client_id=None)
    assert decode_produce_request(data) == decode_request(data)


@pytest.mark.parametrize("version", [3, 9, 13])
def test_records_of_a_writable_frame_are_writable_views_of_it(version: int) -> None:
    data = bytearray(frame(version, request_body(version)))
    decoded = decode_produce_request(data)
    assert decoded is not None
    records = decoded[1].topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and not records.readonly
    records[:8] = struct.pack(">q", 777)  # the log's base offset, assigned in place
    assert struct.pack(">q", 777) in data


def test_bytes_after_the_body_are_ignored_as_the_general_decoder_ignores_them() -> None:
    data = frame(9, request_body(9)) + b"\0\0\0"
    assert decode_produce_request(data) == decode_request(data)


def test_a_tagged_field_leaves_the_request_to_the_general_decoder() -> None:
    data = frame(9, request_body(9))
    assert data[-1] == 0  # the request's empty tagged-field section
    assert decode_produce_request(data[:-1] + b"\x01\x00\x00") is None


@pytest.mark.parametrize("cut", [9, 20, 40, 100])
def test_a_truncated_request_leaves_it_to_the_general_decoder(cut: int) -> None:
    for version in (3, 9):
        data = frame(version, request_body(version))
        assert decode_produce_request(data[:cut]) is None


def test_a_topic_count_larger_than_the_bytes_leaves_it_to_the_general_decoder() -> None:
    data = bytearray(frame(8, request_body(8)))
    position = data.index(b"orders") - 2 - 4  # the topic array's int32 count
    data[position : position + 4] = struct.pack(">i", 2**31 - 1)
    assert decode_produce_request(data) is None


def test_other_api_keys_and_versions_are_left_to_the_general_decoder() -> None:
    assert decode_produce_request(struct.pack(">hhih", 3, 12, 1, -1) + b"\0" * 20) is None
    assert decode_produce_request(struct.pack(">hhih", 0, 2, 1, -1) + b"\0" * 20) is None
