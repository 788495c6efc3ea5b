"""samsa's transactional producer against a real broker process.

Outcomes are checked the way users see them: confluent-kafka consumers with
``isolation.level=read_committed`` see committed records only, offsets sent to
a transaction appear in the group when it commits, and the segment files hold
transactional batches followed by the coordinator's markers.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from samsa import Admin, AsyncProducer, Producer
from samsa.client.admin import NewTopic, OffsetAndMetadata
from samsa.client.errors import IllegalStateError, TransactionAbortedError
from samsa.errors import KafkaError
from samsa.records import ControlRecordType, control_record_type, iter_batches, iter_records
from samsa.testing import BrokerProcess
from samsa.types import TopicPartition as TP

pytestmark = pytest.mark.timeout(120)

QUIET = {"log_level": 3}
FENCED_CODES = {47, 90}  # INVALID_PRODUCER_EPOCH, PRODUCER_FENCED


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _topic(bootstrap: str, partitions: int = 2) -> str:
    topic = _name("txn")
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions)])
    return topic


def _producer(bootstrap: str, transactional_id: str, **extra: Any) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, **extra})


def _read(bootstrap: str, topic: str, isolation: str, partitions: int = 2) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
         "isolation.level": isolation, **QUIET}
    )  # fmt: skip
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    idle_until = time.monotonic() + 2
    try:
        while time.monotonic() < idle_until:
            messages = [m for m in consumer.consume(1000, 0.2) if m.error() is None]
            if messages:
                values += [m.value() for m in messages]
                idle_until = time.monotonic() + 1
    finally:
        consumer.close()
    return sorted(values)


def test_committed_transaction_is_read_by_read_committed_consumers(
    samsa_broker: BrokerProcess,
) -> None:
    topic = _topic(samsa_broker.bootstrap)
    with _producer(samsa_broker.bootstrap, _name("tid")) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        futures = [producer.send(topic, b"v%03d" % i, key=b"%d" % i) for i in range(100)]
        producer.commit_transaction()
        assert all(f.result(0).offset >= 0 for f in futures)
    assert _read(samsa_broker.bootstrap, topic, "read_committed") == [
        b"v%03d" % i for i in range(100)
    ]
    batches = [
        batch
        for log_file in samsa_broker.data_dir.glob(f"{topic}-*/*.log")
        for batch in iter_batches(log_file.read_bytes())
    ]
    data = [b for b in batches if not b.is_control]
    markers = [b for b in batches if b.is_control]
    assert data and all(b.is_transactional and b.producer_id >= 0 for b in data)
    assert {control_record_type(next(iter_records(b))) for b in markers} == {
        ControlRecordType.COMMIT
    }


def test_aborted_transaction_is_skipped_by_read_committed_consumers(
    samsa_broker: BrokerProcess,
) -> None:
    topic = _topic(samsa_broker.bootstrap)
    with _producer(samsa_broker.bootstrap, _name("tid")) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(50):
            producer.send(topic, b"aborted-%d" % i)
        producer.flush()  # written to the log, then aborted
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic, b"committed")
        producer.commit_transaction()
    assert _read(samsa_broker.bootstrap, topic, "read_committed") == [b"committed"]
    assert len(_read(samsa_broker.bootstrap, topic, "read_uncommitted")) == 51


def test_records_not_yet_sent_fail_when_their_transaction_aborts(
    samsa_broker: BrokerProcess,
) -> None:
    topic = _topic(samsa_broker.bootstrap)
    with _producer(samsa_broker.bootstrap, _name("tid"), **{"linger.ms": 60_000}) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        futures = [producer.send(topic, b"never") for _ in range(5)]
        producer.abort_transaction()
        for future in futures:
            with pytest.raises(TransactionAbortedError):
                future.result(10)
    assert _read(samsa_broker.bootstrap, topic, "read_uncommitted") == []


def test_offsets_sent_to_a_transaction_commit_with_it(samsa_broker: BrokerProcess) -> None:
    topic, group = _topic(samsa_broker.bootstrap), _name("group")
    with _producer(samsa_broker.bootstrap, _name("tid")) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"out")
        producer.send_offsets_to_transaction({TP(topic, 0): 7}, group)
        producer.abort_transaction()
        with Admin({"bootstrap.servers": samsa_broker.bootstrap}) as admin:
            assert admin.list_group_offsets(group) == {}
            producer.begin_transaction()
            producer.send_offsets_to_transaction({TP(topic, 0): 9, TP(topic, 1): 3}, group)
            producer.commit_transaction()
            assert admin.list_group_offsets(group) == {
                TP(topic, 0): OffsetAndMetadata(9),
                TP(topic, 1): OffsetAndMetadata(3),
            }


def test_sending_outside_a_transaction_raises_illegal_state(
    samsa_broker: BrokerProcess,
) -> None:
    topic = _topic(samsa_broker.bootstrap)
    with _producer(samsa_broker.bootstrap, _name("tid")) as producer:
        with pytest.raises(IllegalStateError):
            producer.send(topic, b"before init")
        producer.init_transactions()
        with pytest.raises(IllegalStateError):
            producer.send(topic, b"before begin")
        with pytest.raises(IllegalStateError):
            producer.commit_transaction()
        producer.begin_transaction()
        with pytest.raises(IllegalStateError):
            producer.begin_transaction()
        producer.abort_transaction()


def test_transactions_need_a_transactional_id(samsa_broker: BrokerProcess) -> None:
    with (
        Producer({"bootstrap.servers": samsa_broker.bootstrap}) as producer,
        pytest.raises(IllegalStateError, match=r"transactional\.id"),
    ):
        producer.init_transactions()


def test_a_newer_producer_with_the_same_id_fences_the_older(
    samsa_broker: BrokerProcess,
) -> None:
    topic, transactional_id = _topic(samsa_broker.bootstrap), _name("tid")
    zombie = _producer(samsa_broker.bootstrap, transactional_id)
    successor = _producer(samsa_broker.bootstrap, transactional_id)
    try:
        zombie.init_transactions()
        zombie.begin_transaction()
        zombie.send(topic, b"zombie").result(10)
        successor.init_transactions()  # aborts the zombie's open transaction
        with pytest.raises(KafkaError) as raised:
            zombie.commit_transaction()
        assert raised.value.code in FENCED_CODES
        with pytest.raises(KafkaError):
            zombie.begin_transaction()  # fenced for good
        successor.begin_transaction()
        successor.send(topic, b"successor")
        successor.commit_transaction()
    finally:
        zombie.close()
        successor.close()
    assert _read(samsa_broker.bootstrap, topic, "read_committed") == [b"successor"]


def test_async_producer_runs_transactions(samsa_broker: BrokerProcess) -> None:
    topic = _topic(samsa_broker.bootstrap)

    async def main() -> None:
        config = {"bootstrap.servers": samsa_broker.bootstrap, "transactional.id": _name("tid")}
        async with AsyncProducer(config) as producer:
            await producer.init_transactions()
            for round_ in range(3):
                await producer.begin_transaction()
                for i in range(10):
                    await producer.send(topic, b"r%d-%d" % (round_, i))
                if round_ == 1:
                    await producer.abort_transaction()
                else:
                    await producer.commit_transaction()

    asyncio.run(main())
    values = _read(samsa_broker.bootstrap, topic, "read_committed")
    assert values == sorted([b"r0-%d" % i for i in range(10)] + [b"r2-%d" % i for i in range(10)])
