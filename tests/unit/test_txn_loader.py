"""Loading ``__transaction_state`` at start-up never stops on its bytes, and says what it skipped.

Records are appended to a real transaction-log partition, then a coordinator loads it.
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import pytest

from samsa.coordinator.replay import REPORTED_PER_PARTITION
from samsa.coordinator.transaction.coordinator import TransactionCoordinator
from samsa.coordinator.transaction.records import (
    TransactionLogValue,
    encode_transaction_log_key,
    encode_transaction_log_value,
)
from samsa.errors import ErrorCode
from samsa.records import RecordBatchBuilder
from samsa.storage import Log, LogConfig
from samsa.storage.log_loader import load_log
from samsa.storage.validator import AppendOrigin
from samsa.types import TopicPartition

EMPTY = 0  # Kafka's id of the Empty transaction state


def _transaction_log(tmp_path: Path, records: list[tuple[bytes, bytes | None]]) -> Log:
    partition_log = load_log(tmp_path / "__transaction_state-0", LogConfig())
    builder = RecordBatchBuilder()
    for key, value in records:
        builder.append(value, key=key, timestamp=1)
    partition_log.append_as_leader(bytearray(builder.build()), origin=AppendOrigin.COORDINATOR)
    return partition_log


def _loaded(partition_log: Log) -> TransactionCoordinator:
    async def no_append(tp: TopicPartition, records: bytes) -> None:
        raise AssertionError("loading writes nothing")

    async def no_marker(*args: object, **kwargs: object) -> ErrorCode:
        raise AssertionError("loading writes no marker")

    coordinator = TransactionCoordinator(1, no_append, lambda: 0, no_marker, lambda: 0)
    coordinator.load([partition_log])
    return coordinator


def _state(transactional_id: str, producer_id: int) -> tuple[bytes, bytes]:
    value = TransactionLogValue(producer_id, 0, 60_000, EMPTY, None, 1, -1)
    return encode_transaction_log_key(transactional_id), encode_transaction_log_value(value)


def _undecodable(index: int) -> tuple[bytes, bytes]:
    """A key whose transactional id is not UTF-8, then one of an unknown key version."""
    if index % 2:
        return struct.pack(">hh", 7, 1) + b"x", _state("x", 1)[1]
    return struct.pack(">hh", 0, 2) + bytes([0xFF, index]), _state("x", 1)[1]


def _described(coordinator: TransactionCoordinator, transactional_id: str) -> ErrorCode:
    (description,) = coordinator.describe_transactions([transactional_id])
    return description.error


def test_records_around_undecodable_ones_are_loaded(tmp_path: Path) -> None:
    records = [_state("before", 3), _undecodable(0), _undecodable(1), _state("after", 4)]
    coordinator = _loaded(_transaction_log(tmp_path, records))
    assert _described(coordinator, "before") == ErrorCode.NONE
    assert _described(coordinator, "after") == ErrorCode.NONE


def test_a_value_that_cannot_be_decoded_is_skipped_and_the_id_keeps_its_earlier_state(
    tmp_path: Path,
) -> None:
    key, _ = _state("t", 5)
    records = [_state("t", 5), (key, b"\x00\x01\xff"), _state("u", 6)]
    coordinator = _loaded(_transaction_log(tmp_path, records))
    _, listed = coordinator.list_transactions()
    assert {(t.transactional_id, t.producer_id) for t in listed} == {("t", 5), ("u", 6)}


def test_the_first_undecodable_records_are_logged_with_their_offsets_then_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    undecodable = REPORTED_PER_PARTITION + 3
    records = [_state("t", 1)] + [_undecodable(i) for i in range(undecodable)]
    with caplog.at_level(logging.WARNING):
        _loaded(_transaction_log(tmp_path, records))
    one_by_one = [r.getMessage() for r in caplog.records if "skipping" in r.getMessage()]
    assert [m.split(" at offset ")[1].split(":")[0] for m in one_by_one] == [
        str(offset) for offset in range(1, REPORTED_PER_PARTITION + 1)
    ]
    summary = [r.getMessage() for r in caplog.records if "in all" in r.getMessage()]
    assert summary == [
        f"skipped {undecodable} unreadable records of __transaction_state-0 in all "
        f"(offsets 1 to {undecodable}); only the first {REPORTED_PER_PARTITION} were logged"
    ]
