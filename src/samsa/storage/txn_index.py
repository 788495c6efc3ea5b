"""The aborted transaction index of one segment (``.txnindex``), as Kafka's TransactionIndex.

One 34-byte entry, big-endian, per transaction aborted by a marker written in
this segment::

    version:int16 (0)  producerId:int64  firstOffset:int64  lastOffset:int64
    lastStableOffset:int64

``lastOffset`` is the abort marker's offset, so entries are in increasing
``lastOffset`` order; ``firstOffset`` may lie in an earlier segment.
``lastStableOffset`` is the log's last stable offset once the abort completed
(the first offset of the earliest transaction still open, or the marker's
offset + 1): a search for an upper bound at or below it can stop there, as no
later abort can start below it.

The file is created by the first abort (most segments never see one), read
whole on first use and kept in memory: aborts are rare and entries small.

Not thread-safe: the owning segment calls every method from its one writer,
except :meth:`flush`, which may run on a worker thread.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from samsa.errors import StorageError

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size
CURRENT_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction: its producer, first and last (marker) offsets, and the LSO."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(
            CURRENT_VERSION,
            self.producer_id,
            self.first_offset,
            self.last_offset,
            self.last_stable_offset,
        )


class TransactionIndex:
    """The ``.txnindex`` file of one segment; entries cached after the first read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = -1
        self._entries: list[AbortedTxn] | None = None

    # -- reading ------------------------------------------------------------------
    def _load(self) -> list[AbortedTxn]:
        if self._entries is None:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                data = b""
            entries = []
            # A torn last entry (a crash mid-write) is ignored; the next append cuts it off.
            for position in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
                version, pid, first, last, lso = _ENTRY.unpack_from(data, position)
                if version > CURRENT_VERSION:
                    raise StorageError(
                        f"aborted transaction version {version} in {self.path} is not supported"
                    )
                entries.append(AbortedTxn(pid, first, last, lso))
            self._entries = entries
        return self._entries

    def entries(self) -> list[AbortedTxn]:
        """Every entry, in marker order."""
        return list(self._load())

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Aborts overlapping ``[fetch_offset, upper_bound_offset)`` and whether the search ends.

        Done means a later segment cannot hold an overlapping abort: an entry's
        last stable offset reached the upper bound.
        """
        found = []
        for txn in self._load():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    # -- writing ----------------------------------------------------------------------
    def append(self, txn: AbortedTxn) -> None:
        """Add an abort; its marker must come after every abort already here."""
        entries = self._load()
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise StorageError(
                f"aborted transaction ending at {txn.last_offset} is not after "
                f"{entries[-1].last_offset} in {self.path}"
            )
        self.open_for_append()
        data = txn.encode()
        end = len(entries) * ENTRY_SIZE
        try:
            written = os.pwrite(self._fd, data, end)
            if written != len(data):
                raise OSError(f"short write to {self.path}")
        except OSError:
            os.ftruncate(self._fd, end)
            raise
        entries.append(txn)

    def open_for_append(self) -> None:
        """Open (creating) the file now, so an append after the marker's write needs no descriptor.

        Raises ``OSError`` (EMFILE, ENOSPC) with nothing changed but the file's existence.
        """
        if self._fd < 0:
            entries = self._load()
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                os.ftruncate(fd, len(entries) * ENTRY_SIZE)  # drop a torn entry
            except OSError:
                os.close(fd)
                raise
            self._fd = fd

    def truncate_to(self, offset: int) -> None:
        """Remove the aborts whose marker is at or after ``offset``."""
        entries = self._load()
        keep = len(entries)
        while keep and entries[keep - 1].last_offset >= offset:
            keep -= 1
        if keep < len(entries):
            del entries[keep:]
            self._truncate_file(keep * ENTRY_SIZE)

    def reset(self) -> None:
        """Remove every entry (before a rebuild)."""
        self._entries = []
        self._truncate_file(0)

    def _truncate_file(self, size: int) -> None:
        if self._fd >= 0:
            os.ftruncate(self._fd, size)
        elif self.path.exists():
            os.truncate(self.path, size)

    # -- lifecycle ----------------------------------------------------------------------
    def flush(self) -> None:
        """fsync the file if this index wrote to it (blocking)."""
        if self._fd >= 0:
            os.fsync(self._fd)

    def rename_to(self, path: Path) -> None:
        """Rename the file (if there is one); an open descriptor stays valid."""
        if self.path.exists():
            os.replace(self.path, path)
        self.path = path

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        """Close and remove the file."""
        self.close()
        self.path.unlink(missing_ok=True)
