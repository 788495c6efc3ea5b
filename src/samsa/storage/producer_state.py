"""Idempotent producer state of one partition (Kafka's ProducerStateManager).

For every producer id the partition remembers its epoch and the metadata of
its last five batches (first/last sequence, first/last offset, timestamp). A
batch whose sequences match a remembered one is a retry: it gets the original
offsets back and is not written again. Otherwise the sequence must follow the
last one (OUT_OF_ORDER_SEQUENCE_NUMBER) and the epoch must not go back
(INVALID_PRODUCER_EPOCH).

State survives restarts through ``<offset>.snapshot`` files in the log
directory, in Kafka's format (version 1, CRC-32C, one entry per producer with
its last batch), written when a segment rolls and at clean shutdown; on load
the batches after the newest usable snapshot are replayed from their headers.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from samsa.errors import CorruptRecordError, StorageError, for_code
from samsa.records.batch import NO_PRODUCER_ID, RecordBatchView
from samsa.storage.checkpoint import write_atomically

SNAPSHOT_SUFFIX = ".snapshot"
MAX_REMEMBERED_BATCHES = 5
SNAPSHOT_VERSION = 1
_SEQUENCE_MODULUS = 1 << 31
_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_ENTRY = struct.Struct(
    ">qhiqiqiq"
)  # pid, epoch, last seq, last offset, delta, ts, coord epoch, txn
_SNAPSHOTS_KEPT = 2

OutOfOrderSequenceError = for_code(45)
InvalidProducerEpochError = for_code(47)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=MAX_REMEMBERED_BATCHES)
    )
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A retried batch: the offsets it was given the first time."""

    first_offset: int
    last_offset: int
    timestamp: int


class ProducerStateManager:
    """Producer entries of one partition; owned by the partition's log."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.producers: dict[int, ProducerEntry] = {}

    def check(self, batch: RecordBatchView) -> Duplicate | None:
        """Validate an idempotent batch before offsets are assigned.

        Returns the original offsets of a retried batch; raises
        ``InvalidProducerEpochError`` or ``OutOfOrderSequenceError``.
        """
        pid = batch.producer_id
        if pid == NO_PRODUCER_ID:
            return None
        entry = self.producers.get(pid)
        if entry is None:
            return None  # a producer this partition has not seen (or whose state expired)
        epoch = batch.producer_epoch
        first, last = batch.base_sequence, batch.last_sequence
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {pid} epoch {epoch} is older than the current epoch {entry.epoch}"
            )
        if epoch > entry.epoch:
            if first != 0:
                raise OutOfOrderSequenceError(
                    f"producer {pid} began epoch {epoch} at sequence {first}, not 0"
                )
            return None
        for remembered in entry.batches:
            if remembered.first_sequence == first and remembered.last_sequence == last:
                return Duplicate(remembered.first_offset, remembered.last_offset,
                                 remembered.timestamp)  # fmt: skip
        expected = (entry.last_sequence + 1) % _SEQUENCE_MODULUS
        if entry.batches and first != expected:
            raise OutOfOrderSequenceError(
                f"producer {pid} sent sequence {first}; {expected} was expected"
            )
        return None

    def update(self, batch: RecordBatchView) -> None:
        """Record an appended batch (offsets assigned)."""
        pid = batch.producer_id
        if pid == NO_PRODUCER_ID:
            return
        entry = self.producers.get(pid)
        if entry is None or batch.producer_epoch != entry.epoch:
            entry = ProducerEntry(pid, batch.producer_epoch)
            self.producers[pid] = entry
        if batch.is_control:
            return  # markers end transactions; they carry no sequence
        entry.batches.append(
            BatchMetadata(
                batch.base_sequence,
                batch.last_sequence,
                batch.base_offset,
                batch.last_offset,
                batch.max_timestamp,
            )
        )

    def truncate_and_reload(self, batches: Iterable[RecordBatchView]) -> None:
        """Forget everything and replay ``batches`` (their headers) in order."""
        self.producers.clear()
        for batch in batches:
            self.update(batch)

    # -- snapshots ---------------------------------------------------------------------
    def snapshot_offsets(self) -> list[int]:
        offsets = []
        for path in self.directory.glob(f"*{SNAPSHOT_SUFFIX}"):
            stem = path.name[: -len(SNAPSHOT_SUFFIX)]
            if stem.isdigit():
                offsets.append(int(stem))
        return sorted(offsets)

    def write_snapshot(self, offset: int) -> None:
        """Write ``<offset>.snapshot`` (the state after every batch below ``offset``)."""
        entries = [e for e in self.producers.values() if e.batches or e.coordinator_epoch >= 0]
        body = bytearray(_HEADER.size + _ENTRY.size * len(entries))
        position = _HEADER.size
        for entry in entries:
            last = entry.batches[-1] if entry.batches else BatchMetadata(-1, -1, -1, -1, -1)
            _ENTRY.pack_into(
                body, position, entry.producer_id, entry.epoch, last.last_sequence,
                last.last_offset, last.last_offset - last.first_offset, last.timestamp,
                entry.coordinator_epoch, entry.current_txn_first_offset,
            )  # fmt: skip
            position += _ENTRY.size
        struct.pack_into(">i", body, 6, len(entries))
        crc = crc32c.crc32c(memoryview(body)[6:])
        struct.pack_into(">hI", body, 0, SNAPSHOT_VERSION, crc)
        write_atomically(self.directory / f"{offset:020d}{SNAPSHOT_SUFFIX}", bytes(body))
        for old in self.snapshot_offsets()[:-_SNAPSHOTS_KEPT]:
            (self.directory / f"{old:020d}{SNAPSHOT_SUFFIX}").unlink(missing_ok=True)

    def load_snapshot(self, offset: int) -> None:
        """Replace the state with ``<offset>.snapshot``; raises on a corrupt file."""
        data = (self.directory / f"{offset:020d}{SNAPSHOT_SUFFIX}").read_bytes()
        if len(data) < _HEADER.size:
            raise CorruptRecordError(f"producer snapshot {offset} is truncated")
        version, crc, count = _HEADER.unpack_from(data)
        if version != SNAPSHOT_VERSION:
            raise StorageError(f"producer snapshot {offset} has version {version}")
        if crc32c.crc32c(memoryview(data)[6:]) != crc:
            raise CorruptRecordError(f"producer snapshot {offset} fails its CRC")
        if count < 0 or len(data) != _HEADER.size + count * _ENTRY.size:
            raise CorruptRecordError(f"producer snapshot {offset} has a bad entry count")
        self.producers.clear()
        for n in range(count):
            pid, epoch, last_seq, last_offset, delta, ts, coordinator_epoch, txn = (
                _ENTRY.unpack_from(data, _HEADER.size + n * _ENTRY.size)
            )
            entry = ProducerEntry(pid, epoch, coordinator_epoch=coordinator_epoch,
                                  current_txn_first_offset=txn)  # fmt: skip
            if last_offset >= 0:
                first_seq = (last_seq - delta) % _SEQUENCE_MODULUS
                entry.batches.append(
                    BatchMetadata(first_seq, last_seq, last_offset - delta, last_offset, ts)
                )
            self.producers[pid] = entry

    def delete_snapshots_after(self, offset: int) -> None:
        """Remove snapshots beyond ``offset`` (the log was truncated below them)."""
        for snap in self.snapshot_offsets():
            if snap > offset:
                os.unlink(self.directory / f"{snap:020d}{SNAPSHOT_SUFFIX}")
