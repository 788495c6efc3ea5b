"""A confluent-kafka exactly-once copier (consume → transform → produce in transactions),
usable in-process and as a process of its own for tests that SIGKILL it.

Usage::

    python txn_copier.py copy BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID [--open-after K]
    python txn_copier.py hang BOOTSTRAP TOPIC TRANSACTIONAL_ID TIMEOUT_MS COUNT [PARTITION...]

``copy`` copies every record of INPUT to the same partition of OUTPUT, in transactions
that also commit the consumer group's offsets, and prints one JSON line when it is done:
``{"event": "done", ...CopyStats}``. With ``--open-after K`` it commits K transactions,
then produces the records of the next one and sends its offsets without committing,
prints ``{"event": "open", ...}`` and waits to be killed.

``hang`` begins a transaction with ``transaction.timeout.ms=TIMEOUT_MS``, produces COUNT
records to each PARTITION (0 if none is named), flushes them, prints
``{"event": "open"}`` and waits to be killed: a producer that hangs mid-transaction.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

QUIET = {"log_level": 3}
SESSION_TIMEOUT_MS = 3000
HEARTBEAT_INTERVAL_MS = 500


@dataclass(slots=True)
class CopyStats:
    committed_transactions: int = 0
    aborted_transactions: int = 0
    committed_records: int = 0
    aborted_records: int = 0


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's high watermark (the topic is not written while it is copied)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets", **QUIET})
    try:
        partitions = consumer.list_topics(topic, 10).topics[topic].partitions
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1] for p in partitions
        }
    finally:
        consumer.close()


def copy_topic(
    bootstrap: str,
    input_topic: str,
    output_topic: str,
    group: str,
    transactional_id: str,
    *,
    transaction_size: int = 50,
    abort_ratio: float = 0.0,
    seed: int = 0,
    open_after: int | None = None,
    on_open: Callable[[CopyStats, int], None] | None = None,
    timeout: float = 120.0,
) -> CopyStats:
    """Copy ``input_topic`` to ``output_topic`` exactly once; abort ``abort_ratio`` of the
    transactions (chosen by a RNG seeded with ``seed``) and copy their input again.

    Returns once the group's committed offsets reach the input's end offsets. With
    ``open_after`` it calls ``on_open(stats, open records)`` with that transaction open
    instead of ending it, and then never returns.
    """
    ends = end_offsets(bootstrap, input_topic)
    rng = random.Random(seed)
    stats = CopyStats()
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, **QUIET}
    )
    producer.init_transactions(30)  # fences an earlier producer and aborts its transaction
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
            # After an abort the rewind's seek waits for the fetch in flight, which the
            # broker holds for up to this long at the end of the prefetched input.
            "fetch.wait.max.ms": 10,
            **QUIET,
        }
    )
    committed: dict[int, int] = {}  # partition → offset committed by our transactions
    deadline = time.monotonic() + timeout
    try:
        consumer.subscribe([input_topic])
        while any(committed.get(p, 0) < end for p, end in ends.items()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"copy unfinished after {timeout} s: {committed} of {ends}")
            messages = consumer.consume(transaction_size, 0.2)
            if not messages:
                continue
            for message in messages:
                if message.error() is not None:
                    raise KafkaException(message.error())
            producer.begin_transaction()
            for message in messages:
                partition = message.partition()
                assert partition is not None
                producer.produce(output_topic, message.value(), message.key(), partition=partition)
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata())
            if open_after is not None and stats.committed_transactions == open_after:
                assert producer.flush(30) == 0
                if on_open is not None:
                    on_open(stats, len(messages))
                while True:
                    time.sleep(1)
            if rng.random() < abort_ratio:
                # Aborting purges what was not sent yet: flush first, so that the aborted
                # records are in the log, where read_committed consumers must skip them.
                assert producer.flush(30) == 0
                producer.abort_transaction(30)
                stats.aborted_transactions += 1
                stats.aborted_records += len(messages)
                rewind(consumer)
            else:
                producer.commit_transaction(30)
                stats.committed_transactions += 1
                stats.committed_records += len(messages)
                committed.update(_valid_offsets(positions))
    finally:
        consumer.close()
        producer.flush(10)
    return stats


def read_committed(bootstrap: str, topic: str, count: int, timeout: float = 60.0) -> list[bytes]:
    """The values of ``topic`` a read_committed consumer sees, once ``count`` are read
    (or ``timeout`` has passed)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "checker",
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         **QUIET})  # fmt: skip
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < count and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                value = message.value()
                if message.error() is None and value is not None:
                    values.append(value)
    finally:
        consumer.close()
    return values


def rewind(consumer: Consumer) -> None:
    """Seek every assigned partition back to the group's committed offset (its start when
    nothing is committed), so that what an aborted transaction consumed is read again."""
    for tp in consumer.committed(consumer.assignment(), timeout=10):
        if tp.error is not None:
            raise KafkaException(tp.error)
        consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))


def _valid_offsets(positions: list[TopicPartition]) -> dict[int, int]:
    return {tp.partition: tp.offset for tp in positions if tp.offset >= 0}


def hang(
    bootstrap: str, topic: str, transactional_id: str, timeout_ms: int, count: int,
    *, partitions: list[int],
) -> None:  # fmt: skip
    """Open a transaction holding ``count`` records in each partition, then wait forever."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": timeout_ms,
            **QUIET,
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for partition in partitions:
        for i in range(count):
            producer.produce(topic, f"hanging-{partition}-{i}".encode(), partition=partition)
    assert producer.flush(30) == 0
    report({"event": "open"})
    while True:
        time.sleep(1)


def report(line: dict[str, Any]) -> None:
    print(json.dumps(line), flush=True)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    copy = commands.add_parser("copy")
    for name in ("bootstrap", "input", "output", "group", "transactional_id"):
        copy.add_argument(name)
    copy.add_argument("--open-after", type=int, default=None)
    hanging = commands.add_parser("hang")
    for name in ("bootstrap", "topic", "transactional_id"):
        hanging.add_argument(name)
    hanging.add_argument("timeout_ms", type=int)
    hanging.add_argument("count", type=int)
    hanging.add_argument("partitions", type=int, nargs="*")
    args = parser.parse_args(argv)
    if args.command == "hang":
        hang(
            args.bootstrap, args.topic, args.transactional_id, args.timeout_ms, args.count,
            partitions=args.partitions or [0],
        )  # fmt: skip
        return
    stats = copy_topic(
        args.bootstrap, args.input, args.output, args.group, args.transactional_id,
        open_after=args.open_after,
        on_open=lambda stats, records: report(
            {"event": "open", "open_records": records, **asdict(stats)}
        ),
    )  # fmt: skip
    report({"event": "done", **asdict(stats)})


if __name__ == "__main__":
    main(sys.argv[1:])
