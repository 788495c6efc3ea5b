"""Producer state of one partition: idempotence and transactions (Kafka's ProducerStateManager).

For every producer id the partition remembers its epoch, the metadata of its
last five batches (first/last sequence, first/last offset, timestamp), the
coordinator epoch of its last transaction marker and the first offset of its
ongoing transaction. A batch whose sequences match a remembered one is a
retry: it gets the original offsets back and is not written again.

Transactions: a transactional batch from a producer without an ongoing
transaction starts one at its base offset; an end-transaction marker (a
control batch the transaction coordinator writes) ends it, and
:meth:`ProducerStateManager.update` returns the :class:`CompletedTxn`. The log
records aborted ones in the segment's ``.txnindex``. The first unstable
offset is the first offset of the earliest transaction still undecided, or
decided by a marker not yet below the high watermark; the log's last stable
offset is derived from it.

:meth:`ProducerStateManager.check` applies Kafka's ProducerAppendInfo rules
before an append, and raises with nothing changed:

- except for replication, a producer epoch below the producer's current one is
  INVALID_PRODUCER_EPOCH, for data batches and markers alike (Kafka
  answers produce requests with it rather than PRODUCER_FENCED since 2.7);
- a marker whose coordinator epoch is below the last marker's is
  TRANSACTION_COORDINATOR_FENCED; with transaction version 2 the marker's
  epoch must also be above the producer's (the coordinator bumps it when it
  ends a transaction), unless it repeats the marker that ended the last one;
- a client's batch must continue the producer's sequence
  (OUT_OF_ORDER_SEQUENCE_NUMBER, 45; a new epoch starts at 0), and a
  non-transactional batch while the producer's transaction is open is
  INVALID_TXN_STATE.

:meth:`~ProducerStateManager.update` records an appended batch without checks:
replication and replay trust the log.

State survives restarts through ``<offset>.snapshot`` files in the log
directory, in Kafka's format (version 1, CRC-32C, one entry per producer with
its last batch, coordinator epoch and ongoing transaction's first offset),
written when a segment rolls and at clean shutdown; on load the batches after
the newest usable snapshot are replayed.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from samsa.errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceNumberError,
    StorageError,
    TransactionCoordinatorFencedError,
)
from samsa.records.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, RecordBatchView
from samsa.records.control import EndTransactionMarker, parse_end_transaction_marker
from samsa.records.reader import iter_records
from samsa.storage.checkpoint import write_atomically
from samsa.storage.validator import AppendOrigin

SNAPSHOT_SUFFIX = ".snapshot"
MAX_REMEMBERED_BATCHES = 5
SNAPSHOT_VERSION = 1
_SEQUENCE_MODULUS = 1 << 31
_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_ENTRY = struct.Struct(
    ">qhiqiqiq"
)  # pid, epoch, last seq, last offset, delta, ts, coord epoch, txn
_SNAPSHOTS_KEPT = 2


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
    last_timestamp: int = -1

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def set_epoch(self, epoch: int) -> None:
        """A new epoch forgets the batches of the old one (their sequences start again)."""
        if epoch != self.epoch:
            self.batches.clear()
            self.epoch = epoch


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A retried batch: the offsets it was given the first time."""

    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker ended: its producer, first offset and marker offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    """The marker's offset."""
    is_aborted: bool
    last_stable_offset: int = -1
    """The LSO once it completed (ignoring the high watermark): the first offset of the
    earliest transaction still open, or ``last_offset + 1``; the ``.txnindex`` keeps it."""


def read_end_transaction_marker(batch: RecordBatchView) -> tuple[EndTransactionMarker, int] | None:
    """The marker a control batch holds and its timestamp; None if the batch has no record.

    Raises ``CorruptRecordError`` if its record is not a commit or abort marker.
    """
    for record in iter_records(batch):
        return parse_end_transaction_marker(record), record.timestamp
    return None  # the cleaner emptied it: the transaction is gone from the log


class ProducerStateManager:
    """Producer entries and open transactions of one partition; owned by the partition's log."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.producers: dict[int, ProducerEntry] = {}
        # First offset -> producer id, in first-offset order (transactions start in log order).
        self._ongoing: dict[int, int] = {}
        # First offset -> marker offset of completed transactions whose marker is not yet
        # below the high watermark: still unstable.
        self._unreplicated: dict[int, int] = {}

    # -- checks ------------------------------------------------------------------
    def check(
        self, batch: RecordBatchView, origin: AppendOrigin, transaction_version: int = 0
    ) -> Duplicate | None:
        """Validate a batch before offsets are assigned (see the module's rules).

        Returns the original offsets of a retried client batch; raises
        ``InvalidProducerEpochError``, ``OutOfOrderSequenceError``,
        ``InvalidTxnStateError`` or ``TransactionCoordinatorFencedError``.
        """
        pid = batch.producer_id
        if pid == NO_PRODUCER_ID or origin is AppendOrigin.REPLICATION:
            return None
        entry = self.producers.get(pid)
        if batch.is_control:
            self._check_marker(batch, entry, transaction_version)
            return None
        if entry is None:
            return None  # a producer this partition has not seen (or whose state expired)
        epoch = batch.producer_epoch
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {pid} epoch {epoch} is older than the current epoch {entry.epoch}"
            )
        if origin is AppendOrigin.CLIENT:
            duplicate = self._check_sequence(batch, entry)
            if duplicate is not None:
                return duplicate
        if entry.current_txn_first_offset >= 0 and not batch.is_transactional:
            raise InvalidTxnStateError(
                f"producer {pid} sent a non-transactional batch during its transaction "
                f"started at offset {entry.current_txn_first_offset}"
            )
        return None

    @staticmethod
    def _check_sequence(batch: RecordBatchView, entry: ProducerEntry) -> Duplicate | None:
        pid, epoch = batch.producer_id, batch.producer_epoch
        first, last = batch.base_sequence, batch.last_sequence
        if epoch > entry.epoch:
            if first != 0 and entry.epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceNumberError(
                    f"producer {pid} began epoch {epoch} at sequence {first}, not 0"
                )
            return None
        for remembered in entry.batches:
            if remembered.first_sequence == first and remembered.last_sequence == last:
                return Duplicate(remembered.first_offset, remembered.last_offset,
                                 remembered.timestamp)  # fmt: skip
        expected = (entry.last_sequence + 1) % _SEQUENCE_MODULUS
        if first != expected and entry.epoch != NO_PRODUCER_EPOCH:
            raise OutOfOrderSequenceNumberError(
                f"producer {pid} sent sequence {first}; {expected} was expected"
            )
        return None

    @staticmethod
    def _check_marker(
        batch: RecordBatchView, entry: ProducerEntry | None, transaction_version: int
    ) -> None:
        found = read_end_transaction_marker(batch)
        if found is None:
            raise InvalidRecordError("a transaction marker batch holds no record")
        if entry is None:
            return
        marker, _ = found
        pid, epoch, current = batch.producer_id, batch.producer_epoch, entry.epoch
        if transaction_version >= 2:
            # The coordinator bumped the epoch: an equal one is a late or repeated marker,
            # accepted only as the retry of the marker that ended the last transaction.
            fenced = epoch < current or (epoch == current and entry.current_txn_first_offset >= 0)
        else:
            fenced = epoch < current
        if fenced:
            raise InvalidProducerEpochError(
                f"marker for producer {pid} has epoch {epoch}; the producer's epoch is {current}"
            )
        if marker.coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"marker for producer {pid} has coordinator epoch {marker.coordinator_epoch}; "
                f"the last marker had {entry.coordinator_epoch}"
            )

    # -- updates -------------------------------------------------------------------
    def update(self, batch: RecordBatchView) -> CompletedTxn | None:
        """Record an appended batch (offsets assigned); return the transaction a marker ended."""
        pid = batch.producer_id
        if pid == NO_PRODUCER_ID:
            return None
        entry = self.producers.get(pid)
        if batch.is_control:
            try:
                found = read_end_transaction_marker(batch)
            except CorruptRecordError:
                return None  # not an end-transaction marker: nothing it can end
            if found is None:
                return None
            if entry is None:
                entry = self.producers[pid] = ProducerEntry(pid, batch.producer_epoch)
            return self._end_transaction(entry, batch, *found)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid, batch.producer_epoch)
        entry.set_epoch(batch.producer_epoch)
        entry.batches.append(
            BatchMetadata(
                batch.base_sequence,
                batch.last_sequence,
                batch.base_offset,
                batch.last_offset,
                batch.max_timestamp,
            )
        )
        entry.last_timestamp = batch.max_timestamp
        if batch.is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = batch.base_offset
            self._start_transaction(batch.base_offset, pid)
        return None

    def _start_transaction(self, first_offset: int, pid: int) -> None:
        ongoing = self._ongoing
        in_order = not ongoing or first_offset > next(reversed(ongoing))
        ongoing[first_offset] = pid
        if not in_order:
            self._ongoing = dict(sorted(ongoing.items()))

    def _end_transaction(
        self, entry: ProducerEntry, batch: RecordBatchView, marker: EndTransactionMarker,
        timestamp: int,
    ) -> CompletedTxn | None:  # fmt: skip
        completed = None
        first = entry.current_txn_first_offset
        if first >= 0:
            # A marker without data (nothing was written here) does not move the LSO.
            self._ongoing.pop(first, None)
            last = batch.base_offset
            stable = next((f for f, p in self._ongoing.items() if p != entry.producer_id), last + 1)
            completed = CompletedTxn(entry.producer_id, first, last, not marker.committed, stable)
            self._unreplicated[first] = last
        entry.set_epoch(batch.producer_epoch)
        entry.coordinator_epoch = marker.coordinator_epoch
        entry.current_txn_first_offset = -1
        entry.last_timestamp = timestamp
        return completed

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Completed transactions whose marker is now below the high watermark become stable."""
        if self._unreplicated:
            self._unreplicated = {
                first: last for first, last in self._unreplicated.items() if last >= high_watermark
            }

    def first_unstable_offset(self) -> int | None:
        """First offset of the earliest transaction undecided or decided above the HW."""
        first = next(iter(self._ongoing), None)
        if self._unreplicated:
            earliest = min(self._unreplicated)
            first = earliest if first is None else min(first, earliest)
        return first

    def ongoing_transactions(self) -> dict[int, int]:
        """First offset -> producer id of the transactions not yet ended, in offset order."""
        return dict(self._ongoing)

    def clear(self) -> None:
        """Forget every producer and transaction."""
        self.producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()

    def truncate_and_reload(self, batches: Iterable[RecordBatchView]) -> None:
        """Forget everything and replay ``batches`` in order (control batches whole)."""
        self.clear()
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
        entries = list(self.producers.values())
        body = bytearray(_HEADER.size + _ENTRY.size * len(entries))
        position = _HEADER.size
        for entry in entries:
            last = entry.batches[-1] if entry.batches else BatchMetadata(-1, -1, -1, -1, -1)
            _ENTRY.pack_into(
                body, position, entry.producer_id, entry.epoch, last.last_sequence,
                last.last_offset, last.last_offset - last.first_offset, entry.last_timestamp,
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
        self.clear()
        ongoing: list[tuple[int, int]] = []
        for n in range(count):
            pid, epoch, last_seq, last_offset, delta, ts, coordinator_epoch, txn = (
                _ENTRY.unpack_from(data, _HEADER.size + n * _ENTRY.size)
            )
            entry = ProducerEntry(pid, epoch, coordinator_epoch=coordinator_epoch,
                                  current_txn_first_offset=max(txn, -1),
                                  last_timestamp=ts)  # fmt: skip
            if last_offset >= 0:
                first_seq = (last_seq - delta) % _SEQUENCE_MODULUS
                entry.batches.append(
                    BatchMetadata(first_seq, last_seq, last_offset - delta, last_offset, ts)
                )
            if txn >= 0:
                ongoing.append((txn, pid))
            self.producers[pid] = entry
        self._ongoing = dict(sorted(ongoing))

    def delete_snapshots_after(self, offset: int) -> None:
        """Remove snapshots beyond ``offset`` (the log was truncated below them)."""
        for snap in self.snapshot_offsets():
            if snap > offset:
                os.unlink(self.directory / f"{snap:020d}{SNAPSHOT_SUFFIX}")
