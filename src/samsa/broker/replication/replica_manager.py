"""The partitions this broker holds: appends, reads, replication and the waits on them.

Kafka's ``ReplicaManager``: it routes each request to its
:class:`~samsa.broker.replication.partition.Partition`, which leads or follows. A client
request for a partition this broker does not lead gets
NOT_LEADER_OR_FOLLOWER (the client refreshes its metadata and moves on).

An append that fails in storage (disk full, no descriptors left, any
``OSError``) is answered KAFKA_STORAGE_ERROR and leaves the log as it was
(:mod:`samsa.storage.log`); it is logged at ERROR with the partition and its
directory, at most once per partition per minute (with the count of failures
not logged meanwhile), so a full disk under a busy producer cannot flood the
log. Reads go on: a fetch of data already written needs no space.

Delayed operations (Kafka's purgatory) wait on events the partition
signals, never by polling: a fetch waits in :attr:`ReplicaManager.fetch_purgatory`
(:mod:`~samsa.broker.replication.delayed_fetch`) for an append, a move of the high
watermark or a leadership change, which every partition reports here
(``Partition.note_change``); an ``acks=all`` append waits for the high watermark to
pass it (:meth:`ReplicaManager.wait_for_replication`). Incremental fetch sessions
are the :attr:`ReplicaManager.fetch_manager`'s (Kafka's ``FetchManager``), told of
the same changes.
Followers' fetches (:meth:`ReplicaManager.read_for_follower`) tell a leader
their log ends, which moves the high watermark and may bring a follower back
into the ISR; a periodic check (:meth:`ReplicaManager.shrink_isrs`) drops the
followers that lag more than ``replica.lag.time.max.ms``. ISR changes are
written by :attr:`ReplicaManager.write_isr` (the cluster's, to ZooKeeper) and
applied once written.

A single node is a cluster of one: every partition is led here with this
broker as its only replica and ISR (:meth:`ReplicaManager.load`), so the high
watermark follows each append and ``acks=all`` never waits. Transaction
markers (:meth:`ReplicaManager.write_txn_marker`) are appends too: they wake
the waiters, so read_committed fetches see the last stable offset move.

Handlers reach partition logs only through this class: appends, reads
(:meth:`ReplicaManager.read`), offsets by timestamp, DeleteRecords, leader
epochs and the producers a partition remembers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Container
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from samsa.broker.metadata.metadata_cache import MetadataCache
from samsa.broker.metrics.stats import BrokerTopicStats
from samsa.broker.replication.delayed_fetch import DelayedFetchPurgatory
from samsa.broker.replication.fetch_manager import FetchManager
from samsa.broker.replication.partition import LeaderAndIsrState, Partition, now_ms
from samsa.cluster.local import TopicInfo
from samsa.cluster.zk_client import is_expected_zk_error
from samsa.errors import (
    ErrorCode,
    KafkaError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    PolicyViolationError,
    StorageError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    for_code,
)
from samsa.storage import AppendInfo, FetchData, Log, LogConfig, LogManager
from samsa.storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from samsa.storage.log_creation import BuiltLog, discard_built
from samsa.storage.producer_state import ProducerEntry
from samsa.storage.validator import AppendOrigin
from samsa.types import TopicPartition

log = logging.getLogger(__name__)


STORAGE_ERROR_LOG_INTERVAL_S = 60.0
EARLIEST_LOCAL_TIMESTAMP = -4
"""ListOffsets: the first offset held locally (KIP-405); the log start offset here."""
HIGH_WATERMARK = -1
"""DeleteRecords offset meaning "everything below the high watermark"."""
CREATE_SLICE = 256
"""Partitions whose logs one worker-thread call makes; the loop runs between slices."""


@dataclass(frozen=True, slots=True)
class LogReadResult:
    """What a fetch learns of one partition (Kafka's ``LogReadResult``)."""

    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    data: FetchData | None
    """The batches read; None when nothing was read (the response had no room left)."""


class FollowerFetching(Protocol):
    """Keeps the partitions this broker follows fetching from their leaders."""

    def follow(self, partition: Partition) -> None:
        """(Re)start fetching ``partition`` from its leader: truncate, then fetch."""
        ...

    def unfollow(self, tp: TopicPartition) -> None: ...


IsrWriter = Callable[[Partition, tuple[int, ...]], Awaitable[int | None]]
"""Writes a leader's new ISR where the cluster keeps it; the new version of the
partition's state, or None if the write lost a race (the state is read again)."""


class NewLogs:
    """Logs made for new partitions, not served yet: :meth:`serve` them or :meth:`discard` them.

    The caller writes its metadata (the topic table) between the two, so the
    table never names a partition without a log, and a failed write leaves no log.
    """

    def __init__(
        self, owner: ReplicaManager, reserved: list[TopicPartition], built: list[BuiltLog]
    ) -> None:
        self._owner = owner
        self._reserved = reserved
        self._built = built

    def serve(self) -> None:
        self._owner.log_manager.release(self._reserved)
        self._owner._serve(self._built)

    def discard(self) -> None:
        """Remove the logs (blocking; small topics)."""
        self._owner.log_manager.release(self._reserved)
        discard_built(self._built)

    async def discard_async(self) -> None:
        self._owner.log_manager.release(self._reserved)
        if self._built:
            await asyncio.to_thread(discard_built, self._built)


class ReplicaManager:
    """Routes appends and reads to the partitions held here, and changes their roles."""

    def __init__(
        self,
        log_manager: LogManager,
        metadata: MetadataCache,
        defaults: LogConfig,
        *,
        local_id: int = 0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log_manager = log_manager
        self._monotonic = monotonic
        self.metadata = metadata
        self.defaults = defaults
        self.local_id = local_id
        self._partitions: dict[TopicPartition, Partition] = {}
        self.on_txn_marker: Callable[[TopicPartition, int, bool], None] | None = None
        """Called with ``(partition, producer id, committed)`` after a marker is written
        (the broker sets it: the group coordinator completes transactional offset commits)."""
        self.fetching: FollowerFetching | None = None
        """The replica fetchers (a cluster's); None on a single node, which follows nothing."""
        self.write_isr: IsrWriter | None = None
        """How a leader's ISR change is written (a cluster's); None: ISRs never change."""
        self.on_leadership_change: Callable[[Partition, bool], None] | None = None
        """Called with ``(partition, leads now)`` when this broker starts or stops leading
        a partition (the coordinators load or unload the internal topics' state)."""
        self.replica_lag_time_max_ms = 30_000
        self._isr_writes: set[asyncio.Task[None]] = set()
        self.topic_stats = BrokerTopicStats()
        """Messages and bytes in and out, by topic (Kafka's ``BrokerTopicMetrics``)."""
        self.fetch_purgatory = DelayedFetchPurgatory(monotonic)
        """Fetches waiting for data (Kafka's fetch purgatory)."""
        self.fetch_manager = FetchManager(self.get, wake=self.fetch_purgatory.check_and_complete)
        """Consumers' and followers' incremental fetch sessions (KIP-227)."""
        self.delayed_produces = 0
        """``acks=all`` appends waiting for their ISR now (the produce purgatory size)."""
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.barred_from_isr: Callable[[], Container[int]] = tuple
        """Brokers no ISR may take in now (in a cluster: those not registered, or in a
        controlled shutdown)."""

    @property
    def delayed_fetches(self) -> int:
        """Fetches waiting for data now (Kafka's fetch purgatory size)."""
        return len(self.fetch_purgatory)

    def _partition_changed(self, partition: Partition) -> None:
        """``partition`` changed as a fetch could see: wake the fetches waiting on it."""
        self.fetch_manager.partition_changed(partition)
        self.fetch_purgatory.check_and_complete(partition.tp)

    def topic_config(self, topic: str) -> LogConfig:
        info = self.metadata.get(topic)
        if info is None or not info.configs:
            return self.defaults
        return self.defaults.with_overrides(info.configs)

    def _single_node_state(self) -> LeaderAndIsrState:
        me = (self.local_id,)
        return LeaderAndIsrState(self.local_id, 0, me, me)

    def load(self) -> None:
        """A single node: lead every partition of every known topic (the log manager has
        loaded the logs); logs of no known topic are moved aside."""
        for info in self.metadata.topics().values():
            self.ensure_partitions(info)
        known = set(self._partitions)
        for tp in list(self.log_manager.all_logs()):
            if tp not in known:
                # Never deleted: a lost or stale topic table must not cost the records.
                self.log_manager.move_aside_stray(tp)

    def ensure_partitions(self, info: TopicInfo) -> None:
        """Lead the partitions of ``info`` not served yet (a single node), creating missing
        logs (all or none)."""
        missing = []
        for tp in self._missing(info):
            loaded = self.log_manager.get_log(tp)
            if loaded is None:
                missing.append(tp)
            else:
                self._add_partition(tp, loaded)
        if not missing:
            return
        plan = self._reserve(info.name, missing)
        try:
            built = self.log_manager.build_logs(plan, self._config_of(info))
        finally:
            self.log_manager.release(missing)
        self._serve(built)

    def _add_partition(self, tp: TopicPartition, partition_log: Log) -> Partition:
        partition = Partition(tp, partition_log, self.local_id, self.topic_stats.topic(tp.topic),
                              on_change=self._partition_changed)  # fmt: skip
        self._partitions[tp] = partition
        if self.fetching is None:  # a single node leads what it holds
            partition.make_leader(self._single_node_state())
        return partition

    def make_logs_now(self, info: TopicInfo) -> NewLogs:
        """Make the logs of ``info``'s partitions not served yet, all or none, on the loop
        (small topics that must exist before the caller's next step).

        Raises ``KafkaStorageError`` with none left behind if one cannot be made.
        """
        missing = self._missing(info)
        plan = self._reserve(info.name, missing)
        try:
            built = self.log_manager.build_logs(plan, self._config_of(info))
        except BaseException:
            self.log_manager.release(missing)
            raise
        return NewLogs(self, missing, built)

    async def make_logs(self, info: TopicInfo) -> NewLogs:
        """:meth:`make_logs_now` with the files made on worker threads, a slice at a time.

        The loop stays free for other clients while thousands of logs are made
        (one owner: the threads only make files and unregistered logs). Cancelled
        (the client went away), it removes every log made.
        """
        missing = self._missing(info)
        plan = self._reserve(info.name, missing)
        config = self._config_of(info)
        built: list[BuiltLog] = []
        try:
            for start in range(0, len(plan), CREATE_SLICE):
                piece = plan[start : start + CREATE_SLICE]
                making = asyncio.ensure_future(
                    asyncio.to_thread(self.log_manager.build_logs, piece, config)
                )
                try:
                    built += await asyncio.shield(making)
                except asyncio.CancelledError:
                    # The thread goes on: wait for the logs it makes, to remove them
                    # with the others.
                    with contextlib.suppress(Exception):
                        built += await making
                    raise
        except BaseException:
            self.log_manager.release(missing)
            if built:
                await asyncio.to_thread(discard_built, built)
            raise
        return NewLogs(self, missing, built)

    def _missing(self, info: TopicInfo) -> list[TopicPartition]:
        wanted = (TopicPartition(info.name, i) for i in range(info.partitions))
        return [tp for tp in wanted if tp not in self._partitions]

    def _reserve(self, topic: str, tps: list[TopicPartition]) -> list[tuple[TopicPartition, Path]]:
        try:
            return self.log_manager.assign_dirs(tps)
        except StorageError:
            raise TopicAlreadyExistsError(f"topic {topic!r} is being created") from None

    def _config_of(self, info: TopicInfo) -> LogConfig:
        return self.defaults.with_overrides(info.configs) if info.configs else self.defaults

    def _serve(self, built: list[BuiltLog]) -> None:
        self.log_manager.register_built(built)
        for item in built:
            self._add_partition(item.tp, item.log)

    def remove_topic(self, topic: str) -> None:
        """Stop serving ``topic``'s partitions and delete their logs and metrics."""
        for tp in [tp for tp in self._partitions if tp.topic == topic]:
            self.stop_partition(tp, delete=True)
        self.topic_stats.remove(topic)

    def stop_partition(self, tp: TopicPartition, *, delete: bool) -> None:
        """Stop serving ``tp`` (its waits end); with ``delete`` its log is removed."""
        partition = self._partitions.pop(tp, None)
        if partition is None:
            return
        if self.fetching is not None:
            self.fetching.unfollow(tp)
        was_leader = partition.is_leader
        partition.stop()
        if was_leader and self.on_leadership_change is not None:
            self.on_leadership_change(partition, False)
        if delete:
            self.log_manager.delete_log(tp)

    # -- leadership (a cluster) -------------------------------------------------------------
    def apply_leadership(self, tp: TopicPartition, state: LeaderAndIsrState) -> Partition | None:
        """Lead or follow ``tp`` as ``state`` says (the cluster's metadata changed).

        A partition this broker is no longer a replica of (a reassignment moved it
        away) stops being served and its log is removed. Its log is created when missing; a log that
        cannot be created leaves the partition unserved (logged: the next state
        change tries again).
        """
        if self.local_id not in state.replicas:
            if tp in self._partitions:
                # Reassigned away: the new replicas hold every record; this copy goes.
                log.info("%s: no longer a replica here (replicas %s): removing its log", tp,
                         list(state.replicas))  # fmt: skip
                self.stop_partition(tp, delete=True)
            return None
        partition = self._partitions.get(tp)
        if partition is None:
            partition_log = self.log_manager.get_log(tp)
            if partition_log is None:
                try:
                    partition_log = self._create_log(tp)
                except (KafkaError, OSError) as exc:
                    log.error("cannot create the log of %s: %s", tp, exc)
                    return None
            partition = Partition(
                tp, partition_log, self.local_id, self.topic_stats.topic(tp.topic),
                on_change=self._partition_changed,
            )  # fmt: skip
            self._partitions[tp] = partition
        was_leader = partition.is_leader
        if state.leader == self.local_id:
            if partition.make_leader(state) and not was_leader:
                if self.fetching is not None:
                    self.fetching.unfollow(tp)
                log.info("%s: leader in epoch %d, isr %s", tp, state.leader_epoch,
                         list(state.isr))  # fmt: skip
                if self.on_leadership_change is not None:
                    self.on_leadership_change(partition, True)
        elif partition.make_follower(state):
            if was_leader and self.on_leadership_change is not None:
                self.on_leadership_change(partition, False)
            if state.leader >= 0:
                log.info("%s: follower of %d in epoch %d", tp, state.leader, state.leader_epoch)
            if self.fetching is not None:
                if state.leader >= 0:
                    self.fetching.follow(partition)
                else:
                    self.fetching.unfollow(tp)
        return partition

    def _create_log(self, tp: TopicPartition) -> Log:
        info = self.metadata.get(tp.topic)
        config = self._config_of(info) if info is not None else self.defaults
        plan = self._reserve(tp.topic, [tp])
        try:
            built = self.log_manager.build_logs(plan, config)
        finally:
            self.log_manager.release([tp])
        self.log_manager.register_built(built)
        return built[0].log

    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    def apply_config(self, topic: str) -> None:
        config = self.topic_config(topic)
        for tp in self._partitions:
            if tp.topic == topic:
                self.log_manager.update_config(tp, config)

    def partition(self, tp: TopicPartition) -> Partition:
        found = self._partitions.get(tp)
        if found is None:
            if self.metadata.leadership(tp) is not None:
                raise NotLeaderOrFollowerError(f"this broker ({self.local_id}) does not host {tp}")
            raise UnknownTopicOrPartitionError(f"this server does not host {tp}")
        return found

    def leader_partition(self, tp: TopicPartition, current_leader_epoch: int = -1) -> Partition:
        """``tp``'s partition if this broker leads it (in ``current_leader_epoch``, -1: any)."""
        partition = self.partition(tp)
        partition.check_leader(current_leader_epoch)
        return partition

    def get(self, tp: TopicPartition) -> Partition | None:
        return self._partitions.get(tp)

    # -- appends ----------------------------------------------------------------------
    async def append(
        self,
        tp: TopicPartition,
        records: bytes | bytearray | memoryview,
        *,
        required_acks: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> AppendInfo:
        """Append to a partition as its leader; raises the Kafka error the batch deserves.

        Returns once the records are in the local log; an ``acks=all`` caller then
        waits in :meth:`wait_for_replication`.
        """
        partition = self.partition(tp)
        try:
            info = partition.append_as_leader(records, required_acks=required_acks, origin=origin)
        except (KafkaStorageError, OSError) as exc:
            raise self._storage_failure(partition, exc) from exc
        await self.log_manager.maybe_flush(partition.log)
        return info

    async def wait_for_replication(
        self, tp: TopicPartition, required_offset: int, timeout_ms: int
    ) -> ErrorCode:
        """Wait until every ISR member holds the records below ``required_offset`` (acks=all):
        NONE, or the error the append gets (see :meth:`Partition.wait_for_acks`)."""
        partition = self._partitions.get(tp)
        if partition is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if partition.high_watermark >= required_offset:
            return await partition.wait_for_acks(required_offset, timeout_ms / 1000)
        self.delayed_produces += 1
        try:
            return await partition.wait_for_acks(required_offset, timeout_ms / 1000)
        finally:
            self.delayed_produces -= 1

    def replication_done(self, tp: TopicPartition, required_offset: int) -> ErrorCode | None:
        """What :meth:`wait_for_replication` would return at once, or None if it would wait:
        an ``acks=all`` produce the ISR already holds is answered without a delayed wait."""
        partition = self._partitions.get(tp)
        if partition is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return partition.acks_done(required_offset)

    async def append_replicated(
        self,
        tp: TopicPartition,
        records: bytes | bytearray | memoryview,
        *,
        origin: AppendOrigin,
        timeout_ms: int,
    ) -> AppendInfo:
        """An ``acks=all`` append that returns once the ISR holds it (the coordinators')."""
        info = await self.append(tp, records, required_acks=-1, origin=origin)
        code = await self.wait_for_replication(tp, info.last_offset + 1, timeout_ms)
        if code:
            raise for_code(code)(f"append to {tp} was not replicated")
        return info

    async def write_txn_marker(
        self,
        tp: TopicPartition,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        *,
        transaction_version: int = 0,
        timeout_ms: int = 30_000,
    ) -> ErrorCode:
        """Append a COMMIT or ABORT marker as the coordinator does (acks=all); a Kafka error code.

        NONE when written and replicated to the ISR; UNKNOWN_TOPIC_OR_PARTITION for
        a partition not hosted here (NOT_LEADER_OR_FOLLOWER when it exists but is led
        elsewhere); INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED for a
        fenced marker; NOT_ENOUGH_REPLICAS as for any acks=all append.
        After a write, :attr:`on_txn_marker` is called if set.
        """
        partition = self._partitions.get(tp)
        if partition is None:
            if self.metadata.leadership(tp) is not None:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        try:
            info = partition.append_marker(
                producer_id,
                producer_epoch,
                commit,
                coordinator_epoch,
                transaction_version=transaction_version,
            )
        except (KafkaStorageError, OSError) as exc:
            return self._storage_failure(partition, exc).code
        except KafkaError as exc:
            return exc.code
        hook = self.on_txn_marker
        if hook is not None:
            try:
                hook(tp, producer_id, commit)
            except Exception:
                # The marker is in the log whatever the hook does; its owner recovers
                # from the log (a reload replays the marker), so the write still succeeds.
                log.exception("transaction marker hook failed for %s, producer %d", tp,
                              producer_id)  # fmt: skip
        await self.log_manager.maybe_flush(partition.log)
        return await partition.wait_for_acks(info.last_offset + 1, timeout_ms / 1000)

    def _storage_failure(self, partition: Partition, exc: BaseException) -> KafkaStorageError:
        """Log a failed append (rate-limited per partition); the error to answer with."""
        now = self._monotonic()
        last = partition.storage_error_logged_at
        if last is not None and now - last < STORAGE_ERROR_LOG_INTERVAL_S:
            partition.storage_errors_not_logged += 1
        else:
            log.error(
                "append to %s in %s failed, answering KAFKA_STORAGE_ERROR: %s "
                "(%d failures not reported since the last report; reads go on; next report "
                "in %.0f s at the earliest)",
                partition.tp, partition.log.directory, exc,
                partition.storage_errors_not_logged, STORAGE_ERROR_LOG_INTERVAL_S,
            )  # fmt: skip
            partition.storage_error_logged_at = now
            partition.storage_errors_not_logged = 0
        if isinstance(exc, KafkaStorageError):
            return exc
        return KafkaStorageError(f"append to {partition.tp} failed: {exc}")

    # -- reads ------------------------------------------------------------------------
    def read(
        self,
        tp: TopicPartition,
        fetch_offset: int,
        max_bytes: int | None,
        *,
        read_committed: bool,
        min_one_message: bool,
        current_leader_epoch: int = -1,
    ) -> LogReadResult:
        """A consumer's read of ``tp`` (led here) from ``fetch_offset`` up to the high
        watermark (the last stable offset when ``read_committed``, with the aborted
        transactions overlapping the read).

        ``max_bytes`` None reads nothing: the result carries the partition's offsets only.
        """
        partition_log = self.leader_partition(tp, current_leader_epoch).log
        high_watermark = partition_log.high_watermark
        last_stable_offset = partition_log.last_stable_offset
        log_start_offset = partition_log.log_start_offset
        data = None
        if max_bytes is not None:
            data = partition_log.read(
                fetch_offset,
                max_bytes,
                max_offset=last_stable_offset if read_committed else high_watermark,
                min_one_message=min_one_message,
                include_aborted_transactions=read_committed,
            )
        return LogReadResult(high_watermark, last_stable_offset, log_start_offset, data)

    def read_for_follower(
        self,
        tp: TopicPartition,
        follower: int,
        fetch_offset: int,
        max_bytes: int | None,
        *,
        min_one_message: bool,
        current_leader_epoch: int = -1,
    ) -> LogReadResult:
        """A follower's fetch: it holds everything below ``fetch_offset`` (which may move
        the high watermark and bring it back into the ISR); read up to the log end."""
        partition = self.leader_partition(tp, current_leader_epoch)
        partition.record_follower_fetch(follower, fetch_offset, now_ms())
        self._maybe_expand_isr(partition)
        partition_log = partition.log
        data = None
        if max_bytes is not None:
            data = partition_log.read(fetch_offset, max_bytes, min_one_message=min_one_message)
        return LogReadResult(
            partition_log.high_watermark,
            partition_log.last_stable_offset,
            partition_log.log_start_offset,
            data,
        )

    def end_offset_for_epoch(
        self, tp: TopicPartition, epoch: int, current_leader_epoch: int = -1
    ) -> tuple[int, int]:
        """OffsetForLeaderEpoch, answered by the leader: ``(epoch, end offset)``."""
        return self.leader_partition(tp, current_leader_epoch).log.end_offset_for_epoch(epoch)

    def fetch_offset_for_timestamp(
        self,
        tp: TopicPartition,
        timestamp: int,
        *,
        read_committed: bool,
        current_leader_epoch: int = -1,
    ) -> tuple[int, int, int] | None:
        """ListOffsets: ``(offset, timestamp, leader epoch)`` for ``timestamp`` or one of the
        special timestamps (latest, earliest, max), the timestamp -1 for latest and
        earliest; None when no offset answers it. Offsets at or past what a consumer may
        read are not answered for a timestamp. The epoch is that of the leader that wrote
        the offset (the current one for latest), as Kafka answers it."""
        partition_log = self.leader_partition(tp, current_leader_epoch).log
        epochs = partition_log.leader_epoch_cache
        fetchable = (
            partition_log.last_stable_offset if read_committed else partition_log.high_watermark
        )
        if timestamp == LATEST_TIMESTAMP:
            return fetchable, -1, epochs.latest_epoch
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            start = partition_log.log_start_offset
            return start, -1, epochs.epoch_for_offset(start)
        if timestamp < 0 and timestamp != MAX_TIMESTAMP:
            return None  # tiered-storage specs: nothing is tiered
        found = partition_log.fetch_offset_by_timestamp(timestamp)
        if found is not None and found[0] < fetchable:
            return found[0], found[1], epochs.epoch_for_offset(found[0])
        return None

    def leader_epoch_of(self, tp: TopicPartition) -> int:
        """The leader epoch of ``tp`` here (-1 if not held)."""
        partition = self._partitions.get(tp)
        return -1 if partition is None else partition.leader_epoch

    def active_producers(self, tp: TopicPartition) -> list[ProducerEntry]:
        """The producers ``tp``'s log remembers (DescribeProducers)."""
        return self.leader_partition(tp).log.active_producers()

    # -- DeleteRecords --------------------------------------------------------------------
    def delete_records(self, tp: TopicPartition, offset: int) -> int:
        """Move ``tp``'s log start offset to ``offset`` (-1: the high watermark); the new
        start. POLICY_VIOLATION unless the topic's cleanup policy has ``delete``;
        OFFSET_OUT_OF_RANGE past the high watermark (Kafka's ``deleteRecordsOnLocalLog``).
        Followers follow the leader's log start offset as they fetch."""
        partition_log = self.leader_partition(tp).log
        if not partition_log.config.delete:
            raise PolicyViolationError(
                f"Records of partition {tp} can not be deleted due to the configured policy "
                f"(cleanup.policy={','.join(partition_log.config.cleanup_policy)})"
            )
        target = partition_log.high_watermark if offset == HIGH_WATERMARK else offset
        start = partition_log.delete_records_before(target)
        self.leader_partition(tp).note_change()  # fetch sessions answer the new log start
        return start

    # -- the ISR --------------------------------------------------------------------------
    def _maybe_expand_isr(self, partition: Partition) -> None:
        if self.write_isr is None:
            return
        wanted = partition.isr_to_expand(self.barred_from_isr())
        if wanted is not None:
            self._change_isr(partition, wanted, "caught up")

    def shrink_isrs(self, now: int | None = None) -> None:
        """Drop from each led partition's ISR the followers that lagged too long."""
        if self.write_isr is None:
            return
        now = now_ms() if now is None else now
        for partition in list(self._partitions.values()):
            wanted = partition.isr_to_shrink(now, self.replica_lag_time_max_ms)
            if wanted is not None:
                self._change_isr(partition, wanted, "lagging")

    def _change_isr(self, partition: Partition, isr: tuple[int, ...], why: str) -> None:
        writer = self.write_isr
        assert writer is not None
        epoch = partition.leader_epoch
        partition.begin_isr_change(isr)

        async def write() -> None:
            version = None
            try:
                version = await writer(partition, isr)
            except Exception as exc:  # ZooKeeper unreachable: the next check tries again
                log.warning("%s: ISR change to %s not written: %s", partition.tp, list(isr), exc,
                            exc_info=not is_expected_zk_error(exc))  # fmt: skip
            finally:
                if partition.leader_epoch == epoch:
                    # Applied before the change ends: a follower it adds is counted by the
                    # high watermark throughout, as joining, then as an ISR member.
                    if version is not None and partition.is_leader:
                        log.info("%s: ISR %s -> %s (%s)", partition.tp, list(partition.isr),
                                 list(isr), why)  # fmt: skip
                        if len(isr) < len(partition.isr):
                            self.isr_shrinks += 1
                        elif len(isr) > len(partition.isr):
                            self.isr_expands += 1
                        partition.apply_isr(isr, version)
                    partition.end_isr_change()

        task = asyncio.get_running_loop().create_task(write())
        self._isr_writes.add(task)
        task.add_done_callback(self._isr_writes.discard)

    def shutdown(self) -> None:
        for task in self._isr_writes:
            task.cancel()
        for partition in self._partitions.values():
            partition.stop()
