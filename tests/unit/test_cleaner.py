"""The log cleaner: last value per key, tombstones, lags, ratio, codecs, crashes, producers."""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
from tests.conftest import make_batch

from samsa.records import (
    CompressionType,
    ControlRecordType,
    Record,
    RecordBatchBuilder,
    build_end_transaction_batch,
    iter_batches,
    iter_records,
    read_batch,
)
from samsa.storage import AppendOrigin, Log, LogConfig, LogManager, load_log
from samsa.storage.checkpoint import read_offset_checkpoint
from samsa.storage.cleaner import CleanedOutput, CleanerAbortedError, CleaningPlan, LogCleaner
from samsa.testing.clock import ManualClock
from samsa.testing.waiting import wait_until_async
from samsa.types import TopicPartition

COMPACT = {
    "cleanup.policy": "compact",
    "segment.bytes": 600,
    "index.interval.bytes": 64,
    "delete.retention.ms": 60_000,
    "file.delete.delay.ms": 0,
}
TP = TopicPartition("compacted", 0)
HANG_S = 30  # a real-time deadline that only detects a hang

Entry = tuple[int, bytes | None, bytes | None]
"""(offset, key, value) of a record read back."""


def _config(**props: object) -> LogConfig:
    return LogConfig.from_props({**COMPACT, **props})


def _open(directory: Path, clock: ManualClock, **props: object) -> Log:
    return load_log(directory, _config(**props), clock=clock, clean_shutdown=True)


def _put(
    log: Log,
    clock: ManualClock,
    *pairs: tuple[bytes | None, bytes | None],
    compression: CompressionType = CompressionType.NONE,
) -> int:
    """Append one batch of (key, value) records stamped now; the clock moves 10 ms."""
    batch = make_batch(
        [v for _, v in pairs],
        keys=[k for k, _ in pairs],
        timestamp=clock(),
        compression=compression,
    )
    info = log.append_as_leader(batch)
    log.update_high_watermark(log.log_end_offset)
    clock.advance(10)
    return info.first_offset


def _records(log: Log) -> list[Record]:
    """Every record from the log start, fetch by fetch as a consumer reads.

    Unlike ``read_log`` a read that finds nothing ends the walk: compaction may
    leave a gap between the last record and the log end offset, which a
    consumer simply waits in.
    """
    offset, records = log.log_start_offset, []
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).region.read()
        if not data:
            break
        for batch in iter_batches(data[: _whole_batches_length(data)]):
            batch.validate()
            records += [r for r in iter_records(batch) if r.offset >= offset]
            offset = max(offset, batch.next_offset)
    return records


def _whole_batches_length(data: bytes) -> int:
    position = 0
    while len(data) - position >= 12:
        size = int.from_bytes(data[position + 8 : position + 12], "big") + 12
        if position + size > len(data):
            break
        position += size
    assert position, "a read returned no whole batch"
    return position


def _contents(log: Log) -> list[Entry]:
    return [(r.offset, r.key, r.value) for r in _records(log)]


def _latest_per_key(entries: Sequence[Entry]) -> list[Entry]:
    latest: dict[bytes | None, Entry] = {}
    for entry in entries:
        latest[entry[1]] = entry
    return sorted(latest.values())


def _write_rounds(log: Log, clock: ManualClock, rounds: int, keys: int, roll: bool = True) -> None:
    """``rounds`` values of keys ``key-0``… one record a batch; then roll (all cleanable)."""
    for n in range(rounds):
        for k in range(keys):
            _put(log, clock, (f"key-{k}".encode(), f"round-{n}-key-{k}".encode()))
    if roll:
        log.roll()


def _batches(log: Log) -> list[bytes]:
    return [bytes(b.buffer) for s in log.segments for b in iter_batches(s.read_all())]


# -- what a pass keeps --------------------------------------------------------------


def test_cleaning_keeps_the_latest_value_of_each_key_at_its_original_offset(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    _write_rounds(log, clock, rounds=6, keys=8)
    before, segments_before, leo = _contents(log), len(log.segments), log.log_end_offset

    result = LogCleaner().clean_blocking(log, None)

    assert result is not None
    assert result.next_dirty_offset == leo
    assert _contents(log) == _latest_per_key(before)
    assert [offset for offset, _, _ in _contents(log)] == list(range(40, 48))
    assert log.log_end_offset == leo
    assert len(log.segments) < segments_before
    assert not [p for p in (tmp_path / "t-0").iterdir() if p.name.endswith((".cleaned", ".swap"))]


def test_appends_and_reads_go_on_after_cleaning(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path / "t-0", clock)
    _write_rounds(log, clock, rounds=3, keys=4)
    LogCleaner().clean_blocking(log, None)
    offset = _put(log, clock, (b"key-0", b"after"))
    assert offset == 12
    assert _contents(log)[-1] == (12, b"key-0", b"after")
    assert read_batch(log.read(10, 1).region.read()).base_offset == 10


def test_active_segment_is_never_cleaned(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path / "t-0", clock, **{"segment.bytes": 100_000})
    _write_rounds(log, clock, rounds=2, keys=3)
    _write_rounds(log, clock, rounds=2, keys=3, roll=False)  # duplicates, in the active segment
    active, active_bytes = log.active_segment, log.active_segment.read_all()

    LogCleaner().clean_blocking(log, None)

    assert log.active_segment is active
    assert active.read_all() == active_bytes
    assert [offset for offset, _, _ in _contents(log)] == [3, 4, 5, 6, 7, 8, 9, 10, 11]


def test_cleaned_segments_answer_offset_and_timestamp_lookups(
    tmp_path: Path, clock: ManualClock
) -> None:
    directory = tmp_path / "t-0"
    log = _open(directory, clock, **{"segment.bytes": 2000, "index.interval.bytes": 32})
    timestamps: dict[int, int] = {}
    for n in range(12):
        for k in range(10):
            written_at = clock()
            offset = _put(log, clock, (f"k{k}".encode(), f"v{n}".encode() * (1 + k % 4)))
            timestamps[offset] = written_at
    log.roll()
    LogCleaner(dedupe_buffer_size=1 << 20).clean_blocking(log, None)
    survivors = [offset for offset, _, _ in _contents(log)]
    assert survivors == list(range(110, 120))

    def check_lookups(log: Log) -> None:
        for offset in survivors:
            batch = read_batch(log.read(offset, 1).region.read())
            assert batch.base_offset <= offset <= batch.last_offset
            assert log.fetch_offset_by_timestamp(timestamps[offset]) == (offset, timestamps[offset])
        # A removed record's timestamp finds the first survivor after it.
        assert log.fetch_offset_by_timestamp(timestamps[3]) == (110, timestamps[110])
        for segment in log.segments:
            segment.sanity_check()

    check_lookups(log)
    assert any(s.offset_index.entries for s in log.segments if s.size)
    log.close()
    check_lookups(load_log(directory, _config(), clock=clock, clean_shutdown=True))


# -- tombstones --------------------------------------------------------------------------


def test_tombstones_stay_until_their_delete_horizon_then_go(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    _put(log, clock, (b"a", b"1"), (b"b", b"1"))
    written_at = clock()
    _put(log, clock, (b"a", None))
    log.roll()
    cleaner = LogCleaner()

    first = cleaner.clean_blocking(log, None)
    assert first is not None
    assert _contents(log) == [(1, b"b", b"1"), (2, b"a", None)]
    tombstone_batch = read_batch(log.read(2, 1).region.read())
    assert tombstone_batch.has_delete_horizon
    assert tombstone_batch.base_timestamp == clock() + 60_000
    assert first.earliest_delete_horizon == clock() + 60_000
    assert [r.timestamp for r in _records(log)][-1] == written_at

    clock.advance(59_999)
    cleaner.clean_blocking(log, first.next_dirty_offset, force=True)
    assert _contents(log) == [(1, b"b", b"1"), (2, b"a", None)]

    clock.advance(1)
    third = cleaner.clean_blocking(log, first.next_dirty_offset, force=True)
    assert third is not None
    assert third.earliest_delete_horizon is None
    assert _contents(log) == [(1, b"b", b"1")]
    assert log.log_end_offset == 3


def test_a_tombstone_removes_older_values_of_its_key_at_once(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    _put(log, clock, (b"a", b"1"))
    _put(log, clock, (b"a", b"2"))
    _put(log, clock, (b"a", None))
    log.roll()
    LogCleaner().clean_blocking(log, None)
    assert _contents(log) == [(2, b"a", None)]


# -- when a log is cleaned -------------------------------------------------------------


def test_records_younger_than_min_compaction_lag_stay_dirty(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock, **{"min.compaction.lag.ms": 10_000})
    _put(log, clock, (b"a", b"old"))
    log.roll()
    clock.advance(5_000)
    _put(log, clock, (b"a", b"new"))
    log.roll()
    clock.advance(6_000)  # the first segment is 11 s old, the second 6 s
    cleaner = LogCleaner()

    first = cleaner.clean_blocking(log, None)
    assert first is not None
    assert first.next_dirty_offset == 1
    assert _contents(log) == [(0, b"a", b"old"), (1, b"a", b"new")]

    clock.advance(5_000)
    assert cleaner.clean_blocking(log, first.next_dirty_offset) is not None
    assert _contents(log) == [(1, b"a", b"new")]


def test_dirty_ratio_below_the_minimum_leaves_the_log_alone(
    tmp_path: Path, clock: ManualClock
) -> None:
    manager = LogManager([tmp_path], clock=clock)
    manager.startup()
    log = manager.get_or_create_log(TP, _config(**{"min.cleanable.dirty.ratio": 0.5}))
    _write_rounds(log, clock, rounds=4, keys=8)

    async def scenario() -> None:
        assert await manager.clean_once() == TP
        clean_size = log.size
        _put(log, clock, (b"key-0", b"small"))
        log.roll()
        assert await manager.clean_once() is None  # one small dirty segment: ratio < 0.5
        assert [key for _, key, _ in _contents(log)].count(b"key-0") == 2
        while log.size - clean_size <= clean_size:
            _put(log, clock, (b"key-0", b"again"))
        log.roll()
        assert await manager.clean_once() == TP
        assert [key for _, key, _ in _contents(log)].count(b"key-0") == 1

    asyncio.run(scenario())
    manager.close()


def test_max_compaction_lag_forces_cleaning_below_the_ratio(
    tmp_path: Path, clock: ManualClock
) -> None:
    manager = LogManager([tmp_path], clock=clock)
    manager.startup()
    props = {"min.cleanable.dirty.ratio": 0.99, "max.compaction.lag.ms": 60_000}
    log = manager.get_or_create_log(TP, _config(**props))
    _write_rounds(log, clock, rounds=4, keys=8)
    asyncio.run(manager.clean_once())
    _put(log, clock, (b"key-0", b"late"))
    log.roll()

    assert asyncio.run(manager.clean_once()) is None
    clock.advance(60_001)
    assert asyncio.run(manager.clean_once()) == TP
    assert [key for _, key, _ in _contents(log)].count(b"key-0") == 1
    manager.close()


def test_expired_tombstones_are_cleaned_without_new_dirty_records(
    tmp_path: Path, clock: ManualClock
) -> None:
    manager = LogManager([tmp_path], clock=clock)
    manager.startup()
    log = manager.get_or_create_log(TP, _config())
    _put(log, clock, (b"a", b"1"), (b"b", b"1"))
    _put(log, clock, (b"a", None))
    log.roll()
    assert asyncio.run(manager.clean_once()) == TP
    assert asyncio.run(manager.clean_once()) is None
    assert _contents(log) == [(1, b"b", b"1"), (2, b"a", None)]

    clock.advance(60_000)
    asyncio.run(manager.clean_once())
    assert _contents(log) == [(1, b"b", b"1")]
    manager.close()


def test_a_small_key_map_cleans_in_several_passes(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path / "t-0", clock)
    _write_rounds(log, clock, rounds=3, keys=8)
    before = _contents(log)
    cleaner = LogCleaner(dedupe_buffer_size=5 * 128)  # five keys a pass
    first_dirty: int | None = None
    passes = 0
    while (result := cleaner.clean_blocking(log, first_dirty)) is not None:
        assert result.next_dirty_offset > result.first_dirty_offset
        first_dirty, passes = result.next_dirty_offset, passes + 1
        assert set(_contents(log)) >= set(_latest_per_key(before))
    assert passes >= 4
    assert first_dirty == log.log_end_offset
    assert _contents(log) == _latest_per_key(before)


def test_compact_only_logs_keep_old_segments_that_retention_would_delete(
    tmp_path: Path, clock: ManualClock
) -> None:
    compact = _open(tmp_path / "c-0", clock, **{"retention.ms": 1000, "retention.bytes": 10})
    both = _open(
        tmp_path / "b-0",
        clock,
        **{"cleanup.policy": "compact,delete", "retention.ms": 1000, "retention.bytes": 10},
    )
    for log in (compact, both):
        _write_rounds(log, clock, rounds=3, keys=8)
    clock.advance(10_000)
    assert compact.delete_old_segments() == 0
    assert both.delete_old_segments() > 0


# -- batches -------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.ZSTD])
def test_compressed_batches_are_cleaned_and_keep_their_codec(
    tmp_path: Path, clock: ManualClock, codec: CompressionType
) -> None:
    log = _open(tmp_path / "t-0", clock, **{"segment.bytes": 400})
    for n in range(6):
        pairs = [(f"k{(n + i) % 5}".encode(), f"v{n}-{i}".encode() * 8) for i in range(4)]
        _put(log, clock, *pairs, compression=codec)
    log.roll()
    before = _contents(log)

    LogCleaner().clean_blocking(log, None)

    assert _contents(log) == _latest_per_key(before)
    assert {read_batch(b).compression for b in _batches(log)} == {codec}


def test_idempotent_batches_keep_producer_id_epoch_and_sequence(
    tmp_path: Path, clock: ManualClock
) -> None:
    directory = tmp_path / "t-0"
    log = _open(directory, clock)

    def idempotent(producer_id: int, sequence: int, *keys: bytes) -> bytearray:
        builder = RecordBatchBuilder(
            producer_id=producer_id, producer_epoch=3, base_sequence=sequence
        )
        for key in keys:
            builder.append(b"idempotent", key=key, timestamp=clock())
        return bytearray(builder.build())

    log.append_as_leader(idempotent(1000, 0, b"a", b"b"))  # offsets 0-1
    log.append_as_leader(idempotent(1000, 2, b"c", b"d"))  # offsets 2-3, the producer's last
    log.append_as_leader(idempotent(2000, 0, b"e"))  # offset 4, the producer's last
    _put(log, clock, (b"b", b"plain"), (b"d", b"plain"), (b"e", b"plain"))  # offsets 5-7
    log.roll()

    LogCleaner().clean_blocking(log, None)

    assert [offset for offset, _, _ in _contents(log)] == [0, 2, 5, 6, 7]
    headers = [
        (b.base_offset, b.last_offset, b.record_count, b.producer_id, b.base_sequence)
        for b in map(read_batch, _batches(log))
    ]
    assert headers == [
        (0, 1, 1, 1000, 0),  # b went: the rewrite keeps the batch's last offset (Kafka)
        (2, 3, 1, 1000, 2),  # d went: still ends at 3, so sequence 3 stays the last
        (4, 4, 0, 2000, 0),  # every record went: the producer's last batch stays, empty
        (5, 7, 3, -1, -1),
    ]
    assert {read_batch(b).producer_epoch for b in _batches(log)[:3]} == {3}
    log.close()
    for snapshot in directory.glob("*.snapshot"):
        snapshot.unlink()  # the producer state must come back from the log itself

    reloaded = load_log(directory, _config(), clock=clock, clean_shutdown=False)
    producers = reloaded.producer_state.producers
    assert (producers[1000].epoch, producers[1000].last_sequence) == (3, 3)
    assert (producers[2000].epoch, producers[2000].last_sequence) == (3, 0)
    retry = reloaded.append_as_leader(idempotent(2000, 0, b"e"))
    assert (retry.first_offset, retry.record_count) == (4, 0)  # a duplicate: not written again
    assert reloaded.append_as_leader(idempotent(1000, 4, b"f")).first_offset == 8
    assert reloaded.append_as_leader(idempotent(2000, 1, b"g")).first_offset == 9


def test_control_and_transactional_batches_are_kept_as_they_are(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    builder = RecordBatchBuilder(
        producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    builder.append(b"in-txn", key=b"a", timestamp=clock())
    log.append_as_leader(bytearray(builder.build()), origin=AppendOrigin.COORDINATOR)
    marker = build_end_transaction_batch(
        ControlRecordType.COMMIT, producer_id=7, producer_epoch=0, coordinator_epoch=1,
        timestamp=clock(),
    )  # fmt: skip
    log.append_as_leader(bytearray(marker), origin=AppendOrigin.COORDINATOR)
    _put(log, clock, (b"a", b"later"))
    log.roll()
    before = _batches(log)

    LogCleaner().clean_blocking(log, None)

    assert _batches(log)[:2] == before[:2]


# -- concurrency and crashes ---------------------------------------------------------------


def _cleaned_but_not_swapped(log: Log) -> tuple[LogCleaner, CleaningPlan, CleanedOutput]:
    cleaner = LogCleaner()
    plan = cleaner.plan(log, None)
    assert plan is not None
    try:
        return cleaner, plan, cleaner.clean_segments(plan)
    finally:
        plan.close()


@pytest.mark.parametrize("change", ["truncation", "retention"])
def test_output_is_dropped_when_the_log_changed_during_cleaning(
    tmp_path: Path, clock: ManualClock, change: str
) -> None:
    directory = tmp_path / "t-0"
    log = _open(directory, clock)
    _write_rounds(log, clock, rounds=3, keys=8)
    cleaner, plan, output = _cleaned_but_not_swapped(log)
    if change == "truncation":
        log.truncate_to(20)  # a follower diverging: the segments cleaned are no longer the log's
    else:
        log.delete_records_before(10)  # the first segments go
    before = _contents(log)

    assert cleaner.swap(log, plan, output) is None
    output.discard()

    assert _contents(log) == before
    assert not list(directory.glob("*.cleaned"))


def test_appends_and_rolls_during_cleaning_do_not_stop_the_swap(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    _write_rounds(log, clock, rounds=3, keys=8)
    cleaner, plan, output = _cleaned_but_not_swapped(log)
    _put(log, clock, (b"key-0", b"during"))
    log.roll()
    _put(log, clock, (b"key-1", b"during"))

    assert cleaner.swap(log, plan, output) is not None

    assert _contents(log)[-2:] == [(24, b"key-0", b"during"), (25, b"key-1", b"during")]
    assert len(_contents(log)) == 10


def test_reads_in_flight_keep_their_bytes_after_the_swap(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    _write_rounds(log, clock, rounds=3, keys=8)
    region = log.read(0, 1 << 20).region
    before = region.read()

    LogCleaner().clean_blocking(log, None)

    assert region.read() == before  # the old segment is renamed .deleted, not closed yet
    log.purge_deleted_segments(force=True)


def test_a_cancelled_pass_leaves_no_files(tmp_path: Path, clock: ManualClock) -> None:
    directory = tmp_path / "t-0"
    log = _open(directory, clock)
    _write_rounds(log, clock, rounds=3, keys=8)
    cleaner = LogCleaner()
    plan = cleaner.plan(log, None)
    assert plan is not None
    cancelled = threading.Event()
    cancelled.set()
    with pytest.raises(CleanerAbortedError):
        cleaner.clean_segments(plan, cancelled)
    plan.close()
    assert not list(directory.glob("*.cleaned"))


def test_cleaning_on_a_worker_thread_swaps_on_the_loop(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path / "t-0", clock)
    _write_rounds(log, clock, rounds=3, keys=8)
    before = _contents(log)
    result = asyncio.run(LogCleaner().clean(log, None))
    assert result is not None
    assert _contents(log) == _latest_per_key(before)


def test_a_crash_at_any_step_of_the_swap_loads_a_consistent_log(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "live" / "t-0"
    log = _open(directory, clock, **{"segment.bytes": 400})
    for n in range(5):
        for k in range(6):
            _put(log, clock, (f"key-{k}".encode(), None if (n + k) % 4 == 0 else f"{n}".encode()))
    log.roll()
    original, leo = _contents(log), log.log_end_offset
    cleaner = LogCleaner()
    plan = cleaner.plan(log, None)
    assert plan is not None
    try:
        output = cleaner.clean_segments(plan)
    finally:
        plan.close()

    crashes: list[Path] = []

    def snapshot() -> None:
        # What the disk holds if the process dies now.
        crashed = tmp_path / f"crash-{len(crashes)}" / "t-0"
        shutil.copytree(directory, crashed)
        crashes.append(crashed)

    snapshot()  # cleaned files written, nothing renamed yet
    real_replace = os.replace

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        snapshot()
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    assert cleaner.swap(log, plan, output) is not None
    monkeypatch.undo()
    snapshot()
    cleaned = _contents(log)
    assert cleaned == _latest_per_key(original)
    log.close()
    assert len(crashes) > 4

    # A torn .cleaned file and a damaged .swap file, next to intact old segments.
    torn = crashes[0] / f"{0:020d}.log.cleaned"
    torn.write_bytes(torn.read_bytes()[:100])

    def swaps_beside_their_old_segment(directory: Path) -> list[Path]:
        return [
            swap
            for swap in directory.glob("*.log.swap")
            if swap.with_name(swap.name.removesuffix(".swap")).exists()
        ]

    damaged = tmp_path / "damaged" / "t-0"
    shutil.copytree(
        next(c for c in reversed(crashes) if swaps_beside_their_old_segment(c)), damaged
    )
    for swap in swaps_beside_their_old_segment(damaged):
        swap.write_bytes(swap.read_bytes()[:-7])

    for crashed in [*crashes, damaged]:
        reloaded = load_log(crashed, _config(**{"segment.bytes": 400}), clock=clock)
        leftovers = [p.name for p in crashed.iterdir() if p.name.endswith(("cleaned", "swap"))]
        assert not leftovers, crashed
        assert not list(crashed.glob("*.deleted"))
        entries = _contents(reloaded)
        assert reloaded.log_end_offset == leo
        assert set(cleaned) <= set(entries) <= set(original), crashed
        assert [e[0] for e in entries] == sorted({e[0] for e in entries})
        reloaded.close()


# -- the log manager ---------------------------------------------------------------------


def test_cleaner_offsets_survive_a_restart(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager([tmp_path], clock=clock)
    manager.startup()
    log = manager.get_or_create_log(TP, _config())
    _write_rounds(log, clock, rounds=3, keys=8)
    result = asyncio.run(manager.clean_log(TP))
    assert result is not None
    checkpoint = tmp_path / "cleaner-offset-checkpoint"
    assert read_offset_checkpoint(checkpoint) == {TP: 24}
    manager.close()

    again = LogManager([tmp_path], clock=clock)
    again.startup(lambda topic: _config())
    assert again.cleaner_first_dirty_offset(TP) == 24
    again.close()


def test_a_deleted_topic_leaves_the_cleaner_checkpoint(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager([tmp_path], clock=clock)
    manager.startup()
    for partition in (0, 1):
        log = manager.get_or_create_log(TopicPartition("gone", partition), _config())
        _write_rounds(log, clock, rounds=2, keys=4)
        asyncio.run(manager.clean_log(TopicPartition("gone", partition)))
    checkpoint = tmp_path / "cleaner-offset-checkpoint"
    assert set(read_offset_checkpoint(checkpoint)) == {
        TopicPartition("gone", 0),
        TopicPartition("gone", 1),
    }

    async def delete() -> None:
        manager.delete_log(TopicPartition("gone", 0))
        while len(read_offset_checkpoint(checkpoint)) != 1:
            await asyncio.sleep(0.01)

    asyncio.run(asyncio.wait_for(delete(), HANG_S))
    assert set(read_offset_checkpoint(checkpoint)) == {TopicPartition("gone", 1)}
    manager.close()


def test_the_background_cleaner_compacts_dirty_logs(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], cleaner_backoff_ms=10)
    manager.startup()
    clock = ManualClock(manager.clock())
    log = manager.get_or_create_log(TP, _config(**{"min.cleanable.dirty.ratio": 0.1}))
    _write_rounds(log, clock, rounds=4, keys=5)

    async def wait_for_compaction() -> None:
        manager.start_background_tasks()
        # The swap shows first; the pass records its offset after fsyncing the directory.
        await wait_until_async(
            lambda: len(_contents(log)) <= 5 and manager.cleaner_first_dirty_offset(TP) == 20,
            "the cleaner to compact the log and record its offset",
            timeout=HANG_S,
            interval=0.01,
        )
        await manager.shutdown()

    asyncio.run(wait_for_compaction())
    assert read_offset_checkpoint(tmp_path / "cleaner-offset-checkpoint") == {TP: 20}
