"""A partition's log: ordered segments, offsets, roll, retention, reads and truncation.

The log assigns offsets by rewriting each batch's base offset in place (the
CRC does not cover it) and appends the producer's bytes unchanged otherwise.
It tracks the log start offset, the log end offset (LEO), the high watermark,
the last stable offset (LSO: below it every transaction is decided, see
:mod:`samsa.storage.producer_state`) and the recovery point (everything below
it is known to be on disk). An abort marker adds an entry to the ``.txnindex``
of the segment it lands in; read_committed reads collect them
(:meth:`Log.collect_aborted_transactions`).

Segments deleted by retention, or replaced by the log cleaner's output
(:meth:`Log.replace_segments`), are renamed ``.deleted`` at once and removed
after ``file.delete.delay.ms``, so a read that already holds a file region
can still send it. With ``cleanup.policy=compact`` alone, retention by time
and size does not apply (the cleaner keeps the log small); ``compact,delete``
applies both.

Appends are all-or-nothing. A roll opens every file
of the new segment, writes the producer snapshot and seals the old segment
before the new one joins the log; any failure removes the new segment's files
and leaves the old one active. The segment undoes a failed write or index
entry itself (:meth:`LogSegment.append`); a failure after that (the
``.txnindex`` entry of an abort marker) truncates the segment back and
rebuilds the producer state. The caller gets ``KafkaStorageError`` and the
log end offset has not moved, so nothing unacknowledged is ever readable and
the next append takes the same offsets. Only if that undo itself fails is the
log taken offline: appends are refused until a restart recovers it, reads go
on. This is narrower than Kafka, which on any ``IOException`` in a log
directory (``LogDirFailureChannel``) takes the whole directory offline and
answers KAFKA_STORAGE_ERROR for all its partitions until restart: here a full
disk or a shortage of descriptors only refuses the appends that hit it, and
appends work again once space or descriptors are freed.

Not thread-safe: one owner (the partition's writer on the event loop) calls
every method; only the fsync work of :meth:`flush_segments` may run on a
worker thread, on segments snapshotted by :meth:`segments_to_flush`.
Opening a log (and crash recovery) lives in :mod:`samsa.storage.log_loader`.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from samsa.errors import (
    CorruptRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    StorageError,
)
from samsa.records.batch import (
    NO_TIMESTAMP,
    RecordBatchView,
    read_batch,
)
from samsa.records.control import (
    ControlRecordType,
    build_end_transaction_batch,
    control_record_type,
)
from samsa.records.reader import iter_records
from samsa.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from samsa.storage.log_config import LogConfig
from samsa.storage.producer_state import CompletedTxn, ProducerEntry, ProducerStateManager
from samsa.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    EMPTY_REGION,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    FetchData,
    LogOffsetMetadata,
    LogSegment,
    segment_file_name,
)
from samsa.storage.txn_index import AbortedTxn
from samsa.storage.validator import AppendOrigin, validate_batch

log = logging.getLogger(__name__)

Clock = Callable[[], int]
"""Milliseconds since the epoch; tests inject their own."""

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def _is_abort_marker(batch: RecordBatchView) -> bool:
    """Whether control ``batch`` is an ABORT marker (it adds a ``.txnindex`` entry)."""
    record = next(iter_records(batch), None)
    return record is not None and control_record_type(record) is ControlRecordType.ABORT


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """What an append did: the offsets it assigned and the timestamps it saw."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    record_count: int
    valid_bytes: int
    log_start_offset: int


class Log:
    """An ordered list of segments with one active (last) segment taking appends."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[LogSegment],
        *,
        log_start_offset: int,
        recovery_point: int,
        high_watermark: int | None = None,
        clock: Clock = wall_clock_ms,
    ) -> None:
        if not segments:
            raise StorageError(f"log {directory} needs at least one segment")
        self.directory = directory
        self.config = config
        self.clock = clock
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        active = segments[-1]
        self._leo = LogOffsetMetadata(active.read_next_offset(), active.base_offset, active.size)
        self._log_start_offset = max(log_start_offset, segments[0].base_offset)
        self._recovery_point = min(recovery_point, self._leo.offset)
        self.producer_state = ProducerStateManager(directory)
        """Producer state of this log; only storage reads it directly (others: see
        :meth:`active_producers`)."""
        self.leader_epoch_cache = self._load_leader_epochs()
        """The epoch of each leader that wrote to this log and its first offset."""
        self._hw = LogOffsetMetadata(self.log_start_offset)
        self.update_high_watermark(self._leo.offset if high_watermark is None else high_watermark)
        self.unflushed_messages = 0
        self.last_flush_ms = clock()
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._retired = 0
        self.on_roll: Callable[[Log, int], None] | None = None
        """Called with the new segment's base offset after a roll (to flush the old ones)."""
        self.on_truncate: Callable[[Log, int], None] | None = None
        """Called with the offset a truncation cut the log back to (the cleaner rewinds)."""
        self.offline_reason: str | None = None
        """Why appends are refused until a restart (a failed append could not be undone)."""

    # -- state ------------------------------------------------------------
    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self._leo.offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        return self._leo

    @property
    def high_watermark(self) -> int:
        return self._hw.offset

    @property
    def size(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def first_unstable_offset(self) -> int | None:
        """First offset of the earliest transaction not yet decided below the HW (None: none)."""
        first = self.producer_state.first_unstable_offset()
        return None if first is None else max(first, self.log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        """Where read_committed reads stop: the first unstable offset, never above the HW."""
        first = self.first_unstable_offset
        hw = self._hw.offset
        return hw if first is None else min(first, hw)

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, clamped to [log start, LEO]; return it."""
        offset = max(self.log_start_offset, min(offset, self._leo.offset))
        if offset == self._leo.offset:
            self._hw = self._leo
        else:
            self._hw = self._offset_metadata(offset)
        self.producer_state.on_high_watermark_updated(offset)
        return offset

    def _offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Where ``offset`` lives: its batch's position, or the end of the segment before it."""
        if offset == self._leo.offset:
            return self._leo
        segment = self._segment_for(offset) or self._segments[0]
        found = segment.position_of(offset)
        if found is not None:
            return found
        return LogOffsetMetadata(offset, segment.base_offset, segment.size)

    def _segment_index_for(self, offset: int) -> int:
        return bisect.bisect_right(self._bases, offset) - 1

    def _segment_for(self, offset: int) -> LogSegment | None:
        i = self._segment_index_for(offset)
        return self._segments[i] if i >= 0 else None

    # -- leader epochs -------------------------------------------------------
    def _load_leader_epochs(self) -> LeaderEpochCache:
        """The ``leader-epoch-checkpoint``, cut to this log's offsets.

        A checkpoint that cannot be read is rebuilt from the epochs the batches
        carry (as Kafka rebuilds a missing cache), so a damaged file costs a
        scan, never a start-up.
        """
        try:
            cache = LeaderEpochCache(self.directory)
        except StorageError as exc:
            log.warning("rebuilding %s from its batches: %s", LEADER_EPOCH_CHECKPOINT, exc)
            (self.directory / LEADER_EPOCH_CHECKPOINT).unlink(missing_ok=True)
            cache = LeaderEpochCache(self.directory)
            for segment in self._segments:
                for batch in segment.batch_headers(0):
                    if batch.partition_leader_epoch > cache.latest_epoch:
                        cache.assign(batch.partition_leader_epoch, batch.base_offset)
        cache.truncate_from_end(self._leo.offset)
        cache.truncate_from_start(self.log_start_offset)
        return cache

    def recover_leader_epochs(self, from_offset: int) -> None:
        """Re-read the epochs of the batches at and after ``from_offset`` (crash recovery:
        the checkpoint may not hold the epochs begun after the recovery point)."""
        cache = self.leader_epoch_cache
        for i, segment in enumerate(self._segments):
            following = self._bases[i + 1] if i + 1 < len(self._bases) else self._leo.offset + 1
            if following <= from_offset:
                continue
            for batch in segment.batch_headers(from_offset):
                if batch.partition_leader_epoch > cache.latest_epoch:
                    cache.assign(batch.partition_leader_epoch, batch.base_offset)

    @property
    def latest_epoch(self) -> int:
        """The newest leader epoch this log has records of (-1: none)."""
        return self.leader_epoch_cache.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: ``(epoch, end offset)`` — where ``epoch`` ended in this log
        (the log end offset for the latest), or the largest epoch below it and where
        that one ended; ``(-1, -1)`` when this log knows no such epoch."""
        return self.leader_epoch_cache.end_offset_for(epoch, self._leo.offset)

    # -- append -----------------------------------------------------------
    def append_as_leader(
        self,
        data: bytearray | memoryview | bytes,
        *,
        leader_epoch: int = -1,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        transaction_version: int = 0,
    ) -> AppendInfo:
        """Validate batches, assign their offsets in place, and append them.

        Base offsets (and leader epochs) are rewritten in ``data`` when it is
        writable; read-only bytes are copied once first. Raises
        ``CorruptRecordError`` (framing, magic, CRC), ``MessageTooLargeError``
        (``max.message.bytes``), ``InvalidRecordError``, ``InvalidTimestampError``
        or a producer-state error (epoch, sequence, transaction state, coordinator
        epoch: see :mod:`samsa.storage.producer_state`; ``transaction_version`` is
        the marker's, 2 for KIP-890 epoch bumps); nothing is appended when any
        batch fails.
        """
        now = self.clock()
        view = memoryview(data)
        if view.readonly:
            view = memoryview(bytearray(view))  # offsets are written in place
        batches = self._checked_batches(view, origin, now)
        if origin is not AppendOrigin.REPLICATION:
            for batch in batches:
                duplicate = self.producer_state.check(batch, origin, transaction_version)
                if duplicate is not None and len(batches) == 1:
                    # A retry of a batch already in the log: its first offsets, no write.
                    return AppendInfo(duplicate.first_offset, duplicate.last_offset,
                                      duplicate.timestamp, duplicate.last_offset, NO_TIMESTAMP,
                                      0, 0, self.log_start_offset)  # fmt: skip
        next_offset = self._leo.offset
        log_append_time = now if self.config.log_append_time else NO_TIMESTAMP
        for batch in batches:
            batch.set_base_offset(next_offset)
            batch.set_partition_leader_epoch(leader_epoch)
            if log_append_time != NO_TIMESTAMP:
                batch.set_log_append_time(log_append_time)
            next_offset = batch.next_offset
        info = self._append(view, batches, log_append_time, now)
        if batches and leader_epoch > self.leader_epoch_cache.latest_epoch:
            self.leader_epoch_cache.assign(leader_epoch, info.first_offset)
        return info

    def append_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        *,
        leader_epoch: int = -1,
        transaction_version: int = 0,
    ) -> AppendInfo:
        """Append a COMMIT or ABORT marker ending ``producer_id``'s transaction (a coordinator's).

        Raises ``InvalidProducerEpochError`` or ``TransactionCoordinatorFencedError``
        when the marker is fenced; nothing is appended then.
        """
        batch = build_end_transaction_batch(
            ControlRecordType.COMMIT if commit else ControlRecordType.ABORT,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch,
            timestamp=self.clock(),
        )
        return self.append_as_leader(
            bytearray(batch),
            leader_epoch=leader_epoch,
            origin=AppendOrigin.COORDINATOR,
            transaction_version=transaction_version,
        )

    def append_as_follower(self, data: bytearray | memoryview | bytes) -> AppendInfo:
        """Append batches whose offsets the leader assigned; they must follow the LEO."""
        now = self.clock()
        view = memoryview(data)
        batches = self._checked_batches(view, AppendOrigin.REPLICATION, now)
        if batches and batches[0].base_offset < self._leo.offset:
            raise StorageError(
                f"follower append at offset {batches[0].base_offset} is before the "
                f"log end offset {self._leo.offset}"
            )
        for earlier, later in itertools.pairwise(batches):
            if later.base_offset <= earlier.last_offset:
                raise StorageError(f"batch offsets go backwards at {later.base_offset}")
        info = self._append(view, batches, NO_TIMESTAMP, now)
        cache = self.leader_epoch_cache
        for batch in batches:
            if batch.partition_leader_epoch > cache.latest_epoch:
                cache.assign(batch.partition_leader_epoch, batch.base_offset)
        return info

    def _checked_batches(
        self, view: memoryview, origin: AppendOrigin, now: int
    ) -> list[RecordBatchView]:
        batches: list[RecordBatchView] = []
        position = 0
        while position < view.nbytes:
            batch = read_batch(view, position, max_size=self.config.max_message_bytes)
            batch.validate()
            validate_batch(batch, self.config, origin, now)
            batches.append(batch)
            position += batch.size
        return batches

    def _append(
        self, view: memoryview, batches: list[RecordBatchView], log_append_time: int, now: int
    ) -> AppendInfo:
        first = self._leo.offset
        if not batches:
            return AppendInfo(first, first - 1, NO_TIMESTAMP, first, log_append_time, 0, 0,
                              self.log_start_offset)  # fmt: skip
        max_timestamp, offset_of_max = NO_TIMESTAMP, batches[0].base_offset
        records = 0
        aborts = False
        for batch in batches:
            if batch.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = batch.max_timestamp, batch.last_offset
            records += batch.record_count
            if batch.is_control:
                aborts = aborts or _is_abort_marker(batch)
        last_offset = batches[-1].last_offset
        if self.offline_reason is not None:
            raise KafkaStorageError(f"log {self.directory} is offline: {self.offline_reason}")
        segment = self.active_segment
        if segment.should_roll(view.nbytes, max_timestamp, last_offset, now):
            segment = self.roll(batches[0].base_offset)
        if aborts:
            try:
                segment.txn_index.open_for_append()
            except OSError as exc:
                raise KafkaStorageError(f"append to {self.directory} failed: {exc}") from exc
        segment.append(view, batches)
        try:
            for batch in batches:
                completed = self.producer_state.update(batch)
                if completed is not None:
                    self._index_completed(segment, completed)
        except OSError as exc:
            self._undo_append(segment, batches[0].base_offset, exc)
            raise KafkaStorageError(f"append to {self.directory} failed: {exc}") from exc
        self._leo = LogOffsetMetadata(last_offset + 1, segment.base_offset, segment.size)
        self.unflushed_messages += records
        return AppendInfo(
            first_offset=batches[0].base_offset,
            last_offset=last_offset,
            max_timestamp=max_timestamp,
            offset_of_max_timestamp=offset_of_max,
            log_append_time=log_append_time,
            record_count=records,
            valid_bytes=view.nbytes,
            log_start_offset=self.log_start_offset,
        )

    def _undo_append(self, segment: LogSegment, first_offset: int, cause: OSError) -> None:
        """Cut ``segment`` back to ``first_offset`` and replay the producer state up to it.

        The log end offset was not moved yet. If this fails too, the log goes offline.
        """
        try:
            segment.truncate_to(first_offset)
            self.rebuild_producer_state()
        except (OSError, StorageError) as exc:
            self.offline_reason = f"an append failed ({cause}) and could not be undone ({exc})"
            raise KafkaStorageError(
                f"log {self.directory} is offline: {self.offline_reason}"
            ) from exc

    @staticmethod
    def _index_completed(segment: LogSegment, completed: CompletedTxn) -> None:
        """An aborted transaction goes into the index of the segment holding its marker."""
        if completed.is_aborted:
            segment.append_aborted_txn(
                AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset,
                           completed.last_stable_offset)
            )  # fmt: skip

    # -- roll ---------------------------------------------------------------
    def roll(self, base_offset: int | None = None) -> LogSegment:
        """Start a new active segment at ``base_offset`` (default: the LEO).

        All or nothing: raises ``KafkaStorageError`` with the old segment still
        active and the new one's files removed if any file cannot be opened or written.
        """
        new_base = self._leo.offset if base_offset is None else base_offset
        active = self.active_segment
        if active.base_offset == new_base and active.size == 0:
            return active
        if new_base <= active.base_offset:
            raise StorageError(f"cannot roll to {new_base}: active segment starts at it or later")
        segment = LogSegment.create(self.directory, new_base, self.config, created_ms=self.clock())
        try:
            self.producer_state.write_snapshot(new_base)
            active.on_become_inactive()
        except (OSError, StorageError) as exc:
            # The old segment stays active: its trimmed indexes grow again on demand.
            segment.delete_files()
            raise KafkaStorageError(
                f"roll of {self.directory} to {new_base} failed: {exc}"
            ) from exc
        self._segments.append(segment)
        self._bases.append(new_base)
        if self._leo.segment_base_offset == active.base_offset and new_base == self._leo.offset:
            self._leo = LogOffsetMetadata(new_base, new_base, 0)
            if self._hw.offset == new_base:
                self._hw = self._leo
        if self.on_roll is not None:
            self.on_roll(self, new_base)
        return segment

    @property
    def log_start_offset(self) -> int:
        """The first offset a consumer may read; moves only forward, by retention,
        DeleteRecords (:meth:`delete_records_before`) or a full truncation."""
        return self._log_start_offset

    @property
    def recovery_point(self) -> int:
        """Everything below it is flushed to disk (:meth:`mark_flushed` moves it)."""
        return self._recovery_point

    def active_producers(self) -> list[ProducerEntry]:
        """The producers this log remembers (Kafka's ``UnifiedLog.activeProducers``)."""
        return list(self.producer_state.producers.values())

    # -- reads --------------------------------------------------------------
    def read(
        self,
        start_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_message: bool = True,
        include_aborted_transactions: bool = False,
    ) -> FetchData:
        """Bytes of the batches from ``start_offset``, stopping before ``max_offset``.

        ``max_offset`` is exclusive (pass the high watermark for consumers, the
        last stable offset for read_committed ones); by default the read may go
        to the LEO. With ``include_aborted_transactions`` the result lists the
        aborts overlapping the read, up to Kafka's upper bound: the offset of the
        first index entry past the bytes read, else the next segment's base, else
        the LEO. Raises ``OffsetOutOfRangeError`` if ``start_offset`` is below the
        log start or above the LEO.
        """
        leo = self._leo
        if start_offset < self.log_start_offset or start_offset > leo.offset:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} is outside [{self.log_start_offset}, {leo.offset}] "
                f"of {self.directory.name}"
            )
        upper = leo if max_offset is None else self._upper_bound(max_offset)
        no_aborts: list[tuple[int, int]] | None = [] if include_aborted_transactions else None
        if start_offset >= upper.offset:
            return FetchData(LogOffsetMetadata(start_offset), EMPTY_REGION, no_aborts)
        i = max(self._segment_index_for(start_offset), 0)
        segments = self._segments
        while i < len(segments):
            segment = segments[i]
            if upper.segment_base_offset == segment.base_offset:
                max_position: int | None = upper.position
            elif upper.segment_base_offset >= 0 and upper.segment_base_offset < segment.base_offset:
                break
            else:
                max_position = None
            data = segment.read(start_offset, max_bytes, max_position, min_one_message)
            if data is not None:
                if include_aborted_transactions:
                    data = self._with_aborted_transactions(start_offset, i, data)
                return data
            i += 1
        return FetchData(LogOffsetMetadata(start_offset), EMPTY_REGION, no_aborts)

    def _with_aborted_transactions(self, start_offset: int, i: int, data: FetchData) -> FetchData:
        segment = self._segments[i]
        upper_bound = segment.fetch_upper_bound_offset(
            data.offset_metadata.position, data.region.length
        )
        if upper_bound is None:
            following = i + 1 < len(self._segments)
            upper_bound = self._bases[i + 1] if following else self._leo.offset
        aborted = self._collect_aborted(i, start_offset, upper_bound)
        return FetchData(data.offset_metadata, data.region, aborted)

    def collect_aborted_transactions(
        self, start_offset: int, upper_bound_offset: int
    ) -> list[tuple[int, int]]:
        """``(producer id, first offset)`` of aborts overlapping ``[start, upper bound)``.

        As Kafka: the entries whose last offset is >= ``start_offset`` and first
        offset < ``upper_bound_offset``, scanning the ``.txnindex`` files from the
        segment holding ``start_offset`` until an entry's last stable offset
        reaches the upper bound.
        """
        return self._collect_aborted(
            max(self._segment_index_for(start_offset), 0), start_offset, upper_bound_offset
        )

    def _collect_aborted(self, first: int, start: int, upper_bound: int) -> list[tuple[int, int]]:
        aborted: list[tuple[int, int]] = []
        for segment in self._segments[first:]:
            found, complete = segment.txn_index.collect(start, upper_bound)
            aborted += [(txn.producer_id, txn.first_offset) for txn in found]
            if complete:
                break
        return aborted

    def _upper_bound(self, max_offset: int) -> LogOffsetMetadata:
        if max_offset >= self._leo.offset:
            return self._leo
        if max_offset == self._hw.offset and self._hw.position >= 0:
            return self._hw
        return self._offset_metadata(max_offset)

    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` for ListOffsets; -2 earliest, -1 latest, -3 max timestamp.

        For a real timestamp: the first record whose timestamp is >= it, or None.
        """
        if timestamp == EARLIEST_TIMESTAMP:
            return self.log_start_offset, NO_TIMESTAMP
        if timestamp == LATEST_TIMESTAMP:
            return self._leo.offset, NO_TIMESTAMP
        if timestamp == MAX_TIMESTAMP:
            best = max(self._segments, key=lambda s: s.max_timestamp)
            if best.max_timestamp < 0:
                return None
            return best.find_offset_by_timestamp(best.max_timestamp, self.log_start_offset)
        for segment in self._segments:
            if segment.size and segment.max_timestamp >= timestamp:
                found = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if found is not None:
                    return found
        return None

    # -- retention ------------------------------------------------------------
    def delete_old_segments(self) -> int:
        """Apply retention by log start offset, time and size; return segments deleted.

        Never deletes the active segment, nor one holding offsets at or above the
        high watermark.
        """
        deleted = self._delete_while(lambda seg, nxt: nxt.base_offset <= self.log_start_offset)
        if not self.config.delete:
            return deleted
        now = self.clock()
        if self.config.retention_ms >= 0:
            retention_ms = self.config.retention_ms
            deleted += self._delete_while(
                lambda seg, nxt: now - seg.largest_timestamp > retention_ms
            )
        if self.config.retention_bytes >= 0:
            excess = self.size - self.config.retention_bytes

            def over_size(seg: LogSegment, nxt: LogSegment) -> bool:
                nonlocal excess
                if excess - seg.size < 0:
                    return False
                excess -= seg.size
                return True

            deleted += self._delete_while(over_size)
        return deleted

    def _delete_while(self, predicate: Callable[[LogSegment, LogSegment], bool]) -> int:
        doomed = 0
        segments = self._segments
        while doomed < len(segments) - 1:
            segment, following = segments[doomed], segments[doomed + 1]
            if following.base_offset > self._hw.offset or not predicate(segment, following):
                break
            doomed += 1
        if doomed:
            self._remove_segments(doomed)
        return doomed

    def _remove_segments(self, count: int) -> None:
        due = self.clock() + self.config.file_delete_delay_ms
        for segment in self._segments[:count]:
            self._retire(segment, due)
        del self._segments[:count]
        del self._bases[:count]
        self._log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        if self._hw.offset < self.log_start_offset:
            self.update_high_watermark(self.log_start_offset)

    def _retire(self, segment: LogSegment, due: int) -> None:
        """Rename ``segment``'s files ``.deleted`` and queue their removal at ``due``.

        An earlier segment with the same base offset (cleaned twice, or truncated
        and rewritten) may still wait under those names; this one then gets a
        numbered ``.<n>.deleted`` suffix instead of replacing that one's files.
        """
        suffix = DELETED_SUFFIX
        if any(
            (self.directory / segment_file_name(segment.base_offset, kind + suffix)).exists()
            for kind in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
        ):
            self._retired += 1
            suffix = f".{self._retired}{DELETED_SUFFIX}"
        segment.rename_suffix("", suffix)
        self._pending_deletes.append((due, segment))

    def delete_records_before(self, offset: int) -> int:
        """Move the log start offset to ``offset`` (DeleteRecords); return the new start.

        ``offset`` may not pass the high watermark. Segments wholly below it go now.
        """
        if offset > self._hw.offset or offset < 0:
            raise OffsetOutOfRangeError(
                f"cannot delete records before {offset}: high watermark is {self._hw.offset}"
            )
        if offset > self.log_start_offset:
            self._log_start_offset = offset
            self._delete_while(lambda seg, nxt: nxt.base_offset <= offset)
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        return self.log_start_offset

    def take_purgeable_segments(self, *, force: bool = False) -> list[LogSegment]:
        """Hand over the deleted segments whose delay has passed (their files still exist)."""
        now = self.clock()
        due = [seg for when, seg in self._pending_deletes if force or when <= now]
        self._pending_deletes = [
            (when, seg) for when, seg in self._pending_deletes if not (force or when <= now)
        ]
        return due

    def purge_deleted_segments(self, *, force: bool = False) -> int:
        """Remove the files of segments whose deletion delay has passed; return how many."""
        doomed = self.take_purgeable_segments(force=force)
        for segment in doomed:
            segment.delete_files()
        return len(doomed)

    # -- compaction -------------------------------------------------------------
    def replace_segments(self, old: list[LogSegment], new: list[LogSegment]) -> bool:
        """Swap the cleaner's output ``new`` in for the consecutive segments ``old``.

        ``old`` must still be segments of this log, in order, and not the active
        one; otherwise nothing changes and False is returned (a concurrent
        retention, truncation or roll won: the caller discards ``new``). ``new``
        arrive as ``.cleaned`` files, sorted, the first based where ``old`` starts.
        The files are renamed ``.cleaned`` → ``.swap``, the old segments
        ``.deleted`` (removed after ``file.delete.delay.ms``, so in-flight reads
        of them finish), then ``.swap`` → final names: a crash at any step
        leaves files that :func:`~samsa.storage.log_loader.load_log` completes
        or rolls back.
        """
        if not old or not new or new[0].base_offset != old[0].base_offset:
            return False
        segments = self._segments
        start = next((i for i, s in enumerate(segments) if s is old[0]), -1)
        end = start + len(old)
        if start < 0 or end >= len(segments):
            return False
        if any(segments[start + k] is not segment for k, segment in enumerate(old)):
            return False
        for segment in new:
            segment.config = self.config
            segment.rename_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
        segments[start:end] = new
        self._bases[start:end] = [s.base_offset for s in new]
        due = self.clock() + self.config.file_delete_delay_ms
        for segment in old:
            self._retire(segment, due)
        for segment in new:
            segment.rename_suffix(SWAP_SUFFIX, "")
        replaced = {s.base_offset for s in old}
        if self._hw.segment_base_offset in replaced:
            self._hw = self._offset_metadata(self._hw.offset)
        return True

    # -- truncation -----------------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        """Remove every batch at or after ``offset`` (a follower diverging from its leader)."""
        if offset >= self._leo.offset:
            return
        if offset <= self._segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return
        while self._segments[-1].base_offset >= offset:
            segment = self._segments.pop()
            self._bases.pop()
            self._retire(segment, self.clock())
        active = self._segments[-1]
        active.truncate_to(offset)
        self._leo = LogOffsetMetadata(active.read_next_offset(), active.base_offset, active.size)
        self._recovery_point = min(self.recovery_point, self._leo.offset)
        self.update_high_watermark(min(self._hw.offset, self._leo.offset))
        self.producer_state.delete_snapshots_after(self._leo.offset)
        self.rebuild_producer_state()
        self.leader_epoch_cache.truncate_from_end(self._leo.offset)
        if self.on_truncate is not None:
            self.on_truncate(self, self._leo.offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and start empty at ``offset``."""
        for segment in self._segments:
            self._retire(segment, self.clock())
        segment = LogSegment(self.directory, offset, self.config, created_ms=self.clock())
        self._segments = [segment]
        self._bases = [offset]
        self._leo = LogOffsetMetadata(offset, offset, 0)
        self._log_start_offset = offset
        self._recovery_point = offset
        self._hw = self._leo
        self.producer_state.delete_snapshots_after(-1)
        self.producer_state.clear()
        self.leader_epoch_cache.clear()
        if self.on_truncate is not None:
            self.on_truncate(self, offset)

    # -- durability -------------------------------------------------------------
    def should_flush(self) -> bool:
        """Whether ``flush.messages`` or ``flush.ms`` asks for an fsync now."""
        if self.recovery_point >= self._leo.offset:
            return False
        if self.unflushed_messages >= self.config.flush_messages:
            return True
        return self.clock() - self.last_flush_ms >= self.config.flush_ms

    def segments_to_flush(self, up_to: int | None = None) -> tuple[int, list[LogSegment]]:
        """The offset a flush will reach and the segments holding data below it."""
        target = self._leo.offset if up_to is None else min(up_to, self._leo.offset)
        chosen: list[LogSegment] = []
        for i, segment in enumerate(self._segments):
            next_base = self._bases[i + 1] if i + 1 < len(self._segments) else self._leo.offset + 1
            if next_base > self.recovery_point and segment.base_offset < target:
                chosen.append(segment)
        return target, chosen

    @staticmethod
    def flush_segments(segments: list[LogSegment]) -> None:
        """fsync the given segments (blocking: safe on a worker thread)."""
        for segment in segments:
            segment.flush()

    def mark_flushed(self, offset: int) -> None:
        """Record that everything below ``offset`` is on disk."""
        self._recovery_point = max(self.recovery_point, offset)
        if offset >= self._leo.offset:
            self.unflushed_messages = 0
        self.last_flush_ms = self.clock()

    def flush(self, up_to: int | None = None) -> None:
        """fsync everything below ``up_to`` (default: the LEO) on this thread."""
        target, segments = self.segments_to_flush(up_to)
        self.leader_epoch_cache.flush()
        self.flush_segments(segments)
        self.mark_flushed(target)

    def rebuild_producer_state(self, rebuild_txn_indexes_from: int | None = None) -> None:
        """Load the newest usable producer snapshot and replay the batches after it.

        With ``rebuild_txn_indexes_from`` (crash recovery) the ``.txnindex`` of
        every segment based at or after it is rebuilt from the markers replayed:
        the snapshot used is then one at or below that offset.
        """
        state = self.producer_state
        leo = self._leo.offset
        state.delete_snapshots_after(leo)
        usable = leo if rebuild_txn_indexes_from is None else rebuild_txn_indexes_from
        start = self.log_start_offset
        state.clear()
        for snapshot in reversed(state.snapshot_offsets()):
            if snapshot > usable:
                continue
            try:
                state.load_snapshot(snapshot)
                start = max(snapshot, start)
                break
            except (StorageError, CorruptRecordError, OSError):
                state.clear()
                (self.directory / f"{snapshot:020d}.snapshot").unlink(missing_ok=True)
        for i, segment in enumerate(self._segments):
            rebuild = rebuild_txn_indexes_from is not None and (
                segment.base_offset >= rebuild_txn_indexes_from
            )
            if rebuild:
                segment.txn_index.reset()
            following = self._bases[i + 1] if i + 1 < len(self._bases) else leo + 1
            if following <= start:
                continue
            for batch in segment.batch_headers(start):
                if batch.base_offset >= start:
                    completed = state.update(batch)
                    if completed is not None and rebuild:
                        self._index_completed(segment, completed)
        state.on_high_watermark_updated(self._hw.offset)

    def close(self) -> None:
        """Snapshot producer state, close every segment (files of deleted ones are removed).

        A snapshot that cannot be written (disk full) is logged and skipped: the
        next start replays the batches after the newest older snapshot instead.
        """
        try:
            self.producer_state.write_snapshot(self._leo.offset)
        except OSError as exc:
            log.warning("closing %s without a producer snapshot: %s", self.directory, exc)
        try:
            self.leader_epoch_cache.flush()
        except OSError as exc:
            # The next start re-reads the epochs of every batch past the recovery point.
            log.warning("closing %s without its leader epochs written: %s", self.directory, exc)
        for segment in self._segments:
            segment.close()
        self.purge_deleted_segments(force=True)

    def __repr__(self) -> str:
        return (
            f"Log({self.directory.name}, start={self.log_start_offset}, "
            f"end={self._leo.offset}, hw={self._hw.offset}, segments={len(self._segments)})"
        )
