"""Idempotent producer state: retries deduplicated, sequences and epochs enforced, restarts."""

from __future__ import annotations

from pathlib import Path

import pytest

from samsa.errors import for_code
from samsa.records import RecordBatchBuilder
from samsa.storage import Log, LogConfig, load_log
from samsa.testing.clock import ManualClock

PID = 4242
OutOfOrderSequence = for_code(45)
InvalidProducerEpoch = for_code(47)


def _batch(clock: ManualClock, sequence: int, count: int = 3, epoch: int = 0) -> bytearray:
    builder = RecordBatchBuilder(producer_id=PID, producer_epoch=epoch, base_sequence=sequence)
    for i in range(count):
        builder.append(f"s{sequence + i}".encode(), timestamp=clock())
    return bytearray(builder.build())


def _open(path: Path, clock: ManualClock, clean: bool = True, **props: object) -> Log:
    return load_log(path, LogConfig.from_props(props), clean_shutdown=clean, clock=clock)


def test_a_retried_batch_gets_its_original_offsets_and_is_not_written_twice(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    first = log.append_as_leader(_batch(clock, 0))
    log.append_as_leader(_batch(clock, 3))
    retry = log.append_as_leader(_batch(clock, 0))
    assert (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset)
    assert log.log_end_offset == 6


def test_only_the_last_five_batches_are_remembered(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path / "t-0", clock)
    for n in range(7):
        log.append_as_leader(_batch(clock, n * 3))
    assert log.append_as_leader(_batch(clock, 6)).first_offset == 6  # fifth from last
    with pytest.raises(OutOfOrderSequence):
        log.append_as_leader(_batch(clock, 3))  # sixth from last: forgotten


def test_a_gap_in_sequences_is_out_of_order(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path / "t-0", clock)
    log.append_as_leader(_batch(clock, 0))
    with pytest.raises(OutOfOrderSequence):
        log.append_as_leader(_batch(clock, 5))
    assert log.log_end_offset == 3


def test_an_older_epoch_is_fenced(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path / "t-0", clock)
    log.append_as_leader(_batch(clock, 0, epoch=2))
    with pytest.raises(InvalidProducerEpoch):
        log.append_as_leader(_batch(clock, 3, epoch=1))


def test_a_new_epoch_must_start_at_sequence_zero(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path / "t-0", clock)
    log.append_as_leader(_batch(clock, 0, epoch=0))
    with pytest.raises(OutOfOrderSequence):
        log.append_as_leader(_batch(clock, 3, epoch=1))
    assert log.append_as_leader(_batch(clock, 0, epoch=1)).first_offset == 3


def test_state_survives_a_clean_restart_through_a_snapshot(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    log.append_as_leader(_batch(clock, 0))
    log.append_as_leader(_batch(clock, 3))
    log.close()
    assert (tmp_path / "t-0" / f"{6:020d}.snapshot").exists()
    reopened = _open(tmp_path / "t-0", clock)
    assert reopened.append_as_leader(_batch(clock, 3)).first_offset == 3
    with pytest.raises(OutOfOrderSequence):
        reopened.append_as_leader(_batch(clock, 9))
    assert reopened.append_as_leader(_batch(clock, 6)).first_offset == 6


def test_state_is_rebuilt_from_the_log_after_a_crash(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path / "t-0", clock, **{"segment.bytes": 200})
    for n in range(4):
        log.append_as_leader(_batch(clock, n * 3))
    # no close: no snapshot at the log end, as after kill -9
    crashed = _open(tmp_path / "t-0", clock, clean=False, **{"segment.bytes": 200})
    assert crashed.append_as_leader(_batch(clock, 9)).first_offset == 9
    assert crashed.append_as_leader(_batch(clock, 12)).first_offset == 12


def test_a_corrupt_snapshot_is_ignored_and_the_log_replayed(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path / "t-0", clock)
    log.append_as_leader(_batch(clock, 0))
    log.close()
    snapshot = tmp_path / "t-0" / f"{3:020d}.snapshot"
    data = bytearray(snapshot.read_bytes())
    data[-1] ^= 0xFF
    snapshot.write_bytes(data)
    reopened = _open(tmp_path / "t-0", clock)
    assert reopened.append_as_leader(_batch(clock, 0)).first_offset == 0


def test_truncation_forgets_the_batches_it_removes(tmp_path: Path, clock: ManualClock) -> None:
    log = _open(tmp_path / "t-0", clock)
    log.append_as_leader(_batch(clock, 0))
    log.append_as_leader(_batch(clock, 3))
    log.truncate_to(3)
    assert log.append_as_leader(_batch(clock, 3)).first_offset == 3
    assert log.log_end_offset == 6
