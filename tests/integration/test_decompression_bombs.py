"""Compressed data that inflates hugely, sent in the old formats to a real broker.

A gzip message of some 64 KiB that inflates to 64 MiB is produced with Produce v2 (magic 1),
and stored as a RecordBatch v2 then fetched with Fetch v2 (down-converted to magic 1). The
broker must answer with Kafka's codes having inflated no more than its limits: each test
reads the broker process's peak resident memory (``VmHWM``) before and after, and allows it
far less growth than the inflated size.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.record import MemoryRecords
from tests.rawclient import create_topic, exchange

from samsa.records.batch import CompressionType
from samsa.records.builder import RecordBatchBuilder
from samsa.testing import BrokerProcess, start_broker

pytestmark = pytest.mark.timeout(120)

PRODUCE, FETCH = 0, 1
MESSAGE_TOO_LARGE, UNKNOWN_TOPIC_OR_PARTITION = 10, 3
GZIP = 1
MIB = 1 << 20
INFLATED_MIB = 64
ALLOWED_GROWTH = 24 * MIB
"""Peak memory a request may add: well under the 64 MiB the bomb inflates to."""


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path / "data")  # its own: the peak memory is the process's
    try:
        yield process
    finally:
        process.stop()


def _peak_memory(broker: BrokerProcess) -> int:
    """The broker process's peak resident set so far, in bytes."""
    assert broker.process is not None
    status = Path(f"/proc/{broker.process.pid}/status").read_text()
    [line] = [line for line in status.splitlines() if line.startswith("VmHWM:")]
    return int(line.split()[1]) * 1024


def _message(offset: int, attributes: int, value: bytes) -> bytes:
    """A magic 1 message with no key."""
    body = bytes((1, attributes)) + struct.pack(">qii", 0, -1, len(value)) + value
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def _gzip_bomb() -> bytes:
    """One gzip wrapper whose inner set is ``INFLATED_MIB`` messages of 1 MiB of zeros."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [compressor.compress(_message(i, 0, bytes(MIB))) for i in range(INFLATED_MIB)]
    value = b"".join(parts) + compressor.flush()
    return _message(INFLATED_MIB - 1, GZIP, value)


def _produce(broker: BrokerProcess, topic: str, records: bytes) -> dict[str, Any]:
    """Produce v2: a message set, or a RecordBatch v2 stored as it is."""
    partition_data = [{"index": 0, "records": records}]
    values = {"acks": 1, "timeout": 10_000,
              "topic_data": [{"name": topic, "partition_data": partition_data}]}  # fmt: skip
    response = exchange(broker.bootstrap, PRODUCE, 2, values)
    [partition] = response["responses"][0]["partition_responses"]
    return dict(partition)


def test_a_gzip_bomb_for_a_missing_topic_is_unknown_topic_and_never_inflated(
    broker: BrokerProcess,
) -> None:
    bomb = _gzip_bomb()
    before = _peak_memory(broker)
    answered = _produce(broker, "no-such-topic", bomb)
    assert answered["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
    assert _peak_memory(broker) - before < ALLOWED_GROWTH


def test_a_gzip_bomb_past_max_message_bytes_is_message_too_large_and_inflated_no_further(
    broker: BrokerProcess,
) -> None:
    create_topic(broker.bootstrap, "bombed")
    bomb = _gzip_bomb()
    before = _peak_memory(broker)
    answered = _produce(broker, "bombed", bomb)
    assert (answered["error_code"], answered["base_offset"]) == (MESSAGE_TOO_LARGE, -1)
    assert _peak_memory(broker) - before < ALLOWED_GROWTH


def test_a_down_converting_fetch_of_a_batch_inflating_past_its_limits_stays_within_them(
    broker: BrokerProcess,
) -> None:
    topic = "bombed-v2"
    create_topic(broker.bootstrap, topic)
    builder = RecordBatchBuilder(compression=CompressionType.GZIP)
    for _ in range(INFLATED_MIB):
        builder.append(bytes(MIB), timestamp=0)
    assert _produce(broker, topic, builder.build())["error_code"] == 0  # stored as it is
    before = _peak_memory(broker)
    partitions = [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": MIB}]
    response = exchange(broker.bootstrap, FETCH, 2, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 0,
        "topics": [{"topic": topic, "partitions": partitions}],
    })  # fmt: skip
    [partition] = response["responses"][0]["partitions"]
    assert partition["error_code"] == 0
    records = partition["records"]
    # Old clients read the offset and size of a message bigger than what follows, and report
    # a message too large for their fetch size (as Kafka has them do for such a batch).
    offset, size = struct.unpack_from(">qi", records)
    assert (offset, len(records)) == (0, 12)
    assert size > MIB
    assert list(MemoryRecords(records)) == []
    assert _peak_memory(broker) - before < ALLOWED_GROWTH
