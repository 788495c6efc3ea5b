"""Produce requests received in place: however the bytes arrive, every record lands intact.

Requests are written by kio and sent over a raw socket to a real broker: split
into one-byte sends, larger than the connection's shared read buffer, pipelined
in one send with large and small requests mixed (so received buffers are reused
while earlier requests' records are still being appended). The records are then
read back with a real consumer and compared byte for byte.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tests.rawclient import read_response_with_id, request_frame

from samsa.records import RecordBatchBuilder
from samsa.testing import BrokerProcess, start_broker

QUIET = {"log_level": 3}
WAIT_S = 60.0
PRODUCE, PRODUCE_VERSION = 0, 9


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path_factory.mktemp("receiving") / "data")
    try:
        yield process
    finally:
        process.stop()


def batch(values: list[bytes]) -> bytes:
    builder = RecordBatchBuilder()
    for value in values:
        builder.append(value)
    return bytes(builder.build())


def produce_frame(topic: str, records: bytes, correlation_id: int, acks: int = 1) -> bytes:
    body = {"acks": acks, "timeout": 30_000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}]}  # fmt: skip
    return request_frame(PRODUCE, PRODUCE_VERSION, body, correlation_id, "receiving-test")


def read_produce_response(sock: socket.socket) -> tuple[int, Any]:
    """(correlation id, the one partition's response) of the next response on ``sock``."""
    correlation_id, body = read_response_with_id(sock, PRODUCE, PRODUCE_VERSION)
    return correlation_id, body.responses[0].partition_responses[0]


def create_topic(broker: BrokerProcess, name: str, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    admin.create_topics([NewTopic(name, 1, 1, config=config or {})])[name].result(WAIT_S)


def read_back(broker: BrokerProcess, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, **QUIET})  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + WAIT_S
    try:
        while len(values) < count and time.monotonic() < deadline:
            for message in consumer.consume(count - len(values), 0.5):
                if message.error() is not None:
                    raise KafkaException(message.error())
                values.append(message.value())
    finally:
        consumer.close()
    return values


def connect(broker: BrokerProcess) -> socket.socket:
    sock = socket.create_connection((broker.host, broker.port), timeout=WAIT_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def test_a_produce_request_sent_a_byte_at_a_time_is_appended_intact(broker: BrokerProcess) -> None:
    create_topic(broker, "byte-at-a-time")
    values = [f"record {i}".encode() * 5 for i in range(20)]
    frame = produce_frame("byte-at-a-time", batch(values), correlation_id=5)
    with connect(broker) as sock:
        for i in range(len(frame)):
            sock.send(frame[i : i + 1])
        correlation_id, partition = read_produce_response(sock)
    assert (correlation_id, partition.error_code, partition.base_offset) == (5, 0, 0)
    assert read_back(broker, "byte-at-a-time", len(values)) == values


def test_a_produce_request_of_3_mib_is_appended_intact(broker: BrokerProcess) -> None:
    create_topic(broker, "three-mib", {"max.message.bytes": str(8 * 1024 * 1024)})
    values = [bytes([i % 251]) * 1000 + i.to_bytes(4, "big") for i in range(3000)]
    frame = produce_frame("three-mib", batch(values), correlation_id=6)
    assert len(frame) > 3_000_000
    with connect(broker) as sock:
        sock.sendall(frame)
        correlation_id, partition = read_produce_response(sock)
    assert (correlation_id, partition.error_code) == (6, 0)
    assert read_back(broker, "three-mib", len(values)) == values


@pytest.mark.parametrize("acks", [1, -1])
def test_pipelined_large_and_small_requests_are_answered_in_order_and_appended_intact(
    broker: BrokerProcess, acks: int
) -> None:
    topic = f"pipelined-acks{acks}"
    create_topic(broker, topic)
    batches: list[list[bytes]] = []
    for i in range(24):
        size, count = (1000, 300) if i % 3 else (20, 3)  # ~300 KB and tiny, mixed
        batches.append([f"{i}:{j}:".encode() + bytes([i]) * size for j in range(count)])
    stream = b"".join(
        produce_frame(topic, batch(values), correlation_id=100 + i, acks=acks)
        for i, values in enumerate(batches)
    )
    with connect(broker) as sock:
        sock.sendall(stream)
        answers = [read_produce_response(sock) for _ in batches]
    expected_offsets = [sum(len(values) for values in batches[:i]) for i in range(len(batches))]
    assert [(c, p.error_code, p.base_offset) for c, p in answers] == [
        (100 + i, 0, offset) for i, offset in enumerate(expected_offsets)
    ]
    every_value = [value for values in batches for value in values]
    assert read_back(broker, topic, len(every_value)) == every_value


def _proc_field(broker: BrokerProcess, name: str, prefix: str) -> int:
    assert broker.process is not None
    for line in Path(f"/proc/{broker.process.pid}/{name}").read_text().splitlines():
        if line.startswith(prefix):
            return int(line.split()[1])
    raise AssertionError(f"no {prefix} line in /proc/<pid>/{name}")


def test_a_frame_announced_at_100_mib_holds_memory_only_for_the_bytes_that_came(
    broker: BrokerProcess,
) -> None:
    sent = 512 * 1024
    rss_before = _proc_field(broker, "status", "VmRSS:")
    read_before = _proc_field(broker, "io", "rchar:")
    with connect(broker) as sock:
        sock.sendall(struct.pack(">i", 100 * 1024 * 1024) + b"\0" * sent)
        deadline = time.monotonic() + WAIT_S
        while _proc_field(broker, "io", "rchar:") - read_before < sent:
            assert time.monotonic() < deadline, "the broker did not read what was sent"
            time.sleep(0.05)
        grown = _proc_field(broker, "status", "VmRSS:") - rss_before
    assert grown < 20 * 1024, f"RSS grew by {grown} KiB"


def test_hundreds_of_small_requests_in_one_send_are_answered_in_order(
    broker: BrokerProcess,
) -> None:
    create_topic(broker, "many-small")
    count = 300
    stream = b"".join(
        produce_frame("many-small", batch([f"small {i}".encode()]), correlation_id=i)
        for i in range(count)
    )
    with connect(broker) as sock:
        sock.sendall(stream)
        answers = [read_produce_response(sock) for _ in range(count)]
    assert [(c, p.error_code, p.base_offset) for c, p in answers] == [
        (i, 0, i) for i in range(count)
    ]
