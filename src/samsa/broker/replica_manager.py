"""Partitions this broker leads: appends, reads and the waits of delayed fetches.

An append that fails in storage (disk full, no descriptors left, any
``OSError``) is answered KAFKA_STORAGE_ERROR and leaves the log as it was
(:mod:`samsa.storage.log`); it is logged at ERROR with the partition and its
directory, at most once per partition per minute (with the count of failures
not logged meanwhile), so a full disk under a busy producer cannot flood the
log. Reads go on: a fetch of data already written needs no space.

Single node: this broker leads every partition, the ISR is itself, and the high
watermark follows the log end offset as soon as an append returns. A delayed
fetch (Kafka's purgatory) registers a future on the partitions it reads; an
append resolves them, a timeout ends the wait — no polling. Transaction
markers (:meth:`ReplicaManager.write_txn_marker`) are appends too: they wake
the waiters, so read_committed fetches see the last stable offset move.

Handlers reach partition logs only through this class: appends, reads
(:meth:`ReplicaManager.read`), offsets by timestamp, DeleteRecords and the
producers a partition remembers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from samsa.broker.metadata_cache import MetadataCache
from samsa.cluster.local import TopicInfo
from samsa.errors import (
    ErrorCode,
    KafkaError,
    KafkaStorageError,
    NotEnoughReplicasError,
    PolicyViolationError,
    StorageError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
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


@dataclass(eq=False)
class Partition:
    """One partition's log with its leadership state."""

    tp: TopicPartition
    log: Log
    leader_epoch: int = 0
    waiters: set[asyncio.Future[None]] = field(default_factory=set)
    storage_error_logged_at: float | None = None
    storage_errors_not_logged: int = 0

    def wake_waiters(self) -> None:
        for waiter in self.waiters:
            if not waiter.done():
                waiter.set_result(None)
        self.waiters.clear()


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
    """Creates partitions from the topic table and serves appends and reads on them."""

    def __init__(
        self,
        log_manager: LogManager,
        metadata: MetadataCache,
        defaults: LogConfig,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log_manager = log_manager
        self._monotonic = monotonic
        self.metadata = metadata
        self.defaults = defaults
        self._partitions: dict[TopicPartition, Partition] = {}
        self.on_txn_marker: Callable[[TopicPartition, int, bool], None] | None = None
        """Called with ``(partition, producer id, committed)`` after a marker is written
        (the broker sets it: the group coordinator completes transactional offset commits)."""

    def topic_config(self, topic: str) -> LogConfig:
        info = self.metadata.get(topic)
        if info is None or not info.configs:
            return self.defaults
        return self.defaults.with_overrides(info.configs)

    def load(self) -> None:
        """Open the partitions of every known topic (the log manager has loaded the logs)."""
        for info in self.metadata.topics().values():
            self.ensure_partitions(info)
        known = set(self._partitions)
        for tp in list(self.log_manager.all_logs()):
            if tp not in known:
                # Never deleted: a lost or stale topic table must not cost the records.
                self.log_manager.move_aside_stray(tp)

    def ensure_partitions(self, info: TopicInfo) -> None:
        """Serve the partitions of ``info`` not served yet, creating missing logs (all or none)."""
        missing = []
        for tp in self._missing(info):
            loaded = self.log_manager.get_log(tp)
            if loaded is None:
                missing.append(tp)
            else:
                self._partitions[tp] = Partition(tp, loaded)
        if not missing:
            return
        plan = self._reserve(info.name, missing)
        try:
            built = self.log_manager.build_logs(plan, self._config_of(info))
        finally:
            self.log_manager.release(missing)
        self._serve(built)

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
            self._partitions[item.tp] = Partition(item.tp, item.log)

    def remove_topic(self, topic: str) -> None:
        for tp in [tp for tp in self._partitions if tp.topic == topic]:
            partition = self._partitions.pop(tp)
            partition.wake_waiters()
            self.log_manager.delete_log(tp)

    def apply_config(self, topic: str) -> None:
        config = self.topic_config(topic)
        for tp in self._partitions:
            if tp.topic == topic:
                self.log_manager.update_config(tp, config)

    def partition(self, tp: TopicPartition) -> Partition:
        found = self._partitions.get(tp)
        if found is None:
            raise UnknownTopicOrPartitionError(f"this server does not host {tp}")
        return found

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
        """Append to a partition as its leader; raises the Kafka error the batch deserves."""
        partition = self.partition(tp)
        partition_log = partition.log
        if required_acks == -1:
            _check_min_insync(partition)
        try:
            info = partition_log.append_as_leader(
                records, leader_epoch=partition.leader_epoch, origin=origin
            )
        except (KafkaStorageError, OSError) as exc:
            raise self._storage_failure(partition, exc) from exc
        partition_log.update_high_watermark(partition_log.log_end_offset)
        partition.wake_waiters()
        await self.log_manager.maybe_flush(partition_log)
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
    ) -> ErrorCode:
        """Append a COMMIT or ABORT marker as the coordinator does (acks=all); a Kafka error code.

        NONE when written; UNKNOWN_TOPIC_OR_PARTITION for a partition not hosted
        here; INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED for a
        fenced marker; NOT_ENOUGH_REPLICAS as for any acks=all append.
        After a write, :attr:`on_txn_marker` is called if set.
        """
        partition = self._partitions.get(tp)
        if partition is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        partition_log = partition.log
        try:
            _check_min_insync(partition)
            partition_log.append_marker(
                producer_id,
                producer_epoch,
                commit,
                coordinator_epoch,
                leader_epoch=partition.leader_epoch,
                transaction_version=transaction_version,
            )
        except (KafkaStorageError, OSError) as exc:
            return self._storage_failure(partition, exc).code
        except KafkaError as exc:
            return exc.code
        partition_log.update_high_watermark(partition_log.log_end_offset)
        partition.wake_waiters()
        hook = self.on_txn_marker
        if hook is not None:
            try:
                hook(tp, producer_id, commit)
            except Exception:
                # The marker is in the log whatever the hook does; its owner recovers
                # from the log (a reload replays the marker), so the write still succeeds.
                log.exception("transaction marker hook failed for %s, producer %d", tp,
                              producer_id)  # fmt: skip
        await self.log_manager.maybe_flush(partition_log)
        return ErrorCode.NONE

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
    ) -> LogReadResult:
        """Read ``tp`` from ``fetch_offset`` up to the high watermark (the last stable offset
        when ``read_committed``, with the aborted transactions overlapping the read).

        ``max_bytes`` None reads nothing: the result carries the partition's offsets only.
        """
        partition_log = self.partition(tp).log
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

    def fetch_offset_for_timestamp(
        self, tp: TopicPartition, timestamp: int, *, read_committed: bool
    ) -> tuple[int, int] | None:
        """ListOffsets: ``(offset, timestamp)`` for ``timestamp`` or one of the special
        timestamps (latest, earliest, max), the timestamp -1 for latest and earliest; None
        when no offset answers it. Offsets at or past what a consumer may read are not
        answered for a timestamp."""
        partition_log = self.partition(tp).log
        fetchable = (
            partition_log.last_stable_offset if read_committed else partition_log.high_watermark
        )
        if timestamp == LATEST_TIMESTAMP:
            return fetchable, -1
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return partition_log.log_start_offset, -1
        if timestamp < 0 and timestamp != MAX_TIMESTAMP:
            return None  # tiered-storage specs: nothing is tiered
        found = partition_log.fetch_offset_by_timestamp(timestamp)
        if found is not None and found[0] < fetchable:
            return found
        return None

    def active_producers(self, tp: TopicPartition) -> list[ProducerEntry]:
        """The producers ``tp``'s log remembers (DescribeProducers)."""
        return self.partition(tp).log.active_producers()

    # -- DeleteRecords --------------------------------------------------------------------
    def delete_records(self, tp: TopicPartition, offset: int) -> int:
        """Move ``tp``'s log start offset to ``offset`` (-1: the high watermark); the new
        start. POLICY_VIOLATION unless the topic's cleanup policy has ``delete``;
        OFFSET_OUT_OF_RANGE past the high watermark (Kafka's ``deleteRecordsOnLocalLog``)."""
        partition_log = self.partition(tp).log
        if not partition_log.config.delete:
            raise PolicyViolationError(
                f"Records of partition {tp} can not be deleted due to the configured policy "
                f"(cleanup.policy={','.join(partition_log.config.cleanup_policy)})"
            )
        target = partition_log.high_watermark if offset == HIGH_WATERMARK else offset
        return partition_log.delete_records_before(target)

    # -- delayed fetch ------------------------------------------------------------------
    async def wait_for_data(self, tps: Iterable[TopicPartition], timeout_s: float) -> None:
        """Return when any of ``tps`` is appended to, or after ``timeout_s``."""
        if timeout_s <= 0:
            return
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        partitions = [p for tp in tps if (p := self._partitions.get(tp)) is not None]
        for partition in partitions:
            partition.waiters.add(waiter)
        try:
            await asyncio.wait_for(waiter, timeout_s)
        except TimeoutError:
            pass
        finally:
            for partition in partitions:
                partition.waiters.discard(waiter)

    def shutdown(self) -> None:
        for partition in self._partitions.values():
            partition.wake_waiters()


def _check_min_insync(partition: Partition) -> None:
    min_insync = partition.log.config.min_insync_replicas
    if min_insync > 1:
        raise NotEnoughReplicasError(
            f"{partition.tp} has 1 in-sync replica; min.insync.replicas is {min_insync}"
        )
