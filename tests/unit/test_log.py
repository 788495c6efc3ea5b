"""The partition log: offsets, reads, rolls, retention, limits, truncation."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords
from tests.conftest import make_batch, read_log

from samsa.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
)
from samsa.records import (
    CompressionType,
    ControlRecordType,
    TimestampType,
    build_end_transaction_batch,
    iter_batches,
    iter_records,
    read_batch,
)
from samsa.storage import AppendOrigin, Log, LogConfig, load_log
from samsa.testing.clock import ManualClock


def _open(tmp_path: Path, clock: ManualClock, **props: object) -> Log:
    return load_log(
        tmp_path / "topic-0", LogConfig.from_props(props), clock=clock, clean_shutdown=True
    )


def _records_from(log: Log, offset: int) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value or b"") for r in read_log(log, offset)]


def test_appends_get_consecutive_offsets(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path, clock)
    first = log.append_as_leader(make_batch([b"a", b"b", b"c"], timestamp=clock()))
    second = log.append_as_leader(make_batch([b"d", b"e"], timestamp=clock()))
    assert (first.first_offset, first.last_offset) == (0, 2)
    assert (second.first_offset, second.last_offset) == (3, 4)
    assert log.log_end_offset == 5
    assert _records_from(log, 0) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d"), (4, b"e")]


def test_read_from_the_middle_of_a_batch_starts_at_that_batch(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path, clock)
    log.append_as_leader(make_batch([b"a", b"b"], timestamp=clock()))
    log.append_as_leader(make_batch([b"c", b"d"], timestamp=clock()))
    first_batch = read_batch(log.read(3, 1 << 20).region.read())
    assert first_batch.base_offset == 2


def test_read_at_log_end_returns_no_bytes(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path, clock)
    log.append_as_leader(make_batch([b"a"], timestamp=clock()))
    assert log.read(1, 1000).region.length == 0


def test_read_beyond_log_end_raises_offset_out_of_range(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path, clock)
    log.append_as_leader(make_batch([b"a"], timestamp=clock()))
    with pytest.raises(OffsetOutOfRangeError):
        log.read(2, 1000)


def test_read_stops_before_max_offset(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path, clock)
    for value in (b"a", b"b", b"c"):
        log.append_as_leader(make_batch([value], timestamp=clock()))
    log.update_high_watermark(2)
    data = log.read(0, 1 << 20, max_offset=log.high_watermark).region.read()
    assert [b.base_offset for b in iter_batches(data)] == [0, 1]


def test_read_smaller_than_a_batch_returns_the_whole_first_batch(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path, clock)
    log.append_as_leader(make_batch([b"x" * 500], timestamp=clock()))
    region = log.read(0, 10).region
    assert read_batch(region.read()).record_count == 1


def test_read_may_end_inside_a_batch_like_kafka(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path, clock)
    log.append_as_leader(make_batch([b"x" * 200], timestamp=clock()))
    log.append_as_leader(make_batch([b"y" * 200], timestamp=clock()))
    first_size = read_batch(log.read(0, 1 << 20).region.read()).size
    region = log.read(0, first_size + 20).region
    assert region.length == first_size + 20


def test_batch_larger_than_max_message_bytes_is_rejected_and_not_appended(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path, clock, **{"max.message.bytes": 1000})
    with pytest.raises(MessageTooLargeError):
        log.append_as_leader(make_batch([b"x" * 2000], timestamp=clock()))
    assert log.log_end_offset == 0
    assert log.active_segment.size == 0


def test_batch_with_bad_crc_is_rejected_and_not_appended(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path, clock)
    batch = make_batch([b"hello"], timestamp=clock())
    batch[-1] ^= 0x01
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(batch)
    assert log.log_end_offset == 0
    assert log.active_segment.size == 0


def test_second_corrupt_batch_rejects_the_whole_append(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path, clock)
    good = make_batch([b"ok"], timestamp=clock())
    bad = make_batch([b"bad"], timestamp=clock())
    bad[-1] ^= 0x01
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(good + bad)
    assert log.log_end_offset == 0


def test_truncated_batch_is_rejected_as_corrupt(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path, clock)
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(make_batch([b"hello"], timestamp=clock())[:-3])


def test_client_written_control_batch_is_invalid_record(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path, clock)
    marker = bytearray(
        build_end_transaction_batch(
            ControlRecordType.COMMIT,
            producer_id=7,
            producer_epoch=0,
            coordinator_epoch=1,
            timestamp=clock(),
        )
    )
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(marker)
    info = log.append_as_leader(marker, origin=AppendOrigin.COORDINATOR)
    assert info.first_offset == 0


def test_batch_timestamped_far_in_the_future_is_invalid(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path, clock)
    with pytest.raises(InvalidTimestampError):
        log.append_as_leader(make_batch([b"a"], timestamp=clock() + 2 * 3600_000))


def test_log_append_time_topic_stamps_batches_with_the_broker_clock(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path, clock, **{"message.timestamp.type": "LogAppendTime"})
    info = log.append_as_leader(make_batch([b"a", b"b"], timestamp=12345))
    assert info.log_append_time == clock()
    batch = read_batch(log.read(0, 1 << 20).region.read())
    batch.validate()
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert {r.timestamp for r in iter_records(batch)} == {clock()}


def test_leader_epoch_is_written_into_each_batch(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path, clock)
    log.append_as_leader(make_batch([b"a"], timestamp=clock()), leader_epoch=7)
    assert read_batch(log.read(0, 1000).region.read()).partition_leader_epoch == 7


def test_log_rolls_when_segment_bytes_would_be_exceeded(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path, clock, **{"segment.bytes": 1000})
    for i in range(10):
        log.append_as_leader(make_batch([b"x" * 200], timestamp=clock() + i))
    assert len(log.segments) > 1
    assert all(s.size <= 1000 for s in log.segments)
    assert [s.base_offset for s in log.segments] == sorted(s.base_offset for s in log.segments)
    assert [off for off, _ in _records_from(log, 0)] == list(range(10))
    assert _records_from(log, 9) == [(9, b"x" * 200)]
    names = sorted(p.name for p in (tmp_path / "topic-0").glob("*.log"))
    assert names == [f"{s.base_offset:020d}.log" for s in log.segments]


def test_log_rolls_when_segment_ms_has_passed(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path, clock, **{"segment.ms": 60_000})
    log.append_as_leader(make_batch([b"a"], timestamp=clock()))
    clock.advance(30_000)
    log.append_as_leader(make_batch([b"b"], timestamp=clock()))
    assert len(log.segments) == 1
    clock.advance(31_000)
    log.append_as_leader(make_batch([b"c"], timestamp=clock()))
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_retention_ms_deletes_old_segments_but_never_the_active_one(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path, clock, **{"segment.bytes": 300, "retention.ms": 10_000})
    for _ in range(4):
        log.append_as_leader(make_batch([b"x" * 200], timestamp=clock()))
    log.update_high_watermark(log.log_end_offset)
    assert len(log.segments) == 4
    clock.advance(5_000)
    assert log.delete_old_segments() == 0
    clock.advance(6_000)
    assert log.delete_old_segments() == 3
    assert [s.base_offset for s in log.segments] == [3]
    assert log.log_start_offset == 3
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 1000)


def test_deleted_segments_are_renamed_then_removed_after_the_delay(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(
        tmp_path, clock, **{"segment.bytes": 300, "retention.ms": 1, "file.delete.delay.ms": 500}
    )
    for _ in range(2):
        log.append_as_leader(make_batch([b"x" * 200], timestamp=clock()))
    log.update_high_watermark(log.log_end_offset)
    clock.advance(10)
    log.delete_old_segments()
    directory = tmp_path / "topic-0"
    assert (directory / f"{0:020d}.log.deleted").exists()
    assert log.purge_deleted_segments() == 0
    clock.advance(500)
    assert log.purge_deleted_segments() == 1
    assert not (directory / f"{0:020d}.log.deleted").exists()


def test_retention_bytes_deletes_oldest_segments_while_the_rest_stays_over_the_limit(
    tmp_path: Path, clock: ManualClock
) -> None:
    # Kafka's rule: a segment goes only if the log is still >= retention.bytes without it.
    log = _open(tmp_path, clock, **{"segment.bytes": 300, "retention.bytes": 600})
    for _ in range(6):
        log.append_as_leader(make_batch([b"x" * 200], timestamp=clock()))
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 3
    assert log.size >= 600
    assert log.size - log.segments[0].size < 600
    assert log.log_start_offset == log.segments[0].base_offset


def test_retention_keeps_segments_above_the_high_watermark(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path, clock, **{"segment.bytes": 300, "retention.ms": 1})
    for _ in range(3):
        log.append_as_leader(make_batch([b"x" * 200], timestamp=clock()))
    clock.advance(100)
    log.update_high_watermark(1)
    assert log.delete_old_segments() == 1
    assert log.log_start_offset == 1


def test_delete_records_before_moves_log_start_and_drops_whole_segments(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path, clock, **{"segment.bytes": 300})
    for _ in range(4):
        log.append_as_leader(make_batch([b"x" * 200], timestamp=clock()))
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_records_before(2) == 2
    assert log.log_start_offset == 2
    assert log.segments[0].base_offset == 2
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, 1000)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(log.high_watermark + 1)


def test_offset_for_timestamp_finds_the_first_record_at_or_after_it(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path, clock, **{"segment.bytes": 400, "index.interval.bytes": 10})
    base = clock()
    for i in range(10):
        log.append_as_leader(
            make_batch([b"a" * 50, b"b" * 50], timestamp=[base + i * 10, base + i * 10 + 5])
        )
    assert log.fetch_offset_by_timestamp(base) == (0, base)
    assert log.fetch_offset_by_timestamp(base + 42) == (9, base + 45)
    assert log.fetch_offset_by_timestamp(base + 45) == (9, base + 45)
    assert log.fetch_offset_by_timestamp(base + 46) == (10, base + 50)
    assert log.fetch_offset_by_timestamp(base + 1000) is None
    assert log.fetch_offset_by_timestamp(-2) == (0, -1)
    assert log.fetch_offset_by_timestamp(-1) == (20, -1)
    assert log.fetch_offset_by_timestamp(-3) == (19, base + 95)


def test_truncate_to_removes_batches_from_the_offset_on(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path, clock, **{"segment.bytes": 300})
    for i in range(5):
        log.append_as_leader(make_batch([bytes([65 + i]) * 200], timestamp=clock()))
    log.truncate_to(2)
    assert log.log_end_offset == 2
    assert [off for off, _ in _records_from(log, 0)] == [0, 1]
    assert _records_from(log, 1) == [(1, b"B" * 200)]
    info = log.append_as_leader(make_batch([b"new"], timestamp=clock()))
    assert info.first_offset == 2


def test_segment_files_parse_with_an_independent_reader(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path, clock)
    expected = []
    for codec in CompressionType:
        values = [f"{codec.name}-{i}".encode() for i in range(5)]
        log.append_as_leader(make_batch(values, timestamp=clock(), compression=codec))
        expected += values
    log.close()
    raw = (tmp_path / "topic-0" / f"{0:020d}.log").read_bytes()
    records = MemoryRecords(raw)
    seen: list[tuple[int, bytes]] = []
    while records.has_next():
        batch = records.next_batch()
        assert isinstance(batch, DefaultRecordBatch)
        assert batch.validate_crc()
        seen += [(r.offset, r.value) for r in batch]
    assert seen == list(enumerate(expected))
