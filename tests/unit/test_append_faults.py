"""An append that fails part-way leaves the log exactly as it was (all-or-nothing).

The faults are real: the process runs out of file descriptors (the soft
``RLIMIT_NOFILE`` is lowered and the free slots are filled, as idle
connections would fill them), or a write crosses ``RLIMIT_FSIZE`` and is cut
short by the kernel. After each failure the test checks what a client and a
restart would see: the log end offset and files did not move, later appends
get the offsets the failed one would have had, every record read back is one
that was acknowledged, and a reload after a crash (no clean shutdown) finds
exactly the acknowledged records.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import make_batch, read_log
from tests.resource_limits import descriptors_left, file_size_limit

from samsa.errors import KafkaStorageError
from samsa.records import RecordBatchBuilder, iter_records, read_batch
from samsa.storage import Log, LogConfig, load_log
from samsa.testing.clock import ManualClock

SEGMENT_BYTES = 2048


def _open(directory: Path, clock: ManualClock) -> Log:
    config = LogConfig.from_props({"segment.bytes": SEGMENT_BYTES, "index.interval.bytes": 1})
    return load_log(directory, config, clock=clock, clean_shutdown=True)


class AckedLog:
    """A log and the records it acknowledged (offset → value)."""

    def __init__(self, log: Log, clock: ManualClock) -> None:
        self.log = log
        self.clock = clock
        self.acked: dict[int, bytes] = {}
        self.sequence = 0

    def next_batch(self) -> bytearray:
        self.sequence += 1
        values = [f"v{self.sequence}-{i}".encode() * 8 for i in range(3)]
        self.clock.advance(1)
        return make_batch(values, timestamp=self.clock())

    def append(self, batch: bytearray | None = None) -> None:
        batch = self.next_batch() if batch is None else batch
        values = [bytes(v) for v in _values_of(batch)]
        info = self.log.append_as_leader(batch)
        offsets = range(info.first_offset, info.last_offset + 1)
        self.acked.update(zip(offsets, values, strict=True))

    def fill_until_roll_is_due(self) -> bytearray:
        """Append until the next batch must start a new segment; return that batch."""
        while True:
            batch = self.next_batch()
            active = self.log.active_segment
            if active.should_roll(len(batch), self.clock(), self.log.log_end_offset, self.clock()):
                return batch
            self.append(batch)

    def records(self, log: Log | None = None) -> dict[int, bytes]:
        return {r.offset: r.value or b"" for r in read_log(log or self.log)}


def _values_of(batch: bytearray) -> list[bytes]:
    return [r.value or b"" for r in iter_records(read_batch(bytes(batch)))]


def _files(directory: Path) -> dict[str, int]:
    """The segment files and the size of each ``.log`` (index files are pre-allocated)."""
    return {
        p.name: p.stat().st_size if p.suffix == ".log" else 0
        for p in sorted(directory.iterdir())
        if p.suffix in (".log", ".index", ".timeindex", ".txnindex")
    }


def _check_unchanged_then_recovers(acked: AckedLog, directory: Path) -> None:
    """The failed append left no trace; later appends and a crash restart keep every ack."""
    log = acked.log
    assert log.log_end_offset == max(acked.acked) + 1
    assert acked.records() == acked.acked
    for _ in range(6):  # enough to roll at least once more
        acked.append()
    assert acked.records() == acked.acked
    assert sorted(acked.acked) == list(range(len(acked.acked)))
    # A kill -9 now: the log is reloaded without a clean shutdown and recovered.
    reloaded = load_log(
        directory,
        log.config,
        clock=acked.clock,
        clean_shutdown=False,
        recovery_point=0,
    )
    assert acked.records(reloaded) == acked.acked
    reloaded.close()


def _fail_roll_at(tmp_path: Path, clock: ManualClock, suffix: str) -> None:
    """Fail a roll when it opens the new segment's ``suffix`` file; check all-or-nothing."""
    for budget in range(0, 12):
        directory = tmp_path / f"budget-{budget}" / "t-0"
        acked = AckedLog(_open(directory, clock), clock)
        acked.append()
        rolling = acked.fill_until_roll_is_due()
        leo = acked.log.log_end_offset
        files_before = _files(directory)
        try:
            with descriptors_left(budget):
                acked.append(bytearray(rolling))
        except KafkaStorageError as exc:
            if f"{suffix}:" not in str(exc):
                acked.log.close()
                continue
            assert "Too many open files" in str(exc)
            assert acked.log.log_end_offset == leo
            assert len(acked.log.segments) == 1
            assert _files(directory) == files_before
            _check_unchanged_then_recovers(acked, directory)
            acked.log.close()
            return
        acked.log.close()
    pytest.fail(f"no descriptor budget made the roll fail on its {suffix} file")


@pytest.mark.parametrize("suffix", [".log", ".index"])
def test_a_roll_that_cannot_open_a_new_segment_file_appends_nothing(
    tmp_path: Path, clock: ManualClock, suffix: str
) -> None:
    _fail_roll_at(tmp_path, clock, suffix)


def test_a_roll_whose_new_time_index_cannot_be_opened_appends_nothing(
    tmp_path: Path, clock: ManualClock
) -> None:
    # Indexes hold no descriptor once mapped, so the .index and .timeindex opens need
    # the same one slot: a directory in the way makes the second one fail instead.
    directory = tmp_path / "t-0"
    acked = AckedLog(_open(directory, clock), clock)
    acked.append()
    rolling = acked.fill_until_roll_is_due()
    leo = acked.log.log_end_offset
    files_before = _files(directory)
    blocker = directory / f"{leo:020d}.timeindex"
    blocker.mkdir()
    with pytest.raises(KafkaStorageError, match=r"\.timeindex: .*Is a directory"):
        acked.append(bytearray(rolling))
    blocker.rmdir()
    assert acked.log.log_end_offset == leo
    assert len(acked.log.segments) == 1
    assert _files(directory) == files_before
    _check_unchanged_then_recovers(acked, directory)
    acked.log.close()


def test_every_descriptor_shortage_during_a_roll_fails_whole_or_succeeds_whole(
    tmp_path: Path, clock: ManualClock
) -> None:
    for budget in range(0, 12):
        directory = tmp_path / f"budget-{budget}" / "t-0"
        acked = AckedLog(_open(directory, clock), clock)
        acked.append()
        rolling = acked.fill_until_roll_is_due()
        leo = acked.log.log_end_offset
        try:
            with descriptors_left(budget):
                acked.append(bytearray(rolling))
        except KafkaStorageError:
            assert acked.log.log_end_offset == leo
        else:
            assert acked.log.log_end_offset > leo
        _check_unchanged_then_recovers(acked, directory)
        acked.log.close()


def test_an_index_entry_that_cannot_be_written_undoes_the_append(
    tmp_path: Path, clock: ManualClock
) -> None:
    directory = tmp_path / "t-0"
    acked = AckedLog(_open(directory, clock), clock)
    acked.append()  # the segment's first batch gets no index entry; the next one does
    leo = acked.log.log_end_offset
    files_before = _files(directory)
    with descriptors_left(0), pytest.raises(KafkaStorageError, match=r"\.(time)?index'"):
        acked.append()
    assert acked.log.log_end_offset == leo
    assert _files(directory) == files_before
    _check_unchanged_then_recovers(acked, directory)
    acked.log.close()


def test_a_write_cut_short_by_the_kernel_is_cut_back_and_refused(
    tmp_path: Path, clock: ManualClock
) -> None:
    directory = tmp_path / "t-0"
    acked = AckedLog(_open(directory, clock), clock)
    acked.append()
    leo = acked.log.log_end_offset
    size = acked.log.active_segment.size
    files_before = _files(directory)
    batch = acked.next_batch()
    with file_size_limit(size + len(batch) // 2), pytest.raises(KafkaStorageError):
        acked.append(batch)
    assert acked.log.log_end_offset == leo
    assert _files(directory) == files_before
    _check_unchanged_then_recovers(acked, directory)
    acked.log.close()


def test_an_abort_marker_whose_txnindex_cannot_be_opened_is_undone(
    tmp_path: Path, clock: ManualClock
) -> None:
    directory = tmp_path / "t-0"
    log = load_log(directory, LogConfig.from_props({}), clock=clock, clean_shutdown=True)
    builder = RecordBatchBuilder(
        producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    builder.append(b"in the transaction", timestamp=clock())
    log.append_as_leader(bytearray(builder.build()))
    log.update_high_watermark(log.log_end_offset)
    files_before = _files(directory)
    with descriptors_left(0), pytest.raises(KafkaStorageError, match=r"\.txnindex'"):
        log.append_marker(7, 0, False, 0)
    assert log.log_end_offset == 1
    assert _files(directory) == files_before
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 0  # the transaction is still open
    marker = log.append_marker(7, 0, False, 0)  # the coordinator retries
    log.update_high_watermark(log.log_end_offset)
    assert marker.first_offset == 1
    assert log.last_stable_offset == 2
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in
            log.active_segment.txn_index.entries()] == [(7, 0, 1)]  # fmt: skip
    log.close()
