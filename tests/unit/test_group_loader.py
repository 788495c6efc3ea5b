"""Loading ``__consumer_offsets`` at start-up never stops on its bytes, and says what it skipped.

Records are appended to a real offsets-partition log, then a coordinator loads it.
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import pytest

from samsa.coordinator.group.coordinator import GroupCoordinator
from samsa.coordinator.group.records import (
    OffsetKey,
    OffsetValue,
    encode_offset_key,
    encode_offset_value,
)
from samsa.coordinator.replay import REPORTED_PER_PARTITION
from samsa.records import RecordBatchBuilder
from samsa.storage import Log, LogConfig
from samsa.storage.log_loader import load_log
from samsa.storage.validator import AppendOrigin
from samsa.types import TopicPartition

ORDERS = TopicPartition("orders", 0)


def _offsets_log(tmp_path: Path, records: list[tuple[bytes, bytes | None]]) -> Log:
    partition_log = load_log(tmp_path / "__consumer_offsets-0", LogConfig())
    builder = RecordBatchBuilder()
    for key, value in records:
        builder.append(value, key=key, timestamp=1)
    partition_log.append_as_leader(bytearray(builder.build()), origin=AppendOrigin.COORDINATOR)
    return partition_log


def _loaded(partition_log: Log) -> GroupCoordinator:
    async def no_append(tp: TopicPartition, records: bytes) -> None:
        raise AssertionError("loading writes nothing")

    coordinator = GroupCoordinator(1, no_append, lambda: 0)
    coordinator.load([partition_log])
    return coordinator


def _commit(group: str, offset: int) -> tuple[bytes, bytes]:
    key = encode_offset_key(OffsetKey(group, ORDERS.topic, ORDERS.partition))
    return key, encode_offset_value(OffsetValue(offset, -1, "", 1))


def _undecodable(index: int) -> tuple[bytes, bytes]:
    """An offset key whose group name is not UTF-8."""
    key = struct.pack(">hh", 1, 2) + bytes([0xFF, index]) + struct.pack(">h", 1) + b"t"
    return key + struct.pack(">i", 0), encode_offset_value(OffsetValue(1, -1, "", 1))


def test_records_around_undecodable_ones_are_loaded(tmp_path: Path) -> None:
    records = [_commit("before", 3), _undecodable(0), _commit("after", 4)]
    coordinator = _loaded(_offsets_log(tmp_path, records))
    assert coordinator.committed("before") == {ORDERS: OffsetValue(3, -1, "", 1)}
    assert coordinator.committed("after") == {ORDERS: OffsetValue(4, -1, "", 1)}


def test_the_first_undecodable_records_are_logged_with_their_offsets_then_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    undecodable = REPORTED_PER_PARTITION + 3
    records = [_commit("g", 1)] + [_undecodable(i) for i in range(undecodable)]
    with caplog.at_level(logging.WARNING):
        _loaded(_offsets_log(tmp_path, records))
    one_by_one = [r.getMessage() for r in caplog.records if "skipping" in r.getMessage()]
    assert [m.split(" at offset ")[1].split(":")[0] for m in one_by_one] == [
        str(offset) for offset in range(1, REPORTED_PER_PARTITION + 1)
    ]
    summary = [r.getMessage() for r in caplog.records if "in all" in r.getMessage()]
    assert summary == [
        f"skipped {undecodable} unreadable records of __consumer_offsets-0 in all "
        f"(offsets 1 to {undecodable}); only the first {REPORTED_PER_PARTITION} were logged"
    ]
