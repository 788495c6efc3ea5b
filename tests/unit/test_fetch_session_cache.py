"""The fetch session cache's bounds and eviction rules, and the session epochs (KIP-227)."""

from __future__ import annotations

from samsa.broker.replication.fetch_session import (
    EVICTION_MS,
    INT32_MAX,
    SWEEP_MS,
    CachedPartition,
    FetchSession,
    FetchSessionCache,
    next_epoch,
)


def _partitions(count: int) -> list[CachedPartition]:
    return [CachedPartition("t", None, p, 0, 1 << 20) for p in range(count)]


def _session(cache: FetchSessionCache, size: int, now: int, *, privileged: bool = False) -> int:
    session = cache.create(_partitions(size), privileged=privileged, uses_topic_ids=False,
                           now_ms=now)  # fmt: skip
    return 0 if session is None else session.id


def test_the_epoch_after_the_largest_int32_is_one() -> None:
    assert next_epoch(1) == 2
    assert next_epoch(INT32_MAX) == 1


def test_session_ids_are_non_zero_and_distinct() -> None:
    cache = FetchSessionCache(max_slots=50)
    ids = {_session(cache, 1, 0) for _ in range(50)}
    assert len(ids) == 50
    assert 0 not in ids
    assert all(0 < i <= INT32_MAX for i in ids)


def test_a_full_cache_makes_no_session_for_an_equal_newcomer() -> None:
    cache = FetchSessionCache(max_slots=2)
    _session(cache, 3, 0)
    _session(cache, 3, 0)
    assert _session(cache, 3, 1) == 0
    assert len(cache) == 2


def test_a_session_idle_past_the_eviction_time_gives_its_slot_to_any_newcomer() -> None:
    cache = FetchSessionCache(max_slots=1)
    old = _session(cache, 10, 0)
    assert _session(cache, 1, EVICTION_MS + 1) != 0
    assert cache.get(old) is None
    assert cache.evictions == 1


def test_a_larger_session_evicts_the_smallest_consumer_session() -> None:
    cache = FetchSessionCache(max_slots=2)
    small = _session(cache, 1, 0)
    big = _session(cache, 5, 0)
    assert _session(cache, 2, 1) != 0
    assert cache.get(small) is None
    assert cache.get(big) is not None


def test_a_follower_session_evicts_a_consumer_session_but_not_the_reverse() -> None:
    cache = FetchSessionCache(max_slots=1)
    follower = _session(cache, 1, 0, privileged=True)
    assert _session(cache, 100, 1) == 0
    assert cache.get(follower) is not None
    cache = FetchSessionCache(max_slots=1)
    consumer = _session(cache, 100, 0)
    assert _session(cache, 1, 1, privileged=True) != 0
    assert cache.get(consumer) is None


def test_no_slots_means_no_sessions() -> None:
    assert _session(FetchSessionCache(max_slots=0), 1, 0) == 0


def test_a_session_looks_at_marked_partitions_then_at_all_of_them_once_per_sweep() -> None:
    cache = FetchSessionCache()
    session = cache.get(_session(cache, 4, 0))
    assert isinstance(session, FetchSession)
    assert session.take_attention(1) == set()
    session.mark(("t", 2))
    assert session.take_attention(2) == {("t", 2)}
    assert session.take_attention(3) == set()
    assert session.take_attention(SWEEP_MS + 1) == {("t", p) for p in range(4)}


def test_partitions_to_look_at_come_in_the_session_order() -> None:
    cache = FetchSessionCache()
    session = cache.get(_session(cache, 20, 0))
    assert isinstance(session, FetchSession)
    session.to_end(("t", 3))
    ordered = session.in_order({("t", 3), ("t", 7), ("t", 1)})
    assert [p.partition for p in ordered] == [1, 7, 3]
