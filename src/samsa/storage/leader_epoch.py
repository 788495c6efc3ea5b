"""A partition's leader epochs and the offset each began at: ``leader-epoch-checkpoint``.

Kafka's file, in the partition directory, text::

    0            version
    2            number of entries
    0 0          epoch  start offset
    3 1234

An entry says the leader of ``epoch`` wrote its first record at ``start
offset``. A replica asks a leader where its own latest epoch ended
(OffsetForLeaderEpoch, :meth:`LeaderEpochCache.end_offset_for`) and truncates
its log there before it fetches, so two replicas never hold different records
at the same offset (KIP-101, KIP-279).

Rules, as Kafka's ``LeaderEpochFileCache``:

- :meth:`assign` adds an entry for any epoch other than the latest, or for the
  latest at an earlier offset; entries at or above the new one's epoch or
  start offset are dropped first (they were truncated from the log);
- truncating the log's end drops entries starting at or past the new end;
  moving the log start keeps the last entry at or below it, moved up to it.

Changes are made in memory; the file is written, atomically and fsynced, by
:meth:`LeaderEpochCache.flush` — or on a worker thread by the writer
:meth:`LeaderEpochCache.writer` returns — which the log manager runs before
it flushes the log's segments (so the recovery point never passes an epoch
the file does not hold) and at shutdown, as Kafka keeps the fsync off its
produce path (KAFKA-15046). After a crash, the loader cuts the file to the
recovered log and re-reads the epochs of every batch it recovers. A missing
file is an empty cache; a malformed one raises :class:`StorageError` naming it
(the log rebuilds it from its batches' epochs). Not thread-safe, except the
writer: the log's owner calls every method.
"""

from __future__ import annotations

import bisect
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from samsa.errors import StorageError
from samsa.storage.checkpoint import write_atomically

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
_VERSION = 0


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """The epochs of one partition, in epoch (and start offset) order, kept on disk."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / LEADER_EPOCH_CHECKPOINT
        self._entries: list[EpochEntry] = _read(self.path)
        self._version = 0  # changes made in memory
        self._written = 0  # the version the file holds
        self._write_lock = threading.Lock()

    @property
    def dirty(self) -> bool:
        """Whether the file is behind the entries in memory."""
        return self._version != self._written

    def writer(self) -> Callable[[], None] | None:
        """A blocking writer of the entries as they are now (None: the file is current).

        Safe on a worker thread: it writes the snapshot taken here, and a writer
        that runs after a newer one has written does nothing.
        """
        if not self.dirty:
            return None
        version = self._version
        lines = [str(_VERSION), str(len(self._entries))]
        lines += [f"{e.epoch} {e.start_offset}" for e in self._entries]
        data = ("\n".join(lines) + "\n").encode()

        def write() -> None:
            with self._write_lock:
                if self._written >= version:
                    return
                write_atomically(self.path, data)
                self._written = version

        return write

    def flush(self) -> None:
        """Write the file now if it is behind (blocking)."""
        write = self.writer()
        if write is not None:
            write()

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    @property
    def earliest(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` began at ``start_offset`` (a leader's first append in it)."""
        if epoch < 0:
            return
        if self._entries:
            last = self._entries[-1]
            if last.epoch == epoch and last.start_offset <= start_offset:
                return
        self._entries = [
            e for e in self._entries if e.epoch < epoch and e.start_offset < start_offset
        ]
        self._entries.append(EpochEntry(epoch, start_offset))
        self._version += 1

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end offset)`` for an OffsetForLeaderEpoch asking about ``epoch``.

        The end offset of an epoch is where the next known epoch starts (the log
        end for the latest); an epoch this log never had answers with the largest
        epoch below it. Unknown or newer than all: ``(-1, -1)``.
        """
        if epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epoch == self._entries[-1].epoch:
            return epoch, log_end_offset
        epochs = [e.epoch for e in self._entries]
        higher = bisect.bisect_right(epochs, epoch)
        if higher == len(self._entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        next_start = self._entries[higher].start_offset
        if higher == 0:
            # Older than every epoch kept (the log start moved past it): the
            # follower replicates from the first epoch the leader has.
            return epoch, next_start
        return self._entries[higher - 1].epoch, next_start

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch whose leader wrote ``offset`` (-1 if before every entry)."""
        starts = [e.start_offset for e in self._entries]
        i = bisect.bisect_right(starts, offset)
        return self._entries[i - 1].epoch if i else UNDEFINED_EPOCH

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was truncated to ``end_offset``: drop epochs that began at or after it."""
        kept = [e for e in self._entries if e.start_offset < end_offset]
        if len(kept) != len(self._entries):
            self._entries = kept
            self._version += 1

    def truncate_from_start(self, start_offset: int) -> None:
        """The log start moved to ``start_offset``: the epoch holding it now starts there."""
        if not self._entries or self._entries[0].start_offset >= start_offset:
            return
        i = bisect.bisect_right([e.start_offset for e in self._entries], start_offset) - 1
        kept = [EpochEntry(self._entries[i].epoch, start_offset), *self._entries[i + 1 :]]
        self._entries = kept
        self._version += 1

    def clear(self) -> None:
        """Forget every epoch (the log was emptied and starts again elsewhere)."""
        if self._entries:
            self._entries = []
            self._version += 1


def _read(path: Path) -> list[EpochEntry]:
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise StorageError(f"cannot read {path}: {exc}") from exc
    lines = text.split("\n")
    try:
        version, count = int(lines[0]), int(lines[1])
        if version != _VERSION:
            raise ValueError(f"version {version}")
        entries = []
        for line in lines[2 : 2 + count]:
            epoch, start = line.split(" ")
            entries.append(EpochEntry(int(epoch), int(start)))
        if len(entries) != count:
            raise ValueError(f"{len(entries)} entries, the header says {count}")
    except (ValueError, IndexError) as exc:
        raise StorageError(f"{path} is malformed: {exc}") from exc
    for before, after in itertools.pairwise(entries):
        if not (before.epoch < after.epoch and before.start_offset <= after.start_offset):
            raise StorageError(f"{path} is malformed: entries out of order")
    return entries
