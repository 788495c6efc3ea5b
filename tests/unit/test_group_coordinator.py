"""The group coordinator's state machine, driven directly on an event loop.

Appends go to real partition logs (one per offsets partition) so that reloading
from them is tested too. Time is a manual timer: a session, rebalance or expiry
timeout fires when a test advances it, so nothing here sleeps or reads the wall
clock.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from samsa.coordinator.group.coordinator import (
    OFFSETS_TOPIC,
    GroupConfig,
    GroupCoordinator,
    JoinRequest,
    OffsetCommitMember,
    PartitionOffset,
)
from samsa.coordinator.group.group import JoinResult
from samsa.coordinator.group.records import OffsetValue
from samsa.errors import ErrorCode, NotEnoughReplicasError
from samsa.records import iter_records, read_batch
from samsa.records.control import ControlRecordType, build_end_transaction_batch
from samsa.storage import Log, LogConfig
from samsa.storage.log_loader import load_log
from samsa.storage.validator import AppendOrigin
from samsa.testing.clock import ManualClock, ManualTimer
from samsa.types import TopicPartition

T = TypeVar("T")
PARTITIONS = 3
SUB = b"\x00\x00\x00\x00"  # opaque to the coordinator


async def settle(turns: int = 20) -> None:
    """Let every task that can run do so (event-loop turns; the clock does not move)."""
    for _ in range(turns):
        await asyncio.sleep(0)


class Harness:
    def __init__(self, tmp: Path, clock: ManualClock, **config: Any) -> None:
        self.tmp = tmp
        self.clock = clock
        self.timer = ManualTimer(clock)
        defaults: dict[str, Any] = {
            "min_session_timeout_ms": 10,
            "initial_rebalance_delay_ms": 0,
        }
        self.config = GroupConfig(**{**defaults, **config})
        self.logs: dict[TopicPartition, Log] = {}
        self.fail_appends = False
        self.fail_with: Exception | None = None
        self.coordinator = self.new_coordinator()

    def new_coordinator(self) -> GroupCoordinator:
        return GroupCoordinator(PARTITIONS, self.append, self.clock, self.config, timer=self.timer)

    def log_for(self, tp: TopicPartition) -> Log:
        if tp not in self.logs:
            self.logs[tp] = load_log(self.tmp / f"{tp.topic}-{tp.partition}", LogConfig())
        return self.logs[tp]

    async def append(self, tp: TopicPartition, records: bytes) -> None:
        if self.fail_appends:
            raise OSError("disk gone")
        if self.fail_with is not None:
            raise self.fail_with
        self.log_for(tp).append_as_leader(bytearray(records), origin=AppendOrigin.COORDINATOR)

    def keys_written(self) -> list[tuple[bytes, bytes | None]]:
        out = []
        for lg in self.logs.values():
            data = lg.read(0, 1 << 24).region.read()
            position = 0
            while position < len(data):
                batch = read_batch(data, position)
                out += [(r.key, r.value) for r in iter_records(batch) if r.key is not None]
                position += batch.size
        return out

    def reload(self) -> GroupCoordinator:
        fresh = self.new_coordinator()
        fresh.load(self.logs[tp] for tp in sorted(self.logs, key=lambda t: t.partition))
        return fresh


def request(group: str = "g", member: str = "", **overrides: Any) -> JoinRequest:
    values: dict[str, Any] = {
        "group_id": group,
        "member_id": member,
        "group_instance_id": None,
        "client_id": "client",
        "client_host": "/127.0.0.1",
        "session_timeout_ms": 200,
        "rebalance_timeout_ms": 300,
        "protocol_type": "consumer",
        "protocols": [("range", SUB)],
        "require_known_member_id": False,
    }
    values.update(overrides)
    return JoinRequest(**values)


def run(make: Callable[[Harness], Awaitable[T]], tmp_path: Path, **config: Any) -> T:
    async def main() -> T:
        harness = Harness(tmp_path, ManualClock(), **config)
        harness.coordinator.start()
        try:
            return await make(harness)
        finally:
            await harness.coordinator.shutdown()

    return asyncio.run(main())


async def join_and_sync(h: Harness, req: JoinRequest) -> tuple[JoinResult, bytes]:
    joined = await h.coordinator.join(req)
    assert joined.error == ErrorCode.NONE, joined
    assignments = {m: f"to-{m}".encode() for m, _, _ in joined.members}
    synced = await h.coordinator.sync(
        req.group_id,
        joined.generation,
        joined.member_id,
        group_instance_id=req.group_instance_id,
        protocol_type=None,
        protocol_name=None,
        assignments=assignments,
    )
    assert synced.error == ErrorCode.NONE, synced
    return joined, synced.assignment


def test_member_id_required_then_join_sync_stable(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        first = await c.join(request(require_known_member_id=True))
        assert first.error == ErrorCode.MEMBER_ID_REQUIRED and first.member_id.startswith("client-")
        joined, assignment = await join_and_sync(
            h, request(member=first.member_id, require_known_member_id=True)
        )
        assert (joined.generation, joined.leader, joined.protocol_name) == (
            1,
            first.member_id,
            "range",
        )
        assert [m for m, _, _ in joined.members] == [first.member_id]
        assert assignment == f"to-{first.member_id}".encode()
        described = c.describe("g")
        assert described.state == "Stable" and described.protocol == "range"
        assert described.members[0].assignment == assignment
        assert c.heartbeat("g", 1, first.member_id, None) == ErrorCode.NONE
        assert c.heartbeat("g", 0, first.member_id, None) == ErrorCode.ILLEGAL_GENERATION
        assert c.heartbeat("g", 1, "nobody", None) == ErrorCode.UNKNOWN_MEMBER_ID

    run(scenario, tmp_path)


def test_second_member_rebalances_and_follower_waits_for_leader(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        leader_join, _ = await join_and_sync(h, request())
        leader = leader_join.member_id
        follower_task = asyncio.create_task(c.join(request(client_id="other")))
        await settle()
        assert c.describe("g").state == "PreparingRebalance"
        assert c.heartbeat("g", 1, leader, None) == ErrorCode.REBALANCE_IN_PROGRESS
        rejoin = await c.join(request(member=leader))
        follower = await follower_task
        assert rejoin.generation == follower.generation == 2
        assert rejoin.leader == follower.leader == leader
        assert len(rejoin.members) == 2 and follower.members == []
        follower_sync = asyncio.create_task(
            c.sync("g", 2, follower.member_id, group_instance_id=None, protocol_type="consumer",
                   protocol_name="range", assignments={})
        )  # fmt: skip
        await settle()
        assert not follower_sync.done()  # waits for the leader's assignment
        plan = {follower.member_id: b"F", leader: b"L"}
        await c.sync("g", 2, leader, group_instance_id=None, protocol_type=None,
                     protocol_name=None, assignments=plan)  # fmt: skip
        assert (await follower_sync).assignment == b"F"
        assert c.describe("g").state == "Stable"

    run(scenario, tmp_path)


def test_session_expiry_removes_member_and_rebalances(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        a, _ = await join_and_sync(h, request(session_timeout_ms=1000))
        b_task = asyncio.create_task(c.join(request(session_timeout_ms=100)))
        await settle()
        await c.join(request(member=a.member_id, session_timeout_ms=1000))
        b = await b_task
        await c.sync("g", b.generation, a.member_id, group_instance_id=None, protocol_type=None,
                     protocol_name=None, assignments={})  # fmt: skip
        await c.sync("g", b.generation, b.member_id, group_instance_id=None, protocol_type=None,
                     protocol_name=None, assignments={})  # fmt: skip
        # b never heartbeats again: after its 100 ms session the group rebalances without it.
        h.timer.advance(99)
        assert c.heartbeat("g", b.generation, a.member_id, None) == ErrorCode.NONE
        assert len(c.describe("g").members) == 2
        h.timer.advance(1)
        assert c.describe("g").state == "PreparingRebalance"
        assert c.heartbeat("g", b.generation, a.member_id, None) == ErrorCode.REBALANCE_IN_PROGRESS
        assert [m.member_id for m in c.describe("g").members] == [a.member_id]
        rejoin = await c.join(request(member=a.member_id, session_timeout_ms=1000))
        assert rejoin.generation == b.generation + 1 and len(rejoin.members) == 1

    run(scenario, tmp_path)


def test_member_not_rejoining_is_dropped_after_rebalance_timeout(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        a, _ = await join_and_sync(h, request(session_timeout_ms=5000, rebalance_timeout_ms=100))
        b_join = asyncio.create_task(
            c.join(request(session_timeout_ms=5000, rebalance_timeout_ms=100))
        )
        await settle()
        h.timer.advance(99)
        await settle()
        assert not b_join.done()  # a may still rejoin
        h.timer.advance(1)
        b = await b_join
        assert b.error == ErrorCode.NONE
        assert b.leader == b.member_id and [m for m, _, _ in b.members] == [b.member_id]
        assert c.heartbeat("g", a.generation, a.member_id, None) == ErrorCode.UNKNOWN_MEMBER_ID

    run(scenario, tmp_path)


def test_leave_and_last_member_leaving_empties_group(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        a, _ = await join_and_sync(h, request())
        assert c.leave("g", [("nobody", None), (a.member_id, None)]) == (
            ErrorCode.NONE,
            [ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.NONE],
        )
        await settle()  # the empty join phase completes on the next loop turn
        described = c.describe("g")
        assert described.state == "Empty" and described.members == []
        assert c.leave("missing", [("x", None)]) == (ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID])

    run(scenario, tmp_path)


def test_static_member_rejoin_fences_old_id_without_rebalance(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        leader, _ = await join_and_sync(
            h, request(group_instance_id="i-1", session_timeout_ms=5000)
        )
        s_task = asyncio.create_task(
            c.join(request(group_instance_id="i-2", session_timeout_ms=5000))
        )
        await settle()
        await c.join(
            request(member=leader.member_id, group_instance_id="i-1", session_timeout_ms=5000)
        )
        static = await s_task
        await c.sync("g", static.generation, leader.member_id, group_instance_id="i-1",
                     protocol_type=None, protocol_name=None,
                     assignments={static.member_id: b"mine", leader.member_id: b"L"})  # fmt: skip
        # i-2 restarts: a new member id, same instance id, same generation, same assignment.
        again = await c.join(request(group_instance_id="i-2", session_timeout_ms=5000))
        assert again.error == ErrorCode.NONE and again.member_id != static.member_id
        assert again.generation == static.generation
        assert c.describe("g").state == "Stable"
        assert (
            c.heartbeat("g", again.generation, static.member_id, "i-2")
            == ErrorCode.FENCED_INSTANCE_ID
        )
        assert c.heartbeat("g", again.generation, again.member_id, "i-2") == ErrorCode.NONE
        synced = await c.sync("g", again.generation, again.member_id, group_instance_id="i-2",
                              protocol_type=None, protocol_name=None, assignments={})  # fmt: skip
        assert synced.assignment == b"mine"
        # Static leave by instance id alone (LeaveGroup v3+ shape).
        assert c.leave("g", [("", "i-2")]) == (ErrorCode.NONE, [ErrorCode.NONE])

    run(scenario, tmp_path)


def test_static_leader_rejoining_below_v9_is_told_the_old_leader_id_and_keeps_its_assignment(
    tmp_path: Path,
) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        leader_task = asyncio.create_task(
            c.join(request(group_instance_id="lead", session_timeout_ms=5000))
        )
        follower_task = asyncio.create_task(
            c.join(request(group_instance_id="follow", session_timeout_ms=5000))
        )
        leader, follower = await leader_task, await follower_task
        assert leader.leader == leader.member_id
        follower_sync = asyncio.create_task(
            c.sync("g", follower.generation, follower.member_id, group_instance_id="follow",
                   protocol_type=None, protocol_name=None, assignments={})
        )  # fmt: skip
        await c.sync("g", leader.generation, leader.member_id, group_instance_id="lead",
                     protocol_type=None, protocol_name=None,
                     assignments={leader.member_id: b"L", follower.member_id: b"F"})  # fmt: skip
        assert (await follower_sync).assignment == b"F"
        # The leader's process restarts: JoinGroup v5 (no skip_assignment), no member id.
        again = await c.join(request(group_instance_id="lead", session_timeout_ms=5000))
        assert again.error == ErrorCode.NONE and again.member_id != leader.member_id
        assert (again.generation, again.leader, again.members) == (
            leader.generation,
            leader.member_id,
            [],
        )
        assert not again.skip_assignment
        assert c.describe("g").state == "Stable"
        synced = await c.sync("g", again.generation, again.member_id, group_instance_id="lead",
                              protocol_type=None, protocol_name=None, assignments={})  # fmt: skip
        assert synced.assignment == b"L"
        assert c.heartbeat("g", follower.generation, follower.member_id, "follow") == ErrorCode.NONE
        assert (
            c.heartbeat("g", again.generation, leader.member_id, "lead")
            == ErrorCode.FENCED_INSTANCE_ID
        )

    run(scenario, tmp_path)


def test_static_leader_rejoining_with_v9_leads_but_skips_the_assignment(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        leader, _ = await join_and_sync(h, request(group_instance_id="lead"))
        again = await c.join(request(group_instance_id="lead", supports_skip_assignment=True))
        assert again.error == ErrorCode.NONE and again.generation == leader.generation
        assert again.leader == again.member_id and again.skip_assignment
        assert [m for m, _, _ in again.members] == [again.member_id]
        assert c.describe("g").state == "Stable"

    run(scenario, tmp_path)


def test_join_validation_errors(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        assert (
            await c.join(request(session_timeout_ms=5))
        ).error == ErrorCode.INVALID_SESSION_TIMEOUT
        assert (await c.join(request(member="ghost"))).error == ErrorCode.UNKNOWN_MEMBER_ID
        await join_and_sync(h, request())
        assert (
            await c.join(request(protocol_type="connect"))
        ).error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        other = request(protocols=[("roundrobin", SUB)])
        assert (await c.join(other)).error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        assert (await c.join(request(group="full"))).error == ErrorCode.NONE
        assert (await c.join(request(group="full"))).error == ErrorCode.GROUP_MAX_SIZE_REACHED

    run(scenario, tmp_path, max_size=1)


def test_protocol_selection_by_vote(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        both = [("range", SUB), ("cooperative-sticky", SUB)]
        prefer_sticky = [("cooperative-sticky", SUB), ("range", SUB)]
        joins = asyncio.gather(
            c.join(request(protocols=both)),
            c.join(request(protocols=prefer_sticky)),
            c.join(request(protocols=prefer_sticky)),
        )
        await settle()
        h.timer.advance(300)  # the initial delay, extended once for the later members
        results = await joins
        assert {r.protocol_name for r in results} == {"cooperative-sticky"}

    run(scenario, tmp_path, initial_rebalance_delay_ms=50)


def test_initial_delay_waits_and_extends_for_new_members(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        first = asyncio.create_task(c.join(request(rebalance_timeout_ms=1000)))
        await settle()
        h.timer.advance(100)
        second = asyncio.create_task(c.join(request(rebalance_timeout_ms=1000)))
        await settle()
        h.timer.advance(50)  # 150 ms: the delay ends, and is extended for the newcomer
        await settle()
        assert not first.done() and not second.done()
        h.timer.advance(149)
        await settle()
        assert not first.done() and not second.done()
        h.timer.advance(1)  # another 150 ms
        a, b = await asyncio.gather(first, second)
        assert a.generation == b.generation == 1

    run(scenario, tmp_path, initial_rebalance_delay_ms=150)


def test_member_that_never_syncs_is_removed(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        a, _ = await join_and_sync(h, request(session_timeout_ms=5000, rebalance_timeout_ms=150))
        b_task = asyncio.create_task(
            c.join(request(session_timeout_ms=5000, rebalance_timeout_ms=150))
        )
        await settle()
        await c.join(request(member=a.member_id, session_timeout_ms=5000, rebalance_timeout_ms=150))
        b = await b_task
        await c.sync("g", b.generation, a.member_id, group_instance_id=None, protocol_type=None,
                     protocol_name=None, assignments={})  # fmt: skip
        # b never sends SyncGroup: after the rebalance timeout it is dropped and a must rejoin.
        h.timer.advance(149)
        assert c.describe("g").state == "Stable"
        h.timer.advance(1)
        assert c.heartbeat("g", b.generation, b.member_id, None) == ErrorCode.UNKNOWN_MEMBER_ID
        assert c.heartbeat("g", b.generation, a.member_id, None) == ErrorCode.REBALANCE_IN_PROGRESS
        assert c.describe("g").state == "PreparingRebalance"

    run(scenario, tmp_path)


def _commit(
    c: GroupCoordinator,
    group: str,
    generation: int = -1,
    member: str = "",
    *partitions: PartitionOffset,
    metadata_max_bytes: int = 4096,
) -> Awaitable[list[ErrorCode]]:
    return c.commit_offsets(
        OffsetCommitMember(group, generation, member),
        partitions or (PartitionOffset(TopicPartition("t", 0), 1),),
        metadata_max_bytes=metadata_max_bytes,
    )


def test_commit_validation(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        assert await _commit(c, "new") == [ErrorCode.NONE]
        assert await _commit(c, "unseen", 3, "m") == [ErrorCode.ILLEGAL_GENERATION]
        a, _ = await join_and_sync(h, request())
        assert await _commit(c, "g") == [ErrorCode.UNKNOWN_MEMBER_ID]  # group has members
        assert await _commit(c, "g", a.generation, a.member_id) == [ErrorCode.NONE]
        assert await _commit(c, "g", a.generation + 1, a.member_id) == [
            ErrorCode.ILLEGAL_GENERATION
        ]
        assert await _commit(c, "g", a.generation, "other") == [ErrorCode.UNKNOWN_MEMBER_ID]
        assert await _commit(c, "") == [ErrorCode.INVALID_GROUP_ID]

    run(scenario, tmp_path)


def test_commit_answers_each_partition_and_writes_only_the_accepted_ones(tmp_path: Path) -> None:
    fine, unknown, wordy = TopicPartition("t", 0), TopicPartition("gone", 0), TopicPartition("t", 1)

    async def scenario(h: Harness) -> None:
        c = h.coordinator
        codes = await _commit(
            c, "g", -1, "",
            PartitionOffset(fine, 5, metadata="m" * 10),
            PartitionOffset(unknown, 6, topic_exists=False),
            PartitionOffset(wordy, 7, metadata="m" * 11),
            metadata_max_bytes=10,
        )  # fmt: skip
        assert codes == [
            ErrorCode.NONE,
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ErrorCode.OFFSET_METADATA_TOO_LARGE,
        ]
        assert c.committed("g") == {fine: OffsetValue(5, -1, "m" * 10, h.clock())}
        assert h.reload().committed("g") == c.committed("g")

    run(scenario, tmp_path)


def test_a_failed_commit_write_answers_the_accepted_partitions_with_the_mapped_error(
    tmp_path: Path,
) -> None:
    fine, unknown = TopicPartition("t", 0), TopicPartition("gone", 0)

    async def scenario(h: Harness) -> None:
        c = h.coordinator
        h.fail_with = NotEnoughReplicasError("one replica")
        codes = await _commit(
            c,
            "g",
            -1,
            "",
            PartitionOffset(fine, 5),
            PartitionOffset(unknown, 6, topic_exists=False),
        )
        assert codes == [ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        assert c.committed("g") == {}

    run(scenario, tmp_path)


def test_transactional_commit_checks_the_member_before_the_producer(tmp_path: Path) -> None:
    tp = TopicPartition("t", 0)

    async def commit(c: GroupCoordinator, member: OffsetCommitMember, error: ErrorCode) -> Any:
        return await c.commit_transactional_offsets(
            member, 7, 0, [PartitionOffset(tp, 3)], producer_error=error, metadata_max_bytes=10
        )

    async def scenario(h: Harness) -> None:
        c = h.coordinator
        a, _ = await join_and_sync(h, request())
        fenced = ErrorCode.PRODUCER_FENCED
        stale = OffsetCommitMember("g", a.generation + 1, a.member_id)
        assert await commit(c, stale, fenced) == [ErrorCode.ILLEGAL_GENERATION]
        # Without a member named, the group's members are not checked; the producer is.
        assert await commit(c, OffsetCommitMember("g"), fenced) == [fenced]
        assert await commit(c, OffsetCommitMember(""), fenced) == [ErrorCode.INVALID_GROUP_ID]
        assert not c.has_pending_transactional("g", tp)
        current = OffsetCommitMember("g", a.generation, a.member_id)
        assert await commit(c, current, ErrorCode.NONE) == [ErrorCode.NONE]
        assert c.has_pending_transactional("g", tp)

    run(scenario, tmp_path)


def test_state_survives_reload(tmp_path: Path) -> None:
    tp = TopicPartition("t", 0)

    async def scenario(h: Harness) -> GroupCoordinator:
        c = h.coordinator
        a, _ = await join_and_sync(h, request(group_instance_id="i-1"))
        await c.commit("g", {tp: OffsetValue(42, 3, "meta", h.clock())})
        await c.commit("simple", {tp: OffsetValue(7, -1, "", h.clock())})
        reloaded = h.reload()
        described = reloaded.describe("g")
        assert described.state == "Stable" and described.protocol == "range"
        assert [m.member_id for m in described.members] == [a.member_id]
        assert described.members[0].group_instance_id == "i-1"
        assert described.members[0].assignment == f"to-{a.member_id}".encode()
        assert reloaded.committed("g")[tp] == OffsetValue(42, 3, "meta", h.clock())
        assert reloaded.describe("simple").state == "Empty"
        assert sorted(reloaded.groups()) == ["g", "simple"]
        return reloaded

    run(scenario, tmp_path)


def test_delete_groups_and_offsets(tmp_path: Path) -> None:
    tp, other = TopicPartition("t", 0), TopicPartition("u", 1)

    async def scenario(h: Harness) -> None:
        c = h.coordinator
        await c.commit("idle", {tp: OffsetValue(1, -1, "", 0), other: OffsetValue(2, -1, "", 0)})
        assert await c.delete_offsets("idle", [tp]) == (ErrorCode.NONE, {tp: ErrorCode.NONE})
        assert c.committed("idle") == {other: OffsetValue(2, -1, "", 0)}
        assert (await c.delete_offsets("missing", [tp]))[0] == ErrorCode.GROUP_ID_NOT_FOUND
        # A member subscribed to topic "t" (consumer protocol v0: topics ["t"], no user data).
        subscription = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"
        await join_and_sync(h, request(group="busy", protocols=[("range", subscription)]))
        await c.commit("busy", {tp: OffsetValue(5, -1, "", 0)})
        top, codes = await c.delete_offsets("busy", [tp, other])
        assert (top, codes) == (
            ErrorCode.NONE,
            {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, other: ErrorCode.NONE},
        )
        results = await c.delete_groups(["idle", "busy", "missing"])
        assert results == {
            "idle": ErrorCode.NONE,
            "busy": ErrorCode.NON_EMPTY_GROUP,
            "missing": ErrorCode.GROUP_ID_NOT_FOUND,
        }
        assert c.committed("idle") == {} and "idle" not in c.groups()
        assert "idle" not in h.reload().groups()  # tombstones written

    run(scenario, tmp_path)


def test_offsets_of_empty_groups_expire(tmp_path: Path) -> None:
    tp = TopicPartition("t", 0)

    async def scenario(h: Harness) -> None:
        c = h.coordinator
        await c.commit("old", {tp: OffsetValue(1, -1, "", h.clock())})
        await join_and_sync(h, request(group="live"))
        await c.commit("live", {tp: OffsetValue(9, -1, "", h.clock())})
        h.clock.advance(60_001)
        assert await c.expire_offsets() == 1
        assert "old" not in c.groups() and c.committed("live") == {
            tp: OffsetValue(9, -1, "", h.clock() - 60_001)
        }
        assert "old" not in h.reload().groups()

    run(scenario, tmp_path, offsets_retention_ms=60_000)


def test_offsets_expire_at_the_retention_check_interval_without_being_asked(
    tmp_path: Path,
) -> None:
    tp = TopicPartition("t", 0)

    async def scenario(h: Harness) -> None:
        c = h.coordinator
        await c.commit("old", {tp: OffsetValue(1, -1, "", h.clock())})
        for _ in range(5):  # checks at 10 s … 50 s: not yet 60 s old
            h.timer.advance(10_000)
            await settle()
        assert c.committed("old") == {tp: OffsetValue(1, -1, "", h.clock() - 50_000)}
        h.timer.advance(10_000)
        await settle()
        assert c.committed("old") == {} and "old" not in c.groups()
        assert "old" not in h.reload().groups()

    run(scenario, tmp_path, offsets_retention_ms=60_000, retention_check_interval_ms=10_000)


def test_a_loaded_member_that_does_not_heartbeat_after_a_restart_leaves_at_its_session_timeout(
    tmp_path: Path,
) -> None:
    async def scenario(h: Harness) -> None:
        a, _ = await join_and_sync(h, request(session_timeout_ms=200))
        fresh = h.reload()
        fresh.start()
        try:
            assert [m.member_id for m in fresh.describe("g").members] == [a.member_id]
            h.timer.advance(199)
            assert fresh.heartbeat("g", a.generation, a.member_id, None) == ErrorCode.NONE
            h.timer.advance(199)  # the heartbeat gave it another 200 ms
            assert fresh.describe("g").state == "Stable"
            h.timer.advance(1)
            assert fresh.describe("g").members == []
            assert fresh.heartbeat("g", a.generation, a.member_id, None) == (
                ErrorCode.UNKNOWN_MEMBER_ID
            )
        finally:
            await fresh.shutdown()

    run(scenario, tmp_path)


def test_a_commit_creates_the_offsets_topic_only_when_it_writes(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        writes: list[str] = []

        async def create_topic() -> None:
            writes.append("g")

        refused = PartitionOffset(TopicPartition("gone", 0), 1, topic_exists=False)
        member = OffsetCommitMember("g")
        codes = await c.commit_offsets(
            member, [refused], metadata_max_bytes=10, before_write=create_topic
        )
        assert codes == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] and writes == []
        codes = await c.commit_offsets(
            member,
            [refused, PartitionOffset(TopicPartition("t", 0), 1)],
            metadata_max_bytes=10,
            before_write=create_topic,
        )
        assert codes == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NONE]
        assert writes == ["g"]

    run(scenario, tmp_path)


def test_failed_assignment_write_restarts_rebalance(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        joined = await c.join(request())
        h.fail_appends = True
        sync = asyncio.create_task(
            c.sync("g", joined.generation, joined.member_id, group_instance_id=None,
                   protocol_type=None, protocol_name=None, assignments={})
        )  # fmt: skip
        assert (await sync).error == ErrorCode.REBALANCE_IN_PROGRESS
        assert c.describe("g").state == "PreparingRebalance"

    run(scenario, tmp_path)


@pytest.mark.parametrize("count", [10])
def test_many_members_form_one_generation(tmp_path: Path, count: int) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        joins = asyncio.gather(*(c.join(request(client_id=f"c{i}")) for i in range(count)))
        await settle()
        h.timer.advance(300)  # the initial delay, extended once for the later members
        results = await joins
        assert {r.generation for r in results} == {1}
        leaders = [r for r in results if r.members]
        assert len(leaders) == 1 and len(leaders[0].members) == count

    run(scenario, tmp_path, initial_rebalance_delay_ms=50)


def test_offsets_topic_name() -> None:
    assert OFFSETS_TOPIC == "__consumer_offsets"


# -- transactional offset commits --------------------------------------------------------


def _write_marker(h: Harness, group: str, producer_id: int, commit: bool) -> None:
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    batch = build_end_transaction_batch(
        kind, producer_id=producer_id, producer_epoch=0, coordinator_epoch=0
    )
    tp = h.coordinator.partition_of(group)
    h.log_for(tp).append_as_leader(bytearray(batch), origin=AppendOrigin.COORDINATOR)
    h.coordinator.on_txn_marker(tp, producer_id, commit)


def test_transactional_offsets_are_visible_only_after_commit(tmp_path: Path) -> None:
    tp = TopicPartition("t", 0)

    async def scenario(h: Harness) -> None:
        c = h.coordinator
        await c.commit("g", {tp: OffsetValue(1, -1, "", 0)})
        await c.commit_transactional("g", 77, 0, {tp: OffsetValue(10, -1, "", 0)})
        assert c.committed("g")[tp].offset == 1  # type: ignore[union-attr]
        assert c.has_pending_transactional("g", tp)
        # Open at a restart: still pending after reloading.
        assert h.reload().has_pending_transactional("g", tp)
        _write_marker(h, "g", 77, commit=True)
        assert c.committed("g")[tp].offset == 10  # type: ignore[union-attr]
        assert not c.has_pending_transactional("g", tp)
        await c.commit_transactional("g", 78, 0, {tp: OffsetValue(20, -1, "", 0)})
        _write_marker(h, "g", 78, commit=False)
        assert c.committed("g")[tp].offset == 10  # type: ignore[union-attr]
        reloaded = h.reload()
        assert reloaded.committed("g")[tp].offset == 10  # type: ignore[union-attr]
        assert not reloaded.has_pending_transactional("g", tp)

    run(scenario, tmp_path)


def test_marker_on_another_offsets_partition_leaves_pending_alone(tmp_path: Path) -> None:
    tp = TopicPartition("t", 0)

    async def scenario(h: Harness) -> None:
        c = h.coordinator
        other = next(
            g for g in (f"g{i}" for i in range(100)) if c.partition_of(g) != c.partition_of("g")
        )
        await c.commit_transactional("g", 5, 0, {tp: OffsetValue(3, -1, "", 0)})
        c.on_txn_marker(c.partition_of(other), 5, True)
        assert c.has_pending_transactional("g", tp)
        c.on_txn_marker(TopicPartition("plain-topic", 0), 5, True)
        assert c.has_pending_transactional("g", tp)

    run(scenario, tmp_path)


def _calls_while(step: Callable[[], None]) -> int:
    """Python and C function calls (generator resumptions too) made while ``step`` runs."""
    calls = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    sys.setprofile(count)
    try:
        step()
    finally:
        sys.setprofile(None)
    return calls


async def _calls_to_rejoin_a_group_of(h: Harness, size: int) -> int:
    """Calls made by one JoinGroup of a group of ``size`` members rebalancing, when all but
    one of the others have rejoined (the one rejoin that can be costliest to check)."""
    c = h.coordinator
    first = [asyncio.create_task(c.join(request(rebalance_timeout_ms=100))) for _ in range(size)]
    await settle()
    h.timer.advance(100)  # the initial delay ends: generation 1
    joined = [await task for task in first]
    leader = next(j for j in joined if j.leader == j.member_id)
    await c.sync("g", 1, leader.member_id, group_instance_id=None, protocol_type=None,
                 protocol_name=None, assignments={})  # fmt: skip
    newcomer = asyncio.create_task(c.join(request(client_id="newcomer")))
    await settle()
    assert c.describe("g").state == "PreparingRebalance"
    order = [m.member_id for m in c.describe("g").members]
    rejoins = [  # every member but the last two old ones and the newcomer
        asyncio.create_task(c.join(request(member=member_id, rebalance_timeout_ms=100)))
        for member_id in order[:-3]
    ]
    await settle()
    measured = c.join(request(member=order[-3], rebalance_timeout_ms=100))
    # The coroutine runs up to where it waits for the rebalance: that is the join's work.
    calls = _calls_while(lambda: measured.send(None))
    measured.close()
    assert not newcomer.done() and not any(task.done() for task in rejoins)
    return calls


def test_a_join_costs_the_same_in_a_group_of_40_as_of_400(tmp_path: Path) -> None:
    costs = [
        run(
            lambda h, size=size: _calls_to_rejoin_a_group_of(h, size),
            tmp_path / str(size),
            initial_rebalance_delay_ms=100,
        )
        for size in (40, 400)
    ]
    assert costs[0] == costs[1], costs


def test_a_group_over_a_lowered_max_size_keeps_the_members_that_rejoin_first(
    tmp_path: Path,
) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        first = [asyncio.create_task(c.join(request(rebalance_timeout_ms=100))) for _ in range(3)]
        await settle()
        h.timer.advance(100)
        joined = [await task for task in first]
        leader = next(j for j in joined if j.leader == j.member_id)
        await c.sync("g", 1, leader.member_id, group_instance_id=None, protocol_type=None,
                     protocol_name=None, assignments={})  # fmt: skip
        await settle()  # the group's record is stored
        h.config = dataclasses.replace(h.config, max_size=2)
        fresh = h.reload()
        fresh.start()
        try:
            assert fresh.describe("g").state == "PreparingRebalance"
            ids = [j.member_id for j in joined]
            rejoins = [asyncio.create_task(fresh.join(request(member=m))) for m in ids[:2]]
            await settle()
            refused = await fresh.join(request(member=ids[2]))
            assert refused.error == ErrorCode.GROUP_MAX_SIZE_REACHED
            answers = [await task for task in rejoins]
            assert [a.error for a in answers] == [ErrorCode.NONE] * 2
            assert sorted(m.member_id for m in fresh.describe("g").members) == sorted(ids[:2])
        finally:
            await fresh.shutdown()

    run(scenario, tmp_path, initial_rebalance_delay_ms=100)


@pytest.mark.parametrize(
    ("failure", "level", "traceback"),
    [
        (NotEnoughReplicasError("__consumer_offsets-0 has 1 in-sync replica"), "WARNING", False),
        (OSError("disk gone"), "ERROR", True),
    ],
    ids=["not-replicated", "a-fault"],
)
def test_a_group_store_refused_as_not_replicated_is_a_warning_and_a_fault_an_error(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    failure: Exception,
    level: str,
    traceback: bool,
) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        joined = await c.join(request())
        h.fail_with = failure
        c.leave("g", [(joined.member_id, None)])  # the group is empty: it is stored
        await settle()

    with caplog.at_level("WARNING", logger="samsa.coordinator"):
        run(scenario, tmp_path)
    [record] = [r for r in caplog.records if "storing empty group g failed" in r.getMessage()]
    assert (record.levelname, record.exc_info is not None) == (level, traceback)
