"""The producer's record accumulator: batches per partition, and the memory they hold.

``send()`` appends each record to the open batch of its partition; a batch is
sendable when it is full (``batch.size``), has waited ``linger.ms``, or when the
producer is flushing, closing or out of memory. The sender drains sendable
batches, one per partition per request, grouped by the partition's leader.
A batch that must be retried goes back to the front of its partition's queue,
in sequence order, and waits ``retry.backoff.ms`` (exponential) first.

:class:`BufferMemory` bounds the bytes of records accepted and not yet
delivered (``buffer.memory``). It is the one piece shared across threads: the
blocking ``Producer.send`` waits for memory on the caller's thread, everything
else here belongs to the producer's event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import datetime
import itertools
import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from samsa.client.cluster import Backoff, Cluster
from samsa.client.errors import BufferExhaustedError
from samsa.client.producer.types import (
    BatchDeliveryCallback,
    BatchMetadata,
    DeliveryCallback,
    RecordMetadata,
)
from samsa.records import CompressionType, RecordBatchBuilder
from samsa.records.builder import EncodedBatchBuilder, EncodedRecords
from samsa.records.record import Header
from samsa.types import TopicPartition

__all__ = ["BufferMemory", "EncodedProducerBatch", "ProducerBatch", "RecordAccumulator"]

log = logging.getLogger(__name__)

IDLE_CHECK_S = 1.0  # how often an idle sender looks for expired batches
RECORD_OVERHEAD = 21  # a record's attributes, varints and header count, at most
_INVALID_STATE = (asyncio.InvalidStateError, concurrent.futures.InvalidStateError)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
Future = asyncio.Future[RecordMetadata] | concurrent.futures.Future[RecordMetadata]
BatchFuture = asyncio.Future[BatchMetadata] | concurrent.futures.Future[BatchMetadata]


class BufferMemory:
    """``buffer.memory``: bytes reserved by accepted records until their batch completes."""

    def __init__(self, total: int, on_wait: Callable[[], None] = lambda: None) -> None:
        self.total = total
        self.used = 0
        self._on_wait = on_wait  # tells the sender someone is waiting: drain without lingering
        self._condition = threading.Condition(threading.Lock())
        self._blocked = 0
        self._async_waiters: deque[asyncio.Future[None]] = deque()

    @property
    def exhausted(self) -> bool:
        """Whether a send() is waiting for memory."""
        return bool(self._blocked or self._async_waiters)

    def try_reserve(self, size: int) -> bool:
        with self._condition:
            if self.used + size > self.total:
                return False
            self.used += size
            return True

    def reserve_blocking(self, size: int, timeout_s: float) -> None:
        """Reserve on the calling thread, waiting up to ``timeout_s`` (max.block.ms)."""
        with self._condition:
            if self.used + size > self.total:
                self._blocked += 1
                self._on_wait()
                try:
                    if not self._condition.wait_for(
                        lambda: self.used + size <= self.total, timeout_s
                    ):
                        raise self._exhausted(size, timeout_s)
                finally:
                    self._blocked -= 1
            self.used += size

    async def reserve(self, size: int, timeout_s: float) -> None:
        """Reserve from the producer's loop, waiting up to ``timeout_s`` (max.block.ms)."""
        if self.try_reserve(size):
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not self.try_reserve(size):
            waiter = loop.create_future()
            self._async_waiters.append(waiter)
            self._on_wait()
            try:
                async with asyncio.timeout_at(deadline):
                    await waiter
            except TimeoutError:
                raise self._exhausted(size, timeout_s) from None
            finally:
                if waiter in self._async_waiters:
                    self._async_waiters.remove(waiter)

    def _exhausted(self, size: int, timeout_s: float) -> BufferExhaustedError:
        return BufferExhaustedError(
            f"could not reserve {size} bytes for a record within max.block.ms="
            f"{timeout_s * 1000:.0f}: buffer.memory={self.total} is held by {self.used} bytes "
            "of records not yet delivered (the brokers are slower than send(), or unreachable)"
        )

    def release(self, size: int) -> None:
        """Give back ``size`` bytes (on the loop thread) and wake the waiters."""
        with self._condition:
            self.used -= size
            self._condition.notify_all()
        while self._async_waiters:
            waiter = self._async_waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)


class ProducerBatch:
    """Records of one partition sent together, with each record's future and callback."""

    _ids = itertools.count()

    def __init__(self, tp: TopicPartition, compression: CompressionType, created: float) -> None:
        self.id = next(self._ids)
        self.tp = tp
        self.builder: RecordBatchBuilder | EncodedBatchBuilder = RecordBatchBuilder(
            compression=compression
        )
        self.created = created
        self.records: list[tuple[Future | None, DeliveryCallback | None, int, int, int]] = []
        self.reserved = 0
        self.attempts = 0
        self.last_attempt = 0.0
        self.closed = False  # no more appends: full, drained once, or retried
        self.done = False
        self.is_transactional = False
        self.in_flight = False
        self._encoded: bytes | None = None
        self._encoded_for: tuple[int, int, int] = (-1, -1, -1)

    def __repr__(self) -> str:
        return f"<ProducerBatch {self.tp} {len(self.records)} records seq {self.base_sequence}>"

    @property
    def record_count(self) -> int:
        return len(self.records)

    @property
    def size(self) -> int:
        return self.builder.estimated_size

    @property
    def producer_id(self) -> int:
        return self.builder.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.builder.producer_epoch

    @property
    def base_sequence(self) -> int:
        return self.builder.base_sequence

    @property
    def last_sequence(self) -> int:
        return (self.builder.base_sequence + self.record_count - 1) & 0x7FFFFFFF

    def append(
        self,
        *,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header],
        future: Future | None,
        callback: DeliveryCallback | None,
        reserved: int,
    ) -> None:
        builder = self.builder
        assert isinstance(builder, RecordBatchBuilder), "an encoded batch takes no records"
        builder.append(value, key=key, headers=headers, timestamp=timestamp)
        self.records.append(
            (future, callback, timestamp, -1 if key is None else len(key),
             -1 if value is None else len(value))
        )  # fmt: skip
        self.reserved += reserved

    def set_producer_state(self, producer_id: int, epoch: int, base_sequence: int) -> None:
        builder = self.builder
        builder.producer_id, builder.producer_epoch = producer_id, epoch
        builder.base_sequence = base_sequence
        builder.is_transactional = self.is_transactional

    def halves(self) -> tuple[ProducerBatch, ProducerBatch] | None:
        """This batch's records as two batches in their order, each with its share of the
        reserved memory and, if this one had taken sequences, of its sequences — so the
        batches after it keep theirs; None for a batch of one record."""
        count = self.record_count
        builder = self.builder
        if count < 2 or not isinstance(builder, RecordBatchBuilder):
            return None
        cut = count // 2
        appended = builder.appended()
        halves = []
        for start, end in ((0, cut), (cut, count)):
            half = ProducerBatch(self.tp, builder.compression, self.created)
            half.is_transactional = self.is_transactional
            half.attempts = self.attempts
            half.last_attempt = self.last_attempt
            target = half.builder
            assert isinstance(target, RecordBatchBuilder)
            for timestamp, key, value, headers in appended[start:end]:
                target.append(value, key=key, headers=headers, timestamp=timestamp)
            half.records = self.records[start:end]
            # Shares that add up to the whole, whatever the rounding.
            half.reserved = self.reserved * end // count - self.reserved * start // count
            if self.base_sequence >= 0:
                half.set_producer_state(
                    self.producer_id, self.producer_epoch, (self.base_sequence + start) & 0x7FFFFFFF
                )
            halves.append(half)
        first, second = halves
        return first, second

    def encode(self) -> bytes:
        """The batch's bytes; rebuilt only when its producer id, epoch or sequence changed."""
        state = (self.producer_id, self.producer_epoch, self.base_sequence)
        if self._encoded is None or state != self._encoded_for:
            self._encoded = self.builder.build()
            self._encoded_for = state
        return self._encoded

    def complete(self, base_offset: int, log_append_time: Any) -> None:
        """Resolve every record's future with its metadata and run its callback."""
        self.done = True
        append_ms = -1
        if isinstance(log_append_time, datetime.datetime):
            append_ms = (log_append_time - _EPOCH) // datetime.timedelta(milliseconds=1)
        elif isinstance(log_append_time, int):
            append_ms = log_append_time
        topic, partition = self.tp
        for delta, (future, callback, timestamp, key_size, value_size) in enumerate(self.records):
            metadata = RecordMetadata(
                topic,
                partition,
                -1 if base_offset < 0 else base_offset + delta,
                append_ms if append_ms >= 0 else timestamp,
                key_size,
                value_size,
            )
            if future is not None:
                # A future the caller cancelled stays cancelled; the record was delivered.
                with contextlib.suppress(*_INVALID_STATE):
                    future.set_result(metadata)
            if callback is not None:
                _run_callback(callback, metadata, None)

    def fail(self, error: BaseException) -> None:
        """Fail every record's future with ``error`` and run its callback."""
        self.done = True
        for future, callback, _ts, _k, _v in self.records:
            if future is not None:
                with contextlib.suppress(*_INVALID_STATE):  # cancelled by the caller
                    future.set_exception(error)
            if callback is not None:
                _run_callback(callback, None, error)


class EncodedProducerBatch(ProducerBatch):
    """A batch whose records were encoded before they reached the producer: one future
    and one callback for all of them, closed to appends from the start."""

    def __init__(
        self,
        tp: TopicPartition,
        encoded: EncodedRecords,
        created: float,
        *,
        future: BatchFuture | None,
        callback: BatchDeliveryCallback | None,
        reserved: int,
    ) -> None:
        super().__init__(tp, encoded.compression, created)
        self.builder = EncodedBatchBuilder(encoded)
        self.closed = True
        self.reserved = reserved
        self._count = encoded.record_count
        self._future = future
        self._callback = callback

    def __repr__(self) -> str:
        return f"<EncodedProducerBatch {self.tp} {self._count} records seq {self.base_sequence}>"

    @property
    def record_count(self) -> int:
        return self._count

    def complete(self, base_offset: int, log_append_time: Any) -> None:
        self.done = True
        topic, partition = self.tp
        metadata = BatchMetadata(topic, partition, base_offset, self._count)
        if self._future is not None:
            with contextlib.suppress(*_INVALID_STATE):
                self._future.set_result(metadata)
        if self._callback is not None:
            _run_callback(self._callback, metadata, None)

    def fail(self, error: BaseException) -> None:
        self.done = True
        if self._future is not None:
            with contextlib.suppress(*_INVALID_STATE):
                self._future.set_exception(error)
        if self._callback is not None:
            _run_callback(self._callback, None, error)


def _run_callback(
    callback: DeliveryCallback | BatchDeliveryCallback,
    metadata: Any,
    error: BaseException | None,
) -> None:
    try:
        callback(metadata, error)
    except Exception:
        # A user's callback must not stop the sender; Java logs and carries on too.
        log.exception("a producer delivery callback raised")


class RecordAccumulator:
    """Per-partition queues of batches (owned by the producer's event loop)."""

    def __init__(
        self,
        *,
        batch_size: int,
        linger_ms: int,
        compression: CompressionType,
        memory: BufferMemory,
        retry_backoff: Backoff,
        delivery_timeout_ms: int,
        transactional: bool = False,
    ) -> None:
        self.transactional = transactional
        self.batch_size = batch_size
        self.linger_s = linger_ms / 1000
        self.compression = compression
        self.memory = memory
        self.retry_backoff = retry_backoff
        self.delivery_timeout_s = delivery_timeout_ms / 1000
        self.batches: dict[TopicPartition, deque[ProducerBatch]] = {}
        self.incomplete: dict[int, ProducerBatch] = {}  # by id: queued and in flight
        self.flushing = 0
        self.closing = False
        self._drain_start = 0

    def append(
        self,
        tp: TopicPartition,
        *,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header],
        future: Future | None,
        callback: DeliveryCallback | None,
        reserved: int,
        now: float,
    ) -> tuple[ProducerBatch, bool]:
        """Add a record to ``tp``'s open batch (or a new one); returns (batch, is new)."""
        queue = self.batches.get(tp)
        if queue is None:
            queue = self.batches[tp] = deque()
        batch = queue[-1] if queue else None
        new = (
            batch is None
            or batch.closed
            or batch.size + reserved > self.batch_size
        )  # fmt: skip
        if new:
            if batch is not None:
                batch.closed = True
            batch = ProducerBatch(tp, self.compression, now)
            batch.is_transactional = self.transactional
            queue.append(batch)
            self.incomplete[batch.id] = batch
        assert batch is not None
        batch.append(
            timestamp=timestamp, key=key, value=value, headers=headers,
            future=future, callback=callback, reserved=reserved,
        )  # fmt: skip
        return batch, new

    def append_encoded(self, batch: EncodedProducerBatch) -> None:
        """Queue a batch of encoded records behind ``batch.tp``'s batches; the open one is
        closed, so records sent later go after it."""
        queue = self.batches.get(batch.tp)
        if queue is None:
            queue = self.batches[batch.tp] = deque()
        if queue:
            queue[-1].closed = True
        batch.is_transactional = self.transactional
        queue.append(batch)
        self.incomplete[batch.id] = batch

    def retry_delay_s(self, batch: ProducerBatch, now: float) -> float:
        """Seconds until a retried batch may go again (0 for a first attempt)."""
        if not batch.attempts:
            return 0.0
        wait = self.retry_backoff.delay_ms(batch.attempts) / 1000
        return max(0.0, batch.last_attempt + wait - now)

    def ready(self, cluster: Cluster, now: float) -> tuple[set[int], float, bool]:
        """(leaders with a sendable batch, seconds until the next may be, a leader unknown)."""
        nodes: set[int] = set()
        next_check = IDLE_CHECK_S  # appends and answers wake the sender before that
        unknown_leader = False
        urgent = self.flushing > 0 or self.closing or self.memory.exhausted
        for tp, queue in self.batches.items():
            if not queue:
                continue
            leader = cluster.leader_for(tp)
            if leader is None:
                unknown_leader = True
                continue
            if leader in nodes:
                continue
            batch = queue[0]
            backoff = self.retry_delay_s(batch, now)
            if backoff > 0:
                next_check = min(next_check, backoff)
                continue
            waited = now - batch.created
            full = len(queue) > 1 or batch.closed or batch.size >= self.batch_size
            if full or urgent or waited >= self.linger_s:
                nodes.add(leader)
            else:
                next_check = min(next_check, self.linger_s - waited)
        return nodes, max(next_check, 0.0), unknown_leader

    def drain(
        self,
        cluster: Cluster,
        nodes: set[int],
        max_request_size: int,
        now: float,
        can_send: Callable[[ProducerBatch], bool],
    ) -> dict[int, list[ProducerBatch]]:
        """Take at most one batch per partition for each node, up to max.request.size."""
        by_node: dict[int, list[TopicPartition]] = {}
        for tp, queue in self.batches.items():
            if queue:
                leader = cluster.leader_for(tp)
                if leader in nodes:
                    by_node.setdefault(leader, []).append(tp)
        drained: dict[int, list[ProducerBatch]] = {}
        self._drain_start += 1
        for node, tps in by_node.items():
            start = self._drain_start % len(tps)  # rotate, so no partition always waits
            size = 0
            ready: list[ProducerBatch] = []
            for tp in tps[start:] + tps[:start]:
                queue = self.batches[tp]
                batch = queue[0]
                if self.retry_delay_s(batch, now) > 0 or not can_send(batch):
                    continue
                if ready and size + batch.size > max_request_size:
                    break
                queue.popleft()
                batch.closed = True
                ready.append(batch)
                size += batch.size
            if ready:
                drained[node] = ready
        return drained

    def reenqueue(self, batch: ProducerBatch, now: float) -> None:
        """Put a failed batch back at the front of its queue, in sequence order."""
        batch.attempts += 1
        batch.last_attempt = now
        self._put_back(batch)

    def _put_back(self, batch: ProducerBatch) -> None:
        batch.closed = True
        batch.in_flight = False
        queue = self.batches.setdefault(batch.tp, deque())
        position = 0
        if batch.base_sequence >= 0:
            while (
                position < len(queue)
                and queue[position].base_sequence >= 0
                and queue[position].producer_epoch == batch.producer_epoch
                and queue[position].base_sequence < batch.base_sequence
            ):
                position += 1
        queue.insert(position, batch)

    def has_pending_before(self, batch: ProducerBatch) -> bool:
        """Whether a batch of ``batch``'s partition, producer id and epoch with lower
        sequences is still queued or in flight (the broker refuses ``batch`` as out of
        order until that one lands)."""
        return any(
            other.tp == batch.tp
            and not other.done
            and 0 <= other.base_sequence < batch.base_sequence
            and other.producer_id == batch.producer_id
            and other.producer_epoch == batch.producer_epoch
            for other in self.incomplete.values()
        )

    def split(self, batch: ProducerBatch) -> bool:
        """Put ``batch``, which the broker refused as too large (MESSAGE_TOO_LARGE), back
        at the front of its queue in two halves, as Kafka's producer splits such a batch;
        a half refused again is split again. False when it cannot be: one record, or
        records encoded before they reached the producer."""
        halves = batch.halves()
        if halves is None:
            return False
        if self.incomplete.pop(batch.id, None) is None:
            return False  # failed or completed meanwhile (the producer is aborting)
        for half in reversed(halves):  # each goes before what follows it
            self.incomplete[half.id] = half
            self._put_back(half)  # not a failed attempt: no back-off
        return True

    def expired(self, now: float) -> list[ProducerBatch]:
        """Remove and return queued batches older than delivery.timeout.ms."""
        expired: list[ProducerBatch] = []
        for queue in self.batches.values():
            if queue and now - queue[0].created >= self.delivery_timeout_s:
                keep = [b for b in queue if now - b.created < self.delivery_timeout_s]
                expired += [b for b in queue if now - b.created >= self.delivery_timeout_s]
                queue.clear()
                queue.extend(keep)
        return expired

    def finished(self, batch: ProducerBatch) -> None:
        """Forget a completed or failed batch and give its memory back."""
        if self.incomplete.pop(batch.id, None) is not None:
            self.memory.release(batch.reserved)

    def queued(self) -> list[ProducerBatch]:
        """Every batch not in flight, in queue order."""
        return [b for queue in self.batches.values() for b in queue]

    def remove_queued(self) -> list[ProducerBatch]:
        """Take every queued batch out (to fail them when the producer aborts)."""
        batches = self.queued()
        for queue in self.batches.values():
            queue.clear()
        return batches
