"""The leader-epoch-checkpoint: which epoch wrote which offsets, and where a follower truncates."""

from __future__ import annotations

from pathlib import Path

import pytest

from samsa.errors import StorageError
from samsa.storage.leader_epoch import EpochEntry, LeaderEpochCache


def entries(cache: LeaderEpochCache) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in cache.entries]


def test_epochs_are_written_in_kafkas_file_format(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    cache.assign(0, 0)
    cache.assign(3, 1234)
    cache.flush()
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n3 1234\n"
    assert entries(LeaderEpochCache(tmp_path)) == [(0, 0), (3, 1234)]


def test_later_appends_in_the_same_epoch_add_nothing(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    cache.assign(1, 10)
    cache.assign(1, 50)
    assert entries(cache) == [(1, 10)]


def test_a_new_entry_drops_those_at_or_above_its_epoch_or_offset(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    for epoch, start in [(0, 0), (2, 100), (4, 200)]:
        cache.assign(epoch, start)
    cache.assign(3, 150)
    assert entries(cache) == [(0, 0), (2, 100), (3, 150)]


def test_the_latest_epoch_ends_at_the_log_end(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    cache.assign(0, 0)
    cache.assign(2, 100)
    assert cache.end_offset_for(2, 180) == (2, 180)


def test_an_earlier_epoch_ends_where_the_next_one_starts(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    cache.assign(0, 0)
    cache.assign(2, 100)
    cache.assign(5, 300)
    assert cache.end_offset_for(0, 400) == (0, 100)
    # Epoch 3 never wrote here: the answer is the epoch below it and where 5 starts.
    assert cache.end_offset_for(3, 400) == (2, 300)


def test_an_epoch_older_than_any_kept_ends_where_the_first_kept_starts(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    cache.assign(4, 500)
    assert cache.end_offset_for(1, 900) == (1, 500)


def test_unknown_and_future_epochs_are_undefined(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    assert cache.end_offset_for(0, 0) == (-1, -1)
    cache.assign(1, 0)
    assert cache.end_offset_for(-1, 10) == (-1, -1)
    assert cache.end_offset_for(7, 10) == (-1, -1)


def test_truncating_the_log_end_drops_epochs_that_began_past_it(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    for epoch, start in [(0, 0), (1, 100), (2, 200)]:
        cache.assign(epoch, start)
    cache.truncate_from_end(150)
    cache.flush()
    assert entries(LeaderEpochCache(tmp_path)) == [(0, 0), (1, 100)]


def test_moving_the_log_start_moves_the_epoch_that_holds_it(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    for epoch, start in [(0, 0), (1, 100), (2, 200)]:
        cache.assign(epoch, start)
    cache.truncate_from_start(150)
    cache.flush()
    assert entries(LeaderEpochCache(tmp_path)) == [(1, 150), (2, 200)]


def test_the_epoch_of_an_offset_is_the_last_one_started_at_or_before_it(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    cache.assign(1, 10)
    cache.assign(3, 20)
    assert [cache.epoch_for_offset(o) for o in (5, 10, 19, 20, 99)] == [-1, 1, 1, 3, 3]


@pytest.mark.parametrize(
    "content",
    [b"1\n0\n", b"0\n2\n1 0\n", b"0\nx\n", b"0\n2\n3 10\n2 20\n", b"\xff\n"],
)
def test_a_malformed_checkpoint_is_refused_naming_the_file(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "leader-epoch-checkpoint").write_bytes(content)
    with pytest.raises(StorageError, match="leader-epoch-checkpoint"):
        LeaderEpochCache(tmp_path)


def test_a_missing_checkpoint_is_an_empty_cache(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    assert cache.entries == [] and cache.latest_epoch == -1 and cache.earliest is None
    cache.assign(0, 0)
    assert cache.earliest == EpochEntry(0, 0)


def test_changes_reach_the_file_only_when_flushed(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    cache.assign(0, 0)
    assert cache.dirty and not (tmp_path / "leader-epoch-checkpoint").exists()
    cache.flush()
    assert not cache.dirty and entries(LeaderEpochCache(tmp_path)) == [(0, 0)]


def test_a_writer_that_runs_after_a_newer_one_writes_nothing(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    cache.assign(0, 0)
    older = cache.writer()
    cache.assign(1, 10)
    newer = cache.writer()
    assert older is not None and newer is not None
    newer()
    older()
    assert entries(LeaderEpochCache(tmp_path)) == [(0, 0), (1, 10)]
    assert cache.writer() is None
