"""Client workloads for fault-injection runs, each a thread recording into a History.

They use confluent-kafka (librdkafka, the reference client; samsa's ``dev`` extra):

- :class:`Writer`: an idempotent ``acks=all`` producer of unique values
  (``<name>-<n>``) at a steady rate; every delivery report is recorded;
- :class:`GroupReader`: one member of a read_committed consumer group that records
  every record it polls and commits synchronously every second;
- :class:`CopyLoop`: a transactional consume → produce loop copying a topic to another
  (each copy's value is ``<input value>|<attempt>``), aborting a share of its
  transactions on purpose; every transaction's outcome and records are recorded;
- :class:`OffsetsWatch`: reads each group's committed offsets back twice a second.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from samsa.testing.history import COPY_SEPARATOR, History

log = logging.getLogger(__name__)

QUIET = {"log_level": 3}
CONSUMER_SETTINGS: dict[str, Any] = {
    "isolation.level": "read_committed",
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 1000,
    "topic.metadata.refresh.interval.ms": 1000,
    # librdkafka waits this long (60 s by default) for a frozen broker's Metadata answer.
    "socket.timeout.ms": 5000,
    **QUIET,
}
PRODUCER_SETTINGS: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    # A frozen broker answers nothing: give up on its requests soon and retry at the
    # new leader (idempotence deduplicates the retries).
    "request.timeout.ms": 3000,
    "message.timeout.ms": 300_000,
    "socket.timeout.ms": 5000,
    "topic.metadata.refresh.interval.ms": 1000,
    **QUIET,
}


class Workload(threading.Thread):
    """A thread that runs until :meth:`finish`; an exception it raises is kept in
    ``error`` (a run reports it: a workload that died tested nothing afterwards)."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.work()
        except BaseException as exc:
            self.error = exc
            log.exception("%s failed", self.name)

    def work(self) -> None:
        raise NotImplementedError

    def finish(self, timeout: float = 120.0) -> None:
        self.stopping.set()
        self.join(timeout)
        if self.is_alive():
            raise RuntimeError(f"{self.name} did not stop in {timeout} s")


class Writer(Workload):
    """Produces ``<name>-<n>`` values to ``topic`` at ``rate`` records per second."""

    def __init__(self, bootstrap: str, topic: str, history: History, name: str, rate: int) -> None:
        super().__init__(name)
        self.bootstrap = bootstrap
        self.topic = topic
        self.history = history
        self.rate = rate
        self.sent = 0
        self.fatal = 0
        self.producer = self._producer()

    def _producer(self) -> Producer:
        return Producer({"bootstrap.servers": self.bootstrap, **PRODUCER_SETTINGS})

    def _report(self, error: KafkaError | None, message: Message) -> None:
        raw = message.value()
        value = raw.decode() if isinstance(raw, bytes) else ""
        if error is None:
            # librdkafka reports some idempotent retries as delivered without an offset
            # (-1 here): the record is acknowledged, where it is is not said.
            partition, offset = message.partition(), message.offset()
            assert partition is not None
            self.history.ack(self.topic, partition, -1 if offset is None else offset, value)
        else:
            self.history.failed(self.topic, value, error.str())
            if error.fatal():
                self.fatal += 1

    def work(self) -> None:
        started = time.monotonic()
        while not self.stopping.is_set():
            due = int((time.monotonic() - started) * self.rate)
            while self.sent < due:
                value = f"{self.name}-{self.sent}"
                try:
                    self.producer.produce(
                        self.topic, value.encode(), str(self.sent).encode(),
                        on_delivery=self._report,
                    )  # fmt: skip
                except BufferError:
                    break  # the queue is full while the cluster is unavailable
                except KafkaException as exc:
                    if not exc.args[0].fatal():
                        raise
                    # A fatal idempotence error: this producer is done; reports of its
                    # queued records come as failures on the flush.
                    self.fatal += 1
                    self.producer.flush(30)
                    self.producer = self._producer()
                    break
                self.sent += 1
            self.producer.poll(0.02)

    def finish(self, timeout: float = 120.0) -> None:
        super().finish(timeout)
        left = self.producer.flush(timeout)
        if left:
            raise RuntimeError(f"{self.name}: {left} records unreported after {timeout} s")


class GroupReader(Workload):
    """A member of ``group`` reading ``topic`` read_committed; commits every second."""

    def __init__(self, bootstrap: str, topic: str, group: str, history: History, name: str):
        super().__init__(name)
        self.topic = topic
        self.group = group
        self.history = history
        history.groups[group] = topic
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  **CONSUMER_SETTINGS})  # fmt: skip

    def work(self) -> None:
        self.consumer.subscribe([self.topic])
        last_commit = time.monotonic()
        try:
            while not self.stopping.is_set():
                for message in self.consumer.consume(200, 0.2):
                    if message.error() is None:
                        _record_poll(self.history, self.group, self.name, message)
                if time.monotonic() - last_commit >= 1.0:
                    last_commit = time.monotonic()
                    # Nothing to commit, or the coordinator is moving: next second.
                    with contextlib.suppress(KafkaException):
                        self.consumer.commit(asynchronous=False)
        finally:
            self.consumer.close()


def _record_poll(history: History, group: str, member: str, message: Message) -> None:
    raw, partition, offset = message.value(), message.partition(), message.offset()
    assert partition is not None and offset is not None
    value = raw.decode() if isinstance(raw, bytes) else ""
    history.polled(group, member, message.topic() or "", partition, offset=offset, value=value)


class CopyLoop(Workload):
    """Copies ``source`` to ``target`` in transactions, ``abort_ratio`` of them aborted."""

    def __init__(
        self,
        bootstrap: str,
        source: str,
        target: str,
        group: str,
        history: History,
        *,
        name: str = "copier",
        abort_ratio: float = 0.2,
        size: int = 500,
        seed: int = 0,
    ) -> None:
        super().__init__(name)
        self.bootstrap = bootstrap
        self.source, self.target, self.group = source, target, group
        self.history = history
        history.groups[group] = source
        history.copies[target] = (source, group)
        self.abort_ratio = abort_ratio
        self.size = size
        self.random = random.Random(seed)
        self.attempt = 0
        self.restarts = 0
        self.client_hangs = 0
        """Producers given up in send_offsets_to_transaction (see :data:`SEND_OFFSETS_HANG_S`)."""

    def work(self) -> None:
        while not self.stopping.is_set():
            producer = Producer({**PRODUCER_SETTINGS, "bootstrap.servers": self.bootstrap,
                                 "transactional.id": f"{self.name}-txn",
                                 "message.timeout.ms": 60_000})  # fmt: skip
            consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                                 **CONSUMER_SETTINGS})  # fmt: skip
            abandoned = False
            try:
                self._copy(producer, consumer)
            except ClientHang as exc:
                # The producer is left to its hung call; the next one fences it.
                abandoned = True
                self.client_hangs += 1
                self.restarts += 1
                log.warning("%s starts over: %s", self.name, exc)
            except KafkaException as exc:
                # Fatal or unknown: start over with a new producer (it fences this one and
                # ends its transaction) and a consumer at the group's committed offsets.
                self.restarts += 1
                log.warning("%s starts over after %s", self.name, exc)
            finally:
                consumer.close()
                if not abandoned:
                    producer.flush(10)

    def _copy(self, producer: Producer, consumer: Consumer) -> None:
        try:
            with _slow(self.name, "init_transactions"):
                producer.init_transactions(30)
        except KafkaException:
            time.sleep(0.5)  # no coordinator yet: try again with a new producer
            raise
        consumer.subscribe([self.source])
        idle_since = time.monotonic()
        while not self.stopping.is_set():
            messages = [m for m in consumer.consume(self.size, 0.2) if m.error() is None]
            if not messages:
                if time.monotonic() - idle_since > 10:
                    assigned = [tp.partition for tp in consumer.assignment()]
                    log.warning("%s: nothing consumed for 10 s (assigned %s)", self.name, assigned)
                    idle_since = time.monotonic()
                continue
            idle_since = time.monotonic()
            for message in messages:
                _record_poll(self.history, self.group, self.name, message)
            self.attempt += 1
            values = []
            producer.begin_transaction()
            try:
                for message in messages:
                    raw = message.value()
                    value = (raw.decode() if isinstance(raw, bytes) else "") + (
                        f"{COPY_SEPARATOR}{self.attempt}"
                    )
                    producer.produce(self.target, value.encode(), message.key(),
                                     partition=message.partition() or 0)  # fmt: skip
                    values.append(value)
                positions = consumer.position(consumer.assignment())
                with _slow(self.name, "send_offsets_to_transaction"):
                    _send_offsets(producer, positions, consumer.consumer_group_metadata())
                if self.random.random() < self.abort_ratio:
                    with _slow(self.name, "flush"):
                        producer.flush(30)  # the aborted records are in the log, to be skipped
                    self._abort(producer, consumer, values)
                    continue
                self._commit(producer, consumer, values)
            except KafkaException as exc:
                error = exc.args[0]
                if isinstance(error, KafkaError) and error.txn_requires_abort():
                    self._abort(producer, consumer, values)
                    continue
                self.history.transaction(self.name, None, values)
                raise
            except ClientHang:
                self.history.transaction(self.name, None, values)
                raise

    def _commit(self, producer: Producer, consumer: Consumer, values: list[str]) -> None:
        while True:
            try:
                with _slow(self.name, "commit_transaction"):
                    producer.commit_transaction(30)
            except KafkaException as exc:
                error = exc.args[0]
                if isinstance(error, KafkaError) and error.retriable():
                    log.warning("%s: commit_transaction: %s; retrying", self.name, error)
                    continue
                raise
            self.history.transaction(self.name, True, values)
            return

    def _abort(self, producer: Producer, consumer: Consumer, values: list[str]) -> None:
        while True:
            try:
                with _slow(self.name, "abort_transaction"):
                    producer.abort_transaction(30)
                break
            except KafkaException as exc:
                error = exc.args[0]
                if isinstance(error, KafkaError) and error.retriable():
                    log.warning("%s: abort_transaction: %s; retrying", self.name, error)
                    continue
                self.history.transaction(self.name, None, values)
                raise
        self.history.transaction(self.name, False, values)
        with _slow(self.name, "committed"):
            committed = consumer.committed(consumer.assignment(), timeout=30)
        for tp in committed:
            if tp.error is None:
                consumer.seek(KafkaTopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))


SEND_OFFSETS_HANG_S = 15.0
"""How long send_offsets_to_transaction may take before the copy loop gives its
producer up: below the checker's bound for a stuck group, so that the loop's group
does not count as stuck for a client defect (a call that was only slow costs a fresh
start). librdkafka 2.16 ignores that call's timeout (confluentinc/librdkafka#5456) and
can wait for good when the group coordinator it cached is a broker that left the
metadata, one that was killed (confluentinc/librdkafka#5511)."""


class ClientHang(Exception):
    """A client call that did not return in time (a client defect, not the broker's)."""


def _send_offsets(producer: Producer, positions: list[KafkaTopicPartition], group: Any) -> None:
    """``send_offsets_to_transaction`` on a thread of its own; ClientHang if it hangs."""
    outcome: list[BaseException | None] = []

    def call() -> None:
        try:
            producer.send_offsets_to_transaction(positions, group, 30)
            outcome.append(None)
        except BaseException as exc:  # handed to the caller
            outcome.append(exc)

    caller = threading.Thread(target=call, name="send-offsets", daemon=True)
    caller.start()
    caller.join(SEND_OFFSETS_HANG_S)
    if not outcome:
        raise ClientHang(
            f"send_offsets_to_transaction did not return in {SEND_OFFSETS_HANG_S:.0f} s "
            "(confluentinc/librdkafka#5511)"
        )
    if outcome[0] is not None:
        raise outcome[0]


@contextlib.contextmanager
def _slow(name: str, step: str, after: float = 5.0) -> Iterator[None]:
    """Log a step that took longer than ``after`` seconds (what a stalled workload waited on)."""
    started = time.monotonic()
    try:
        yield
    finally:
        took = time.monotonic() - started
        if took > after:
            log.warning("%s: %s took %.1f s", name, step, took)


class OffsetsWatch(Workload):
    """Reads ``groups``' committed offsets of their topics' partitions twice a second."""

    def __init__(self, bootstrap: str, history: History, partitions: dict[str, int]) -> None:
        super().__init__("offsets-watch")
        self.bootstrap = bootstrap
        self.history = history
        self.partitions = partitions
        """topic → partition count."""

    def work(self) -> None:
        readers = {
            group: Consumer({"bootstrap.servers": self.bootstrap, "group.id": group, **QUIET})
            for group in self.history.groups
        }
        try:
            while not self.stopping.wait(0.5):
                for group, consumer in readers.items():
                    self.read(group, consumer)
        finally:
            for consumer in readers.values():
                consumer.close()

    def read(self, group: str, consumer: Consumer) -> None:
        topic = self.history.groups[group]
        asked = [KafkaTopicPartition(topic, p) for p in range(self.partitions[topic])]
        try:
            found = consumer.committed(asked, timeout=5)
        except KafkaException:
            return  # the coordinator is moving
        for tp in found:
            if tp.error is None and tp.offset >= 0:
                self.history.committed(group, tp.topic, tp.partition, tp.offset)


def read_all(bootstrap: str, topics: Sequence[str], timeout: float = 120.0) -> dict[
    tuple[str, int], list[tuple[int, str]]
]:  # fmt: skip
    """Every record of ``topics`` from the start to the end, read_committed."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "final-read",
                         "enable.partition.eof": True, **CONSUMER_SETTINGS})  # fmt: skip
    try:
        metadata = consumer.list_topics(timeout=30)
        assigned = [
            KafkaTopicPartition(topic, p, 0)
            for topic in topics
            for p in sorted(metadata.topics[topic].partitions)
        ]
        consumer.assign(assigned)
        records: dict[tuple[str, int], list[tuple[int, str]]] = {
            (tp.topic, tp.partition): [] for tp in assigned
        }
        ends = {
            (tp.topic, tp.partition): consumer.get_watermark_offsets(tp, 30)[1] for tp in assigned
        }
        done = {key for key, end in ends.items() if end == 0}
        deadline = time.monotonic() + timeout
        while len(done) < len(records):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the final read did not reach the end in {timeout} s")
            for message in consumer.consume(500, 0.5):
                topic, partition = message.topic() or "", message.partition() or 0
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        done.add((topic, partition))
                    continue
                raw, offset = message.value(), message.offset()
                assert offset is not None
                value = raw.decode() if isinstance(raw, bytes) else ""
                records[(topic, partition)].append((offset, value))
        return records
    finally:
        consumer.close()
