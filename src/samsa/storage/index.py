"""Sparse offset and time indexes of one segment, memory-mapped like Kafka's.

``.index`` entries are 8 bytes, ``(relative offset u32, file position u32)``;
``.timeindex`` entries are 12 bytes, ``(timestamp i64, relative offset u32)``;
both big-endian, both strictly increasing in their key. A writable index is
pre-allocated when entries are written, a page first and then doubling up to
``segment.index.bytes`` (an empty index maps nothing, so an idle partition
costs no index memory), and trimmed to its entries when the segment rolls or
closes, so after a crash the file may end in zeros: the number of entries is
found by binary search for the first zero key after entry 0 (keys after entry
0 are never 0), with ``pread`` before mapping, not trusted from the file size.

The mapping holds no file descriptor (:mod:`samsa.storage.file_mapping`;
Python's ``mmap`` keeps one per mapping), so descriptors grow with segments,
not with their index files.

The pre-allocated size is a sparse file: its pages get disk blocks only when
written. A store through the mapping into a page the filesystem cannot
allocate (disk full) would kill the process with SIGBUS, so before an entry
first touches a page, that page is reserved with ``posix_fallocate`` (on a
fresh descriptor: an index holds none, only its mapping); a full
disk then surfaces as ``OSError(ENOSPC)`` from :meth:`OffsetIndex.append`
before anything is stored. One ``fallocate`` per page of entries (512 offset
entries, ~2 MiB of log at the default ``index.interval.bytes``); the cost is
in ``bench/RESULTS.md``.

Lookups return the greatest entry at or below a target, by binary search.
Not thread-safe: the owning segment serialises appends; ``flush`` may run on a
worker thread while the owner appends, which mmap allows. Every method that
fails with ``OSError`` leaves the index as it was (a resize keeps the old
mapping until the new one exists).
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path
from typing import ClassVar

from samsa.errors import LogClosedError, StorageError
from samsa.storage.file_mapping import FileMapping

PAGE_SIZE = mmap.PAGESIZE


class IndexFullError(StorageError):
    """Raised when an index has no room for another entry; its segment must roll."""


class IndexCorruptError(StorageError):
    """Raised by :meth:`SparseIndex.sanity_check` when an index cannot be trusted."""


def _count_entries(fd: int, upper: int, size: int) -> int:
    """Entries actually written among the first ``upper`` slots of the file open as ``fd``.

    Written entries are never all zero bytes (an offset index entry always has a
    position > 0; time index keys are increasing and >= 0), and padding is all
    zero, so the count is the first all-zero slot, found by binary search with
    ``pread`` (page cache only, never this process's memory). Entries are written
    from the start, so the file's first hole (``SEEK_HOLE``) bounds them.
    """
    try:
        hole = os.lseek(fd, 0, os.SEEK_HOLE)
    except OSError:
        hole = upper * size
    zero = bytes(size)
    lo, hi = 0, min(upper, -(-hole // size))
    while lo < hi:
        mid = (lo + hi) // 2
        if os.pread(fd, size, mid * size) == zero:
            hi = mid
        else:
            lo = mid + 1
    return lo


class SparseIndex:
    """Shared machinery of the offset and time indexes (fixed-size entries, binary search)."""

    ENTRY: ClassVar[struct.Struct]

    def __init__(self, path: Path, base_offset: int, max_index_size: int, writable: bool) -> None:
        self.path = path
        self.base_offset = base_offset
        self.writable = writable
        entry_size = self.ENTRY.size
        self._max_entries = max(max_index_size // entry_size, 1)
        fd = os.open(path, (os.O_RDWR | os.O_CREAT) if writable else os.O_RDONLY, 0o644)
        try:
            file_size = os.fstat(fd).st_size
            if file_size % entry_size:
                # A torn last entry: drop it; recovery rebuilds the index if it matters.
                file_size -= file_size % entry_size
            # Counted before mapping, with preads: touching a crashed index's pre-allocated
            # zeros through a mapping faulted in ~0.7 MB per index (2.7 GB for 2,000 logs).
            self._entries = _count_entries(fd, file_size // entry_size, self.ENTRY.size)
            # An empty index maps nothing (no memory, no pre-allocation) until its first
            # entry; :meth:`_write` then grows it to ``segment.index.bytes``.
            length = file_size
            self._mmap: FileMapping | None = (
                FileMapping(fd, length, writable=writable) if length else None
            )
        finally:
            os.close(fd)
        self._capacity = length // entry_size
        self._allocated = self._written_pages()
        self._closed = False

    # -- keys -------------------------------------------------------------
    def _key_at(self, n: int) -> int:
        raise NotImplementedError

    # -- public -----------------------------------------------------------
    @property
    def entries(self) -> int:
        return self._entries

    @property
    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    @property
    def size_bytes(self) -> int:
        return self._entries * self.ENTRY.size

    def _search(self, target_key: int) -> int:
        """Slot of the greatest entry whose key is <= ``target_key``, or -1."""
        self._check_open()
        lo, hi = 0, self._entries - 1
        if hi < 0 or self._key_at(0) > target_key:
            return -1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._key_at(mid) <= target_key:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _write(self, *fields: int) -> None:
        self._check_open()
        if not self.writable:
            raise StorageError(f"index {self.path} is read-only")
        if self._entries >= self._max_entries:
            raise IndexFullError(f"index {self.path} is full ({self._entries} entries)")
        if self._entries >= self._capacity:
            # Doubling from one page, not straight to segment.index.bytes: the first store
            # into a fresh 10 MB sparse mapping costs ~3 ms (a page is ~15 µs), paid by
            # every partition whose first entry is its final time index entry at close.
            grown = max(2 * self._capacity * self.ENTRY.size, PAGE_SIZE) // self.ENTRY.size
            self._resize(min(grown, self._max_entries))
        assert self._mmap is not None
        position = self._entries * self.ENTRY.size
        if position + self.ENTRY.size > self._allocated:
            self._allocate(position + self.ENTRY.size)
        self.ENTRY.pack_into(self._mmap.buffer, position, *fields)
        self._entries += 1

    def _written_pages(self) -> int:
        """Bytes from the start that surely have disk blocks: the whole pages of entries."""
        return self._entries * self.ENTRY.size // PAGE_SIZE * PAGE_SIZE

    def _allocate(self, end: int) -> None:
        """Give the file real blocks up to ``end`` (whole pages) before the mapping stores there.

        Raises ``OSError`` (ENOSPC, EMFILE, EFBIG) with nothing changed.
        """
        start = self._allocated
        stop = min(-(-end // PAGE_SIZE) * PAGE_SIZE, self._capacity * self.ENTRY.size)
        fd = os.open(self.path, os.O_RDWR)
        try:
            os.posix_fallocate(fd, start, stop - start)
        finally:
            os.close(fd)
        self._allocated = stop

    def truncate_to_entries(self, n: int) -> None:
        """Keep the first ``n`` entries, zeroing the rest of the written area."""
        self._check_open()
        n = max(0, min(n, self._entries))
        if self._mmap is not None and self.writable:
            start, end = n * self.ENTRY.size, self._entries * self.ENTRY.size
            self._mmap.zero(start, end)
        self._entries = n

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self.truncate_to_entries(0)

    def trim_to_valid_size(self) -> None:
        """Shrink the file to its entries (on roll and close)."""
        if self.writable:
            self._resize(self._entries)

    def expand_to_max(self) -> None:
        """Grow the file back to ``segment.index.bytes`` (when a segment becomes active again)."""
        if self.writable:
            self._resize(self._max_entries)

    def _resize(self, slots: int) -> None:
        """Make the file and mapping ``slots`` entries long; on ``OSError`` the old map stays."""
        self._check_open()
        length = slots * self.ENTRY.size
        current = self._capacity * self.ENTRY.size
        fd = os.open(self.path, os.O_RDWR)
        try:
            if length > current:
                os.ftruncate(fd, length)  # sparse: blocks come from _allocate
            new_map = FileMapping(fd, length, writable=True) if length else None
            if length < current:
                try:
                    os.ftruncate(fd, length)
                except OSError:
                    if new_map is not None:
                        new_map.close()
                    raise
        finally:
            os.close(fd)
        if self._mmap is not None:
            # No msync: unmapping keeps dirty shared pages in the page cache, and a
            # flush here would block the appending event loop (flush() does it later).
            self._mmap.close()
        self._mmap = new_map
        self._capacity = slots
        self._allocated = min(self._allocated, length // PAGE_SIZE * PAGE_SIZE)

    def flush(self) -> None:
        """msync the mapping (blocking: run it off the event loop)."""
        if self._mmap is not None and self.writable and not self._closed:
            self._mmap.flush()

    def close(self, *, trim: bool = True) -> None:
        """Trim the file to its entries (unless ``trim`` is False) and unmap it.

        The mapping is released even when the trim fails; the ``OSError`` is then
        raised (an untrimmed index only ends in zeros, which loading skips).
        """
        if self._closed:
            return
        try:
            if trim:
                self.trim_to_valid_size()
        finally:
            if self._mmap is not None:
                self._mmap.close()
                self._mmap = None
            self._closed = True

    def rename_to(self, path: Path) -> None:
        os.replace(self.path, path)
        self.path = path

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"index {self.path} is closed")


class OffsetIndex(SparseIndex):
    """Maps offsets to positions in the segment's ``.log`` file."""

    ENTRY = struct.Struct(">II")

    def _key_at(self, n: int) -> int:
        assert self._mmap is not None
        return int(self.ENTRY.unpack_from(self._mmap.buffer, n * 8)[0])

    def entry(self, n: int) -> tuple[int, int]:
        """Entry ``n`` as ``(absolute offset, position)``."""
        self._check_open()
        assert self._mmap is not None and 0 <= n < self._entries
        relative, position = self.ENTRY.unpack_from(self._mmap.buffer, n * 8)
        return self.base_offset + relative, position

    @property
    def last_entry(self) -> tuple[int, int]:
        """The last entry, or ``(base_offset, 0)`` when empty."""
        return self.entry(self._entries - 1) if self._entries else (self.base_offset, 0)

    def lookup(self, offset: int) -> tuple[int, int]:
        """Greatest entry with offset <= ``offset``; ``(base_offset, 0)`` if there is none."""
        slot = self._search(offset - self.base_offset)
        return (self.base_offset, 0) if slot < 0 else self.entry(slot)

    def first_offset_at_or_after(self, position: int) -> int | None:
        """Offset of the first entry whose file position is >= ``position``; None if none is."""
        self._check_open()
        lo, hi = 0, self._entries
        while lo < hi:
            mid = (lo + hi) // 2
            if self.entry(mid)[1] >= position:
                hi = mid
            else:
                lo = mid + 1
        return self.entry(lo)[0] if lo < self._entries else None

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        if not 0 <= relative <= 0xFFFFFFFF:
            raise StorageError(f"offset {offset} does not fit in index based at {self.base_offset}")
        if self._entries and relative <= self._key_at(self._entries - 1):
            raise StorageError(
                f"index entry for offset {offset} is not after {self.last_entry[0]} in {self.path}"
            )
        self._write(relative, position)

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= ``offset``."""
        slot = self._search(offset - self.base_offset)
        keep = slot + 1
        if keep > 0 and self.entry(slot)[0] >= offset:
            keep -= 1
        self.truncate_to_entries(keep)

    def sanity_check(self, log_size: int) -> None:
        """Raise :class:`IndexCorruptError` if the last entry is out of order or past the log.

        Constant time, as Kafka's: entries were written in order, so the first and
        last entries bound the rest.
        """
        if not self._entries:
            return
        first_offset, first_position = self.entry(0)
        last_offset, last_position = self.last_entry
        if (
            first_offset <= self.base_offset
            or last_offset < first_offset
            or last_position < first_position
            or last_position > log_size
        ):
            raise IndexCorruptError(f"offset index {self.path} is inconsistent with its log")


class TimeIndex(SparseIndex):
    """Maps timestamps to the offsets from which to scan for them."""

    ENTRY = struct.Struct(">qI")

    def _key_at(self, n: int) -> int:
        assert self._mmap is not None
        return int(self.ENTRY.unpack_from(self._mmap.buffer, n * 12)[0])

    def entry(self, n: int) -> tuple[int, int]:
        """Entry ``n`` as ``(timestamp, absolute offset)``."""
        self._check_open()
        assert self._mmap is not None and 0 <= n < self._entries
        timestamp, relative = self.ENTRY.unpack_from(self._mmap.buffer, n * 12)
        return timestamp, self.base_offset + relative

    @property
    def last_entry(self) -> tuple[int, int]:
        """The last entry, or ``(-1, base_offset)`` when empty."""
        return self.entry(self._entries - 1) if self._entries else (-1, self.base_offset)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """Greatest entry with timestamp <= ``timestamp``; ``(-1, base_offset)`` if none."""
        slot = self._search(timestamp)
        return (-1, self.base_offset) if slot < 0 else self.entry(slot)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Add an entry if ``timestamp`` is newer than the last one (Kafka's rule)."""
        if timestamp <= self.last_entry[0]:
            return
        if self._entries and offset < self.last_entry[1]:
            raise StorageError(
                f"time index entry for {offset} is before {self.last_entry[1]} in {self.path}"
            )
        if skip_full_check and self.is_full:
            # Kafka reserves room for the final entry on roll; overwrite the last one instead.
            self.truncate_to_entries(self._entries - 1)
        self._write(timestamp, offset - self.base_offset)

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= ``offset`` (linear from the end; entries are few)."""
        keep = self._entries
        while keep and self.entry(keep - 1)[1] >= offset:
            keep -= 1
        self.truncate_to_entries(keep)

    def sanity_check(self, log_size: int) -> None:
        """Raise :class:`IndexCorruptError` if the last entry is before the first (O(1))."""
        if not self._entries:
            return
        first_timestamp, first_offset = self.entry(0)
        last_timestamp, last_offset = self.last_entry
        if first_offset < self.base_offset or last_timestamp < first_timestamp:
            raise IndexCorruptError(f"time index {self.path} is inconsistent")
        if last_offset < first_offset:
            raise IndexCorruptError(f"time index {self.path} is inconsistent")
