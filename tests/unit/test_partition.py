"""A partition leading or following: high watermark, acks=all waits, epochs, fencing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tests.conftest import make_batch

from samsa.broker.replication.partition import LeaderAndIsrState, Partition
from samsa.errors import (
    ErrorCode,
    FencedLeaderEpochError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
)
from samsa.records import read_batch
from samsa.storage import AppendOrigin, LogConfig, load_log
from samsa.testing.clock import ManualClock
from samsa.types import TopicPartition

TP = TopicPartition("t", 0)
NOW = 1_000_000


def _partition(tmp_path: Path, clock: ManualClock, min_insync: int = 1) -> Partition:
    config = LogConfig.from_props({"min.insync.replicas": min_insync})
    return Partition(TP, load_log(tmp_path / "t-0", config, clock=clock), local_id=1)


def _lead(partition: Partition, epoch: int = 0, isr: tuple[int, ...] = (1, 2, 3)) -> None:
    partition.make_leader(LeaderAndIsrState(1, epoch, isr, (1, 2, 3), 0), NOW)


def _append(partition: Partition, clock: ManualClock, n: int = 1, acks: int = -1) -> int:
    """Append ``n`` records; the offset just past them."""
    info = partition.append_as_leader(
        make_batch([b"v"] * n, timestamp=clock()), required_acks=acks, origin=AppendOrigin.CLIENT
    )
    return info.last_offset + 1


def test_a_single_replica_moves_the_high_watermark_with_each_append(
    tmp_path: Path, clock: ManualClock
) -> None:
    partition = _partition(tmp_path, clock)
    _lead(partition, isr=(1,))
    assert _append(partition, clock, 3) == 3
    assert partition.high_watermark == 3


def test_the_high_watermark_is_the_lowest_log_end_over_the_isr(
    tmp_path: Path, clock: ManualClock
) -> None:
    partition = _partition(tmp_path, clock)
    _lead(partition)
    _append(partition, clock, 5)
    assert partition.high_watermark == 0  # the followers' log ends are not known yet
    partition.record_follower_fetch(2, 5, NOW)
    assert partition.high_watermark == 0
    partition.record_follower_fetch(3, 3, NOW)
    assert partition.high_watermark == 3
    partition.record_follower_fetch(3, 5, NOW)
    assert partition.high_watermark == 5


def test_an_acks_all_append_completes_once_every_isr_member_has_it(
    tmp_path: Path, clock: ManualClock
) -> None:
    async def scenario() -> None:
        partition = _partition(tmp_path, clock)
        _lead(partition)
        end = _append(partition, clock, 2)
        waiting = asyncio.create_task(partition.wait_for_acks(end, 30))
        await asyncio.sleep(0)
        partition.record_follower_fetch(2, end, NOW)
        await asyncio.sleep(0)
        assert not waiting.done()
        partition.record_follower_fetch(3, end, NOW)
        assert await waiting == ErrorCode.NONE

    asyncio.run(scenario())


def test_acks_all_appends_complete_as_the_high_watermark_passes_each_whatever_order_they_wait_in(
    tmp_path: Path, clock: ManualClock
) -> None:
    async def scenario() -> None:
        partition = _partition(tmp_path, clock)
        _lead(partition, isr=(1, 2))
        ends = [_append(partition, clock) for _ in range(6)]  # 1 … 6
        order = [ends[4], ends[0], ends[5], ends[2], ends[1], ends[3]]
        waiting = {end: asyncio.create_task(partition.wait_for_acks(end, 30)) for end in order}
        timed_out = await partition.wait_for_acks(ends[1], 0.01)  # gone before the HW moves
        await asyncio.sleep(0)
        partition.record_follower_fetch(2, ends[2], NOW)  # HW 3
        await asyncio.wait([waiting[end] for end in ends[:3]], timeout=20)
        assert sorted(e for e, task in waiting.items() if task.done()) == ends[:3]
        partition.record_follower_fetch(2, ends[5], NOW)  # HW 6
        assert [await waiting[end] for end in ends] == [ErrorCode.NONE] * 6
        assert timed_out == ErrorCode.REQUEST_TIMED_OUT

    asyncio.run(scenario())


def test_an_acks_all_append_times_out_when_a_follower_never_fetches(
    tmp_path: Path, clock: ManualClock
) -> None:
    async def scenario() -> None:
        partition = _partition(tmp_path, clock)
        _lead(partition)
        end = _append(partition, clock)
        partition.record_follower_fetch(2, end, NOW)
        assert await partition.wait_for_acks(end, 0.01) == ErrorCode.REQUEST_TIMED_OUT

    asyncio.run(scenario())


def test_losing_leadership_answers_the_waiting_appends_not_leader(
    tmp_path: Path, clock: ManualClock
) -> None:
    async def scenario() -> None:
        partition = _partition(tmp_path, clock)
        _lead(partition)
        end = _append(partition, clock)
        waiting = asyncio.create_task(partition.wait_for_acks(end, 30))
        await asyncio.sleep(0)
        partition.make_follower(LeaderAndIsrState(2, 1, (2, 3), (1, 2, 3), 1))
        assert await waiting == ErrorCode.NOT_LEADER_OR_FOLLOWER

    asyncio.run(scenario())


def test_a_shrunk_isr_lets_the_high_watermark_move_on(tmp_path: Path, clock: ManualClock) -> None:
    partition = _partition(tmp_path, clock)
    _lead(partition)
    end = _append(partition, clock, 4)
    partition.record_follower_fetch(2, end, NOW)
    assert partition.high_watermark == 0  # follower 3 holds it back
    partition.apply_isr((1, 2), zk_version=1)
    assert partition.high_watermark == end


def test_min_insync_replicas_refuses_acks_all_before_the_append(
    tmp_path: Path, clock: ManualClock
) -> None:
    partition = _partition(tmp_path, clock, min_insync=2)
    _lead(partition, isr=(1,))
    with pytest.raises(NotEnoughReplicasError):
        _append(partition, clock)
    assert partition.log.log_end_offset == 0
    assert _append(partition, clock, acks=1) == 1  # acks=1 does not need the ISR


def test_an_isr_that_shrank_below_min_insync_while_waiting_is_not_enough_after_append(
    tmp_path: Path, clock: ManualClock
) -> None:
    async def scenario() -> None:
        partition = _partition(tmp_path, clock, min_insync=2)
        _lead(partition, isr=(1, 2))
        end = _append(partition, clock)
        waiting = asyncio.create_task(partition.wait_for_acks(end, 30))
        await asyncio.sleep(0)
        partition.apply_isr((1,), zk_version=1)  # follower 2 dropped: the HW moves alone
        assert await waiting == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND

    asyncio.run(scenario())


def test_leaders_stamp_their_epoch_on_batches_and_record_where_it_began(
    tmp_path: Path, clock: ManualClock
) -> None:
    partition = _partition(tmp_path, clock)
    _lead(partition, epoch=4, isr=(1,))
    _append(partition, clock, 2)
    _lead(partition, epoch=7, isr=(1,))
    _append(partition, clock)
    epochs = [(e.epoch, e.start_offset) for e in partition.log.leader_epoch_cache.entries]
    assert epochs == [(4, 0), (7, 2)]
    batch = read_batch(partition.log.read(2, 1 << 20).region.read())
    assert batch.partition_leader_epoch == 7


def test_an_older_state_is_ignored(tmp_path: Path, clock: ManualClock) -> None:
    partition = _partition(tmp_path, clock)
    _lead(partition, epoch=5)
    assert not partition.make_follower(LeaderAndIsrState(2, 4, (2,), (1, 2, 3), 0))
    assert partition.is_leader and partition.leader_epoch == 5


def test_clients_with_another_epoch_are_fenced_or_told_it_is_unknown(
    tmp_path: Path, clock: ManualClock
) -> None:
    partition = _partition(tmp_path, clock)
    _lead(partition, epoch=3)
    partition.check_leader(3)
    partition.check_leader(-1)
    with pytest.raises(FencedLeaderEpochError):
        partition.check_leader(2)
    with pytest.raises(UnknownLeaderEpochError):
        partition.check_leader(4)


def test_a_follower_refuses_client_appends_and_takes_the_leaders_high_watermark(
    tmp_path: Path, clock: ManualClock
) -> None:
    partition = _partition(tmp_path, clock)
    partition.make_follower(LeaderAndIsrState(2, 1, (2, 1), (1, 2, 3), 0))
    with pytest.raises(NotLeaderOrFollowerError):
        _append(partition, clock)
    batch = make_batch([b"a", b"b"], timestamp=clock())
    view = read_batch(memoryview(batch))
    view.set_partition_leader_epoch(1)
    partition.append_as_follower(batch, leader_high_watermark=10)
    assert partition.log.log_end_offset == 2
    assert partition.high_watermark == 2  # never past its own log end


def test_a_lagging_follower_is_proposed_out_of_the_isr_and_back_once_caught_up(
    tmp_path: Path, clock: ManualClock
) -> None:
    partition = _partition(tmp_path, clock)
    _lead(partition)
    end = _append(partition, clock, 3)
    partition.record_follower_fetch(2, end, NOW + 100)
    assert partition.isr_to_shrink(NOW + 20_000, 30_000) is None
    assert partition.isr_to_shrink(NOW + 31_000, 30_000) == (1, 2)
    partition.apply_isr((1, 2), zk_version=1)
    partition.record_follower_fetch(3, end, NOW + 32_000)
    assert partition.isr_to_expand() == (1, 2, 3)


def _expansion_being_written(tmp_path: Path, clock: ManualClock) -> tuple[Partition, int, int]:
    """Follower 3 caught up and proposed for the ISR (1, 2); while the write is out the
    producer and follower 2 go on: (partition, where 3 stands, where 2 and the log are)."""
    partition = _partition(tmp_path, clock)
    _lead(partition, isr=(1, 2))
    end = _append(partition, clock, 3)
    partition.record_follower_fetch(2, end, NOW)
    partition.record_follower_fetch(3, end, NOW)
    assert partition.high_watermark == end
    proposed = partition.isr_to_expand()
    assert proposed == (1, 2, 3)
    partition.begin_isr_change(proposed)
    later = _append(partition, clock, 5)
    partition.record_follower_fetch(2, later, NOW + 10)
    return partition, end, later


def test_while_an_isr_expansion_is_written_the_high_watermark_waits_for_the_joining_follower(
    tmp_path: Path, clock: ManualClock
) -> None:
    # The write to ZooKeeper takes a while and follower 3 may stop meanwhile. Were the
    # high watermark to pass it, the ISR the write lands would name a replica without
    # acknowledged records, and the controller could elect it.
    partition, end, later = _expansion_being_written(tmp_path, clock)
    assert partition.high_watermark == end  # held where follower 3 stands
    partition.apply_isr((1, 2, 3), zk_version=1)
    partition.end_isr_change()
    assert partition.high_watermark == end
    partition.record_follower_fetch(3, later, NOW + 20)
    assert partition.high_watermark == later


def test_an_isr_expansion_that_was_not_written_releases_the_high_watermark(
    tmp_path: Path, clock: ManualClock
) -> None:
    partition, end, later = _expansion_being_written(tmp_path, clock)
    assert partition.high_watermark == end
    partition.end_isr_change()  # the write lost a race: the ISR is still (1, 2)
    assert partition.high_watermark == later
    assert partition.isr == (1, 2)
