"""One log segment: a ``.log`` file of record batches with its offset, time and txn indexes.

The file is named for the segment's base offset (20 digits) and holds
RecordBatch v2 bytes concatenated, exactly as Kafka writes them. Appends are
one ``os.pwrite`` of already-validated batch bytes; reads return a
:class:`FileRegion` for ``os.sendfile``. Index entries are added every
``index.interval.bytes`` of appended data. Indexes of inactive segments are
opened on first use (Kafka's lazy indexes), so a log with many segments maps
only what it reads. The ``.txnindex`` (aborted transactions whose abort marker
lies here, :mod:`samsa.storage.txn_index`) exists only once a marker aborts one.

An append is all-or-nothing. The indexes it may write to are open before the
batch bytes are written (a new segment opens all its files in
:meth:`LogSegment.create`); the bytes go with ``os.pwrite`` at the segment's
size, never ``O_APPEND``, so bytes a failed append left behind can never sit
under a later batch; and when the write or an index entry fails (ENOSPC,
EMFILE, a short write), the file and both indexes are cut back to where they
were and :class:`~samsa.errors.KafkaStorageError` is raised. If even that cut
fails, the next append retries it before writing.

Not thread-safe: the owning :class:`~samsa.storage.log.Log` calls every method
from its one writer, except :meth:`flush`, which may run on a worker thread.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from samsa.errors import CorruptRecordError, KafkaStorageError, StorageError
from samsa.records.batch import (
    ATTRIBUTES_POS,
    CONTROL_BIT,
    HEADER_SIZE,
    LAST_OFFSET_DELTA_POS,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_POS,
    MAX_TIMESTAMP_POS,
    MIN_BATCH_LENGTH,
    RecordBatchView,
    iter_batches,
)
from samsa.records.reader import iter_records
from samsa.storage.index import OffsetIndex, TimeIndex
from samsa.storage.log_config import LogConfig
from samsa.storage.txn_index import AbortedTxn, TransactionIndex

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
"""The log cleaner's output while it is being written (removed at load)."""
SWAP_SUFFIX = ".swap"
"""Cleaned output ready to replace the segments it covers (the swap completes at load)."""

_SCAN_HEADER = struct.Struct(">qi")  # baseOffset, batchLength
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_RECOVERY_CHUNK = 1 << 20
_MAX_RECOVERY_CHUNK = 64 << 20
_MAX_RELATIVE_OFFSET = 2**31 - 1


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


@dataclass(frozen=True, slots=True)
class FileRegion:
    """``length`` bytes at ``position`` of an open file: what ``os.sendfile`` sends."""

    fd: int
    position: int
    length: int

    def read(self) -> bytes:
        """The region's bytes (tests and non-zero-copy paths)."""
        chunks: list[bytes] = []
        position, remaining = self.position, self.length
        while remaining > 0:
            chunk = os.pread(self.fd, remaining, position)
            if not chunk:
                break
            chunks.append(chunk)
            position += len(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)


EMPTY_REGION = FileRegion(-1, 0, 0)


@dataclass(frozen=True, slots=True)
class LogOffsetMetadata:
    """Where an offset lives: the segment's base offset and the batch's file position."""

    offset: int
    segment_base_offset: int = -1
    position: int = -1


@dataclass(frozen=True, slots=True)
class FetchData:
    """A read's result: where the first batch read lives and the bytes to send."""

    offset_metadata: LogOffsetMetadata
    region: FileRegion
    aborted_transactions: list[tuple[int, int]] | None = None
    """``(producer id, first offset)`` of aborts overlapping the read (read_committed only)."""


@dataclass(frozen=True, slots=True)
class _BatchPosition:
    position: int
    base_offset: int
    last_offset: int
    size: int


class LogSegment:
    """A ``.log`` file and its indexes, named for ``base_offset``."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        *,
        created_ms: int,
        rolling_jitter_ms: int = 0,
        suffix: str = "",
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        self.created_ms = created_ms
        self.rolling_jitter_ms = rolling_jitter_ms
        self.log_path = directory / segment_file_name(base_offset, LOG_SUFFIX + suffix)
        self._index_path = directory / segment_file_name(base_offset, INDEX_SUFFIX + suffix)
        self._time_index_path = directory / segment_file_name(
            base_offset, TIME_INDEX_SUFFIX + suffix
        )
        self.indexes_existed = self._index_path.exists() and self._time_index_path.exists()
        self.txn_index = TransactionIndex(
            directory / segment_file_name(base_offset, TXN_INDEX_SUFFIX + suffix)
        )
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.fstat(self._fd).st_size
        self._cut_pending = False  # a failed append's bytes past ``size`` are still to be cut
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self._bytes_since_last_index_entry = 0
        self._max_timestamp: int | None = None  # loaded lazily from the time index
        self._offset_of_max_timestamp = base_offset
        self.rolling_base_timestamp: int | None = None
        if self.size >= HEADER_SIZE:
            first_max = os.pread(self._fd, 8, MAX_TIMESTAMP_POS)
            self.rolling_base_timestamp = _I64.unpack(first_max)[0] if len(first_max) == 8 else None
        self.closed = False

    @classmethod
    def create(
        cls, directory: Path, base_offset: int, config: LogConfig, *, created_ms: int
    ) -> LogSegment:
        """A new, empty segment with every file an append needs already open (a roll).

        Raises :class:`~samsa.errors.KafkaStorageError` naming the file that could
        not be opened; the files it created are removed again.
        """
        paths = [
            directory / segment_file_name(base_offset, suffix)
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)
        ]
        existed = [path.exists() for path in paths]
        segment: LogSegment | None = None
        opening = paths[0]
        try:
            segment = cls(directory, base_offset, config, created_ms=created_ms)
            opening = paths[1]
            segment.offset_index  # noqa: B018 (opens it)
            opening = paths[2]
            segment._load_max_timestamp()  # opens the time index
        except OSError as exc:
            if segment is not None:
                segment.discard()
            for path, was_there in zip(paths, existed, strict=True):
                if not was_there:
                    path.unlink(missing_ok=True)
            raise KafkaStorageError(f"cannot open {opening}: {exc}") from exc
        return segment

    # -- indexes -----------------------------------------------------------
    @property
    def offset_index(self) -> OffsetIndex:
        if self._offset_index is None:
            self._offset_index = OffsetIndex(
                self._index_path, self.base_offset, self.config.segment_index_bytes, writable=True
            )
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if self._time_index is None:
            self._time_index = TimeIndex(
                self._time_index_path,
                self.base_offset,
                self.config.segment_index_bytes,
                writable=True,
            )
        return self._time_index

    def _load_max_timestamp(self) -> None:
        if self._max_timestamp is None:
            timestamp, offset = self.time_index.last_entry
            self._max_timestamp, self._offset_of_max_timestamp = timestamp, offset

    @property
    def max_timestamp(self) -> int:
        """Largest batch max-timestamp seen (-1 if none): exact while active, indexed after."""
        self._load_max_timestamp()
        assert self._max_timestamp is not None
        return self._max_timestamp

    @property
    def offset_of_max_timestamp(self) -> int:
        self._load_max_timestamp()
        return self._offset_of_max_timestamp

    @property
    def largest_timestamp(self) -> int:
        """What time retention compares: the max timestamp, else the file's mtime."""
        timestamp = self.max_timestamp
        if timestamp >= 0:
            return timestamp
        return int(os.fstat(self._fd).st_mtime * 1000)

    # -- append -----------------------------------------------------------
    def append(
        self,
        data: bytes | bytearray | memoryview,
        batches: list[RecordBatchView] | None = None,
    ) -> None:
        """Append whole, validated batches whose offsets are already assigned.

        ``batches`` are the views over ``data`` when the caller has them (saves a
        parse). All or nothing: on any failure the segment is left as it was and
        ``KafkaStorageError`` is raised (``OSError`` is its cause).
        """
        view = memoryview(data)
        if not view.nbytes:
            return
        if batches is None:
            batches = list(iter_batches(view))
        position = self.size
        offset_index, time_index = self._offset_index, self._time_index
        if offset_index is None or time_index is None or self._cut_pending:
            try:
                if self._cut_pending:
                    os.ftruncate(self._fd, position)
                    self._cut_pending = False
                # Open (lazily loaded) indexes now: once bytes are written it is too late.
                self._load_max_timestamp()
                offset_index, time_index = self.offset_index, self.time_index
            except OSError as exc:
                raise KafkaStorageError(f"append to {self.log_path} failed: {exc}") from exc
        index_entries = offset_index.entries, time_index.entries
        saved = (self._max_timestamp, self._offset_of_max_timestamp,
                 self._bytes_since_last_index_entry, self.rolling_base_timestamp)  # fmt: skip
        try:
            self._write_at(view, position)
            if position == 0:
                self.rolling_base_timestamp = batches[0].max_timestamp
            end = position
            for batch in batches:
                self._after_append(batch.last_offset, batch.max_timestamp, end, batch.size)
                end += batch.size
        except (OSError, StorageError) as exc:
            (self._max_timestamp, self._offset_of_max_timestamp,
             self._bytes_since_last_index_entry, self.rolling_base_timestamp) = saved  # fmt: skip
            offset_index.truncate_to_entries(index_entries[0])
            time_index.truncate_to_entries(index_entries[1])
            try:
                os.ftruncate(self._fd, position)
            except OSError:
                self._cut_pending = True  # reads stop at ``size``; the next append cuts first
            raise KafkaStorageError(f"append to {self.log_path} failed: {exc}") from exc
        self.size = end

    def _write_at(self, view: memoryview, position: int) -> None:
        written = os.pwrite(self._fd, view, position)
        while written < view.nbytes:
            more = os.pwrite(self._fd, view[written:], position + written)
            if more <= 0:
                raise OSError(f"short write at {position + written} of {self.log_path}")
            written += more

    def _after_append(self, last_offset: int, max_timestamp: int, position: int, size: int) -> None:
        self._load_max_timestamp()
        assert self._max_timestamp is not None
        if max_timestamp > self._max_timestamp:
            self._max_timestamp = max_timestamp
            self._offset_of_max_timestamp = last_offset
        if self._bytes_since_last_index_entry > self.config.index_interval_bytes:
            # An active segment rolls before its indexes fill; a cleaned or recovered one
            # may not fit them all, and a sparser index only means a longer scan.
            if not self.offset_index.is_full:
                self.offset_index.append(last_offset, position)
            if not self.time_index.is_full:
                self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += size

    # -- scanning -----------------------------------------------------------
    def _batch_positions(self, start: int, end: int | None = None) -> Iterator[_BatchPosition]:
        """Headers of the batches from file position ``start`` (framing only, no CRC)."""
        end = self.size if end is None else end
        position = start
        while end - position >= LOG_OVERHEAD:
            header = os.pread(self._fd, LAST_OFFSET_DELTA_POS + 4, position)
            if len(header) < LAST_OFFSET_DELTA_POS + 4:
                return
            base_offset, batch_length = _SCAN_HEADER.unpack_from(header)
            size = batch_length + LOG_OVERHEAD
            if batch_length < MIN_BATCH_LENGTH or position + size > end:
                return
            (delta,) = _I32.unpack_from(header, LAST_OFFSET_DELTA_POS)
            yield _BatchPosition(position, base_offset, base_offset + delta, size)
            position += size

    def batch_headers(self, from_offset: int = 0) -> Iterator[RecordBatchView]:
        """Views of the batches ending at or after ``from_offset`` (no CRC check).

        Header-only, except control batches, which come whole: their one record
        says whether a transaction committed or aborted.
        """
        start = self._translate_offset(from_offset)
        if start is None:
            return
        for batch in self._batch_positions(start.position):
            header = os.pread(self._fd, HEADER_SIZE, batch.position)
            if (
                len(header) == HEADER_SIZE
                and batch.size > HEADER_SIZE
                and _I16.unpack_from(header, ATTRIBUTES_POS)[0] & CONTROL_BIT
            ):
                header = os.pread(self._fd, batch.size, batch.position)
            yield RecordBatchView(memoryview(header))

    def _translate_offset(self, offset: int, start_position: int = 0) -> _BatchPosition | None:
        """The first batch whose last offset is >= ``offset``, searching from the index."""
        _, position = self.offset_index.lookup(offset)
        for batch in self._batch_positions(max(position, start_position)):
            if batch.last_offset >= offset:
                return batch
        return None

    def read_next_offset(self) -> int:
        """The offset after the last batch (the base offset when empty)."""
        _, position = self.offset_index.last_entry
        next_offset = self.base_offset
        for batch in self._batch_positions(position):
            next_offset = batch.last_offset + 1
        return next_offset

    # -- reads ------------------------------------------------------------
    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_message: bool = False,
    ) -> FetchData | None:
        """Bytes from the batch holding ``start_offset``, at most ``max_size`` of them.

        As Kafka does, the region may end inside a batch (clients drop a partial
        trailing batch); with ``min_one_message`` the first batch is whole even if
        larger than ``max_size``. Returns None if no batch here reaches ``start_offset``.
        """
        batch = self._translate_offset(start_offset)
        if batch is None:
            return None
        limit = self.size if max_position is None else min(max_position, self.size)
        metadata = LogOffsetMetadata(start_offset, self.base_offset, batch.position)
        if batch.position >= limit:
            return FetchData(metadata, EMPTY_REGION)
        adjusted = max(max_size, batch.size) if min_one_message else max_size
        length = min(limit - batch.position, adjusted)
        return FetchData(metadata, FileRegion(self._fd, batch.position, length))

    def open_reader(self) -> int:
        """A duplicate of the ``.log`` file's descriptor, for a reader on another thread.

        The caller owns and closes it; it stays valid whatever happens to this
        segment meanwhile (rename, deletion, close).
        """
        return os.dup(self._fd)

    def read_all(self) -> bytes:
        """The whole ``.log`` file (tests, the cleaner and tools)."""
        return FileRegion(self._fd, 0, self.size).read()

    def position_of(self, offset: int) -> LogOffsetMetadata | None:
        """Where the batch holding ``offset`` starts, or None if it is past this segment."""
        batch = self._translate_offset(offset)
        return (
            None if batch is None else LogOffsetMetadata(offset, self.base_offset, batch.position)
        )

    def fetch_upper_bound_offset(self, position: int, size: int) -> int | None:
        """An offset past every batch a read of ``size`` bytes at ``position`` returned.

        Kafka's ``fetchUpperBoundOffset``: the offset of the first index entry at or
        after the read's end — not the smallest such offset, but one a scan of the
        aborted transaction index can stop at. None when no entry lies there.
        """
        return self.offset_index.first_offset_at_or_after(position + size)

    def append_aborted_txn(self, txn: AbortedTxn) -> None:
        """Record a transaction whose abort marker was just appended here."""
        self.txn_index.append(txn)

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record at or after ``timestamp``, or None."""
        _, indexed_offset = self.time_index.lookup(timestamp)
        start = self._translate_offset(max(indexed_offset, starting_offset))
        if start is None:
            return None
        for batch in self._batch_positions(start.position):
            header = os.pread(self._fd, 8, batch.position + MAX_TIMESTAMP_POS)
            if _I64.unpack(header)[0] < timestamp:
                continue
            view = RecordBatchView(memoryview(os.pread(self._fd, batch.size, batch.position)))
            for record in iter_records(view):
                if record.timestamp >= timestamp and record.offset >= starting_offset:
                    return record.offset, record.timestamp
        return None

    # -- recovery and truncation ---------------------------------------------
    def recover(self, before_cut: Callable[[int, int], None] | None = None) -> int:
        """Rebuild the indexes from the file; cut it at the first invalid batch.

        A batch is valid when it is whole, has magic 2, its CRC matches and its
        offsets follow the previous batch's. Returns the bytes cut off;
        ``before_cut(start, end)`` is called with the byte range about to be
        cut, while it is still in the file (to keep a copy). The
        ``.txnindex`` is rebuilt by the log, which has the producer state it
        needs (:meth:`~samsa.storage.log.Log.rebuild_producer_state`).
        """
        self.offset_index.reset()
        self.time_index.reset()
        self._max_timestamp, self._offset_of_max_timestamp = -1, self.base_offset
        self._bytes_since_last_index_entry = 0
        self.rolling_base_timestamp = None
        valid = 0
        next_offset = self.base_offset
        for batch in self._scan_valid(0):
            if batch.base_offset < next_offset:
                break
            if valid == 0:
                self.rolling_base_timestamp = batch.max_timestamp
            self._after_append(batch.last_offset, batch.max_timestamp, valid, batch.size)
            valid += batch.size
            next_offset = batch.next_offset
        truncated = self.size - valid
        if truncated:
            if before_cut is not None:
                before_cut(valid, self.size)
            os.ftruncate(self._fd, valid)
            self.size = valid
        return truncated

    def _scan_valid(self, start: int) -> Iterator[RecordBatchView]:
        """Whole, CRC-valid batches from ``start``; stops at the first that is not."""
        size = os.fstat(self._fd).st_size
        self.size = size
        buffer = b""
        buffer_start = start
        position = start
        chunk = _RECOVERY_CHUNK
        while position < size:
            offset_in_buffer = position - buffer_start
            if len(buffer) - offset_in_buffer < LOG_OVERHEAD:
                buffer = os.pread(self._fd, chunk, position)
                buffer_start, offset_in_buffer = position, 0
                if len(buffer) < LOG_OVERHEAD:
                    return
            (batch_length,) = _I32.unpack_from(buffer, offset_in_buffer + 8)
            batch_size = batch_length + LOG_OVERHEAD
            if batch_length < MIN_BATCH_LENGTH or position + batch_size > size:
                return  # a torn or garbled length: nothing after it can be trusted
            if len(buffer) - offset_in_buffer < batch_size:
                buffer = os.pread(self._fd, max(batch_size, chunk), position)
                buffer_start, offset_in_buffer = position, 0
                if len(buffer) < batch_size:
                    return
            # Chunks of at least two batches: large batches are read once, not twice.
            chunk = max(chunk, min(2 * batch_size, _MAX_RECOVERY_CHUNK))
            view = RecordBatchView(
                memoryview(buffer)[offset_in_buffer : offset_in_buffer + batch_size]
            )
            if view.buffer[MAGIC_POS] != MAGIC or view.last_offset_delta < 0:
                return
            try:
                view.validate()
            except CorruptRecordError:
                return
            yield view
            position += batch_size

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset``; return bytes removed."""
        batch = self._translate_offset(offset)
        if batch is None:
            return 0
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        removed = self.size - batch.position
        os.ftruncate(self._fd, batch.position)
        self.size = batch.position
        self._max_timestamp = None
        self._bytes_since_last_index_entry = 0
        if self.size == 0:
            self.rolling_base_timestamp = None
        return removed

    def sanity_check(self) -> None:
        """Raise :class:`~samsa.storage.index.IndexCorruptError` if an index cannot be trusted."""
        self.offset_index.sanity_check(self.size)
        self.time_index.sanity_check(self.size)

    # -- rolling ----------------------------------------------------------
    def should_roll(
        self, batch_size: int, max_timestamp: int, last_offset: int, now_ms: int
    ) -> bool:
        """Whether a batch of ``batch_size`` bytes must go to a new segment."""
        if self.size == 0:
            return False
        if self.size > self.config.segment_bytes - batch_size:
            return True
        if self.rolling_base_timestamp is not None and self.rolling_base_timestamp >= 0:
            waited = max_timestamp - self.rolling_base_timestamp
        else:
            waited = now_ms - self.created_ms
        if waited > self.config.segment_ms - self.rolling_jitter_ms:
            return True
        if self.offset_index.is_full or self.time_index.is_full:
            return True
        return last_offset - self.base_offset > _MAX_RELATIVE_OFFSET

    def on_become_inactive(self) -> None:
        """After a roll: record the final max timestamp and trim the indexes."""
        self._load_max_timestamp()
        assert self._max_timestamp is not None
        self.time_index.maybe_append(
            self._max_timestamp, self._offset_of_max_timestamp, skip_full_check=True
        )
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    # -- durability and lifecycle ---------------------------------------------
    def flush(self) -> None:
        """fsync the log and msync the indexes (blocking: run it off the event loop)."""
        if self.closed:
            return
        os.fsync(self._fd)
        if self._offset_index is not None:
            self._offset_index.flush()
        if self._time_index is not None:
            self._time_index.flush()
        self.txn_index.flush()

    def rename_suffix(self, old: str, new: str) -> None:
        """Rename the segment's files from suffix ``old`` to ``new`` (e.g. to ``.deleted``)."""
        renames: list[tuple[Path, Path]] = []
        paths = (self.log_path, self._index_path, self._time_index_path, self.txn_index.path)
        for path in paths:
            if not path.name.endswith(old):
                raise StorageError(f"{path} does not end with {old!r}")
            renames.append((path, path.with_name(path.name[: len(path.name) - len(old)] + new)))
        for old_path, new_path in renames[:3]:
            if old_path.exists():
                os.replace(old_path, new_path)
        self.txn_index.rename_to(renames[3][1])
        self.log_path = renames[0][1]
        self._index_path = renames[1][1]
        self._time_index_path = renames[2][1]
        if self._offset_index is not None:
            self._offset_index.path = self._index_path
        if self._time_index is not None:
            self._time_index.path = self._time_index_path

    def close(self) -> None:
        """Record the final time index entry, trim and close the indexes, close the file.

        Every file is closed even on a full disk: a final time index entry or a
        trim that fails is logged and skipped. The index then lacks the segment's
        last max timestamp (retention by time sees the last indexed one) or ends
        in zeros (loading counts entries, not bytes).
        """
        if self.closed:
            return
        try:
            if self.size:
                self.on_become_inactive()
        except OSError as exc:
            log.warning("closing %s without its final time index entry: %s", self.log_path, exc)
        for index in (self._offset_index, self._time_index):
            if index is not None:
                try:
                    index.close()
                except OSError as exc:
                    log.warning("closing %s untrimmed: %s", index.path, exc)
        self.txn_index.close()
        os.close(self._fd)
        self.closed = True

    def discard(self) -> None:
        """Close every file without trimming or writing anything (the files are about to go)."""
        for index in (self._offset_index, self._time_index):
            if index is not None:
                index.close(trim=False)
        self.txn_index.close()
        if not self.closed:
            os.close(self._fd)
            self.closed = True

    def delete_files(self) -> None:
        """Close and remove the segment's files (after they were renamed ``.deleted``)."""
        self.discard()
        for path in (self.log_path, self._index_path, self._time_index_path):
            path.unlink(missing_ok=True)
        self.txn_index.delete()

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path.name}, size={self.size})"
