"""The transaction coordinator: producer ids and epochs of transactional ids, and their
transactions from the first AddPartitionsToTxn to the last marker.

Kafka's protocol, transaction version 1 (the epoch is bumped by InitProducerId and
by fencing, not by every EndTxn). Every transition is written to the compacted
``__transaction_state`` topic (:mod:`samsa.coordinator.transaction.records`, Kafka's
format) before the cache changes; a transactional id's partition is
``abs(hash(id)) % transaction.state.log.num.partitions``, Java's hash. While a
transition is being written the id refuses others with CONCURRENT_TRANSACTIONS.

Ending a transaction: Ongoing → PrepareCommit/PrepareAbort (written), then a
COMMIT/ABORT marker to every partition of the transaction through ``write_marker``
(retried until it lands), then CompleteCommit/CompleteAbort (written). Kafka answers
EndTxn once the Prepare record is durable and writes the markers behind the
answer; here EndTxn also waits for the markers and the Complete record, so a
client that sees its commit succeed can read the data at once and its next
AddPartitionsToTxn is not refused while markers are in flight. The outcome is
fixed by the Prepare record either way: a crash before Complete is finished by
:meth:`TransactionCoordinator.start` after the next load.

Deliberate choices, where Kafka leaves room or has more than one node:

* Coordinator epoch: ``COORDINATOR_EPOCH`` (0). One broker leads every
  ``__transaction_state`` partition and its leader epoch never changes, so the
  epoch Kafka passes with markers to fence stale coordinators is constant.
* InitProducerId on an Ongoing transaction fences the producer (PrepareAbort with
  the epoch bumped), waits for the abort to complete and then bumps the epoch
  again and answers — Kafka answers CONCURRENT_TRANSACTIONS and lets the client
  retry into that second bump; the epochs handed out are the same.
* A marker that fails with UNKNOWN_TOPIC_OR_PARTITION (the topic was deleted),
  UNSUPPORTED_VERSION / UNSUPPORTED_FOR_MESSAGE_FORMAT, INVALID_PRODUCER_EPOCH or
  TRANSACTION_COORDINATOR_FENCED is given up for that partition and logged; Kafka
  gives up the last two for the whole transaction because another coordinator
  then owns it, which cannot happen on one node. Other errors are retried.
* Expired transactional ids (idle past ``transactional.id.expiration.ms`` in
  Empty or Complete*) are removed with a tombstone, as in Kafka.

Everything runs on the broker's event loop; waiting is event-driven. Time — the
timeout and expiry checks, marker retry backoff, record timestamps — comes from a
:class:`~samsa.coordinator.timer.Timer`, the event loop's unless a test passes a
manual one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from samsa.coordinator.group.records import partition_for
from samsa.coordinator.replay import (
    DecodeErrors,
    UnreadableRecords,
    batch_records,
    partition_batches,
)
from samsa.coordinator.timer import LoopTimer, Timer, sleep_ms
from samsa.coordinator.transaction.records import (
    decode_transaction_log_key,
    decode_transaction_log_value,
    encode_transaction_log_key,
    encode_transaction_log_value,
)
from samsa.coordinator.transaction.state import (
    COMPLETED,
    EXPIRABLE,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    PREPARING,
    TransactionMetadata,
    TransactionState,
    Transit,
    epoch_exhausted,
)
from samsa.errors import ErrorCode, KafkaError, is_expected_error
from samsa.records import Record, RecordBatchBuilder
from samsa.storage import Log
from samsa.types import TopicPartition

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"
OFFSETS_TOPIC = "__consumer_offsets"
COORDINATOR_EPOCH = 0
_MAX_RETRY_BACKOFF_MS = 5000

AppendFn = Callable[[TopicPartition, bytes], Awaitable[Any]]
# (partition, producer id, producer epoch, commit, coordinator epoch) → Kafka error code
WriteMarkerFn = Callable[[TopicPartition, int, int, bool, int], Awaitable[int]]

# Append errors as Kafka's TransactionStateManager turns them into coordinator errors.
_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
}
# Marker errors after which the partition no longer waits for its marker.
_MARKER_GIVE_UP = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNSUPPORTED_VERSION,
    ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.TRANSACTION_COORDINATOR_FENCED,
})  # fmt: skip


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    """The broker's ``transaction.*`` settings the coordinator uses."""

    max_timeout_ms: int = 900_000
    abort_timed_out_interval_ms: int = 10_000
    remove_expired_interval_ms: int = 3_600_000
    transactional_id_expiration_ms: int = 604_800_000
    offsets_topic_partitions: int = 50  # to find a group's __consumer_offsets partition
    marker_retry_backoff_ms: int = 100


@dataclass(frozen=True, slots=True)
class InitResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    transactional_id: str
    error: ErrorCode
    state: str = ""
    timeout_ms: int = 0
    start_timestamp: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: tuple[TopicPartition, ...] = ()


class TransactionCoordinator:
    """Owner of every transactional id's state (one writer: the loop)."""

    def __init__(
        self,
        partitions: int,
        append: AppendFn,
        clock: Callable[[], int],
        write_marker: WriteMarkerFn,
        allocate_producer_id: Callable[[], int],
        *,
        config: TransactionConfig | None = None,
        timer: Timer | None = None,
    ) -> None:
        self.partitions = partitions
        self.config = config or TransactionConfig()
        self._append = append
        self._timer = timer or LoopTimer(clock)
        self._write_marker = write_marker
        self._allocate_producer_id = allocate_producer_id
        self._txns: dict[str, TransactionMetadata] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._periodic: list[asyncio.Task[None]] = []
        self._owned: set[int] | None = None
        """The ``__transaction_state`` partitions whose ids this coordinator serves (None:
        all of them, a single node)."""

    def partition_of(self, transactional_id: str) -> TopicPartition:
        return TopicPartition(
            TRANSACTION_STATE_TOPIC, partition_for(transactional_id, self.partitions)
        )

    def offsets_partition_of(self, group_id: str) -> TopicPartition:
        return TopicPartition(
            OFFSETS_TOPIC, partition_for(group_id, self.config.offsets_topic_partitions)
        )

    # -- which transactional ids are this coordinator's (a cluster) ---------------------
    def own_led_partitions_only(self) -> None:
        """A cluster: serve only the ids of the partitions this broker leads
        (:meth:`load_partition`); others are NOT_COORDINATOR."""
        self._owned = set()

    def owns(self, transactional_id: str) -> bool:
        return (
            self._owned is None or partition_for(transactional_id, self.partitions) in self._owned
        )

    def coordinator_error(self, transactional_id: str) -> ErrorCode:
        return ErrorCode.NONE if self.owns(transactional_id) else ErrorCode.NOT_COORDINATOR

    def load_partition(self, index: int, partition_log: Log) -> None:
        """This broker leads ``__transaction_state`` partition ``index`` now: take its ids
        from the log, serve them, and complete the transactions left mid-way."""
        if self._owned is None or index in self._owned:
            return
        self.unload_partition(index)
        before = set(self._txns)
        self.load([partition_log])
        self._owned.add(index)
        for transactional_id in set(self._txns) - before:
            txn = self._txns[transactional_id]
            if txn.state in PREPARING:
                self._start_completion(txn)

    def unload_partition(self, index: int) -> None:
        """Another broker leads partition ``index`` now: forget its ids (their completions
        in flight stop at their next write, which this broker can no longer make)."""
        if self._owned is None:
            return
        self._owned.discard(index)
        for transactional_id in [
            t for t in self._txns if partition_for(t, self.partitions) == index
        ]:
            del self._txns[transactional_id]

    # -- lifecycle -------------------------------------------------------------------
    def load(self, logs: Iterable[Log]) -> None:
        """Rebuild every transactional id from ``__transaction_state`` (latest record wins).

        Never raises on the bytes the topic holds: a record that cannot be decoded
        is skipped and reported with its offset (one unreadable record must not hide
        every other transactional id, nor stop the broker from starting).
        """
        for partition_log in logs:
            skipped = UnreadableRecords(partition_log.directory.name)
            for record in _keyed_records(partition_log, skipped):
                assert record.key is not None
                try:
                    transactional_id = decode_transaction_log_key(record.key)
                    if record.value is None:
                        self._txns.pop(transactional_id, None)
                        continue
                    self._txns[transactional_id] = TransactionMetadata.from_log_value(
                        transactional_id, decode_transaction_log_value(record.value)
                    )
                except DecodeErrors as exc:
                    skipped.skip(record.offset, exc)
            skipped.summary()
        if self._txns:
            unfinished = sum(1 for t in self._txns.values() if t.state in PREPARING)
            log.info(
                "loaded %d transactional ids (%d transactions to complete)",
                len(self._txns),
                unfinished,
            )

    def start(self) -> None:
        """Complete transactions loaded mid-way and start the timeout and expiry checks."""
        if self._owned is None:  # in a cluster, completions start as partitions load
            for txn in self._txns.values():
                if txn.state in PREPARING:
                    self._start_completion(txn)
        loop = asyncio.get_running_loop()
        cfg = self.config
        self._periodic = [
            loop.create_task(
                self._every(cfg.abort_timed_out_interval_ms, self.abort_timed_out_transactions)
            ),
            loop.create_task(
                self._every(cfg.remove_expired_interval_ms, self.expire_transactional_ids)
            ),
        ]

    async def shutdown(self, grace_s: float = 5.0) -> None:
        """Stop the checks; give in-flight completions ``grace_s``, then leave them to the log.

        A transaction cut off between its Prepare record and its Complete record is
        finished after the next start, from the log.
        """
        for task in self._periodic:
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=grace_s)
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await task

    async def _every(self, interval_ms: int, action: Callable[[], Awaitable[int]]) -> None:
        while True:
            await sleep_ms(self._timer, interval_ms)
            try:
                await action()
            except Exception:
                log.exception("transaction coordinator: %s failed", action.__name__)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- InitProducerId ----------------------------------------------------------------
    async def init_producer_id(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> InitResult:
        """A producer id and epoch for ``transactional_id``, fencing earlier producers.

        ``producer_id``/``producer_epoch`` (InitProducerId v3+, KIP-360) name the
        producer's current ones when it asks for an epoch bump to recover.
        """
        if not transactional_id:
            return InitResult(ErrorCode.INVALID_REQUEST)
        if not self.owns(transactional_id):
            return InitResult(ErrorCode.NOT_COORDINATOR)
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return InitResult(ErrorCode.INVALID_REQUEST)
        if not 0 < transaction_timeout_ms <= self.config.max_timeout_ms:
            return InitResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        expected_epoch = None if producer_id == NO_PRODUCER_ID else producer_epoch
        txn = self._txns.get(transactional_id)
        if txn is None:
            txn = TransactionMetadata(
                transactional_id,
                self._allocate_producer_id(),
                timeout_ms=transaction_timeout_ms,
                last_update_timestamp=self._timer.now_ms(),
            )
            self._txns[transactional_id] = txn
        while True:
            if txn.pending_state is not None:
                return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
            if expected_epoch is not None and not txn.expected_producer_valid(
                producer_id, expected_epoch
            ):
                return InitResult(ErrorCode.PRODUCER_FENCED)
            if txn.state in PREPARING:
                return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
            if txn.state is not TransactionState.ONGOING:
                break
            log.info(
                "transactional id %s: a new producer fences epoch %d and aborts its transaction",
                transactional_id,
                txn.producer_epoch,
            )
            error = await self._prepare_end(txn, commit=False, fence=True)
            if error:
                return InitResult(error)
            await self._completed(txn)
            if txn.state not in COMPLETED:
                return InitResult(
                    ErrorCode.CONCURRENT_TRANSACTIONS
                )  # shutting down; the client retries
        now = self._timer.now_ms()
        transit: Transit | None
        if epoch_exhausted(txn.producer_epoch) and expected_epoch in (None, txn.producer_epoch):
            transit = txn.rotate_producer_id(
                self._allocate_producer_id(),
                transaction_timeout_ms,
                expected_epoch is not None,
                now,
            )
        else:
            transit = txn.bump_epoch(transaction_timeout_ms, expected_epoch, now)
            if transit is None:
                return InitResult(ErrorCode.PRODUCER_FENCED)
        error = await self._write(txn, transit)
        if error:
            return InitResult(error)
        log.info(
            "transactional id %s: producer id %d epoch %d",
            transactional_id,
            txn.producer_id,
            txn.producer_epoch,
        )
        return InitResult(ErrorCode.NONE, txn.producer_id, txn.producer_epoch)

    # -- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------
    def _producer_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[ErrorCode, TransactionMetadata | None]:
        """The id's metadata if the request's producer is its current one, else the error."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        if not self.owns(transactional_id):
            return ErrorCode.NOT_COORDINATOR, None
        txn = self._txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if txn.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED, None
        return ErrorCode.NONE, txn

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> ErrorCode:
        """AddPartitionsToTxn: the partitions join the producer's (possibly new) transaction."""
        error, txn = self._producer_txn(transactional_id, producer_id, producer_epoch)
        if txn is None:
            return error
        if txn.pending_state is not None or txn.state in PREPARING:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        wanted = frozenset(partitions)
        if txn.state is TransactionState.ONGOING and wanted <= txn.partitions:
            return ErrorCode.NONE
        return await self._write(txn, txn.add_partitions(wanted, self._timer.now_ms()))

    async def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> ErrorCode:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the transaction."""
        return await self.add_partitions(
            transactional_id, producer_id, producer_epoch, [self.offsets_partition_of(group_id)]
        )

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn ``verify_only``: whether each partition is in the transaction.

        Kafka's answers: the producer's errors or CONCURRENT_TRANSACTIONS for every
        partition, else NONE for a partition in the transaction and
        TRANSACTION_ABORTABLE for one that is not. Nothing changes.
        """
        wanted = list(partitions)
        error, txn = self._producer_txn(transactional_id, producer_id, producer_epoch)
        if txn is not None and txn.state in PREPARING:
            error, txn = ErrorCode.CONCURRENT_TRANSACTIONS, None
        if txn is None:
            return dict.fromkeys(wanted, error)
        return {
            tp: ErrorCode.NONE if tp in txn.partitions else ErrorCode.TRANSACTION_ABORTABLE
            for tp in wanted
        }

    def check_offset_commit(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> ErrorCode:
        """Whether a TxnOffsetCommit may be written: the producer is current and its
        Ongoing transaction holds the group's offsets partition (AddOffsetsToTxn came
        first). Kafka checks the epoch against the offsets partition's producer state
        (ErrorCode.INVALID_PRODUCER_EPOCH) and, with verification, the partition's membership
        (ErrorCode.INVALID_TXN_STATE); this answers the same from the coordinator's state.
        In a cluster the transactional id's coordinator may be another broker: its
        state is not here, and the commit is not checked (a deviation).
        """
        if not self.owns(transactional_id):
            return ErrorCode.NONE
        txn = self._txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if txn.producer_epoch != producer_epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if txn.state is not TransactionState.ONGOING:
            return ErrorCode.INVALID_TXN_STATE
        if self.offsets_partition_of(group_id) not in txn.partitions:
            return ErrorCode.INVALID_TXN_STATE
        return ErrorCode.NONE

    # -- EndTxn -----------------------------------------------------------------------
    async def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> ErrorCode:
        """EndTxn: commit or abort the producer's transaction, markers included.

        A retry after the transaction completed the same way answers NONE; one that
        asks for the other outcome, or for an Empty transaction, INVALID_TXN_STATE.
        """
        error, txn = self._producer_txn(transactional_id, producer_id, producer_epoch)
        if txn is None:
            return error
        if txn.pending_state is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        state = txn.state
        if state is TransactionState.ONGOING:
            error = await self._prepare_end(txn, commit)
            if not error:
                await self._completed(txn)
            return error
        if state in COMPLETED:
            done_commit = state is TransactionState.COMPLETE_COMMIT
            return ErrorCode.NONE if done_commit == commit else ErrorCode.INVALID_TXN_STATE
        if state in PREPARING:
            preparing_commit = state is TransactionState.PREPARE_COMMIT
            return (
                ErrorCode.CONCURRENT_TRANSACTIONS
                if preparing_commit == commit
                else ErrorCode.INVALID_TXN_STATE
            )
        return ErrorCode.INVALID_TXN_STATE

    async def _prepare_end(
        self, txn: TransactionMetadata, commit: bool, fence: bool = False
    ) -> ErrorCode:
        """Write PrepareCommit/PrepareAbort and start the markers; fencing bumps the epoch."""
        error = await self._write(txn, txn.prepare_end(commit, self._timer.now_ms(), fence))
        if error:
            if fence:
                txn.failed_epoch_fence = True  # the bumped epoch was never handed out
            return error
        txn.failed_epoch_fence = False
        self._start_completion(txn)
        return ErrorCode.NONE

    def _start_completion(self, txn: TransactionMetadata) -> None:
        txn.completion = asyncio.get_running_loop().create_future()
        self._spawn(self._complete(txn, txn.completion))

    async def _completed(self, txn: TransactionMetadata) -> None:
        """Wait for the transaction's markers and Complete record (or the coordinator's end)."""
        if txn.completion is not None:
            await asyncio.shield(txn.completion)

    async def _complete(self, txn: TransactionMetadata, done: asyncio.Future[None]) -> None:
        try:
            commit = txn.state is TransactionState.PREPARE_COMMIT
            producer_id, epoch = txn.producer_id, txn.producer_epoch
            partitions = sorted(txn.partitions)
            await asyncio.gather(
                *(self._send_marker(tp, producer_id, epoch, commit) for tp in partitions)
            )
            backoff_ms = self.config.marker_retry_backoff_ms
            while await self._write(txn, txn.complete(self._timer.now_ms())):
                # The outcome is decided; only the record is late.
                await sleep_ms(self._timer, backoff_ms)
                backoff_ms = min(backoff_ms * 2, _MAX_RETRY_BACKOFF_MS)
            log.debug(
                "transactional id %s: %s of producer %d epoch %d complete (%d partitions)",
                txn.transactional_id,
                "commit" if commit else "abort",
                producer_id,
                epoch,
                len(partitions),
            )
        finally:
            if not done.done():
                done.set_result(None)
            if txn.completion is done:
                txn.completion = None

    async def _send_marker(
        self, tp: TopicPartition, producer_id: int, epoch: int, commit: bool
    ) -> None:
        delay_ms = self.config.marker_retry_backoff_ms
        while True:
            try:
                error = await self._write_marker(tp, producer_id, epoch, commit, COORDINATOR_EPOCH)
            except Exception:
                log.exception("writing a transaction marker to %s failed; retrying", tp)
                error = ErrorCode.UNKNOWN_SERVER_ERROR
            if error == ErrorCode.NONE:
                return
            if error in _MARKER_GIVE_UP:
                log.warning(
                    "transaction marker for producer %d to %s failed with error %d; "
                    "that partition no longer waits for it",
                    producer_id,
                    tp,
                    error,
                )
                return
            log.info("transaction marker to %s failed with error %d; retrying", tp, error)
            await sleep_ms(self._timer, delay_ms)
            delay_ms = min(delay_ms * 2, _MAX_RETRY_BACKOFF_MS)

    # -- timeouts and expiry -----------------------------------------------------------
    async def abort_timed_out_transactions(self) -> int:
        """Abort every Ongoing transaction older than its timeout, fencing its producer."""
        aborted = 0
        for txn in list(self._txns.values()):
            now = self._timer.now_ms()
            if (
                txn.state is TransactionState.ONGOING
                and txn.pending_state is None
                and txn.start_timestamp + txn.timeout_ms < now
            ):
                log.info(
                    "transactional id %s: aborting a transaction open for %d ms (timeout %d ms)",
                    txn.transactional_id,
                    now - txn.start_timestamp,
                    txn.timeout_ms,
                )
                if not await self._prepare_end(txn, commit=False, fence=True):
                    aborted += 1
        return aborted

    async def expire_transactional_ids(self) -> int:
        """Forget ids idle in Empty/Complete* past ``transactional.id.expiration.ms``."""
        horizon = self._timer.now_ms() - self.config.transactional_id_expiration_ms
        by_partition: dict[TopicPartition, list[TransactionMetadata]] = {}
        for txn in self._txns.values():
            if (
                txn.state in EXPIRABLE
                and txn.pending_state is None
                and txn.last_update_timestamp <= horizon
            ):
                txn.pending_state = TransactionState.DEAD
                by_partition.setdefault(self.partition_of(txn.transactional_id), []).append(txn)
        removed = 0
        for tp, expired in by_partition.items():
            builder = RecordBatchBuilder()
            now = self._timer.now_ms()
            for txn in expired:
                builder.append(
                    None, key=encode_transaction_log_key(txn.transactional_id), timestamp=now
                )
            try:
                await self._append(tp, builder.build())
            except Exception as exc:
                # Safe to skip: the ids stay as they were and the next check tries again.
                log.warning("expiring %d transactional ids in %s failed: %s", len(expired), tp,
                            exc, exc_info=not is_expected_error(exc))  # fmt: skip
                continue
            finally:
                for txn in expired:
                    txn.pending_state = None
            for txn in expired:
                if self._txns.get(txn.transactional_id) is txn:
                    del self._txns[txn.transactional_id]
                    removed += 1
        if removed:
            log.info("expired %d transactional ids", removed)
        return removed

    # -- admin ---------------------------------------------------------------------------
    def list_transactions(
        self,
        state_filters: Iterable[str] = (),
        producer_id_filters: Iterable[int] = (),
        duration_filter_ms: int = -1,
    ) -> tuple[list[str], list[TransactionListing]]:
        """ListTransactions: ``(unknown state filters, matching transactional ids)``.

        Empty filters match everything; ``duration_filter_ms`` ≥ 0 (v1, KIP-994) keeps
        ids whose last transaction started longer ago than that, leaving out ids that
        never started one (start timestamp -1).
        """
        names = list(state_filters)
        unknown = [name for name in names if TransactionState.from_kafka_name(name) is None]
        states = {s for name in names if (s := TransactionState.from_kafka_name(name)) is not None}
        producers = set(producer_id_filters)
        now = self._timer.now_ms()
        found = []
        for txn in self._txns.values():
            if txn.state is TransactionState.DEAD or not self.owns(txn.transactional_id):
                continue
            if producers and txn.producer_id not in producers:
                continue
            if names and txn.state not in states:
                continue
            if duration_filter_ms >= 0 and (
                txn.start_timestamp < 0 or now - txn.start_timestamp <= duration_filter_ms
            ):
                continue
            found.append(
                TransactionListing(txn.transactional_id, txn.producer_id, txn.state.kafka_name)
            )
        return unknown, found

    def describe_transactions(
        self, transactional_ids: Iterable[str]
    ) -> list[TransactionDescription]:
        described = []
        for transactional_id in transactional_ids:
            txn = self._txns.get(transactional_id)
            if not transactional_id:
                described.append(
                    TransactionDescription(transactional_id, ErrorCode.INVALID_REQUEST)
                )
            elif not self.owns(transactional_id):
                described.append(
                    TransactionDescription(transactional_id, ErrorCode.NOT_COORDINATOR)
                )
            elif txn is None or txn.state is TransactionState.DEAD:
                described.append(
                    TransactionDescription(transactional_id, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
                )
            else:
                described.append(
                    TransactionDescription(
                        transactional_id,
                        ErrorCode.NONE,
                        txn.state.kafka_name,
                        txn.timeout_ms,
                        txn.start_timestamp,
                        txn.producer_id,
                        txn.producer_epoch,
                        tuple(sorted(txn.partitions)),
                    )
                )
        return described

    # -- persistence -------------------------------------------------------------------
    async def _write(self, txn: TransactionMetadata, transit: Transit) -> ErrorCode:
        """Append the transition's record, then apply it; a Kafka error code, NONE on success."""
        txn.pending_state = transit.state
        builder = RecordBatchBuilder()
        builder.append(
            encode_transaction_log_value(txn.log_value(transit)),
            key=encode_transaction_log_key(txn.transactional_id),
            timestamp=self._timer.now_ms(),
        )
        try:
            await self._append(self.partition_of(txn.transactional_id), builder.build())
        except KafkaError as exc:
            error = _APPEND_ERRORS.get(exc.code, exc.code)
            log.warning(
                "transactional id %s: writing %s failed (%s); answering error %d",
                txn.transactional_id,
                transit.state.kafka_name,
                exc,
                error,
            )
            return error
        except Exception as exc:
            log.warning(
                "transactional id %s: writing %s failed: %r",
                txn.transactional_id,
                transit.state.kafka_name,
                exc,
                exc_info=not is_expected_error(exc),
            )
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        else:
            txn.apply(transit)
            return ErrorCode.NONE
        finally:
            txn.pending_state = None


def _keyed_records(partition_log: Log, skipped: UnreadableRecords) -> Iterator[Record]:
    """Every keyed data record of a log from its start to its end, in offset order."""
    for batch in partition_batches(partition_log, skipped):
        if batch.is_control:
            continue
        for record in batch_records(batch, skipped):
            if record.key is not None:
                yield record
