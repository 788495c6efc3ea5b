"""Where a follower cuts its log before fetching from a new leader (KIP-101/279).

Each case is a follower whose leader epochs are given, asking its latest epoch and
getting the leader's answer; the point is that afterwards the follower holds only
records the leader holds at the same offsets.
"""

from __future__ import annotations

from pathlib import Path

from samsa.broker.replication.replica_fetcher import truncation_point
from samsa.storage.leader_epoch import LeaderEpochCache


def _follower(tmp_path: Path, epochs: list[tuple[int, int]], log_end: int):  # type: ignore[no-untyped-def]
    cache = LeaderEpochCache(tmp_path)
    for epoch, start in epochs:
        cache.assign(epoch, start)
    return lambda epoch: cache.end_offset_for(epoch, log_end)


def test_a_follower_that_has_the_leaders_epoch_keeps_what_both_wrote_in_it(
    tmp_path: Path,
) -> None:
    # Follower: epoch 1 from 0, epoch 2 from 100, log end 150. The leader's epoch 2
    # ended at 120 (then it wrote epoch 3): records 120..149 here were never committed.
    ends = _follower(tmp_path, [(1, 0), (2, 100)], log_end=150)
    assert truncation_point(ends, 150, 90, 2, 120) == (120, None)


def test_a_follower_behind_the_leader_keeps_everything(tmp_path: Path) -> None:
    ends = _follower(tmp_path, [(1, 0), (2, 100)], log_end=110)
    assert truncation_point(ends, 110, 90, 2, 120) == (110, None)


def test_a_follower_that_never_had_the_leaders_epoch_cuts_where_its_own_earlier_epoch_ends(
    tmp_path: Path,
) -> None:
    # The follower (an old leader) wrote epoch 3 from 100 that the new leader never saw;
    # the new leader answers its own largest epoch below 3: epoch 2, ending at 130.
    ends = _follower(tmp_path, [(1, 0), (3, 100)], log_end=180)
    assert truncation_point(ends, 180, 90, 2, 130) == (100, 1)
    # It then asks about epoch 1, which both had; epoch 1 ended at 100 on the leader.
    assert truncation_point(ends, 100, 90, 1, 100) == (100, None)


def test_a_leader_that_knows_no_epoch_leaves_only_the_high_watermark(tmp_path: Path) -> None:
    ends = _follower(tmp_path, [(1, 0)], log_end=50)
    assert truncation_point(ends, 50, 40, -1, -1) == (40, None)


def test_a_follower_without_epochs_keeps_up_to_the_leaders_end(tmp_path: Path) -> None:
    ends = _follower(tmp_path, [], log_end=30)
    assert truncation_point(ends, 30, 0, 4, 20) == (20, None)
