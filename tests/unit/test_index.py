"""Offset and time indexes: lookups, truncation, reopening, capacity."""

from __future__ import annotations

import bisect
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.errors import StorageError
from samsa.storage.index import PAGE_SIZE, IndexFullError, OffsetIndex, TimeIndex

BASE = 1000


def _offset_index(tmp_path: Path, max_bytes: int = 8 * 1024) -> OffsetIndex:
    return OffsetIndex(tmp_path / "00000000000000001000.index", BASE, max_bytes, writable=True)


@settings(max_examples=60, deadline=None)
@given(
    deltas=st.lists(st.integers(1, 50), min_size=0, max_size=200),
    targets=st.lists(st.integers(BASE - 5, BASE + 6000), min_size=1, max_size=30),
)
def test_offset_lookup_matches_brute_force_model(
    tmp_path_factory: pytest.TempPathFactory, deltas: list[int], targets: list[int]
) -> None:
    index = _offset_index(tmp_path_factory.mktemp("idx"))
    offsets, offset = [], BASE
    for i, delta in enumerate(deltas):
        offset += delta
        offsets.append(offset)
        index.append(offset, (i + 1) * 100)
    for target in targets:
        expected = (BASE, 0)
        for i, candidate in enumerate(offsets):
            if candidate <= target:
                expected = (candidate, (i + 1) * 100)
        assert index.lookup(target) == expected
    index.close()


@settings(max_examples=60, deadline=None)
@given(
    deltas=st.lists(st.integers(1, 10_000), min_size=1, max_size=200),
    targets=st.lists(st.integers(0, 3_000_000), min_size=1, max_size=30),
)
def test_time_lookup_matches_brute_force_model(
    tmp_path_factory: pytest.TempPathFactory, deltas: list[int], targets: list[int]
) -> None:
    index = TimeIndex(
        tmp_path_factory.mktemp("tidx") / "x.timeindex", BASE, 12 * 1024, writable=True
    )
    timestamps, ts = [], 0
    for i, delta in enumerate(deltas):
        ts += delta
        timestamps.append(ts)
        index.maybe_append(ts, BASE + i * 3)
    for target in targets:
        slot = bisect.bisect_right(timestamps, target) - 1
        expected = (-1, BASE) if slot < 0 else (timestamps[slot], BASE + slot * 3)
        assert index.lookup(target) == expected
    index.close()


def test_time_index_skips_timestamps_not_newer_than_the_last(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "t.timeindex", 0, 1200, writable=True)
    index.maybe_append(100, 5)
    index.maybe_append(100, 9)
    index.maybe_append(90, 12)
    assert index.entries == 1
    assert index.lookup(1_000) == (100, 5)


def test_offset_index_rejects_entries_that_go_backwards(tmp_path: Path) -> None:
    index = _offset_index(tmp_path)
    index.append(BASE + 10, 400)
    with pytest.raises(StorageError):
        index.append(BASE + 10, 800)


def test_full_offset_index_raises_index_full(tmp_path: Path) -> None:
    index = _offset_index(tmp_path, max_bytes=8 * 4)
    for i in range(4):
        index.append(BASE + i + 1, (i + 1) * 10)
    assert index.is_full
    with pytest.raises(IndexFullError):
        index.append(BASE + 10, 100)


def test_truncate_removes_entries_at_and_after_the_offset(tmp_path: Path) -> None:
    index = _offset_index(tmp_path)
    for i in range(1, 6):
        index.append(BASE + i * 10, i * 100)
    index.truncate_to(BASE + 30)
    assert index.entries == 2
    assert index.lookup(BASE + 45) == (BASE + 20, 200)


def test_close_trims_the_preallocated_file_to_its_entries(tmp_path: Path) -> None:
    index = _offset_index(tmp_path)
    index.append(BASE + 3, 4100)
    assert index.path.stat().st_size == PAGE_SIZE
    index.append(BASE + 7, 8300)
    index.close()
    assert index.path.stat().st_size == 16


def test_an_empty_index_is_not_preallocated_until_its_first_entry(tmp_path: Path) -> None:
    index = _offset_index(tmp_path)
    assert index.path.stat().st_size == 0
    assert index.lookup(BASE + 5) == (BASE, 0)
    index.append(BASE + 3, 4100)
    assert index.path.stat().st_size == PAGE_SIZE


def test_an_index_grows_by_doubling_up_to_its_maximum(tmp_path: Path) -> None:
    index = _offset_index(tmp_path)
    sizes = set()
    for i in range(1, 1025):
        index.append(BASE + i, i * 10)
        sizes.add(index.path.stat().st_size)
    assert sizes == {PAGE_SIZE, 2 * PAGE_SIZE}
    assert index.is_full
    assert [index.lookup(BASE + i) for i in (1, 700, 1024)] == [
        (BASE + 1, 10),
        (BASE + 700, 7000),
        (BASE + 1024, 10240),
    ]


def test_reopened_preallocated_index_counts_only_written_entries(tmp_path: Path) -> None:
    # As after a crash: the file was never trimmed and ends in zeros.
    index = _offset_index(tmp_path)
    index.append(BASE + 3, 4100)
    index.append(BASE + 7, 8300)
    index.flush()
    reopened = OffsetIndex(index.path, BASE, 8 * 1024, writable=True)
    assert reopened.entries == 2
    assert reopened.lookup(BASE + 100) == (BASE + 7, 8300)


def test_trimmed_index_grows_again_when_appended_to(tmp_path: Path) -> None:
    index = _offset_index(tmp_path)
    index.append(BASE + 1, 100)
    index.close()
    reopened = OffsetIndex(index.path, BASE, 8 * 1024, writable=True)
    reopened.append(BASE + 2, 200)
    assert reopened.entries == 2
    assert reopened.lookup(BASE + 2) == (BASE + 2, 200)


def test_sanity_check_rejects_positions_past_the_log(tmp_path: Path) -> None:
    index = _offset_index(tmp_path)
    index.append(BASE + 1, 5000)
    with pytest.raises(StorageError):
        index.sanity_check(log_size=4000)


def test_reopening_an_existing_index_does_not_grow_its_file(tmp_path: Path) -> None:
    index = _offset_index(tmp_path)
    index.append(BASE + 1, 100)
    index.close()
    reopened = OffsetIndex(index.path, BASE, 8 * 1024, writable=True)
    assert reopened.path.stat().st_size == 8
    assert reopened.entries == 1
