"""In a cluster, coordinators serve only the keys of the internal partitions led here: they
load a partition's state when its leadership arrives and drop it when it leaves."""

from __future__ import annotations

import asyncio
from pathlib import Path

from samsa.coordinator.group.coordinator import GroupCoordinator, JoinRequest
from samsa.coordinator.group.records import (
    OffsetKey,
    OffsetValue,
    encode_offset_key,
    encode_offset_value,
    partition_for,
)
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

PARTITIONS = 4
ORDERS = TopicPartition("orders", 0)
GROUP = "billing"
TXN = "copier"


def _log(directory: Path, records: list[tuple[bytes, bytes]]) -> Log:
    partition_log = load_log(directory, LogConfig())
    builder = RecordBatchBuilder()
    for key, value in records:
        builder.append(value, key=key, timestamp=1)
    partition_log.append_as_leader(bytearray(builder.build()), origin=AppendOrigin.COORDINATOR)
    return partition_log


async def _no_append(tp: TopicPartition, records: bytes) -> None:
    raise AssertionError("nothing is written here")


def _join(group: str) -> JoinRequest:
    return JoinRequest(group, "", None, "c", "/h", 10_000, 10_000, "consumer",
                       [("range", b"")], True, False)  # fmt: skip


def test_a_group_is_served_only_while_its_offsets_partition_is_led_here(tmp_path: Path) -> None:
    async def scenario() -> None:
        coordinator = GroupCoordinator(PARTITIONS, _no_append, lambda: 0)
        coordinator.own_led_partitions_only()
        index = partition_for(GROUP, PARTITIONS)
        key = encode_offset_key(OffsetKey(GROUP, ORDERS.topic, ORDERS.partition))
        offsets_log = _log(tmp_path / f"__consumer_offsets-{index}",
                           [(key, encode_offset_value(OffsetValue(42, -1, "", 1)))])  # fmt: skip
        assert coordinator.coordinator_error(GROUP) == ErrorCode.NOT_COORDINATOR
        assert (await coordinator.join(_join(GROUP))).error == ErrorCode.NOT_COORDINATOR

        coordinator.load_partition(index, offsets_log)
        assert coordinator.coordinator_error(GROUP) == ErrorCode.NONE
        assert coordinator.committed(GROUP) == {ORDERS: OffsetValue(42, -1, "", 1)}

        coordinator.unload_partition(index)
        assert coordinator.coordinator_error(GROUP) == ErrorCode.NOT_COORDINATOR
        assert coordinator.committed(GROUP) == {}
        assert GROUP not in coordinator.groups()

    asyncio.run(scenario())


def test_a_transactional_id_is_served_only_while_its_partition_is_led_here(
    tmp_path: Path,
) -> None:
    async def no_marker(*args: object) -> int:
        raise AssertionError("no marker is written here")

    coordinator = TransactionCoordinator(PARTITIONS, _no_append, lambda: 0, no_marker, lambda: 7)
    coordinator.own_led_partitions_only()
    index = coordinator.partition_of(TXN).partition
    state = encode_transaction_log_value(TransactionLogValue(7, 3, 60_000, 0, None, 1, -1))
    txn_log = _log(
        tmp_path / f"__transaction_state-{index}", [(encode_transaction_log_key(TXN), state)]
    )
    assert coordinator.coordinator_error(TXN) == ErrorCode.NOT_COORDINATOR
    (described,) = coordinator.describe_transactions([TXN])
    assert described.error == ErrorCode.NOT_COORDINATOR

    coordinator.load_partition(index, txn_log)
    (described,) = coordinator.describe_transactions([TXN])
    assert (described.error, described.producer_id, described.producer_epoch) == (
        ErrorCode.NONE, 7, 3,
    )  # fmt: skip

    coordinator.unload_partition(index)
    _, listed = coordinator.list_transactions()
    assert listed == []
    assert coordinator.coordinator_error(TXN) == ErrorCode.NOT_COORDINATOR
