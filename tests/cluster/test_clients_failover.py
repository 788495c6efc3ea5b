"""Clients carry on when a data partition's leader dies: each Python client, a consumer
group and an exactly-once copy loop."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from tests.compat.txn_copier import CopyStats, copy_topic, read_committed

from samsa import Consumer as SamsaConsumer
from samsa import Producer as SamsaProducer
from samsa.coordinator.group.records import partition_for
from samsa.testing.cluster import LocalCluster
from samsa.types import TopicPartition

QUIET = {"log_level": 3}
COUNT = 200


def _create(cluster: LocalCluster, *topics: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})
    futures = admin.create_topics([NewTopic(t, partitions, 3) for t in topics])
    for future in futures.values():
        future.result(30)


def _kill_leader(cluster: LocalCluster, topic: str) -> int:
    victim = cluster.leader_of(topic, 0)
    cluster.kill(victim)
    cluster.wait_for_leader(topic, 0, not_in=[victim])
    return victim


def _values(start: int, end: int) -> list[bytes]:
    return [b"value-%d" % i for i in range(start, end)]


def test_kafka_python_follows_the_new_leader(cluster: LocalCluster) -> None:
    _create(cluster, "kp")
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap.split(","), acks="all",
                             retries=20, retry_backoff_ms=200)  # fmt: skip
    for value in _values(0, COUNT):
        producer.send("kp", value)
    producer.flush(30)
    _kill_leader(cluster, "kp")
    for value in _values(COUNT, 2 * COUNT):
        producer.send("kp", value)
    producer.flush(60)
    producer.close()
    consumer = KafkaConsumer("kp", bootstrap_servers=cluster.bootstrap.split(","),
                             auto_offset_reset="earliest", consumer_timeout_ms=20_000)  # fmt: skip
    got = []
    for message in consumer:
        got.append(message.value)
        if len(got) == 2 * COUNT:
            break
    consumer.close()
    assert got == _values(0, 2 * COUNT)


def test_aiokafka_follows_the_new_leader(cluster: LocalCluster) -> None:
    _create(cluster, "aio")

    async def produce(values: list[bytes]) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all",
                                    request_timeout_ms=60_000)  # fmt: skip
        await producer.start()
        try:
            for value in values:
                await producer.send("aio", value)
            await producer.flush()
        finally:
            await producer.stop()

    async def consume(count: int) -> list[bytes]:
        consumer = AIOKafkaConsumer("aio", bootstrap_servers=cluster.bootstrap,
                                    auto_offset_reset="earliest")  # fmt: skip
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                async for message in consumer:
                    assert message.value is not None
                    got.append(message.value)
                    if len(got) == count:
                        break
        finally:
            await consumer.stop()
        return got

    asyncio.run(produce(_values(0, COUNT)))
    _kill_leader(cluster, "aio")
    asyncio.run(produce(_values(COUNT, 2 * COUNT)))
    assert asyncio.run(consume(2 * COUNT)) == _values(0, 2 * COUNT)


def test_samsas_clients_follow_the_new_leader(cluster: LocalCluster) -> None:
    _create(cluster, "own")
    with SamsaProducer({"bootstrap.servers": cluster.bootstrap, "acks": "all"}) as producer:
        for value in _values(0, COUNT):
            producer.send("own", value)
        producer.flush()
        _kill_leader(cluster, "own")
        for value in _values(COUNT, 2 * COUNT):
            producer.send("own", value)
        producer.flush()
    got: list[bytes | None] = []
    # No group: with a broker down, __consumer_offsets cannot be created with its three
    # replicas (as in Kafka), and this test is about the partition's new leader.
    with SamsaConsumer(
        {"bootstrap.servers": cluster.bootstrap, "auto.offset.reset": "earliest"}
    ) as consumer:
        consumer.assign([TopicPartition("own", 0)])
        deadline = time.monotonic() + 30
        while len(got) < 2 * COUNT and time.monotonic() < deadline:
            got += [r.value for r in consumer.poll(1.0)]
    assert got == _values(0, 2 * COUNT)


def _coordinators(cluster: LocalCluster, group: str, transactional_id: str) -> set[int]:
    offsets = cluster.leader_of("__consumer_offsets", partition_for(group, 50))
    txns = cluster.leader_of("__transaction_state", partition_for(transactional_id, 50))
    return {offsets, txns}


@pytest.mark.timeout(240)
def test_a_transactional_copy_loop_and_its_group_carry_on_across_a_leader_kill(
    cluster: LocalCluster,
) -> None:
    _create(cluster, "source", "copy", partitions=3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", **QUIET})
    values = _values(0, 3000)
    for i, value in enumerate(values):
        producer.produce("source", value, partition=i % 3)
    assert producer.flush(30) == 0

    result: list[CopyStats | BaseException] = []

    def copy() -> None:
        try:
            result.append(
                copy_topic(cluster.bootstrap, "source", "copy", "copiers", "copier-1",
                           transaction_size=20, timeout=180)
            )  # fmt: skip
        except BaseException as exc:
            result.append(exc)

    copier = threading.Thread(target=copy, daemon=True)
    copier.start()
    cluster.wait_until(lambda: cluster.leader_of("__transaction_state", 0) >= 0,
                       "the transaction log created")  # fmt: skip
    time.sleep(2)  # some transactions are committed
    coordinators = _coordinators(cluster, "copiers", "copier-1")
    data_leaders = {cluster.leader_of(t, p) for t in ("source", "copy") for p in range(3)}
    # Three partitions over three brokers: each broker leads one, and at most two coordinate.
    victim = min(data_leaders - coordinators)
    cluster.kill(victim)
    copier.join(200)
    assert result and not isinstance(result[0], BaseException), result
    copied = read_committed(cluster.bootstrap, "copy", len(values))
    assert sorted(copied) == sorted(values), "each source record copied exactly once"
