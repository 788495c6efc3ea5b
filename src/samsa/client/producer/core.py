"""The asyncio producer: send() places records in batches; the sender delivers them.

``send()`` serializes the record and reserves its size from ``buffer.memory``
(waiting up to ``max.block.ms``), then hands it to the accumulator under the
partition the partitioner picks. A record for a topic the metadata does not
know yet waits (behind the earlier records of that topic) until a refresh
brings the topic — auto-created brokers answer with the new topic — or
``max.block.ms`` passes. The record's future resolves to its
:class:`~samsa.client.producer.types.RecordMetadata` once the broker has it.

Errors found before a record is accepted (a value that is not bytes, a record
larger than ``max.request.size``, memory that stays full) raise from send();
errors after (no metadata in time, delivery failed or timed out) fail the
record's future and reach its callback.

``send_batch()`` takes a batch whose records were encoded elsewhere (the Spark
sink builds them from Arrow columns) and queues it as one of the producer's own
batches for its partition: the sender gives it the producer id, epoch and
sequence, and the transaction its partition, as for any batch.

Everything here runs on one event loop; :meth:`AsyncProducer.send_threadsafe`
and :meth:`AsyncProducer.send_batch_threadsafe` are the entries for other
threads (the blocking ``Producer``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Self

from samsa.client.cluster import Cluster, PartitionMetadata
from samsa.client.config import ClientConfig, producer_config
from samsa.client.errors import (
    ClientClosedError,
    ClientTimeoutError,
    IllegalStateError,
    error_for,
)
from samsa.client.producer.accumulator import (
    RECORD_OVERHEAD,
    BatchFuture,
    BufferMemory,
    EncodedProducerBatch,
    Future,
    ProducerBatch,
    RecordAccumulator,
)
from samsa.client.producer.idempotence import IdempotenceState
from samsa.client.producer.partitioner import StickyPartitioner, partition_for_key
from samsa.client.producer.sender import Sender
from samsa.client.producer.transactions import TransactionManager
from samsa.client.producer.types import (
    BatchDeliveryCallback,
    BatchMetadata,
    ConsumerGroupMetadata,
    DeliveryCallback,
    RecordMetadata,
)
from samsa.errors import ErrorCode, MessageTooLargeError
from samsa.records import CompressionType
from samsa.records.builder import EncodedRecords
from samsa.records.record import Header
from samsa.types import TopicPartition

__all__ = ["AsyncProducer", "PreparedRecord"]

log = logging.getLogger(__name__)

_producer_ids = itertools.count(1)
Headers = Sequence[tuple[str, bytes | None]] | Mapping[str, bytes | None]


class PreparedRecord(NamedTuple):
    """A record serialized and sized, ready for the accumulator."""

    topic: str
    partition: int | None
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    timestamp: int
    size: int


class _EncodedHandoff(NamedTuple):
    """A batch of encoded records on its way from another thread to the loop."""

    tp: TopicPartition
    encoded: EncodedRecords
    future: BatchFuture | None
    callback: BatchDeliveryCallback | None


class _Waiting(NamedTuple):
    record: PreparedRecord
    future: Future | None
    callback: DeliveryCallback | None
    deadline: float


def _available(partitions: Sequence[PartitionMetadata]) -> list[int]:
    """Partitions with a leader (the sticky partitioner prefers them)."""
    return [p.partition for p in partitions if p.leader >= 0]


def _as_bytes(data: Any, what: str) -> bytes | None:
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise TypeError(
        f"the record's {what} is a {type(data).__name__}: give bytes, or configure "
        f"{what}.serializer"
    )


class AsyncProducer:
    """Kafka producer, asyncio flavour: ``fut = await producer.send(...)``; ``await fut``.

    Use ``async with AsyncProducer(config)`` or :meth:`start` and :meth:`close`.
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config: ClientConfig = producer_config(config)
        config = self.config
        self.client_id: str = config["client.id"] or f"samsa-producer-{next(_producer_ids)}"
        self._cluster = Cluster(config, client_id=self.client_id, allow_auto_topic_creation=True)
        self._memory = BufferMemory(config["buffer.memory"], self._wakeup_threadsafe)
        self._accumulator = RecordAccumulator(
            batch_size=config["batch.size"],
            linger_ms=config["linger.ms"],
            compression=CompressionType[config["compression.type"].upper()],
            memory=self._memory,
            retry_backoff=self._cluster.retry_backoff,
            delivery_timeout_ms=config["delivery.timeout.ms"],
            transactional=config["transactional.id"] is not None,
        )
        self._idempotence = IdempotenceState() if config["enable.idempotence"] else None
        self._transactions: TransactionManager | None = None
        if config["transactional.id"] is not None:
            assert self._idempotence is not None  # producer_config requires it
            self._transactions = TransactionManager(
                transactional_id=config["transactional.id"],
                transaction_timeout_ms=config["transaction.timeout.ms"],
                cluster=self._cluster,
                idempotence=self._idempotence,
                max_block_ms=config["max.block.ms"],
                wakeup=self._wakeup_sender,
            )
        self._partitioner = StickyPartitioner(config["batch.size"])
        self._ignore_keys: bool = config["partitioner.ignore.keys"]
        self._key_serializer = config["key.serializer"]
        self._value_serializer = config["value.serializer"]
        self._max_block_s = config["max.block.ms"] / 1000
        self._unyielded = 0
        self._yield_every = max(config["batch.size"], 1)
        self._waiting: dict[str, deque[_Waiting]] = {}
        self._handoff: deque[
            tuple[PreparedRecord, Future | None, DeliveryCallback | None] | _EncodedHandoff
        ] = deque()
        self._handoff_scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sender: Sender | None = None
        self._sender_task: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def producer_identity(self) -> tuple[int, int] | None:
        """(producer id, epoch) the broker gave this idempotent or transactional producer;
        None before it has one (or without idempotence). With an open transaction it is
        what an EndTxn for that transaction carries."""
        state = self._idempotence
        if state is None or not state.has_producer_id:
            return None
        return state.producer_id, state.epoch

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the sender and background metadata refreshes (no connection is awaited)."""
        if self._sender is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._sender = Sender(
            cluster=self._cluster,
            accumulator=self._accumulator,
            idempotence=self._idempotence,
            transactions=self._transactions,
            config=self.config,
            before_round=self._place_waiting,
        )
        # Records awaiting their topic's metadata are placed by the sender's next round:
        # wake it when a refresh ends rather than at its idle poll.
        self._cluster.on_refresh.append(self._metadata_refreshed)
        self._cluster.start_background()
        self._sender_task = self._loop.create_task(
            self._sender.run(), name=f"samsa-sender-{self.client_id}"
        )

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError(f"producer {self.client_id} was closed")
        sender = self._sender
        if sender is not None and sender.fatal_error is not None:
            raise sender.fatal_error

    def _check_send(self) -> None:
        self._check_open()
        if self._transactions is not None:
            self._transactions.check_send()

    async def close(self, timeout: float | None = None) -> None:
        """Deliver what was sent (waiting up to ``timeout`` seconds, None: no limit), then
        stop. Records still undelivered at the timeout fail with ClientClosedError."""
        if self._closed:
            return
        self._closed = True
        sender = self._sender
        if sender is None:
            await self._cluster.close()
            return
        self._accumulator.closing = True
        try:
            async with asyncio.timeout(timeout):
                await self.flush()
            await sender.stop()
        except TimeoutError:
            error = ClientClosedError(
                f"producer {self.client_id} was closed before these records were delivered"
            )
            self._fail_waiting(error)
            await sender.stop(abort=error)
        if self._sender_task is not None:
            await self._sender_task
        await self._cluster.close()

    # -- sending ---------------------------------------------------------------------------

    def prepare(
        self,
        topic: str,
        value: Any = None,
        *,
        key: Any = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> PreparedRecord:
        """Serialize and size a record (thread-safe, no I/O). Raises TypeError, ValueError
        or MessageTooLargeError for a record that can never be sent."""
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"topic must be a non-empty string, not {topic!r}")
        if partition is not None and (not isinstance(partition, int) or partition < 0):
            raise ValueError(f"partition must be an int >= 0 (or None), not {partition!r}")
        if self._key_serializer is not None and key is not None:
            key = self._key_serializer(key)
        if self._value_serializer is not None and value is not None:
            value = self._value_serializer(value)
        key_bytes, value_bytes = _as_bytes(key, "key"), _as_bytes(value, "value")
        items = headers.items() if isinstance(headers, Mapping) else headers or ()
        header_list = tuple((str(k), _as_bytes(v, f"header {k!r}")) for k, v in items)
        size = (
            RECORD_OVERHEAD
            + (len(key_bytes) if key_bytes is not None else 0)
            + (len(value_bytes) if value_bytes is not None else 0)
            + sum(len(k) + len(v or b"") + 10 for k, v in header_list)
        )  # fmt: skip
        for limit_name in ("max.request.size", "buffer.memory"):
            if size > self.config[limit_name]:
                raise MessageTooLargeError(
                    f"the record is {size} bytes when serialized, larger than "
                    f"{limit_name}={self.config[limit_name]}"
                )
        ts = time.time_ns() // 1_000_000 if timestamp is None else int(timestamp)
        return PreparedRecord(topic, partition, key_bytes, value_bytes, header_list, ts, size)

    async def send(
        self,
        topic: str,
        value: Any = None,
        *,
        key: Any = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Accept a record for sending; return the future of its RecordMetadata.

        Waits only for memory (``max.block.ms``). ``timestamp`` is epoch milliseconds
        (default: now). ``on_delivery(metadata, error)`` runs on delivery or failure.
        """
        record = self.prepare(
            topic, value, key=key, headers=headers, partition=partition, timestamp=timestamp
        )
        await self.start()
        self._check_send()
        await self._memory.reserve(record.size, self._max_block_s)
        future: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        self._accept(record, future, on_delivery)
        # A loop of awaited sends that never waits for memory would never let the sender
        # run (until buffer.memory fills): yield about once per batch.size of records.
        self._unyielded += record.size
        if self._unyielded >= self._yield_every:
            self._unyielded = 0
            await asyncio.sleep(0)
        return future

    async def send_and_wait(
        self,
        topic: str,
        value: Any = None,
        *,
        key: Any = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> RecordMetadata:
        """Send one record and wait for its delivery."""
        future = await self.send(
            topic, value, key=key, headers=headers, partition=partition, timestamp=timestamp
        )
        return await future

    def reserve_blocking(self, record: PreparedRecord, *, wait: bool = True) -> None:
        """Reserve ``record``'s memory on the calling thread (not the loop's), waiting up to
        max.block.ms when ``wait``; raises BufferExhaustedError, or ClientClosedError."""
        self._check_send()
        if not self._memory.try_reserve(record.size):
            self._memory.reserve_blocking(record.size, self._max_block_s if wait else 0)

    def send_threadsafe(
        self,
        record: PreparedRecord,
        future: concurrent.futures.Future[RecordMetadata] | None,
        on_delivery: DeliveryCallback | None,
    ) -> None:
        """Hand a record whose memory :meth:`reserve_blocking` reserved to the loop, from
        any thread.

        Records handed over from one thread keep their order.
        """
        self._handoff.append((record, future, on_delivery))
        if not self._handoff_scheduled:
            self._handoff_scheduled = True
            assert self._loop is not None, "start() the producer first"
            self._loop.call_soon_threadsafe(self._drain_handoff)

    def _drain_handoff(self) -> None:
        self._handoff_scheduled = False  # before draining: a later handoff schedules anew
        handoff = self._handoff
        while handoff:
            item = handoff.popleft()
            if isinstance(item, _EncodedHandoff):
                self._accept_encoded(item.tp, item.encoded, item.future, item.callback)
                continue
            record, future, callback = item
            if self._closed and self._sender is None:
                self._memory.release(record.size)
                error = ClientClosedError(f"producer {self.client_id} was closed")
                if future is not None:
                    future.set_exception(error)
                continue
            self._accept(record, future, callback)

    # -- batches of encoded records -------------------------------------------------------

    def check_encoded(self, tp: TopicPartition, encoded: EncodedRecords) -> None:
        """Raise what :meth:`send_batch` raises before it accepts a batch (thread-safe)."""
        size = encoded.batch_size
        for limit_name in ("max.request.size", "buffer.memory"):
            if size > self.config[limit_name]:
                raise MessageTooLargeError(
                    f"the batch of {encoded.record_count} records is {size} bytes, larger "
                    f"than {limit_name}={self.config[limit_name]}"
                )
        partitions = self._cluster.partitions_for(tp.topic)
        if partitions is None or not 0 <= tp.partition < len(partitions):
            count = "unknown" if partitions is None else len(partitions)
            raise ValueError(
                f"{tp} is not in the producer's metadata (partition count {count}): "
                "call partitions_for(topic) first"
            )

    async def send_batch(
        self,
        topic: str,
        partition: int,
        encoded: EncodedRecords,
        *,
        on_delivery: BatchDeliveryCallback | None = None,
    ) -> asyncio.Future[BatchMetadata]:
        """Accept a batch of records encoded elsewhere for ``partition`` of ``topic``; return
        the future of its BatchMetadata.

        The producer treats it as one of its own batches, sent after the records already
        placed in that partition: it gets the producer id, epoch and sequence (idempotence),
        joins the open transaction, is retried and fails as a whole. The topic's metadata
        must be known (:meth:`partitions_for`); waits only for memory (``max.block.ms``).
        Raises MessageTooLargeError past ``max.request.size`` or ``buffer.memory``.
        """
        tp = TopicPartition(topic, partition)
        await self.start()
        self._check_send()
        self.check_encoded(tp, encoded)
        await self._memory.reserve(encoded.batch_size, self._max_block_s)
        future: asyncio.Future[BatchMetadata] = asyncio.get_running_loop().create_future()
        self._accept_encoded(tp, encoded, future, on_delivery)
        await asyncio.sleep(0)  # let the sender run between batches
        return future

    def send_batch_threadsafe(
        self,
        tp: TopicPartition,
        encoded: EncodedRecords,
        future: concurrent.futures.Future[BatchMetadata] | None,
        on_delivery: BatchDeliveryCallback | None,
    ) -> None:
        """Hand a batch whose memory was reserved (``reserve_batch_blocking``) to the loop,
        from any thread, in order with the records :meth:`send_threadsafe` handed over."""
        self._handoff.append(_EncodedHandoff(tp, encoded, future, on_delivery))
        if not self._handoff_scheduled:
            self._handoff_scheduled = True
            assert self._loop is not None, "start() the producer first"
            self._loop.call_soon_threadsafe(self._drain_handoff)

    def reserve_batch_blocking(self, encoded: EncodedRecords, *, wait: bool = True) -> None:
        """:meth:`reserve_blocking` for a batch of encoded records."""
        self._check_send()
        if not self._memory.try_reserve(encoded.batch_size):
            self._memory.reserve_blocking(encoded.batch_size, self._max_block_s if wait else 0)

    def _accept_encoded(
        self,
        tp: TopicPartition,
        encoded: EncodedRecords,
        future: BatchFuture | None,
        callback: BatchDeliveryCallback | None,
    ) -> None:
        if self._waiting:
            self._place_waiting(time.monotonic())  # records sent earlier go first
        if self._closed and self._sender is None:
            self._memory.release(encoded.batch_size)
            if future is not None:
                future.set_exception(ClientClosedError(f"producer {self.client_id} was closed"))
            return
        if self._transactions is not None:
            self._transactions.add_partition(tp)
        batch = EncodedProducerBatch(
            tp, encoded, time.monotonic(), future=future, callback=callback,
            reserved=encoded.batch_size,
        )  # fmt: skip
        self._accumulator.append_encoded(batch)
        assert self._sender is not None
        self._sender.wakeup()

    def _metadata_refreshed(self) -> None:
        if self._waiting and self._sender is not None:
            self._sender.wakeup()

    def _wakeup_sender(self) -> None:
        if self._sender is not None:
            self._sender.wakeup()

    def _wakeup_threadsafe(self) -> None:
        loop, sender = self._loop, self._sender
        if loop is not None and sender is not None and not loop.is_closed():
            loop.call_soon_threadsafe(sender.wakeup)

    def _accept(
        self, record: PreparedRecord, future: Future | None, callback: DeliveryCallback | None
    ) -> None:
        topic = record.topic
        waiting = self._waiting.get(topic)
        partitions = self._cluster.partitions_for(topic)
        if waiting is None and partitions is not None:
            partition = self._choose_partition(record, partitions)
            if partition is not None:
                self._append(record, partition, partitions, future=future, callback=callback)
                return
        if waiting is None:
            waiting = self._waiting[topic] = deque()
            self._cluster.tracked_topics.add(topic)
            self._cluster.request_update()
        waiting.append(_Waiting(record, future, callback, time.monotonic() + self._max_block_s))
        assert self._sender is not None
        self._sender.wakeup()

    def _choose_partition(
        self, record: PreparedRecord, partitions: Sequence[PartitionMetadata]
    ) -> int | None:
        count = len(partitions)
        if record.partition is not None:
            return record.partition if record.partition < count else None
        if record.key is not None and not self._ignore_keys:
            return partition_for_key(record.key, count)
        current = self._partitioner.current(record.topic, count)
        if current is not None:
            return current
        return self._partitioner.partition(record.topic, count, _available(partitions))

    def _append(
        self,
        record: PreparedRecord,
        partition: int,
        partitions: Sequence[PartitionMetadata],
        *,
        future: Future | None,
        callback: DeliveryCallback | None,
    ) -> None:
        tp = TopicPartition(record.topic, partition)
        if self._transactions is not None:
            self._transactions.add_partition(tp)
        accumulator = self._accumulator
        batch, new = accumulator.append(
            tp, timestamp=record.timestamp, key=record.key, value=record.value,
            headers=record.headers, future=future, callback=callback, reserved=record.size,
            now=time.monotonic(),
        )  # fmt: skip
        sticky = record.partition is None and (record.key is None or self._ignore_keys)
        if sticky and self._partitioner.record_appended(record.topic, partition, record.size):
            self._partitioner.next_partition(record.topic, len(partitions), _available(partitions))
        if new or batch.size >= accumulator.batch_size:
            assert self._sender is not None
            self._sender.wakeup()

    def _place_waiting(self, now: float) -> float:
        """Place records whose topic metadata arrived; fail those past max.block.ms."""
        delay = 1.0
        for topic in list(self._waiting):
            queue = self._waiting[topic]
            code = self._cluster.topic_errors.get(topic)
            fatal = code is not None and code not in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                       ErrorCode.LEADER_NOT_AVAILABLE)  # fmt: skip
            refused = self._cluster.authentication_error
            partitions = self._cluster.partitions_for(topic)
            while queue:
                item = queue[0]
                partition = None
                if partitions is not None and not fatal and refused is None:
                    partition = self._choose_partition(item.record, partitions)
                if partition is not None:
                    assert partitions is not None
                    queue.popleft()
                    self._append(
                        item.record, partition, partitions,
                        future=item.future, callback=item.callback,
                    )  # fmt: skip
                    assert self._sender is not None
                    self._sender.progress.set()
                elif refused is not None:
                    queue.popleft()
                    self._fail_record(item, refused)
                elif fatal or now >= item.deadline:
                    queue.popleft()
                    self._fail_record(item, self._metadata_error(item.record, code, partitions))
                else:
                    delay = min(delay, item.deadline - now)
                    self._cluster.request_update()
                    break
            if not queue:
                del self._waiting[topic]
        return max(delay, 0.0)

    def _metadata_error(
        self,
        record: PreparedRecord,
        code: int | None,
        partitions: Sequence[PartitionMetadata] | None,
    ) -> BaseException:
        if code is not None and code not in (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ErrorCode.LEADER_NOT_AVAILABLE,
        ):
            return error_for(code, f"topic {record.topic!r}")
        ms = self._max_block_s * 1000
        if partitions is not None and record.partition is not None:
            return ClientTimeoutError(
                f"partition {record.partition} of topic {record.topic!r} with partition count "
                f"{len(partitions)} is not present in metadata after {ms:.0f} ms (max.block.ms)"
            )
        return ClientTimeoutError(
            f"topic {record.topic!r} not present in metadata after {ms:.0f} ms (max.block.ms)"
        )

    def _fail_record(self, item: _Waiting, error: BaseException) -> None:
        self._memory.release(item.record.size)
        if item.future is not None and not item.future.done():
            item.future.set_exception(error)
        if item.callback is not None:
            try:
                item.callback(None, error)
            except Exception:
                log.exception("a producer delivery callback raised")
        assert self._sender is not None
        self._sender.progress.set()

    def _fail_waiting(self, error: BaseException) -> None:
        for queue in self._waiting.values():
            for item in queue:
                self._fail_record(item, error)
        self._waiting.clear()

    # -- flush and metadata ----------------------------------------------------------------

    async def flush(self) -> None:
        """Send every record accepted so far at once (no linger) and wait until each has
        been delivered or has failed. Record failures do not raise here."""
        sender = self._sender
        if sender is None:
            return
        self._drain_handoff()
        accumulator = self._accumulator
        accumulator.flushing += 1
        sender.wakeup()
        try:
            # Records awaiting metadata first (each leaves its queue once placed in a
            # batch or failed), then every batch incomplete at that point.
            pending = {id(item) for queue in self._waiting.values() for item in queue}
            batches: list[ProducerBatch] | None = None
            while True:
                if pending:
                    pending &= {id(item) for queue in self._waiting.values() for item in queue}
                if not pending:
                    if batches is None:
                        batches = list(accumulator.incomplete.values())
                    batches = [b for b in batches if not b.done]
                    if not batches:
                        return
                sender.progress.clear()
                await sender.progress.wait()
        finally:
            accumulator.flushing -= 1

    async def partitions_for(self, topic: str) -> list[int]:
        """The partition numbers of ``topic`` (fetching its metadata, up to max.block.ms)."""
        await self.start()
        deadline = time.monotonic() + self._max_block_s
        self._cluster.tracked_topics.add(topic)
        while True:
            partitions = self._cluster.partitions_for(topic)
            if partitions is not None:
                return [p.partition for p in partitions]
            code = self._cluster.topic_errors.get(topic)
            if code is not None and code not in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                 ErrorCode.LEADER_NOT_AVAILABLE):  # fmt: skip
                raise error_for(code, f"topic {topic!r}")
            if not await self._cluster.wait_for_update(deadline - time.monotonic()):
                raise ClientTimeoutError(
                    f"topic {topic!r} not present in metadata after "
                    f"{self._max_block_s * 1000:.0f} ms (max.block.ms)"
                )

    # -- transactions ----------------------------------------------------------------------

    def _transaction_manager(self) -> TransactionManager:
        if self._transactions is None:
            raise IllegalStateError("transactions need transactional.id in the producer's config")
        self._check_open()
        return self._transactions

    async def init_transactions(self) -> None:
        """Register ``transactional.id`` with its coordinator and get this producer's id and
        epoch, fencing earlier producers of the same id (their open transaction is aborted).
        Call once, before the first transaction."""
        transactions = self._transaction_manager()
        await self.start()
        await transactions.init()

    async def begin_transaction(self) -> None:
        """Start a transaction: records sent until commit or abort belong to it."""
        self._transaction_manager().begin()

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int],
        group: ConsumerGroupMetadata | str,
    ) -> None:
        """Commit a consumer group's offsets (the next record to read, per partition) as
        part of the transaction: visible to the group only if it commits."""
        transactions = self._transaction_manager()
        metadata = ConsumerGroupMetadata(group) if isinstance(group, str) else group
        await transactions.send_offsets(dict(offsets), metadata)

    async def commit_transaction(self) -> None:
        """Deliver every record of the transaction, then commit it. When a record failed,
        raises that error: the transaction can then only be aborted."""
        transactions = self._transaction_manager()
        await transactions.end(True, self.flush, self._abort_unsent)

    async def abort_transaction(self) -> None:
        """Abort the transaction: records not yet sent fail with TransactionAbortedError,
        those written are marked aborted (read_committed consumers skip them)."""
        transactions = self._transaction_manager()
        await transactions.end(False, self.flush, self._abort_unsent)

    def _abort_unsent(self, error: BaseException) -> None:
        assert self._sender is not None
        self._drain_handoff()
        self._fail_waiting(error)
        self._sender.abort_unsent(error)
