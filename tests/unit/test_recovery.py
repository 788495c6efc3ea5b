"""Crash recovery: torn tails, corrupt batches, lost indexes, clean-shutdown markers."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from tests.conftest import make_batch, read_log

from samsa.storage import Log, LogConfig, load_log
from samsa.testing.clock import ManualClock


def _write_log(directory: Path, clock: ManualClock, batches: int, **props: object) -> list[int]:
    """Write ``batches`` batches of 3 records each and close cleanly; return their sizes."""
    config = LogConfig.from_props({"index.interval.bytes": 64, **props})
    log = load_log(directory, config, clean_shutdown=True, clock=clock)
    sizes = []
    for i in range(batches):
        batch = make_batch([f"r{i}-{j}".encode() * 4 for j in range(3)], timestamp=clock() + i)
        sizes.append(len(batch))
        log.append_as_leader(batch)
    log.close()
    return sizes


def _reopen(directory: Path, clock: ManualClock, *, clean: bool = False, **props: object) -> Log:
    config = LogConfig.from_props({"index.interval.bytes": 64, **props})
    return load_log(directory, config, clean_shutdown=clean, recovery_point=0, clock=clock)


def _all_records(log: Log) -> list[tuple[int, bytes | None]]:
    return [(r.offset, r.value) for r in read_log(log)]


def test_log_cut_at_every_byte_keeps_exactly_the_complete_batches(
    tmp_path: Path, clock: ManualClock
) -> None:
    source = tmp_path / "source" / "t-0"
    sizes = _write_log(source, clock, batches=4)
    segment = f"{0:020d}.log"
    full = (source / segment).read_bytes()
    boundaries = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    expected_all = _all_records(_reopen(source, clock, clean=True))
    for cut in range(boundaries[-3], len(full) + 1):
        crashed = tmp_path / f"cut-{cut}" / "t-0"
        shutil.copytree(source, crashed)
        with open(crashed / segment, "r+b") as f:
            f.truncate(cut)
        log = _reopen(crashed, clock)
        complete = max(i for i, b in enumerate(boundaries) if b <= cut)
        assert log.log_end_offset == complete * 3, f"cut at byte {cut}"
        assert log.active_segment.size == boundaries[complete]
        assert _all_records(log) == expected_all[: complete * 3]
        info = log.append_as_leader(make_batch([b"after"], timestamp=clock()))
        assert info.first_offset == complete * 3
        assert _all_records(log)[-1] == (complete * 3, b"after")
        log.close()
        shutil.rmtree(crashed.parent)


def test_batch_with_bad_crc_in_the_middle_truncates_it_and_all_after(
    tmp_path: Path, clock: ManualClock
) -> None:
    directory = tmp_path / "t-0"
    sizes = _write_log(directory, clock, batches=6)
    path = directory / f"{0:020d}.log"
    data = bytearray(path.read_bytes())
    data[sum(sizes[:3]) + 70] ^= 0xFF  # a record byte of the fourth batch
    path.write_bytes(data)
    log = _reopen(directory, clock)
    assert log.log_end_offset == 9
    assert path.stat().st_size == sum(sizes[:3])
    assert [offset for offset, _ in _all_records(log)] == list(range(9))


def test_corruption_in_an_earlier_segment_keeps_the_later_segments_aside(
    tmp_path: Path, clock: ManualClock
) -> None:
    directory = tmp_path / "t-0"
    _write_log(directory, clock, batches=6, **{"segment.bytes": 200})
    logs = sorted(directory.glob("*.log"))
    assert len(logs) == 6
    later = {p.name: p.read_bytes() for p in logs[3:]}
    data = bytearray(logs[2].read_bytes())
    data[-1] ^= 0xFF
    logs[2].write_bytes(data)
    log = _reopen(directory, clock, **{"segment.bytes": 200})
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    assert log.log_end_offset == 6
    assert sorted(p.name for p in directory.glob("*.log")) == [p.name for p in logs[:3]]
    for name, content in later.items():
        assert (directory / f"{name}.corrupt").read_bytes() == content
    assert log.append_as_leader(make_batch([b"x"], timestamp=clock())).first_offset == 6


def test_bytes_cut_from_a_segment_are_kept_beside_it(tmp_path: Path, clock: ManualClock) -> None:
    directory = tmp_path / "t-0"
    sizes = _write_log(directory, clock, batches=6)
    path = directory / f"{0:020d}.log"
    data = bytearray(path.read_bytes())
    cut_at = sum(sizes[:2])
    data[cut_at + 70] ^= 0xFF  # a record byte of the third batch
    path.write_bytes(data)
    log = _reopen(directory, clock)
    assert log.log_end_offset == 6
    kept = directory / f"{path.name}.cut-at-{cut_at}.corrupt"
    assert kept.read_bytes() == bytes(data[cut_at:])


def test_a_second_cut_at_the_same_place_keeps_both_copies(
    tmp_path: Path, clock: ManualClock
) -> None:
    directory = tmp_path / "t-0"
    sizes = _write_log(directory, clock, batches=3)
    path = directory / f"{0:020d}.log"
    for garbage in (b"first", b"second"):
        with open(path, "ab") as f:
            f.write(garbage * 20)
        _reopen(directory, clock).close()
    kept = sorted(p.read_bytes() for p in directory.glob("*.corrupt"))
    assert kept == sorted([b"first" * 20, b"second" * 20])
    assert path.stat().st_size == sum(sizes)


def test_recovery_logs_the_partition_offsets_and_bytes_it_cut_at_error(
    tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "t-0"
    _write_log(directory, clock, batches=6, **{"segment.bytes": 200})
    logs = sorted(directory.glob("*.log"))
    data = bytearray(logs[2].read_bytes())
    data[-1] ^= 0xFF
    logs[2].write_bytes(data)
    with caplog.at_level(logging.ERROR, logger="samsa.storage.log_loader"):
        _reopen(directory, clock, **{"segment.bytes": 200})
    (record,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    message = record.getMessage()
    assert "partition t-0" in message
    assert f"bytes 0-{len(data)} of {logs[2].name}" in message
    assert f"segment {logs[3].name} (offsets 9-11) kept as {logs[3].name}.corrupt" in message
    assert f"segment {logs[5].name} (offsets 15-17)" in message


def test_recovery_starts_at_the_segment_holding_the_recovery_point(
    tmp_path: Path, clock: ManualClock
) -> None:
    directory = tmp_path / "t-0"
    _write_log(directory, clock, batches=4, **{"segment.bytes": 200})
    logs = sorted(directory.glob("*.log"))
    data = bytearray(logs[0].read_bytes())
    data[-1] ^= 0xFF  # below the recovery point: trusted, not scanned
    logs[0].write_bytes(data)
    config = LogConfig.from_props({"segment.bytes": 200, "index.interval.bytes": 64})
    log = load_log(directory, config, recovery_point=9, clean_shutdown=False, clock=clock)
    assert log.log_end_offset == 12
    assert len(log.segments) == 4


def test_missing_indexes_are_rebuilt(tmp_path: Path, clock: ManualClock) -> None:
    directory = tmp_path / "t-0"
    _write_log(directory, clock, batches=20)
    index = directory / f"{0:020d}.index"
    original = index.read_bytes()
    assert original  # entries exist with index.interval.bytes=64
    index.unlink()
    (directory / f"{0:020d}.timeindex").unlink()
    log = _reopen(directory, clock, clean=True)
    assert log.active_segment.offset_index.entries == len(original) // 8
    assert log.read(31, 1 << 20).offset_metadata.position > 0
    log.close()
    assert index.read_bytes() == original


def test_index_left_preallocated_by_a_crash_is_rebuilt_consistently(
    tmp_path: Path, clock: ManualClock
) -> None:
    directory = tmp_path / "t-0"
    config = LogConfig.from_props({"index.interval.bytes": 64})
    log = load_log(directory, config, clean_shutdown=True, clock=clock)
    for i in range(20):
        log.append_as_leader(make_batch([b"v" * 40] * 3, timestamp=clock() + i))
    # no close: the index file is still preallocated, as after kill -9
    crashed = _reopen(directory, clock)
    assert crashed.log_end_offset == 60
    entries = crashed.active_segment.offset_index.entries
    assert 0 < entries < 20
    assert [o for o, _ in _all_records(crashed)] == list(range(60))


def test_clean_shutdown_skips_the_recovery_scan(tmp_path: Path, clock: ManualClock) -> None:
    directory = tmp_path / "t-0"
    sizes = _write_log(directory, clock, batches=3)
    path = directory / f"{0:020d}.log"
    data = bytearray(path.read_bytes())
    data[sizes[0] + 70] ^= 0xFF
    path.write_bytes(data)
    log = _reopen(directory, clock, clean=True)
    assert log.log_end_offset == 9  # not scanned, so not truncated
    log.close()
    log = _reopen(directory, clock, clean=False)
    assert log.log_end_offset == 3


def test_leftover_deleted_files_are_removed_on_open(tmp_path: Path, clock: ManualClock) -> None:
    directory = tmp_path / "t-0"
    _write_log(directory, clock, batches=1)
    leftover = directory / f"{500:020d}.log.deleted"
    leftover.write_bytes(b"junk")
    orphan = directory / f"{900:020d}.index"
    orphan.write_bytes(b"\x00" * 8)
    log = _reopen(directory, clock, clean=True)
    assert not leftover.exists()
    assert not orphan.exists()
    assert log.log_end_offset == 3


@pytest.mark.parametrize("garbage", [b"\x00" * 40, b"\xff" * 12, b"\x00" * 8 + b"\x7f\xff\xff\xff"])
def test_garbage_after_the_last_batch_is_cut_off(
    tmp_path: Path, clock: ManualClock, garbage: bytes
) -> None:
    directory = tmp_path / "t-0"
    sizes = _write_log(directory, clock, batches=2)
    path = directory / f"{0:020d}.log"
    with open(path, "ab") as f:
        f.write(garbage)
    log = _reopen(directory, clock)
    assert log.log_end_offset == 6
    assert path.stat().st_size == sum(sizes)
