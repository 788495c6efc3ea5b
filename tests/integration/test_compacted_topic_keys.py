"""A compacted topic refuses records without a key, as Kafka's LogValidator does.

The whole batch is refused with INVALID_RECORD, and Produce v8+ names each
keyless record in ``record_errors`` (its index in the batch and the reason).
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tests.conftest import make_batch
from tests.rawclient import exchange

from samsa.records import CompressionType
from samsa.testing import BrokerProcess

QUIET = {"log_level": 3}
TIMEOUT_S = 10
PRODUCE, LIST_OFFSETS = 0, 2
INVALID_RECORD = 87
NOW_MS = 1_700_000_000_000


def _create(broker: BrokerProcess, policy: str) -> str:
    name = f"keys-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    futures = admin.create_topics([NewTopic(name, 1, 1, config={"cleanup.policy": policy})])
    futures[name].result(TIMEOUT_S)
    return name


def _produce_raw(broker: BrokerProcess, topic: str, batch: bytes, version: int = 9) -> object:
    response = exchange(broker.bootstrap, PRODUCE, version, {
        "transactional_id": None, "acks": -1, "timeout": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    })  # fmt: skip
    [topic_response] = response.responses
    [partition] = topic_response.partition_responses
    return partition


def _log_end_offset(broker: BrokerProcess, topic: str) -> int:
    response = exchange(broker.bootstrap, LIST_OFFSETS, 7, {
        "replica_id": -1, "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    })  # fmt: skip
    return int(response.topics[0].partitions[0].offset)


def _batch(keys: list[bytes | None], compression: CompressionType) -> bytes:
    values = [f"v{i}".encode() for i in range(len(keys))]
    return bytes(make_batch(values, timestamp=NOW_MS, keys=keys, compression=compression))


def test_confluent_producer_gets_invalid_record_for_a_keyless_record_in_a_compacted_topic(
    samsa_broker: BrokerProcess,
) -> None:
    topic = _create(samsa_broker, "compact")
    producer = Producer({"bootstrap.servers": samsa_broker.bootstrap, **QUIET})
    reports: list[KafkaError | None] = []
    producer.produce(topic, b"no key", on_delivery=lambda err, _msg: reports.append(err))
    assert producer.flush(TIMEOUT_S) == 0
    [error] = reports
    assert error is not None
    assert error.code() == KafkaError.INVALID_RECORD
    assert _log_end_offset(samsa_broker, topic) == 0


@pytest.mark.parametrize("compression", [CompressionType.NONE, CompressionType.GZIP])
def test_keyless_records_refuse_the_whole_batch_and_are_named_in_record_errors(
    samsa_broker: BrokerProcess, compression: CompressionType
) -> None:
    topic = _create(samsa_broker, "compact,delete")
    partition = _produce_raw(samsa_broker, topic, _batch([b"k0", None, b"k2", None], compression))
    assert partition.error_code.value == INVALID_RECORD  # type: ignore[attr-defined]
    errors = [
        (e.batch_index, e.batch_index_error_message)
        for e in partition.record_errors  # type: ignore[attr-defined]
    ]
    assert [index for index, _ in errors] == [1, 3]
    assert all("without key" in (message or "") for _, message in errors)
    assert "without key" in (partition.error_message or "")  # type: ignore[attr-defined]
    assert _log_end_offset(samsa_broker, topic) == 0


def test_a_batch_whose_records_all_have_keys_is_appended_to_a_compacted_topic(
    samsa_broker: BrokerProcess,
) -> None:
    topic = _create(samsa_broker, "compact")
    partition = _produce_raw(samsa_broker, topic, _batch([b"a", b"b"], CompressionType.LZ4))
    assert partition.error_code.value == 0  # type: ignore[attr-defined]
    assert _log_end_offset(samsa_broker, topic) == 2


def test_keyless_records_are_appended_to_a_topic_that_is_not_compacted(
    samsa_broker: BrokerProcess,
) -> None:
    topic = _create(samsa_broker, "delete")
    partition = _produce_raw(samsa_broker, topic, _batch([None, None], CompressionType.NONE))
    assert partition.error_code.value == 0  # type: ignore[attr-defined]
    assert _log_end_offset(samsa_broker, topic) == 2
