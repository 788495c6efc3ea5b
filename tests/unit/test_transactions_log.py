"""Transactions in a partition's log: LSO, markers, fencing, the aborted transaction index."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from tests.conftest import make_batch

from samsa.errors import for_code
from samsa.records import RecordBatchBuilder, iter_batches
from samsa.storage import Log, LogConfig, load_log
from samsa.storage.cleaner import LogCleaner
from samsa.testing.clock import ManualClock

A, B, C = 1000, 2000, 3000
InvalidProducerEpoch = for_code(47)
InvalidTxnState = for_code(48)
CoordinatorFenced = for_code(52)
ENTRY = struct.Struct(">hqqqq")


def _open(
    path: Path, clock: ManualClock, clean: bool = True, recovery_point: int = 0, **props: object
) -> Log:
    return load_log(path, LogConfig.from_props(props), clean_shutdown=clean, clock=clock,
                    recovery_point=recovery_point)  # fmt: skip


class Producer:
    """A transactional producer's batches, numbered as a client numbers them."""

    def __init__(self, clock: ManualClock, producer_id: int, epoch: int = 0) -> None:
        self.clock, self.producer_id, self.epoch, self.sequence = clock, producer_id, epoch, 0

    def batch(
        self, count: int = 2, *, transactional: bool = True, size: int = 8, keyed: bool = False
    ) -> bytearray:
        builder = RecordBatchBuilder(
            producer_id=self.producer_id, producer_epoch=self.epoch,
            base_sequence=self.sequence, is_transactional=transactional,
        )  # fmt: skip
        for i in range(count):
            value = f"{self.producer_id}-{self.sequence + i}".encode().ljust(size, b".")
            # A compacted log refuses records without a key.
            builder.append(value, key=value if keyed else None, timestamp=self.clock())
        self.sequence += count
        return bytearray(builder.build())


def _send(log: Log, data: bytearray) -> int:
    """Append as a client and move the high watermark along, as the replica manager does."""
    first = log.append_as_leader(data).first_offset
    log.update_high_watermark(log.log_end_offset)
    return first


def _end(log: Log, producer: Producer, commit: bool, coordinator_epoch: int = 0) -> int:
    offset = log.append_marker(producer.producer_id, producer.epoch, commit, coordinator_epoch)
    log.update_high_watermark(log.log_end_offset)
    return offset.first_offset


def _plain(log: Log, clock: ManualClock, count: int = 1) -> int:
    return _send(log, make_batch([b"plain"] * count, timestamp=clock()))


def _txn_index_entries(path: Path) -> list[tuple[int, int, int, int, int]]:
    data = path.read_bytes() if path.exists() else b""
    return [ENTRY.unpack_from(data, i) for i in range(0, len(data), ENTRY.size)]


# -- the last stable offset ------------------------------------------------------------------


def test_an_open_transaction_holds_the_lso_at_its_first_offset(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    _plain(log, clock, 3)
    first = _send(log, Producer(clock, A).batch())
    _plain(log, clock, 4)
    assert first == 3
    assert log.high_watermark == 9
    assert log.last_stable_offset == 3
    assert log.first_unstable_offset == 3


def test_a_commit_marker_moves_the_lso_to_the_high_watermark(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    producer = Producer(clock, A)
    _send(log, producer.batch())
    _send(log, producer.batch())
    marker = _end(log, producer, commit=True)
    assert marker == 4
    assert log.first_unstable_offset is None
    assert log.last_stable_offset == log.high_watermark == 5
    assert log.collect_aborted_transactions(0, 5) == []


def test_the_lso_never_passes_the_high_watermark(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path / "t-0", clock)
    producer = Producer(clock, A)
    _send(log, producer.batch())
    log.append_marker(A, 0, True, 0)  # appended, but the high watermark stays at 2
    assert log.high_watermark == 2
    assert log.last_stable_offset == 0  # decided, but the marker is not below the HW
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 3


def test_interleaved_transactions_of_three_producers(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path / "t-0", clock)
    a, b, c = Producer(clock, A), Producer(clock, B), Producer(clock, C)
    _send(log, a.batch())  # 0-1
    _send(log, b.batch())  # 2-3
    _send(log, c.batch())  # 4-5
    _send(log, a.batch())  # 6-7
    assert log.last_stable_offset == 0
    assert _end(log, b, commit=False) == 8  # B aborts while A and C are open
    assert log.last_stable_offset == 0
    assert _end(log, a, commit=True) == 9
    assert log.last_stable_offset == 4  # C's transaction is the earliest still open
    _send(log, b.batch())  # 10-11: B's next transaction
    assert _end(log, c, commit=False) == 12
    assert log.last_stable_offset == 10
    assert _end(log, b, commit=True) == 13
    assert log.last_stable_offset == log.high_watermark == 14
    assert log.collect_aborted_transactions(0, 14) == [(B, 2), (C, 4)]
    # Each abort records the LSO once it completed: the earliest other transaction open.
    index = tmp_path / "t-0" / f"{0:020d}.txnindex"
    assert _txn_index_entries(index) == [(0, B, 2, 8, 0), (0, C, 4, 12, 10)]


# -- the aborted transaction index -------------------------------------------------------------


def test_an_abort_marker_writes_a_txnindex_entry_in_kafka_format(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    producer = Producer(clock, A)
    _plain(log, clock, 2)
    _send(log, producer.batch(3))
    assert _end(log, producer, commit=False) == 5
    index = tmp_path / "t-0" / f"{0:020d}.txnindex"
    assert index.read_bytes() == struct.pack(">hqqqq", 0, A, 2, 5, 6)
    assert log.last_stable_offset == 6


def test_collect_aborted_transactions_returns_only_overlapping_ones(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    producer = Producer(clock, A)
    _plain(log, clock, 5)  # 0-4
    _send(log, producer.batch(3))  # 5-7
    _end(log, producer, commit=False)  # 8
    _plain(log, clock, 5)  # 9-13
    assert log.collect_aborted_transactions(0, 5) == []  # ends before it starts
    assert log.collect_aborted_transactions(0, 6) == [(A, 5)]
    assert log.collect_aborted_transactions(7, 9) == [(A, 5)]
    assert log.collect_aborted_transactions(8, 14) == [(A, 5)]  # its marker is at 8
    assert log.collect_aborted_transactions(9, 14) == []  # starts after its marker


def test_a_transaction_spanning_segments_is_found_from_its_first_segment(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock, **{"segment.bytes": 300})
    producer = Producer(clock, A)
    _send(log, producer.batch(2, size=100))
    for _ in range(4):
        _plain(log, clock)
        log.roll()
    _end(log, producer, commit=False)
    assert len(log.segments) > 3
    marker_segment = log.segments[-1]
    assert (tmp_path / "t-0" / f"{marker_segment.base_offset:020d}.txnindex").exists()
    assert not (tmp_path / "t-0" / f"{0:020d}.txnindex").exists()
    assert log.collect_aborted_transactions(0, 2) == [(A, 0)]
    assert log.collect_aborted_transactions(3, 4) == [(A, 0)]


def test_read_committed_reads_stop_at_the_lso_and_list_aborts(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    aborted, open_ = Producer(clock, A), Producer(clock, B)
    _send(log, aborted.batch(2))  # 0-1
    _end(log, aborted, commit=False)  # 2
    _plain(log, clock, 2)  # 3-4
    _send(log, open_.batch(2))  # 5-6
    _plain(log, clock, 2)  # 7-8
    data = log.read(
        0, 1 << 20, max_offset=log.last_stable_offset, include_aborted_transactions=True
    )
    batches = list(iter_batches(data.region.read()))
    assert batches[-1].next_offset == log.last_stable_offset == 5
    assert data.aborted_transactions == [(A, 0)]
    uncommitted = log.read(0, 1 << 20, max_offset=log.high_watermark)
    assert uncommitted.aborted_transactions is None
    nothing = log.read(5, 1 << 20, max_offset=5, include_aborted_transactions=True)
    assert (nothing.region.length, nothing.aborted_transactions) == (0, [])


def test_read_committed_upper_bound_is_the_first_index_entry_past_the_read(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock, **{"index.interval.bytes": 1})
    producer = Producer(clock, A)
    for _ in range(6):
        _plain(log, clock)  # 0-5: one batch each, each indexed
    _send(log, producer.batch(1))  # 6
    _end(log, producer, commit=False)  # 7
    first_batch = len(make_batch([b"plain"], timestamp=clock()))
    # A read of the first batch alone ends before offset 6: the abort is not listed...
    one = log.read(0, first_batch, include_aborted_transactions=True, min_one_message=False)
    assert one.region.length == first_batch
    assert one.aborted_transactions == []
    # ...and one that reaches it is.
    all_ = log.read(0, 1 << 20, include_aborted_transactions=True)
    assert all_.aborted_transactions == [(A, 6)]


def test_truncation_drops_txnindex_entries_at_and_above_the_offset(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    a, b = Producer(clock, A), Producer(clock, B)
    _send(log, a.batch())  # 0-1
    _end(log, a, commit=False)  # 2
    _send(log, b.batch())  # 3-4
    _end(log, b, commit=False)  # 5
    _plain(log, clock)  # 6
    log.truncate_to(5)
    assert log.collect_aborted_transactions(0, 10) == [(A, 0)]
    assert [e[1] for e in _txn_index_entries(tmp_path / "t-0" / f"{0:020d}.txnindex")] == [A]
    # B's transaction is open again: the marker that ended it is gone.
    assert log.last_stable_offset == 3


# -- markers and fencing ---------------------------------------------------------------------


def test_a_marker_with_an_older_producer_epoch_is_fenced(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    _send(log, Producer(clock, A, epoch=3).batch())
    with pytest.raises(InvalidProducerEpoch):
        log.append_marker(A, 2, True, 0)
    assert log.log_end_offset == 2
    assert log.last_stable_offset == 0


def test_a_marker_from_an_older_coordinator_epoch_is_fenced(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    producer = Producer(clock, A)
    _send(log, producer.batch())
    _end(log, producer, commit=True, coordinator_epoch=5)
    _send(log, producer.batch())
    with pytest.raises(CoordinatorFenced):
        log.append_marker(A, 0, False, 4)
    assert log.log_end_offset == 5
    _end(log, producer, commit=False, coordinator_epoch=5)
    assert log.collect_aborted_transactions(0, 10) == [(A, 3)]


def test_transaction_version_2_markers_need_the_bumped_epoch(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    producer = Producer(clock, A, epoch=4)
    _send(log, producer.batch())
    with pytest.raises(InvalidProducerEpoch):
        log.append_marker(A, 4, True, 0, transaction_version=2)
    log.append_marker(A, 5, True, 0, transaction_version=2)
    log.append_marker(A, 5, True, 0, transaction_version=2)  # a retry of the same marker
    log.update_high_watermark(log.log_end_offset)
    assert log.producer_state.producers[A].epoch == 5
    assert log.last_stable_offset == 4


def test_transactional_data_with_an_older_epoch_is_fenced(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    _send(log, Producer(clock, A, epoch=1).batch())
    with pytest.raises(InvalidProducerEpoch):
        _send(log, Producer(clock, A, epoch=0).batch())


def test_a_non_transactional_batch_during_the_producers_transaction_is_refused(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    producer = Producer(clock, A)
    _send(log, producer.batch())
    with pytest.raises(InvalidTxnState):
        _send(log, producer.batch(transactional=False))


def test_a_retried_transactional_batch_is_not_written_twice(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    producer = Producer(clock, A)
    batch = producer.batch()
    assert _send(log, bytearray(batch)) == 0
    assert _send(log, bytearray(batch)) == 0
    assert log.log_end_offset == 2


def test_producer_entries_describe_the_open_transaction(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path / "t-0", clock)
    producer = Producer(clock, A, epoch=2)
    _plain(log, clock)
    _send(log, producer.batch(3))
    entry = log.producer_state.producers[A]
    assert (entry.epoch, entry.last_sequence, entry.current_txn_first_offset) == (2, 2, 1)
    assert entry.last_timestamp == clock()
    _end(log, producer, commit=True, coordinator_epoch=7)
    assert (entry.coordinator_epoch, entry.current_txn_first_offset) == (7, -1)


# -- restarts --------------------------------------------------------------------------------


def test_an_open_transaction_survives_a_clean_restart_through_the_snapshot(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    producer = Producer(clock, A)
    _plain(log, clock, 2)
    _send(log, producer.batch())  # 2-3
    _plain(log, clock)  # 4
    log.close()
    reopened = _open(tmp_path / "t-0", clock)
    assert reopened.last_stable_offset == 2
    entry = reopened.producer_state.producers[A]
    assert (entry.current_txn_first_offset, entry.last_sequence) == (2, 1)
    _send(reopened, producer.batch())  # sequences go on: 5-6
    _end(reopened, producer, commit=False)
    assert reopened.collect_aborted_transactions(0, 10) == [(A, 2)]


def test_replay_after_a_snapshot_rebuilds_open_transactions(
    tmp_path: Path, clock: ManualClock
) -> None:
    props = {"segment.bytes": 250}
    log = _open(tmp_path / "t-0", clock, **props)
    a, b = Producer(clock, A), Producer(clock, B)
    _send(log, a.batch(2, size=60))  # opened before the roll: comes from the snapshot
    log.roll()
    _send(log, b.batch(2, size=60))  # opened after it: comes from replay
    _plain(log, clock)
    log.flush(2)
    assert (tmp_path / "t-0" / f"{2:020d}.snapshot").exists()
    # no close: as after kill -9, recovery starts at the segment of the recovery point (2)
    crashed = _open(tmp_path / "t-0", clock, clean=False, recovery_point=2, **props)
    assert crashed.producer_state.ongoing_transactions() == {0: A, 2: B}
    assert crashed.last_stable_offset == 0
    _end(crashed, a, commit=True)
    assert crashed.last_stable_offset == 2


def test_the_txnindex_survives_a_clean_restart(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path / "t-0", clock)
    producer = Producer(clock, A)
    _send(log, producer.batch())
    _end(log, producer, commit=False)
    log.close()
    reopened = _open(tmp_path / "t-0", clock)
    assert reopened.collect_aborted_transactions(0, 3) == [(A, 0)]


def test_crash_recovery_rebuilds_lost_txnindexes(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path / "t-0", clock)
    a, b, c = Producer(clock, A), Producer(clock, B), Producer(clock, C)
    _send(log, a.batch())  # 0-1
    _send(log, b.batch())  # 2-3
    _end(log, a, commit=False)  # 4
    log.roll()  # a snapshot at 5 holds B's open transaction
    _send(log, c.batch())  # 5-6
    _end(log, b, commit=False)  # 7
    _end(log, c, commit=False)  # 8
    indexes = [tmp_path / "t-0" / f"{base:020d}.txnindex" for base in (0, 5)]
    expected = [index.read_bytes() for index in indexes]
    for index in indexes:
        index.unlink()  # as if the crash came before the indexes reached the disk
    crashed = _open(tmp_path / "t-0", clock, clean=False)
    assert crashed.collect_aborted_transactions(0, 9) == [(A, 0), (B, 2), (C, 5)]
    assert [index.read_bytes() for index in indexes] == expected


def test_crash_truncation_drops_the_aborts_it_cuts_off(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path / "t-0", clock)
    a, b = Producer(clock, A), Producer(clock, B)
    _send(log, a.batch())  # 0-1
    _end(log, a, commit=False)  # 2
    _send(log, b.batch())  # 3-4
    _end(log, b, commit=False)  # 5: its marker will be torn
    log.flush()
    segment = tmp_path / "t-0" / f"{0:020d}.log"
    os.truncate(segment, segment.stat().st_size - 5)
    crashed = _open(tmp_path / "t-0", clock, clean=False)
    assert crashed.log_end_offset == 5
    assert crashed.collect_aborted_transactions(0, 10) == [(A, 0)]
    assert len(_txn_index_entries(tmp_path / "t-0" / f"{0:020d}.txnindex")) == 1
    assert crashed.last_stable_offset == 3  # B's transaction is open again


# -- retention and compaction ------------------------------------------------------------------


def test_retention_deletes_txnindex_files_with_their_segments(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock, **{"segment.bytes": 300, "retention.ms": 1000,
                                            "file.delete.delay.ms": 0})  # fmt: skip
    producer = Producer(clock, A)
    _send(log, producer.batch())
    _end(log, producer, commit=False)
    log.roll()
    _plain(log, clock)
    index = tmp_path / "t-0" / f"{0:020d}.txnindex"
    assert index.exists()
    clock.advance(2000)
    assert log.delete_old_segments() == 1
    assert not index.exists()
    assert (tmp_path / "t-0" / f"{0:020d}.txnindex.deleted").exists()
    log.purge_deleted_segments()
    assert not (tmp_path / "t-0" / f"{0:020d}.txnindex.deleted").exists()
    assert log.collect_aborted_transactions(3, 4) == []


def test_cleaning_keeps_the_aborted_transactions_of_cleaned_segments(
    tmp_path: Path, clock: ManualClock
) -> None:
    props = {"cleanup.policy": "compact", "segment.bytes": 600, "file.delete.delay.ms": 0}
    log = _open(tmp_path / "t-0", clock, **props)
    producer = Producer(clock, A)

    def put(key: bytes) -> None:
        _send(log, make_batch([b"v" * 20], keys=[key], timestamp=clock()))

    put(b"k")  # 0
    _send(log, producer.batch(keyed=True))  # 1-2
    _end(log, producer, commit=False)  # 3
    put(b"k")  # 4: makes offset 0 removable
    log.roll()
    put(b"k")  # 5
    log.roll()
    first_segment = log.segments[0]

    result = LogCleaner().clean_blocking(log, None)

    assert result is not None and result.records_removed >= 1
    assert log.segments[0] is not first_segment
    assert log.collect_aborted_transactions(0, 5) == [(A, 1)]
    index = tmp_path / "t-0" / f"{0:020d}.txnindex"
    assert [e[1:4] for e in _txn_index_entries(index)] == [(A, 1, 3)]
    log.close()
    assert _open(tmp_path / "t-0", clock, **props).collect_aborted_transactions(0, 5) == [(A, 1)]
