"""A leader's view of its followers: caught-up times, ISR shrink and expand, high watermark."""

from __future__ import annotations

from samsa.broker.replication.replicas import FollowerState, LeaderReplicas

LAG_MS = 30_000
T0 = 1_000_000


def leader(isr: tuple[int, ...] = (1, 2, 3), hw: int = 0, epoch_start: int = 0) -> LeaderReplicas:
    return LeaderReplicas(
        1, (1, 2, 3), isr, high_watermark=hw, epoch_start_offset=epoch_start, now_ms=T0
    )


def test_the_high_watermark_is_the_lowest_log_end_over_the_isr() -> None:
    replicas = leader()
    assert not replicas.record_fetch(2, 100, 100, T0)  # follower 3 has not fetched yet
    assert replicas.high_watermark == 0
    assert replicas.record_fetch(3, 60, 100, T0)
    assert replicas.high_watermark == 60
    assert replicas.record_fetch(3, 100, 100, T0)
    assert replicas.high_watermark == 100


def test_the_high_watermark_never_goes_back() -> None:
    replicas = leader(hw=80)
    replicas.record_fetch(2, 50, 100, T0)
    replicas.record_fetch(3, 50, 100, T0)
    assert replicas.high_watermark == 80


def test_a_follower_that_keeps_up_stays_in_the_isr() -> None:
    replicas = leader()
    for t in range(0, 120_000, 5_000):
        replicas.record_fetch(2, 100, 100, T0 + t)
        replicas.record_fetch(3, 100, 100, T0 + t)
    assert replicas.isr_to_shrink(100, T0 + 120_000, LAG_MS) is None


def test_a_follower_not_caught_up_for_the_lag_time_leaves_the_isr() -> None:
    replicas = leader()
    replicas.record_fetch(2, 100, 100, T0)
    replicas.record_fetch(3, 100, 100, T0)
    replicas.record_fetch(2, 100, 200, T0 + 10_000)  # behind since the leader reached 200
    replicas.record_fetch(3, 200, 200, T0 + 10_000)
    assert replicas.isr_to_shrink(200, T0 + 30_000, LAG_MS) is None
    assert replicas.isr_to_shrink(200, T0 + 40_001, LAG_MS) == (1, 3)


def test_a_follower_that_reached_the_previous_log_end_counts_as_caught_up_then() -> None:
    state = FollowerState(2)
    state.record_fetch(100, 100, T0)  # caught up at T0
    state.record_fetch(100, 150, T0 + 1_000)  # the leader moved on meanwhile
    state.record_fetch(150, 180, T0 + 2_000)  # reached what the leader had at T0+1000
    assert state.last_caught_up_ms == T0 + 1_000


def test_a_silent_follower_in_the_isr_gets_a_full_lag_window_after_an_election() -> None:
    replicas = leader()
    assert replicas.isr_to_shrink(100, T0 + LAG_MS, LAG_MS) is None
    assert replicas.isr_to_shrink(100, T0 + LAG_MS + 1, LAG_MS) == (1,)


def test_a_follower_rejoins_once_it_reaches_the_high_watermark_and_the_epoch_start() -> None:
    replicas = leader(isr=(1, 2), epoch_start=120)
    replicas.record_fetch(2, 150, 150, T0)
    assert replicas.high_watermark == 150
    replicas.record_fetch(3, 140, 150, T0)
    assert replicas.isr_to_expand() is None
    replicas.record_fetch(3, 150, 150, T0)
    assert replicas.isr_to_expand() == (1, 2, 3)


def test_a_caught_up_follower_in_a_controlled_shutdown_is_not_taken_back() -> None:
    replicas = leader(isr=(1, 2))
    replicas.record_fetch(2, 150, 150, T0)
    replicas.record_fetch(3, 150, 150, T0)
    assert replicas.isr_to_expand(barred={3}) is None
    assert replicas.isr_to_expand(barred={2}) == (1, 2, 3)  # already in: not its to drop


def test_shrinking_the_isr_releases_a_high_watermark_held_by_the_dropped_follower() -> None:
    replicas = leader()
    replicas.record_fetch(2, 100, 100, T0)
    replicas.record_fetch(3, 10, 100, T0)
    assert replicas.high_watermark == 10
    assert replicas.apply_isr((1, 2), 100)
    assert replicas.high_watermark == 100
    assert replicas.reached(100) and not replicas.reached(101)


def test_fetches_from_brokers_that_are_not_replicas_change_nothing() -> None:
    replicas = leader()
    assert not replicas.record_fetch(7, 100, 100, T0)
    assert 7 not in replicas.followers
