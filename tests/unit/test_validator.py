"""Checks a batch must pass before the log appends it: keys in compacted topics."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import make_batch

from samsa.records import CompressionType
from samsa.storage import AppendOrigin, Log, LogConfig, load_log
from samsa.storage.validator import RecordError, RecordValidationError
from samsa.testing.clock import ManualClock

NO_KEY = "Compacted topic cannot accept message without key"


def _open(tmp_path: Path, clock: ManualClock, policy: str) -> Log:
    config = LogConfig.from_props({"cleanup.policy": policy})
    return load_log(tmp_path / "topic-0", config, clock=clock, clean_shutdown=True)


@pytest.mark.parametrize("compression", [CompressionType.NONE, CompressionType.ZSTD])
def test_keyless_records_in_a_compacted_log_refuse_the_batch_naming_each_one(
    tmp_path: Path, clock: ManualClock, compression: CompressionType
) -> None:
    log = _open(tmp_path, clock, "compact")
    batch = make_batch(
        [b"a", b"b", b"c"], timestamp=clock(), keys=[None, b"k", None], compression=compression
    )
    with pytest.raises(RecordValidationError) as raised:
        log.append_as_leader(batch)
    assert raised.value.record_errors == (RecordError(0, NO_KEY), RecordError(2, NO_KEY))
    assert raised.value.code == 87  # INVALID_RECORD
    assert log.log_end_offset == 0 and log.active_segment.size == 0


def test_a_coordinator_may_not_write_keyless_records_to_a_compacted_log_either(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path, clock, "compact,delete")
    with pytest.raises(RecordValidationError):
        log.append_as_leader(make_batch([b"a"], timestamp=clock()), origin=AppendOrigin.COORDINATOR)


def test_a_follower_appends_what_its_leader_accepted_without_looking_at_keys(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path, clock, "compact")
    log.append_as_follower(make_batch([b"a"], timestamp=clock()))
    assert log.log_end_offset == 1


def test_keyless_records_are_appended_to_a_log_that_is_not_compacted(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = _open(tmp_path, clock, "delete")
    log.append_as_leader(make_batch([b"a", b"b"], timestamp=clock()))
    assert log.log_end_offset == 2
