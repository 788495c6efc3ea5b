"""A log's leader epochs: recorded by appends, cut by truncation, kept across crashes."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import make_batch

from samsa.records import read_batch
from samsa.storage import Log, LogConfig, load_log
from samsa.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT
from samsa.testing.clock import ManualClock


def _open(directory: Path, clock: ManualClock, *, clean: bool = True) -> Log:
    return load_log(directory, LogConfig(), clock=clock, clean_shutdown=clean)


def _epochs(log: Log) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries]


def _stamped(values: list[bytes], epoch: int, base_offset: int, clock: ManualClock) -> bytearray:
    """A batch as a leader of ``epoch`` wrote it at ``base_offset`` (what a follower appends)."""
    batch = make_batch(values, timestamp=clock())
    view = read_batch(memoryview(batch))
    view.set_base_offset(base_offset)
    view.set_partition_leader_epoch(epoch)
    return batch


def test_a_leaders_first_append_in_an_epoch_records_where_it_began(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    log.append_as_leader(make_batch([b"a", b"b"], timestamp=clock()), leader_epoch=0)
    log.append_as_leader(make_batch([b"c"], timestamp=clock()), leader_epoch=0)
    log.append_as_leader(make_batch([b"d"], timestamp=clock()), leader_epoch=3)
    assert _epochs(log) == [(0, 0), (3, 3)]
    assert log.end_offset_for_epoch(0) == (0, 3)
    assert log.end_offset_for_epoch(3) == (3, 4)
    assert log.end_offset_for_epoch(2) == (0, 3)


def test_a_follower_takes_the_epochs_its_leaders_stamped(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    log.append_as_follower(_stamped([b"a", b"b"], 1, 0, clock))
    log.append_as_follower(_stamped([b"c"], 1, 2, clock) + _stamped([b"d"], 4, 3, clock))
    assert _epochs(log) == [(1, 0), (4, 3)]
    assert log.latest_epoch == 4


def test_truncation_drops_the_epochs_that_began_past_the_new_end(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    log.append_as_follower(_stamped([b"a", b"b"], 1, 0, clock))
    log.append_as_follower(_stamped([b"c", b"d"], 2, 2, clock))
    log.truncate_to(2)
    assert _epochs(log) == [(1, 0)]
    log.append_as_follower(_stamped([b"x"], 3, 2, clock))
    assert _epochs(log) == [(1, 0), (3, 2)]


def test_epochs_survive_a_clean_restart(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path / "t-0", clock)
    log.append_as_leader(make_batch([b"a"], timestamp=clock()), leader_epoch=2)
    log.append_as_leader(make_batch([b"b"], timestamp=clock()), leader_epoch=5)
    log.close()
    assert _epochs(_open(tmp_path / "t-0", clock)) == [(2, 0), (5, 1)]


def test_after_a_crash_the_epochs_of_recovered_batches_are_read_again(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    log.append_as_leader(make_batch([b"a"], timestamp=clock()), leader_epoch=2)
    log.flush()  # the checkpoint holds epoch 2
    log.append_as_leader(make_batch([b"b"], timestamp=clock()), leader_epoch=5)
    # A crash: epoch 5 never reached the checkpoint file.
    assert _epochs(load_log(tmp_path / "t-0", LogConfig(), clock=clock, clean_shutdown=True)) == [
        (2, 0)
    ]
    recovered = load_log(
        tmp_path / "t-0", LogConfig(), clock=clock, clean_shutdown=False, recovery_point=1
    )
    assert _epochs(recovered) == [(2, 0), (5, 1)]


def test_an_unreadable_checkpoint_is_rebuilt_from_the_batches(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    log.append_as_leader(make_batch([b"a"], timestamp=clock()), leader_epoch=1)
    log.append_as_leader(make_batch([b"b"], timestamp=clock()), leader_epoch=4)
    log.close()
    (tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT).write_bytes(b"\xff garbage")
    assert _epochs(_open(tmp_path / "t-0", clock)) == [(1, 0), (4, 1)]


def test_moving_the_log_start_moves_the_first_epoch_with_it(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    log.append_as_leader(make_batch([b"a", b"b", b"c"], timestamp=clock()), leader_epoch=1)
    log.append_as_leader(make_batch([b"d"], timestamp=clock()), leader_epoch=2)
    log.update_high_watermark(log.log_end_offset)
    log.delete_records_before(2)
    assert _epochs(log) == [(1, 2), (2, 3)]
