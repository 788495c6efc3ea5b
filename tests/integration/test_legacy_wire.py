"""Old request versions sent raw to a real broker: message sets in, message sets out.

Message sets are built and parsed with kafka-python's implementation of the old
formats, so what samsa stores and down-converts is checked against another
implementation, record by record, byte for byte.
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.record import MemoryRecords
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from tests.rawclient import create_topic, exchange

from samsa.testing import BrokerProcess, start_broker

pytestmark = pytest.mark.timeout(60)

PRODUCE, FETCH, LIST_OFFSETS, OFFSET_COMMIT, OFFSET_FETCH = 0, 1, 2, 8, 9
API_VERSIONS, CREATE_TOPICS, DESCRIBE_CONFIGS = 18, 19, 32
CORRUPT_MESSAGE, UNKNOWN_TOPIC_OR_PARTITION = 2, 3
GZIP, SNAPPY, LZ4 = 1, 2, 3
LATEST = -1
# The lowest version Kafka 3.9 served of each API samsa serves (its JSON message definitions).
KAFKA_3_9_FLOORS = {
    PRODUCE: 0, FETCH: 0, LIST_OFFSETS: 0, 3: 0, OFFSET_COMMIT: 0, OFFSET_FETCH: 0,
    10: 0, 11: 0, 12: 0, 13: 0, 14: 0, 15: 0, 16: 0, API_VERSIONS: 0, CREATE_TOPICS: 0,
    20: 0, 21: 0, 22: 0, 23: 0, 24: 0, 25: 0, 26: 0, 27: 0, 28: 0, DESCRIBE_CONFIGS: 0,
    33: 0, 35: 0, 37: 0, 42: 0, 43: 0, 44: 0, 45: 0, 46: 0, 47: 0, 60: 0, 61: 0, 65: 0, 66: 0,
}  # fmt: skip


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path_factory.mktemp("legacy-wire") / "data")
    try:
        yield process
    finally:
        process.stop()


def _message_set(magic: int, codec: int, records: list[tuple[bytes | None, bytes]],
                 timestamp: int = 0) -> bytes:  # fmt: skip
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i, (key, value) in enumerate(records):
        builder.append(i, timestamp=timestamp + i if magic else None, key=key, value=value)
    return bytes(builder.build())


def _create_topic(broker: BrokerProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic)


def _produce(broker: BrokerProcess, version: int, topic: str, records: bytes) -> dict[str, Any]:
    partition_data = [{"index": 0, "records": records}]
    values = {"acks": 1, "timeout": 10_000,
              "topic_data": [{"name": topic, "partition_data": partition_data}]}  # fmt: skip
    response = exchange(broker.bootstrap, PRODUCE, version, values)
    [partition] = response["responses"][0]["partition_responses"]
    return dict(partition)


def _fetch(
    broker: BrokerProcess, version: int, topic: str, offset: int = 0,
    partition_max_bytes: int = 1 << 20,
) -> dict[str, Any]:  # fmt: skip
    partitions = [{"partition": 0, "fetch_offset": offset,
                   "partition_max_bytes": partition_max_bytes}]  # fmt: skip
    values = {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
              "topics": [{"topic": topic, "partitions": partitions}]}  # fmt: skip
    response = exchange(broker.bootstrap, FETCH, version, values)
    [partition] = response["responses"][0]["partitions"]
    return dict(partition)


def _read(records: bytes) -> list[tuple[int, int, int | None, bytes | None, bytes | None]]:
    """(magic, offset, timestamp, key, value) of every message, CRCs checked."""
    out = []
    for batch in MemoryRecords(records):
        for record in batch:
            assert record.validate_crc()
            out.append((batch.magic, record.offset, record.timestamp, record.key, record.value))
    return out


def _log_end(broker: BrokerProcess, topic: str) -> int:
    response = exchange(broker.bootstrap, LIST_OFFSETS, 0, {"replica_id": -1, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": LATEST,
                                        "max_num_offsets": 1}]}]})  # fmt: skip
    [partition] = response["topics"][0]["partitions"]
    assert partition["error_code"] == 0
    [offset] = partition["old_style_offsets"]
    return int(offset)


def test_api_versions_advertises_every_version_kafka_3_9_served(broker: BrokerProcess) -> None:
    response = exchange(broker.bootstrap, API_VERSIONS, 3, {})
    floors = {key.api_key: key.min_version for key in response.api_keys}
    assert {key: floors.get(key) for key in KAFKA_3_9_FLOORS} == KAFKA_3_9_FLOORS


@pytest.fixture(scope="module")
def old_topic(broker: BrokerProcess) -> tuple[str, list[tuple[bytes | None, bytes, int | None]]]:
    """A topic written by Produce v0, v1 and v2 with nested compressed sets: (key, value,
    timestamp sent — None for magic 0) of each record, in offset order."""
    topic = "legacy-wire"
    _create_topic(broker, topic)
    ts = int(time.time() * 1000) - 50_000
    v0 = (_message_set(0, 0, [(b"k0", b"plain v0")])
          + _message_set(0, GZIP, [(None, b"gzip v0 a"), (b"k2", bytes(range(256)))]))  # fmt: skip
    v1 = (_message_set(1, SNAPPY, [(b"k3", b"snappy v1"), (b"k4", b"")], ts)
          + _message_set(1, 0, [(b"k5", b"plain v1")], ts + 10))  # fmt: skip
    v2 = _message_set(1, LZ4, [(b"k6", b"lz4 v1 " * 40)], ts + 20)
    sent: list[tuple[bytes | None, bytes, int | None]] = [
        (b"k0", b"plain v0", None), (None, b"gzip v0 a", None), (b"k2", bytes(range(256)), None),
        (b"k3", b"snappy v1", ts), (b"k4", b"", ts + 1), (b"k5", b"plain v1", ts + 10),
        (b"k6", b"lz4 v1 " * 40, ts + 20),
    ]  # fmt: skip
    assert _produce(broker, 0, topic, v0)["base_offset"] == 0
    assert _produce(broker, 1, topic, v1)["base_offset"] == 3
    appended = _produce(broker, 2, topic, v2)
    assert (appended["error_code"], appended["base_offset"]) == (0, 6)
    return topic, sent


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_fetch_v0_to_v3_returns_old_produced_records_byte_exact(
    broker: BrokerProcess, old_topic: tuple[str, list[Any]], version: int
) -> None:
    topic, sent = old_topic
    fetched = _fetch(broker, version, topic)
    assert (fetched["error_code"], fetched["high_watermark"]) == (0, len(sent))
    messages = _read(fetched["records"])
    magic = 0 if version < 2 else 1
    assert [(m[0], m[1], m[3], m[4]) for m in messages] == [
        (magic, offset, key, value) for offset, (key, value, _) in enumerate(sent)
    ]
    if magic == 1:  # magic-1 records keep the producer's timestamps
        assert [m[2] for m in messages][3:] == [ts for *_, ts in sent][3:]


def test_fetch_v3_from_the_middle_of_a_compressed_batch_starts_at_the_offset_asked(
    broker: BrokerProcess, old_topic: tuple[str, list[Any]]
) -> None:
    topic, sent = old_topic
    messages = _read(_fetch(broker, 3, topic, offset=2)["records"])
    assert [m[1] for m in messages] == list(range(2, len(sent)))


def test_fetch_v3_stops_within_partition_max_bytes_after_the_first_message(
    broker: BrokerProcess, old_topic: tuple[str, list[Any]]
) -> None:
    topic, _ = old_topic
    records = _fetch(broker, 3, topic, partition_max_bytes=1)["records"]
    # One message whatever its size (KIP-74): the first stored batch, compressed by the Produce
    # v0 that wrote offsets 0-2, goes out as one gzip wrapper.
    assert [m[1] for m in _read(records)] == [0, 1, 2]
    # With room for a little more than that wrapper, the next message does not fit.
    limited = _fetch(broker, 3, topic, partition_max_bytes=len(records) + 10)["records"]
    assert limited == records


def test_a_large_old_message_set_is_appended_whole(broker: BrokerProcess) -> None:
    topic = "legacy-wire-large"
    _create_topic(broker, topic)
    records = [(b"k%d" % i, bytes([i % 256]) * 1000) for i in range(300)]  # ~300 KiB
    assert _produce(broker, 1, topic, _message_set(1, SNAPPY, records, 5))["error_code"] == 0
    fetched = []
    while len(fetched) < len(records):
        fetched += _read(_fetch(broker, 2, topic, offset=len(fetched))["records"])
    assert [(m[3], m[4]) for m in fetched] == records


def test_a_corrupt_old_message_is_answered_corrupt_message_and_nothing_is_appended(
    broker: BrokerProcess, old_topic: tuple[str, list[Any]]
) -> None:
    topic, _ = old_topic
    before = _log_end(broker, topic)
    good = _message_set(1, 0, [(b"k", b"fine")], 1)
    bad = bytearray(_message_set(1, GZIP, [(b"k", b"value")], 1))
    bad[-1] ^= 0xFF  # the CRC no longer matches
    answered = _produce(broker, 2, topic, good + bytes(bad))
    assert (answered["error_code"], answered["base_offset"]) == (CORRUPT_MESSAGE, -1)
    assert _log_end(broker, topic) == before


def test_a_message_whose_size_overruns_the_set_is_corrupt(
    broker: BrokerProcess, old_topic: tuple[str, list[Any]]
) -> None:
    topic, _ = old_topic
    before = _log_end(broker, topic)
    data = bytearray(_message_set(0, 0, [(b"k", b"v")]))
    struct.pack_into(">i", data, 8, 1 << 30)
    assert _produce(broker, 0, topic, bytes(data))["error_code"] == CORRUPT_MESSAGE
    assert _log_end(broker, topic) == before


def test_a_nested_compressed_message_is_corrupt(
    broker: BrokerProcess, old_topic: tuple[str, list[Any]]
) -> None:
    topic, _ = old_topic
    before = _log_end(broker, topic)
    inner = _message_set(0, GZIP, [(None, b"x")])
    compressor = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    value = compressor.compress(inner) + compressor.flush()
    body = bytes((0, GZIP)) + struct.pack(">ii", -1, len(value)) + value
    wrapper = struct.pack(">qiI", 0, len(body) + 4, zlib.crc32(body)) + body
    assert _produce(broker, 0, topic, wrapper)["error_code"] == CORRUPT_MESSAGE
    assert _log_end(broker, topic) == before


def test_offset_commit_v0_is_read_back_by_offset_fetch_v0_and_v1(broker: BrokerProcess) -> None:
    topic = "legacy-commit-v0"
    _create_topic(broker, topic)
    group = "legacy-v0-group"
    committed = exchange(broker.bootstrap, OFFSET_COMMIT, 0, {"group_id": group, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 42,
                                        "committed_metadata": "zk-era"}]}]})  # fmt: skip
    assert committed["topics"][0]["partitions"][0]["error_code"] == 0
    request = {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}
    v0 = exchange(broker.bootstrap, OFFSET_FETCH, 0, request)["topics"][0]["partitions"][0]
    assert (v0["committed_offset"], v0["metadata"], v0["error_code"]) == (42, "zk-era", 0)
    v1 = exchange(broker.bootstrap, OFFSET_FETCH, 1, request).topics[0].partitions[0]
    assert (v1.committed_offset, v1.metadata) == (42, "zk-era")


def test_describe_configs_v0_marks_the_defaults(broker: BrokerProcess) -> None:
    topic = "legacy-configs"
    _create_topic(broker, topic)
    resource = {"resource_type": 2, "resource_name": topic, "configuration_keys": ["retention.ms"]}
    response = exchange(broker.bootstrap, DESCRIBE_CONFIGS, 0, {"resources": [resource]})
    [result] = response["results"]
    assert result["error_code"] == 0
    assert [(c["name"], c["is_default"]) for c in result["configs"]] == [("retention.ms", True)]
