"""Log compaction, as Kafka's LogCleaner does it: keep the last record of every key.

A compacted log (``cleanup.policy`` holding ``compact``) is a *clean* head,
already compacted, followed by a *dirty* tail starting at the first dirty
offset, which the log manager keeps in ``cleaner-offset-checkpoint``. A pass
has three steps:

1. :meth:`LogCleaner.plan`, on the log's owner (the event loop): the cleanable
   range ends at the first uncleanable offset — the active segment's base, the
   segment holding the high watermark, or the first dirty segment holding a
   record younger than ``min.compaction.lag.ms`` (whole segments, by their
   largest timestamp, as Kafka). A log is worth a pass when its dirty bytes
   reach ``min.cleanable.dirty.ratio`` of its cleanable bytes, or its oldest
   dirty record is older than ``max.compaction.lag.ms`` (the log manager
   decides). The segments below it are snapshotted:
   duplicated file descriptors and sizes, so nothing the loop does later can
   pull the files from under the worker.
2. :meth:`LogCleaner.clean_segments`, on a worker thread: a key map (16-byte
   BLAKE2b digest of the key → last offset) is built from the dirty records;
   then every cleanable segment is copied into new ``.cleaned`` segments whose
   indexes are built as they are written, each fsynced. Consecutive segments
   share one output while what it holds so far plus the next input still fits
   ``segment.bytes`` (and the index and offset range), so segments emptied by
   cleaning merge at once. A lone segment from which nothing would be removed
   is left as it is.
3. :meth:`LogCleaner.swap`, on the loop: if the segments cleaned are still the
   log's (same objects, same sizes, not active) the output replaces them
   (:meth:`~samsa.storage.log.Log.replace_segments`); otherwise a concurrent
   retention, truncation or roll won and the output is thrown away.

What a pass keeps — offsets never change, gaps appear:

- a record, unless the key map holds a later offset for its key; records past
  the map's end and records without a key are always kept (Kafka refuses
  keyless records for compacted topics at produce and drops them here; samsa
  keeps whatever the log holds);
- a tombstone (null value) until its batch's delete horizon (KIP-534): a pass
  that keeps a tombstone in a batch without a horizon rewrites that batch with
  attribute bit 6 (``isDeleteHorizonSet``, 0x40) and base timestamp = now +
  ``delete.retention.ms`` (record timestamp deltas are relative to the base
  timestamp, so records read back with their own timestamps); a later pass
  drops tombstones (keyed or not) once now >= the horizon, as Kafka. A pass reports the
  earliest horizon it left behind, so the manager can run a pass for expired
  tombstones alone when no log is dirty enough (Kafka's ``latestDeleteHorizon``);
- control batches (transaction markers) and transactional batches, byte for
  byte, neither deduplicated nor entered in the key map. Kafka's cleaner also
  drops the records of aborted transactions and, after
  ``delete.retention.ms``, the markers; samsa keeps both, so every abort
  marker stays in the output and the sources' ``.txnindex`` entries are copied
  into the cleaned segment (as Kafka carries the index over), keeping
  read_committed reads of cleaned segments right;
- a rewritten batch keeps its base offset, producer id, epoch, base sequence,
  partition leader epoch, codec and timestamp type; its records keep their
  offset deltas from the base offset;
- a batch left without records is dropped, unless it is the last batch of its
  producer id (the producer state's last offset at plan time): that one stays
  as a header-only batch of 0 records with its original offsets and sequence,
  as Kafka keeps it, so an idempotent producer's state still rebuilds from the
  log;
- a rewritten batch keeps its original last offset delta even when its last
  records go (as Kafka's cleaner does), so the batch still ends where the
  producer's sequence says it ends;
- a batch from which nothing is removed is copied byte for byte.

Memory: the key map holds at most ``log.cleaner.dedupe.buffer.size //``
:data:`BYTES_PER_MAP_ENTRY` keys. When the dirty records hold more, the map
stops at a batch boundary and the pass cleans up to there; the rest stays dirty
for the next pass, as Kafka does.

Crash safety: the output is complete and fsynced before any file is renamed;
:meth:`~samsa.storage.log.Log.replace_segments` gives the rename order and
:mod:`samsa.storage.log_loader` completes (``.swap``) or drops (``.cleaned``)
what a crash left.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import logging
import os
import struct
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from samsa.errors import CorruptRecordError, StorageError
from samsa.records.batch import (
    CONTROL_BIT,
    CRC_POS,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    NO_PRODUCER_ID,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    RecordBatchView,
    batch_size_at,
    compute_crc,
)
from samsa.records.builder import RecordBatchBuilder
from samsa.records.reader import iter_records, records_section
from samsa.records.record import Record
from samsa.records.varint import MAX_VARINT_BYTES, decode_varint
from samsa.storage.checkpoint import fsync_dir
from samsa.storage.index import TimeIndex
from samsa.storage.log import Log
from samsa.storage.log_config import LogConfig
from samsa.storage.segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    segment_file_name,
)
from samsa.storage.txn_index import AbortedTxn

log = logging.getLogger(__name__)

BYTES_PER_MAP_ENTRY: Final = 128
"""What one key-map entry costs on CPython 3.11, measured: ~123 bytes (the dict's
slot and index share, a 16-byte ``bytes`` digest, an ``int`` offset). Kafka's
off-heap map needs 24; a given buffer holds about 5x fewer keys here."""

_READ_CHUNK: Final = 1 << 20
_WRITE_CHUNK: Final = 1 << 20
_MAX_RELATIVE_OFFSET: Final = 2**31 - 1
_U32 = struct.Struct(">I")


class CleanerAbortedError(StorageError):
    """Raised on the cleaner's worker thread when its pass is cancelled (shutdown)."""


# -- how dirty a log is ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LogToClean:
    """How dirty a compacted log is (Kafka's ``LogToClean``); bytes are whole segments."""

    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    dirty_bytes: int
    max_compaction_delay_ms: int
    """How long past ``max.compaction.lag.ms`` the oldest dirty record is (0: not past)."""

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0

    def is_cleanable(self, min_cleanable_dirty_ratio: float) -> bool:
        """Dirty bytes exist and the ratio reaches the minimum, or the max lag forces it."""
        if self.dirty_bytes <= 0:
            return False
        return self.max_compaction_delay_ms > 0 or self.dirty_ratio >= min_cleanable_dirty_ratio


def effective_first_dirty_offset(partition_log: Log, checkpointed: int | None) -> int:
    """The checkpointed first dirty offset, or the log start if it is missing or out of range."""
    if (
        checkpointed is None
        or checkpointed < partition_log.log_start_offset
        or checkpointed > partition_log.log_end_offset
    ):
        return partition_log.log_start_offset
    return checkpointed


def measure_dirty(partition_log: Log, first_dirty_offset: int, now: int) -> LogToClean:
    """Clean and dirty bytes of the segments below the first uncleanable offset."""
    config = partition_log.config
    segments = partition_log.segments
    high_watermark = partition_log.high_watermark
    lag_cutoff = now - config.min_compaction_lag_ms
    clean_bytes = dirty_bytes = 0
    earliest_dirty: int | None = None
    first_uncleanable = segments[-1].base_offset
    for segment, following in itertools.pairwise(segments):
        next_base = following.base_offset
        if next_base > high_watermark:
            first_uncleanable = segment.base_offset
            break
        if next_base <= first_dirty_offset:
            clean_bytes += segment.size
            continue
        if config.min_compaction_lag_ms > 0 and segment.largest_timestamp > lag_cutoff:
            first_uncleanable = segment.base_offset
            break
        dirty_bytes += segment.size
        first_timestamp = segment.rolling_base_timestamp
        if first_timestamp is not None and first_timestamp > 0:
            earliest_dirty = (
                first_timestamp if earliest_dirty is None else min(earliest_dirty, first_timestamp)
            )
    delay = 0
    if earliest_dirty is not None:
        delay = max(0, now - config.max_compaction_lag_ms - earliest_dirty)
    return LogToClean(first_dirty_offset, first_uncleanable, clean_bytes, dirty_bytes, delay)


# -- a pass's plan, output and result ----------------------------------------------


@dataclass(slots=True)
class _Source:
    """A segment to clean, as the plan saw it."""

    segment: LogSegment
    base_offset: int
    next_offset: int
    """The following segment's base: no offset here reaches it."""
    size: int
    index_entries: int
    map_from: int
    """File position where its dirty records start; -1 if it is all clean."""
    fd: int
    aborted: list[AbortedTxn]
    """Its ``.txnindex`` entries, read on the owner at plan time."""


@dataclass(slots=True)
class CleaningPlan:
    """What one pass cleans, snapshotted on the log's owner; the worker reads only this."""

    directory: Path
    config: LogConfig
    now: int
    dirtiness: LogToClean
    sources: list[_Source]
    producer_last_offsets: dict[int, int]
    max_map_keys: int
    _closed: bool = False

    def close(self) -> None:
        """Close the duplicated descriptors (after the worker is done with them)."""
        if not self._closed:
            self._closed = True
            for source in self.sources:
                os.close(source.fd)


@dataclass(slots=True)
class _Stats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_removed: int = 0
    earliest_delete_horizon: int | None = None

    def saw_delete_horizon(self, horizon: int) -> None:
        if self.earliest_delete_horizon is None or horizon < self.earliest_delete_horizon:
            self.earliest_delete_horizon = horizon


@dataclass(slots=True)
class CleanedGroup:
    """Consecutive old segments and the one cleaned segment replacing them (None: unchanged)."""

    old: list[LogSegment]
    old_sizes: list[int]
    new: LogSegment | None


@dataclass(slots=True)
class CleanedOutput:
    """The worker's output: cleaned groups not yet swapped in."""

    groups: list[CleanedGroup]
    end_offset: int
    """The first offset the key map did not reach: the next pass's first dirty offset."""
    stats: _Stats = field(default_factory=_Stats)

    def discard(self) -> None:
        """Delete the cleaned files (blocking)."""
        for group in self.groups:
            if group.new is not None:
                group.new.delete_files()
                group.new = None


@dataclass(frozen=True, slots=True)
class CleanResult:
    """What a pass did."""

    first_dirty_offset: int
    next_dirty_offset: int
    segments_cleaned: int
    segments_written: int
    bytes_read: int
    bytes_written: int
    records_read: int
    records_removed: int
    earliest_delete_horizon: int | None
    """The earliest delete horizon of the tombstones kept (None: none kept)."""


# -- the cleaner -----------------------------------------------------------------------


class LogCleaner:
    """Cleans one compacted log per pass; stateless between passes (the manager keeps offsets).

    :meth:`plan` and :meth:`swap` run on the log's owner; :meth:`clean_segments`
    is blocking and may run on any thread (it touches only the plan and its own
    files). One pass per log at a time: two would write the same ``.cleaned``
    files (the log manager runs one pass at a time).
    """

    def __init__(self, dedupe_buffer_size: int = 134_217_728) -> None:
        self.dedupe_buffer_size = dedupe_buffer_size
        self.max_map_keys = max(1, dedupe_buffer_size // BYTES_PER_MAP_ENTRY)

    async def clean(
        self,
        partition_log: Log,
        first_dirty_offset: int | None,
        *,
        force: bool = False,
        still_current: Callable[[], bool] | None = None,
    ) -> CleanResult | None:
        """One pass over ``partition_log``, the heavy part on a worker thread.

        ``first_dirty_offset`` is the checkpointed one (None: the log start).
        Returns None when nothing is dirty (with ``force``: nothing cleanable),
        or when the log changed under the pass or ``still_current()`` says it is
        no longer wanted (the output is dropped). Cancelling stops the worker
        at its next batch and removes its files.
        """
        plan = self.plan(partition_log, first_dirty_offset, force=force)
        if plan is None:
            return None
        abort = threading.Event()
        try:
            worker = asyncio.ensure_future(asyncio.to_thread(self.clean_segments, plan, abort))
            try:
                output = await asyncio.shield(worker)
            except asyncio.CancelledError:
                abort.set()
                with contextlib.suppress(BaseException):
                    await worker  # its files are removed when it stops
                raise
        finally:
            plan.close()
        result = None
        if still_current is None or still_current():
            result = self.swap(partition_log, plan, output)
        if result is None:
            await asyncio.to_thread(output.discard)
        else:
            await asyncio.to_thread(fsync_dir, partition_log.directory)  # the renames, durably
        return result

    def clean_blocking(
        self, partition_log: Log, first_dirty_offset: int | None, *, force: bool = False
    ) -> CleanResult | None:
        """:meth:`clean` on the calling thread (tools and tests; blocks for the whole pass)."""
        plan = self.plan(partition_log, first_dirty_offset, force=force)
        if plan is None:
            return None
        try:
            output = self.clean_segments(plan)
        finally:
            plan.close()
        result = self.swap(partition_log, plan, output)
        if result is None:
            output.discard()
        else:
            fsync_dir(partition_log.directory)
        return result

    # -- step 1: plan (owner) ---------------------------------------------------------
    def plan(
        self, partition_log: Log, first_dirty_offset: int | None, *, force: bool = False
    ) -> CleaningPlan | None:
        """Snapshot what a pass would clean; None if nothing is dirty and cleanable.

        With ``force`` a pass without dirty records is planned too: it copies the
        clean segments again to drop tombstones whose horizon has passed.
        """
        now = partition_log.clock()
        first_dirty = effective_first_dirty_offset(partition_log, first_dirty_offset)
        dirtiness = measure_dirty(partition_log, first_dirty, now)
        if dirtiness.dirty_bytes <= 0 and not force:
            return None
        segments = partition_log.segments
        sources: list[_Source] = []
        try:
            for segment, following in itertools.pairwise(segments):
                if segment.base_offset >= dirtiness.first_uncleanable_offset:
                    break
                next_offset = following.base_offset
                if next_offset <= first_dirty:
                    map_from = -1
                elif segment.base_offset >= first_dirty:
                    map_from = 0
                else:
                    found = segment.position_of(first_dirty)
                    map_from = segment.size if found is None else found.position
                entries = max(segment.offset_index.entries, segment.time_index.entries)
                aborted = segment.txn_index.entries()
                sources.append(
                    _Source(segment, segment.base_offset, next_offset, segment.size, entries,
                            map_from, segment.open_reader(), aborted)
                )  # fmt: skip
        except BaseException:
            for source in sources:
                os.close(source.fd)
            raise
        if not sources:
            return None
        producers = {
            entry.producer_id: entry.last_offset
            for entry in partition_log.active_producers()
            if entry.last_offset >= 0
        }
        return CleaningPlan(partition_log.directory, partition_log.config, now, dirtiness,
                            sources, producers, self.max_map_keys)  # fmt: skip

    # -- step 2: clean (worker thread) ------------------------------------------------------
    def clean_segments(
        self, plan: CleaningPlan, abort: threading.Event | None = None
    ) -> CleanedOutput:
        """Build the key map and write the cleaned ``.cleaned`` segments (blocking)."""
        key_map, end_offset = _build_key_map(plan, abort)
        output = CleanedOutput([], end_offset)
        group: _GroupWriter | None = None
        try:
            for source in plan.sources:
                if source.base_offset >= end_offset:
                    break
                if group is not None and not group.fits(source):
                    output.groups.append(group.finish())
                    group = None
                if group is None:
                    group = _GroupWriter(plan, output.stats)
                group.add(source, key_map, end_offset, abort)
            if group is not None:
                output.groups.append(group.finish())
                group = None
        except BaseException:
            if group is not None:
                group.abandon()
            output.discard()
            raise
        return output

    # -- step 3: swap (owner) -----------------------------------------------------------
    def swap(
        self, partition_log: Log, plan: CleaningPlan, output: CleanedOutput
    ) -> CleanResult | None:
        """Swap the cleaned segments in; None (nothing changed) if the log moved on.

        Every old segment must still be in the log, unchanged in size and not
        active, in the order cleaned; the caller then discards the output.
        """
        current = partition_log.segments
        where = {id(segment): i for i, segment in enumerate(current)}
        for group in output.groups:
            for k, (segment, size) in enumerate(zip(group.old, group.old_sizes, strict=True)):
                i = where.get(id(segment), -1)
                first = where.get(id(group.old[0]), -1)
                if i < 0 or i != first + k or i == len(current) - 1 or segment.size != size:
                    log.info("log %s changed during cleaning; dropping the cleaned output",
                             partition_log.directory.name)  # fmt: skip
                    return None
        written = 0
        for group in output.groups:
            if group.new is not None:
                if not partition_log.replace_segments(group.old, [group.new]):
                    raise StorageError(f"cleaned segments of {partition_log} no longer fit")
                written += 1
        stats = output.stats
        result = CleanResult(
            first_dirty_offset=plan.dirtiness.first_dirty_offset,
            next_dirty_offset=max(output.end_offset, plan.dirtiness.first_dirty_offset),
            segments_cleaned=sum(len(g.old) for g in output.groups if g.new is not None),
            segments_written=written,
            bytes_read=stats.bytes_read,
            bytes_written=stats.bytes_written,
            records_read=stats.records_read,
            records_removed=stats.records_removed,
            earliest_delete_horizon=stats.earliest_delete_horizon,
        )
        log.info(
            "cleaned %s up to offset %d: %d segment(s) into %d, %d -> %d bytes, "
            "%d of %d records removed",
            partition_log.directory.name, result.next_dirty_offset, result.segments_cleaned,
            written, result.bytes_read, result.bytes_written, result.records_removed,
            result.records_read,
        )  # fmt: skip
        return result


# -- worker-side helpers -------------------------------------------------------------------


def _key_digest(key: bytes) -> bytes:
    return hashlib.blake2b(key, digest_size=16).digest()


def _check_abort(abort: threading.Event | None) -> None:
    if abort is not None and abort.is_set():
        raise CleanerAbortedError("cleaning cancelled")


def _build_key_map(
    plan: CleaningPlan, abort: threading.Event | None
) -> tuple[dict[bytes, int], int]:
    """Last offset of every key among the dirty records, and where the map stopped."""
    key_map: dict[bytes, int] = {}
    first_dirty = plan.dirtiness.first_dirty_offset
    for source in plan.sources:
        if source.map_from < 0:
            continue
        for _, batch in _read_batches(source.fd, source.map_from, source.size):
            _check_abort(abort)
            if batch.last_offset < first_dirty or batch.is_control or batch.is_transactional:
                continue
            if key_map and len(key_map) + batch.record_count > plan.max_map_keys:
                return key_map, batch.base_offset
            for offset, key, _ in _scan_records(batch):
                if key is not None:
                    key_map[_key_digest(key)] = offset
    return key_map, plan.dirtiness.first_uncleanable_offset


class _GroupWriter:
    """Cleans consecutive sources into one ``.cleaned`` segment.

    A source joins the group while the output so far plus the source's own
    size fits ``segment.bytes`` (and the index entries and offset span fit), so
    segments emptied by cleaning merge with their neighbours at once. A group of
    one source from which nothing is removed writes nothing: it stays as it is.
    """

    def __init__(self, plan: CleaningPlan, stats: _Stats) -> None:
        self.plan, self.stats = plan, stats
        self.sources: list[_Source] = []
        self.out: LogSegment | None = None
        self.size = 0
        self.index_entries = 0
        self._pending: list[bytes | memoryview] = []
        self._pending_size = 0

    def fits(self, source: _Source) -> bool:
        config = self.plan.config
        return (
            self.size + source.size <= config.segment_bytes
            and self.index_entries + source.index_entries
            <= config.segment_index_bytes // TimeIndex.ENTRY.size
            and source.next_offset - 1 - self.sources[0].base_offset <= _MAX_RELATIVE_OFFSET
        )

    def add(
        self,
        source: _Source,
        key_map: dict[bytes, int],
        end_offset: int,
        abort: threading.Event | None,
    ) -> None:
        if self.sources and self.out is None:
            self._open()  # the lone source so far was unchanged: copy it as it is
            _copy_range(self.sources[0].fd, 0, self.sources[0].size, self)
        self.sources.append(source)
        self.stats.bytes_read += source.size
        self.index_entries += source.index_entries
        for position, batch in _read_batches(source.fd, 0, source.size):
            _check_abort(abort)
            kept = _filter_batch(self.plan, batch, key_map, end_offset, self.stats)
            if self.out is None:
                if kept is batch.buffer:
                    self.size = position + batch.size
                    continue
                self._open()
                _copy_range(source.fd, 0, position, self)
            if kept is not None:
                self.write(kept)

    def _open(self) -> None:
        plan, base = self.plan, self.sources[0].base_offset
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            path = plan.directory / segment_file_name(base, suffix + CLEANED_SUFFIX)
            path.unlink(missing_ok=True)  # a leftover would be appended to
        self.out = LogSegment(
            plan.directory, base, plan.config, created_ms=plan.now, suffix=CLEANED_SUFFIX
        )
        self.size = 0

    def write(self, data: bytes | memoryview) -> None:
        self._pending.append(data)
        self._pending_size += len(data)
        self.size += len(data)
        if self._pending_size >= _WRITE_CHUNK:
            self._flush_pending()

    def _flush_pending(self) -> None:
        if self._pending and self.out is not None:
            self.out.append(b"".join(self._pending))
        self._pending, self._pending_size = [], 0

    def finish(self) -> CleanedGroup:
        """Finalize the cleaned segment: indexes trimmed, everything fsynced."""
        group = CleanedGroup(
            [s.segment for s in self.sources], [s.size for s in self.sources], None
        )
        if self.out is None:
            return group
        try:
            self._flush_pending()
            for source in self.sources:
                for txn in source.aborted:
                    self.out.append_aborted_txn(txn)
            self.out.on_become_inactive()
            self.out.flush()
        except BaseException:
            self.abandon()
            raise
        self.stats.bytes_written += self.out.size
        group.new, self.out = self.out, None
        return group

    def abandon(self) -> None:
        if self.out is not None:
            self.out.delete_files()
            self.out = None


def _filter_batch(
    plan: CleaningPlan,
    batch: RecordBatchView,
    key_map: dict[bytes, int],
    end_offset: int,
    stats: _Stats,
) -> bytes | memoryview | None:
    """The batch to write in place of ``batch``: itself, a rewrite, or None (dropped)."""
    if batch.is_control or batch.is_transactional:
        return batch.buffer
    now = plan.now
    horizon = batch.base_timestamp if batch.has_delete_horizon else None
    keep: list[bool] = []
    has_tombstone = False
    for offset, key, has_value in _scan_records(batch):
        kept = _keep(offset, key, has_value, key_map, end_offset, horizon, now)
        keep.append(kept)
        has_tombstone = has_tombstone or (kept and not has_value)
    kept_count = sum(keep)
    stats.records_read += len(keep)
    stats.records_removed += len(keep) - kept_count
    pid = batch.producer_id
    producers_last = (
        pid != NO_PRODUCER_ID and plan.producer_last_offsets.get(pid) == batch.last_offset
    )
    if not kept_count:
        if not producers_last:
            return None
        if batch.record_count == 0:
            return batch.buffer
        return _header_only_batch(batch, batch.base_offset, batch.last_offset_delta,
                                  batch.base_sequence)  # fmt: skip
    removed = kept_count < len(keep)
    if has_tombstone:
        if horizon is None:
            horizon = now + plan.config.delete_retention_ms
            removed = True  # the batch is rewritten to carry its horizon
        stats.saw_delete_horizon(horizon)
    if not removed:
        return batch.buffer
    retained = [r for r, kept in zip(iter_records(batch), keep, strict=True) if kept]
    return _rebuild(batch, retained, horizon)


def _keep(  # noqa: PLR0917 (a hot per-record helper: positional on purpose)
    offset: int,
    key: bytes | None,
    has_value: bool,
    key_map: dict[bytes, int],
    end_offset: int,
    horizon: int | None,
    now: int,
) -> bool:
    if offset >= end_offset:
        return True  # past the key map: nothing is known about later values
    if not has_value and horizon is not None and now >= horizon:
        return False
    if key is None:
        return True
    return offset >= key_map.get(_key_digest(key), -1)


def _scan_records(batch: RecordBatchView) -> Iterator[tuple[int, bytes | None, bool]]:
    """``(offset, key, has a value)`` of each record, skipping values and headers.

    The cleaner's per-record work: much cheaper than decoding whole records,
    which only batches being rewritten need. Lengths are checked against the
    record before slicing; full validation is :func:`iter_records`' job.
    """
    buf = records_section(batch)
    base_offset = batch.base_offset
    position = 0
    for _ in range(batch.record_count):
        length, position = decode_varint(buf, position, MAX_VARINT_BYTES)
        end = position + length
        if length < 6 or end > len(buf):
            raise CorruptRecordError(f"record length {length} does not fit in its batch")
        _, cursor = decode_varint(buf, position + 1)  # after attributes: timestamp delta
        offset_delta, cursor = decode_varint(buf, cursor, MAX_VARINT_BYTES)
        key_length, cursor = decode_varint(buf, cursor, MAX_VARINT_BYTES)
        key = None
        if key_length >= 0:
            key = buf[cursor : cursor + key_length]
            cursor += key_length
        value_length, cursor = decode_varint(buf, cursor, MAX_VARINT_BYTES)
        if key_length < -1 or value_length < -1 or cursor > end:
            raise CorruptRecordError("record key or value length does not fit in the record")
        yield base_offset + offset_delta, key, value_length >= 0
        position = end


def _rebuild(batch: RecordBatchView, records: list[Record], delete_horizon_ms: int | None) -> bytes:
    """``records`` re-encoded as ``batch`` was: same offsets, producer, codec, timestamp type."""
    builder = RecordBatchBuilder(
        compression=batch.compression,
        base_offset=batch.base_offset,
        partition_leader_epoch=batch.partition_leader_epoch,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        timestamp_type=batch.timestamp_type,
        delete_horizon_ms=delete_horizon_ms,
        last_offset_delta=batch.last_offset_delta,
    )
    base = batch.base_offset
    for record in records:
        builder.append(record.value, key=record.key, headers=record.headers,
                       timestamp=record.timestamp, offset_delta=record.offset - base)  # fmt: skip
    return builder.build()


def _header_only_batch(
    batch: RecordBatchView, base_offset: int, last_offset_delta: int, base_sequence: int
) -> bytes:
    """A batch of no records standing for (part of) ``batch``, for its producer's state."""
    attributes = batch.attributes & (TIMESTAMP_TYPE_BIT | TRANSACTIONAL_BIT | CONTROL_BIT)
    buf = bytearray(HEADER_SIZE)
    HEADER_STRUCT.pack_into(
        buf, 0, base_offset, HEADER_SIZE - LOG_OVERHEAD, batch.partition_leader_epoch,
        MAGIC, 0, attributes, last_offset_delta, batch.max_timestamp, batch.max_timestamp,
        batch.producer_id, batch.producer_epoch, base_sequence, 0,
    )  # fmt: skip
    _U32.pack_into(buf, CRC_POS, compute_crc(buf))
    return bytes(buf)


def _pread_fully(fd: int, length: int, position: int) -> bytes:
    chunks: list[bytes] = []
    while length > 0:
        chunk = os.pread(fd, length, position)
        if not chunk:
            break
        chunks.append(chunk)
        position += len(chunk)
        length -= len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


class _ChunkedReader:
    """Reads a file ``_READ_CHUNK`` bytes at a time and hands out views of what it read."""

    def __init__(self, fd: int, end: int) -> None:
        self.fd, self.end = fd, end
        self.buffer, self.start = b"", 0

    def view(self, position: int, length: int) -> memoryview:
        offset = position - self.start
        if offset < 0 or offset + length > len(self.buffer):
            want = min(max(length, _READ_CHUNK), self.end - position)
            self.buffer, self.start, offset = _pread_fully(self.fd, want, position), position, 0
            if len(self.buffer) < length:
                raise CorruptRecordError(f"segment ends inside the batch at byte {position}")
        return memoryview(self.buffer)[offset : offset + length]


def _read_batches(fd: int, start: int, end: int) -> Iterator[tuple[int, RecordBatchView]]:
    """``(position, batch)`` of every batch in ``[start, end)``, CRC-checked.

    Raises :class:`CorruptRecordError` for a torn, short or failing batch: the
    segments were whole when planned, so that means the log changed or is damaged.
    """
    reader = _ChunkedReader(fd, end)
    position = start
    while position < end:
        if end - position < LOG_OVERHEAD:
            raise CorruptRecordError(f"segment ends inside the batch at byte {position}")
        size = batch_size_at(reader.view(position, LOG_OVERHEAD))
        if size is None or position + size > end:
            raise CorruptRecordError(f"segment ends inside the batch at byte {position}")
        batch = RecordBatchView(reader.view(position, size))
        batch.validate()
        yield position, batch
        position += size


def _copy_range(fd: int, start: int, end: int, group: _GroupWriter) -> None:
    """Write the source's batches in ``[start, end)`` to ``group`` unchanged."""
    for _, batch in _read_batches(fd, start, end):
        group.write(batch.buffer)
