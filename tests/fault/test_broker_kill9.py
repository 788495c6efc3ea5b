"""kill -9 of a broker under a live producer: every acknowledged record survives.

A confluent-kafka producer (acks=1) writes numbered records to one partition
and keeps its delivery reports. Once enough records are acknowledged the
broker is SIGKILLed while a burst of records produced after the last poll is
on its way (some acknowledged on the wire but not yet reported), restarted on
the same port and data dir, and production goes on; this happens twice. A
consumer then reads the partition from offset 0: each acknowledged record must
be at its acknowledged offset with its value, and the offsets must run 0..N-1
with no gap or repeat. Records that were never acknowledged may or may not be
there (a retry after a lost response may even store one twice) — only
acknowledgements are promises.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import BrokerProcess, start_broker

QUIET = {"log_level": 3}
TOPIC = "kill9"
KILLS = 2
ACKED_BEFORE_EACH_KILL = 20_000
PRODUCED_WHILE_DOWN = 2_000
IN_FLIGHT_WINDOW = 5_000  # unacknowledged records the producer may hold before it waits
IN_FLIGHT_BURST = 2_000  # records produced just before each kill, never polled for
HANG_S = 30.0


class DeliveryLog:
    """The producer's delivery reports: acknowledged (offset, value) pairs, in report order."""

    def __init__(self) -> None:
        self.acknowledged: list[tuple[int, bytes]] = []
        self.failed = 0

    @property
    def reported(self) -> int:
        return len(self.acknowledged) + self.failed

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self.acknowledged.append((message.offset(), message.value()))
        else:
            self.failed += 1


def _produce_until_acknowledged(
    producer: Producer, deliveries: DeliveryLog, target: int, next_number: int, deadline: float
) -> int:
    """Produce numbered records until ``target`` are acknowledged; return the next number."""
    while len(deliveries.acknowledged) < target:
        assert time.monotonic() < deadline, (
            f"only {len(deliveries.acknowledged)} of {target} records acknowledged in time"
        )
        if next_number - deliveries.reported >= IN_FLIGHT_WINDOW:
            producer.poll(0.01)
            continue
        producer.produce(TOPIC, f"record-{next_number}".encode(), on_delivery=deliveries)
        next_number += 1
        if next_number % 500 == 0:
            producer.poll(0)
    return next_number


def _produce_in_flight(
    producer: Producer, deliveries: DeliveryLog, next_number: int, bootstrap: str
) -> int:
    """Produce a burst and return once the broker has stored part of it, unreported.

    Delivery reports reach the test only through ``poll()``, which is not called
    here: once the partition's high watermark (asked on another connection) passes
    the highest offset reported so far, records the broker has acknowledged are
    known to be on their way back to a producer that has not reported them — the
    moment the test kills the broker.
    """
    reported_end = max((offset for offset, _ in deliveries.acknowledged), default=-1) + 1
    for _ in range(IN_FLIGHT_BURST):
        producer.produce(TOPIC, f"record-{next_number}".encode(), on_delivery=deliveries)
        next_number += 1
    deadline = time.monotonic() + HANG_S
    while _high_watermark(bootstrap) <= reported_end:
        assert time.monotonic() < deadline, f"the broker stored none of the burst in {HANG_S} s"
        time.sleep(0.001)
    assert next_number > deliveries.reported, "records must be in flight at the kill"
    return next_number


def _produce_blind(
    producer: Producer, deliveries: DeliveryLog, count: int, next_number: int
) -> int:
    """Produce ``count`` records without waiting for anything (the broker is down)."""
    for _ in range(count):
        producer.produce(TOPIC, f"record-{next_number}".encode(), on_delivery=deliveries)
        next_number += 1
    producer.poll(0)
    return next_number


def _read_partition(bootstrap: str, end_offset: int) -> list[tuple[int, bytes]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            **QUIET,
        }
    )
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    records: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 30
    try:
        while (not records or records[-1][0] < end_offset - 1) and time.monotonic() < deadline:
            for message in consumer.consume(10_000, 0.5):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(error)
                records.append((message.offset(), message.value()))
    finally:
        consumer.close()
    return records


def _high_watermark(bootstrap: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", **QUIET})
    try:
        return consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), 10)[1]
    finally:
        consumer.close()


@pytest.mark.timeout(120)
def test_kill_9_under_a_live_producer_loses_no_acknowledged_record(tmp_path: Path) -> None:
    broker: BrokerProcess = start_broker(tmp_path / "data")
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(10)
        del admin  # it would only log its failed reconnects while the broker is down
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "acks": 1,
                "linger.ms": 5,
                "enable.idempotence": False,
                "message.timeout.ms": 20_000,
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 500,
                **QUIET,
            }
        )
        deliveries = DeliveryLog()
        deadline = time.monotonic() + 90
        number = 0
        for kill in range(1, KILLS + 1):
            number = _produce_until_acknowledged(
                producer, deliveries, kill * ACKED_BEFORE_EACH_KILL, number, deadline
            )
            number = _produce_in_flight(producer, deliveries, number, broker.bootstrap)
            broker.kill()
            number = _produce_blind(producer, deliveries, PRODUCED_WHILE_DOWN, number)
            broker.start()
        number = _produce_until_acknowledged(
            producer, deliveries, KILLS * ACKED_BEFORE_EACH_KILL + 1_000, number, deadline
        )
        assert producer.flush(30) == 0

        acknowledged = dict(deliveries.acknowledged)
        assert len(acknowledged) == len(deliveries.acknowledged), (
            "the broker acknowledged two records at the same offset"
        )
        end_offset = _high_watermark(broker.bootstrap)
        records = _read_partition(broker.bootstrap, end_offset)
        offsets = [offset for offset, _ in records]
        assert offsets == list(range(end_offset)), "offsets must run 0..N-1 without gaps or repeats"
        stored = dict(records)
        lost = [(offset, value) for offset, value in acknowledged.items() if offset not in stored]
        assert not lost, f"{len(lost)} acknowledged records lost, first {lost[:3]}"
        changed = [
            (offset, value, stored[offset])
            for offset, value in acknowledged.items()
            if stored[offset] != value
        ]
        assert not changed, f"{len(changed)} acknowledged offsets hold other values: {changed[:3]}"
    finally:
        if broker.process is not None:
            broker.stop()
