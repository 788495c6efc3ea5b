"""The group coordinator: membership, rebalances and committed offsets of every group.

Kafka's classic group protocol. Members join (JoinGroup), the coordinator waits
until every known member has rejoined — or the rebalance timeout passes — then
starts a new generation, hands the leader every member's subscription, and
passes the leader's assignment to each member (SyncGroup). Heartbeats keep a
member's session alive; a session that lapses removes the member and starts a
rebalance. Assignors run in the clients, so eager and cooperative protocols
both work unchanged.

Everything here runs on the broker's event loop. Waiting is event-driven: a
JoinGroup or SyncGroup request awaits a future that a later request or a
timer (``loop.call_later``) completes — no polling.

State lives in the compacted ``__consumer_offsets`` topic, in Kafka's record
formats (:mod:`samsa.coordinator.group.records`): a group's partition is
``abs(hash(group)) % offsets.topic.num.partitions``; offset commits and group
metadata (generation, protocol, leader, members with subscriptions and
assignments) are appended before the cache changes, and the cache is rebuilt
from the topic at start-up. Deleting a group or an offset writes tombstones.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from samsa.coordinator.errors import write_error_code
from samsa.coordinator.group.group import (
    COORDINATOR_NOT_AVAILABLE,
    FENCED_INSTANCE_ID,
    GROUP_ID_NOT_FOUND,
    GROUP_MAX_SIZE_REACHED,
    GROUP_SUBSCRIBED_TO_TOPIC,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_GROUP_ID,
    INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED,
    NON_EMPTY_GROUP,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    Group,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
)
from samsa.coordinator.group.loader import load_groups
from samsa.coordinator.group.records import (
    GroupMetadataValue,
    MemberMetadata,
    OffsetKey,
    OffsetValue,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_key,
    encode_offset_value,
    partition_for,
)
from samsa.errors import CorruptRecordError
from samsa.protocol.consumer_protocol import parse_subscription
from samsa.records import RecordBatchBuilder
from samsa.storage import Log
from samsa.types import TopicPartition

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "104857600"}
CONSUMER_PROTOCOL_TYPE = "consumer"

AppendFn = Callable[[TopicPartition, bytes], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """The broker's ``group.*`` and ``offsets.*`` settings the coordinator uses."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    offsets_retention_ms: int = 7 * 24 * 3600_000
    retention_check_interval_ms: int = 600_000


@dataclass(slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool  # JoinGroup v4+: a new member first gets an id (KIP-394)
    supports_skip_assignment: bool = False  # JoinGroup v9+


@dataclass(slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription] = field(default_factory=list)


class GroupCoordinator:
    """Owner of every group's membership and committed offsets (one writer: the loop)."""

    def __init__(
        self,
        partitions: int,
        append: AppendFn,
        clock: Callable[[], int],
        config: GroupConfig | None = None,
    ) -> None:
        self.partitions = partitions
        self.config = config or GroupConfig()
        self._append = append
        self._clock = clock
        self._groups: dict[str, Group] = {}
        self._offsets: dict[str, dict[TopicPartition, OffsetValue]] = {}
        # Offsets committed inside open transactions: producer id → group → offsets.
        self._pending_txn: dict[int, dict[str, dict[TopicPartition, OffsetValue]]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._expiry_task: asyncio.Task[None] | None = None

    def partition_of(self, group: str) -> TopicPartition:
        return TopicPartition(OFFSETS_TOPIC, partition_for(group, self.partitions))

    # -- lifecycle -------------------------------------------------------------------
    def load(self, logs: Iterable[Log]) -> None:
        """Rebuild groups and offsets from the offsets topic (:mod:`.loader`); never raises."""
        loaded = load_groups(logs)
        self._offsets = loaded.offsets
        self._pending_txn = loaded.pending
        for group_id, stored in loaded.metadata.items():
            self._groups[group_id] = self._restore(group_id, stored)
        for group_id in self._offsets:
            if group_id not in self._groups:
                self._groups[group_id] = Group(group_id, state_timestamp=-1)
        if self._groups or loaded.skipped:
            log.info(
                "loaded %d groups (%d with committed offsets); %d unreadable records skipped",
                len(self._groups),
                len(self._offsets),
                loaded.skipped,
            )

    def _restore(self, group_id: str, value: GroupMetadataValue) -> Group:
        group = Group(
            group_id,
            state=GroupState.STABLE if value.members else GroupState.EMPTY,
            generation=value.generation,
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol,
            leader_id=value.leader,
            state_timestamp=value.current_state_timestamp,
        )
        for m in value.members:
            member = Member(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.rebalance_timeout, m.session_timeout, value.protocol_type,
                [(value.protocol or "", m.subscription)], assignment=m.assignment,
            )  # fmt: skip
            group.members[m.member_id] = member
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        return group

    def start(self) -> None:
        """Start session timers of loaded members and the periodic offset expiry."""
        for group in self._groups.values():
            for member in group.members.values():
                self._arm_session(group, member)
        self._expiry_task = asyncio.get_running_loop().create_task(self._expire_periodically())

    async def shutdown(self) -> None:
        if self._expiry_task is not None:
            self._expiry_task.cancel()
        for group in self._groups.values():
            group.cancel_timers()
            for member in group.members.values():
                member.complete_join(JoinResult(COORDINATOR_NOT_AVAILABLE, member.member_id))
                member.complete_sync(SyncResult(COORDINATOR_NOT_AVAILABLE))
        for task in list(self._tasks):
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(task, 5)

    def _spawn(self, coro: Awaitable[Any], what: str) -> None:
        async def run() -> None:
            try:
                await coro
            except Exception:
                log.exception("group coordinator: %s failed", what)

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- JoinGroup ---------------------------------------------------------------------
    async def join(self, req: JoinRequest) -> JoinResult:
        cfg = self.config
        if not req.group_id:
            return JoinResult(INVALID_GROUP_ID, req.member_id)
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            return JoinResult(INVALID_SESSION_TIMEOUT, req.member_id)
        group = self._groups.get(req.group_id)
        if group is None:
            if req.member_id:
                return JoinResult(UNKNOWN_MEMBER_ID, req.member_id)
            group = self._groups[req.group_id] = Group(req.group_id, state_timestamp=self._clock())
        if group.is_(GroupState.DEAD):
            return JoinResult(COORDINATOR_NOT_AVAILABLE, req.member_id)
        if not group.supports(req.protocol_type, req.protocols):
            return JoinResult(INCONSISTENT_GROUP_PROTOCOL, req.member_id)
        known = req.member_id in group.members or req.member_id in group.pending_members
        static_known = (
            req.group_instance_id is not None and req.group_instance_id in group.static_members
        )
        if not known and not static_known and len(group.members) >= cfg.max_size:
            return JoinResult(GROUP_MAX_SIZE_REACHED, req.member_id)
        fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        if not req.member_id:
            result = self._join_new_member(group, req, fut)
        else:
            result = self._join_known_member(group, req, fut)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)
        if result is not None:
            return result
        return await fut

    def _new_member(self, req: JoinRequest, member_id: str) -> Member:
        return Member(
            member_id, req.group_instance_id, req.client_id, req.client_host,
            req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
            list(req.protocols),
        )  # fmt: skip

    def _join_new_member(
        self, group: Group, req: JoinRequest, fut: asyncio.Future[JoinResult]
    ) -> JoinResult | None:
        prefix = req.group_instance_id if req.group_instance_id is not None else req.client_id
        member_id = f"{prefix}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            if req.group_instance_id in group.static_members:
                return self._replace_static_member(group, req, member_id, fut)
            self._add_member_and_rebalance(group, self._new_member(req, member_id), fut)
            return None
        if req.require_known_member_id:
            # KIP-394: hand out an id first; the member has a session timeout to rejoin with it.
            loop = asyncio.get_running_loop()
            group.pending_members[member_id] = loop.call_later(
                req.session_timeout_ms / 1000, self._expire_pending, group, member_id
            )
            return JoinResult(MEMBER_ID_REQUIRED, member_id)
        self._add_member_and_rebalance(group, self._new_member(req, member_id), fut)
        return None

    def _join_known_member(
        self, group: Group, req: JoinRequest, fut: asyncio.Future[JoinResult]
    ) -> JoinResult | None:
        member_id = req.member_id
        if member_id in group.pending_members:
            group.pending_members.pop(member_id).cancel()
            self._add_member_and_rebalance(group, self._new_member(req, member_id), fut)
            return None
        if group.static_member_fenced(member_id, req.group_instance_id):
            return JoinResult(FENCED_INSTANCE_ID, member_id)
        member = group.members.get(member_id)
        if member is None or group.is_(GroupState.EMPTY):
            return JoinResult(UNKNOWN_MEMBER_ID, member_id)
        member.client_id, member.client_host = req.client_id, req.client_host
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, req.protocols, fut)
        elif group.is_(GroupState.COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                return self._current_generation(group, member_id)  # the response was lost
            self._update_member_and_rebalance(group, member, req.protocols, fut)
        elif group.is_leader(member_id) or not member.matches(req.protocols):
            self._update_member_and_rebalance(group, member, req.protocols, fut)
        else:
            self._arm_session(group, member)
            return self._current_generation(group, member_id)
        return None

    def _current_generation(self, group: Group, member_id: str) -> JoinResult:
        leader = group.is_leader(member_id)
        return JoinResult(
            NONE, member_id, group.generation, group.protocol_type, group.protocol_name,
            group.leader_id or "", group.member_metadata() if leader else [],
        )  # fmt: skip

    def _replace_static_member(
        self, group: Group, req: JoinRequest, new_id: str, fut: asyncio.Future[JoinResult]
    ) -> JoinResult | None:
        """A static member came back with a new member id: fence the old id, keep its place."""
        assert req.group_instance_id is not None
        old_id = group.static_members[req.group_instance_id]
        old = group.members[old_id]
        current_leader = group.leader_id or ""
        old.complete_join(JoinResult(FENCED_INSTANCE_ID, old_id))
        old.complete_sync(SyncResult(FENCED_INSTANCE_ID))
        old.cancel_session_timer()
        old_protocols = old.protocols
        member = self._new_member(req, new_id)
        member.assignment = old.assignment
        group.members = {(new_id if k == old_id else k): (member if k == old_id else v)
                         for k, v in group.members.items()}  # fmt: skip
        group.static_members[req.group_instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        if old_id in group.pending_sync:
            group.pending_sync.discard(old_id)
            group.pending_sync.add(new_id)
        if group.is_(GroupState.STABLE):
            if group.select_protocol() == group.protocol_name:
                # Kafka's updateStaticMemberAndRebalance: a Stable group keeps its generation
                # and assignment. From JoinGroup v9 a returning leader is told it leads but
                # must skip the assignment; below v9 it is answered with the old leader id,
                # so it does not recognise itself, syncs as a follower and gets its current
                # assignment (an assignment it computed would not be handed out anyway).
                self._arm_session(group, member)
                self._spawn(self._store_group(group), f"storing group {group.group_id}")
                if group.is_leader(new_id) and req.supports_skip_assignment:
                    result = self._current_generation(group, new_id)
                    result.skip_assignment = True
                    return result
                return JoinResult(
                    NONE, new_id, group.generation, group.protocol_type, group.protocol_name,
                    current_leader,
                )  # fmt: skip
            member.protocols = list(req.protocols)
            member.join_future = fut
            self._prepare_rebalance(group, f"static member {req.group_instance_id} rejoined")
            return None
        if group.is_(GroupState.COMPLETING_REBALANCE):
            member.join_future = fut
            self._prepare_rebalance(group, f"static member {req.group_instance_id} replaced")
            return None
        if group.is_(GroupState.PREPARING_REBALANCE):
            member.join_future = fut
            self._arm_session(group, member)
            return None
        member.protocols = old_protocols
        return JoinResult(UNKNOWN_MEMBER_ID, new_id)

    def _add_member_and_rebalance(
        self, group: Group, member: Member, fut: asyncio.Future[JoinResult]
    ) -> None:
        member.join_future = fut
        member.is_new = True
        group.add(member)
        if group.initial_delay_active:
            group.new_member_added = True
        self._arm_session(group, member)
        self._maybe_prepare_rebalance(group, f"member {member.member_id} joined")

    def _update_member_and_rebalance(
        self,
        group: Group,
        member: Member,
        protocols: list[tuple[str, bytes]],
        fut: asyncio.Future[JoinResult],
    ) -> None:
        if member.awaiting_join:  # a second JoinGroup replaces one still waiting
            member.complete_join(JoinResult(REBALANCE_IN_PROGRESS, member.member_id))
        member.protocols = list(protocols)
        member.join_future = fut
        self._arm_session(group, member)
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")

    # -- rebalances ------------------------------------------------------------------
    def _transition(self, group: Group, state: GroupState) -> None:
        group.state = state
        group.state_timestamp = self._clock()

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            for member in group.members.values():
                member.assignment = b""
                member.complete_sync(SyncResult(REBALANCE_IN_PROGRESS))
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
        group.pending_sync.clear()
        if group.join_timer is not None:
            group.join_timer.cancel()
        loop = asyncio.get_running_loop()
        rebalance_timeout = group.rebalance_timeout_ms()
        if group.is_(GroupState.EMPTY):
            # Kafka's initial delay: wait for more of a starting group's members to arrive.
            delay = self.config.initial_rebalance_delay_ms
            group.initial_delay_active = True
            group.new_member_added = False
            group.initial_delay_remaining_ms = max(rebalance_timeout - delay, 0)
            group.join_timer = loop.call_later(delay / 1000, self._initial_delay_expired, group)
        else:
            group.join_timer = loop.call_later(rebalance_timeout / 1000, self._complete_join, group)
        self._transition(group, GroupState.PREPARING_REBALANCE)
        log.info(
            "group %s rebalancing (generation %d): %s", group.group_id, group.generation, reason
        )

    def _initial_delay_expired(self, group: Group) -> None:
        if group.new_member_added and group.initial_delay_remaining_ms > 0:
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, group.initial_delay_remaining_ms)
            group.initial_delay_remaining_ms -= delay
            group.join_timer = asyncio.get_running_loop().call_later(
                delay / 1000, self._initial_delay_expired, group
            )
            return
        self._complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if (
            group.is_(GroupState.PREPARING_REBALANCE)
            and not group.initial_delay_active
            and group.all_members_joined()
        ):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """End the join phase: drop members that did not rejoin, start the next generation."""
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.initial_delay_active = False
        for member in list(group.members.values()):
            if not member.awaiting_join:
                log.info(
                    "group %s: member %s did not rejoin in time; removing it",
                    group.group_id,
                    member.member_id,
                )
                group.remove(member.member_id)
        group.generation += 1
        if not group.members:
            group.protocol_name = None
            self._transition(group, GroupState.EMPTY)
            self._spawn(self._store_group(group), f"storing empty group {group.group_id}")
            log.info("group %s is empty at generation %d", group.group_id, group.generation)
            return
        group.protocol_name = group.select_protocol()
        if group.leader_id is None or group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        self._transition(group, GroupState.COMPLETING_REBALANCE)
        group.pending_sync = set(group.members)
        for member in group.members.values():
            member.is_new = False
            member.complete_join(self._current_generation(group, member.member_id))
            self._arm_session(group, member)
        group.sync_timer = asyncio.get_running_loop().call_later(
            group.rebalance_timeout_ms() / 1000, self._sync_expired, group, group.generation
        )
        log.info(
            "group %s generation %d: %d members, protocol %s, leader %s",
            group.group_id,
            group.generation,
            len(group.members),
            group.protocol_name,
            group.leader_id,
        )

    def _sync_expired(self, group: Group, generation: int) -> None:
        """Members that never sent SyncGroup for this generation are dropped (rebalance)."""
        group.sync_timer = None
        if generation != group.generation or not group.pending_sync:
            return
        if not group.is_(GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        for member_id in list(group.pending_sync):
            log.info("group %s: member %s did not sync in time", group.group_id, member_id)
            member = group.remove(member_id)
            if member is not None:
                member.complete_sync(SyncResult(UNKNOWN_MEMBER_ID))
        group.pending_sync.clear()
        if group.members:
            self._prepare_rebalance(group, "members did not sync in time")
        else:
            self._prepare_rebalance(group, "no member synced")

    def _expire_pending(self, group: Group, member_id: str) -> None:
        if group.pending_members.pop(member_id, None) is not None:
            self._try_complete_join(group)

    def _arm_session(self, group: Group, member: Member) -> None:
        member.cancel_session_timer()
        member.session_timer = asyncio.get_running_loop().call_later(
            member.session_timeout_ms / 1000, self._session_expired, group, member
        )

    def _session_expired(self, group: Group, member: Member) -> None:
        member.session_timer = None
        if group.members.get(member.member_id) is not member:
            return
        if member.awaiting_join or member.awaiting_sync:
            self._arm_session(group, member)  # waiting on us: its session cannot lapse
            return
        log.info("group %s: member %s session expired", group.group_id, member.member_id)
        self._remove_member(group, member, "session timeout")

    def _remove_member(self, group: Group, member: Member, reason: str) -> None:
        member.complete_join(JoinResult(UNKNOWN_MEMBER_ID, member.member_id))
        member.complete_sync(SyncResult(UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        group.pending_sync.discard(member.member_id)
        if group.is_(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"member {member.member_id} left ({reason})")
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # -- SyncGroup, Heartbeat, LeaveGroup -------------------------------------------------
    async def sync(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        *,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Mapping[str, bytes],
    ) -> SyncResult:
        group = self._groups.get(group_id)
        if group is None:
            return SyncResult(UNKNOWN_MEMBER_ID)
        if group.is_(GroupState.DEAD):
            return SyncResult(COORDINATOR_NOT_AVAILABLE)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(INCONSISTENT_GROUP_PROTOCOL)
        if group.static_member_fenced(member_id, group_instance_id):
            return SyncResult(FENCED_INSTANCE_ID)
        member = group.members.get(member_id)
        if member is None:
            return SyncResult(UNKNOWN_MEMBER_ID)
        if generation != group.generation:
            return SyncResult(ILLEGAL_GENERATION)
        group.pending_sync.discard(member_id)
        if group.is_(GroupState.EMPTY):
            return SyncResult(UNKNOWN_MEMBER_ID)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return SyncResult(REBALANCE_IN_PROGRESS)
        self._arm_session(group, member)
        if group.is_(GroupState.STABLE):
            return SyncResult(NONE, group.protocol_type, group.protocol_name, member.assignment)
        fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        if member.awaiting_sync:
            member.complete_sync(SyncResult(REBALANCE_IN_PROGRESS))
        member.sync_future = fut
        if group.is_leader(member_id):
            await self._complete_sync(group, generation, assignments)
        return await fut

    async def _complete_sync(
        self, group: Group, generation: int, assignments: Mapping[str, bytes]
    ) -> None:
        """Persist the leader's assignment, then hand each member its part (→ Stable)."""
        planned = {member_id: assignments.get(member_id, b"") for member_id in group.members}
        try:
            await self._store_group(group, planned)
        except Exception as exc:
            log.warning("group %s: storing the assignment failed: %s", group.group_id, exc)
            if group.is_(GroupState.COMPLETING_REBALANCE) and group.generation == generation:
                self._prepare_rebalance(group, "the assignment could not be stored")
            return
        if not group.is_(GroupState.COMPLETING_REBALANCE) or group.generation != generation:
            return  # the group moved on while the record was written
        self._transition(group, GroupState.STABLE)
        for member_id, member in group.members.items():
            member.assignment = planned.get(member_id, b"")
            member.complete_sync(
                SyncResult(NONE, group.protocol_type, group.protocol_name, member.assignment)
            )
        log.info("group %s generation %d is stable", group.group_id, group.generation)

    def heartbeat(
        self, group_id: str, generation: int, member_id: str, group_instance_id: str | None
    ) -> int:
        group = self._groups.get(group_id)
        if group is None:
            return UNKNOWN_MEMBER_ID
        if group.is_(GroupState.DEAD):
            return COORDINATOR_NOT_AVAILABLE
        if group.static_member_fenced(member_id, group_instance_id):
            return FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None or group.is_(GroupState.EMPTY):
            return UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return ILLEGAL_GENERATION
        self._arm_session(group, member)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return REBALANCE_IN_PROGRESS
        return NONE

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """Remove members (``(member_id, group_instance_id)`` pairs); top and per-member errors."""
        group = self._groups.get(group_id)
        if group is None:
            return NONE, [UNKNOWN_MEMBER_ID] * len(members)
        if group.is_(GroupState.DEAD):
            return COORDINATOR_NOT_AVAILABLE, [COORDINATOR_NOT_AVAILABLE] * len(members)
        errors = []
        for member_id, instance_id in members:
            if not member_id and instance_id is not None:
                member_id = group.static_members.get(instance_id, "")
                if not member_id:
                    errors.append(UNKNOWN_MEMBER_ID)
                    continue
            if group.static_member_fenced(member_id, instance_id):
                errors.append(FENCED_INSTANCE_ID)
                continue
            if member_id in group.pending_members:
                group.pending_members.pop(member_id).cancel()
                self._try_complete_join(group)
                errors.append(NONE)
                continue
            member = group.members.get(member_id)
            if member is None:
                errors.append(UNKNOWN_MEMBER_ID)
                continue
            log.info("group %s: member %s leaves", group_id, member_id)
            self._remove_member(group, member, "left the group")
            errors.append(NONE)
        return NONE, errors

    # -- offsets ---------------------------------------------------------------------
    def validate_commit(
        self, group_id: str, generation: int, member_id: str, group_instance_id: str | None
    ) -> int:
        """Kafka's checks for an OffsetCommit; NONE means the commit may be written."""
        group = self._groups.get(group_id)
        if group is None:
            return NONE if generation < 0 else ILLEGAL_GENERATION
        if group.is_(GroupState.DEAD):
            return COORDINATOR_NOT_AVAILABLE
        if generation >= 0 or member_id or group_instance_id is not None:
            if group.static_member_fenced(member_id, group_instance_id):
                return FENCED_INSTANCE_ID
            member = group.members.get(member_id)
            if member is None:
                return UNKNOWN_MEMBER_ID
            if generation != group.generation:
                return ILLEGAL_GENERATION
            if group.is_(GroupState.COMPLETING_REBALANCE):
                return REBALANCE_IN_PROGRESS
            self._arm_session(group, member)
            return NONE
        if not group.is_(GroupState.EMPTY):
            return UNKNOWN_MEMBER_ID  # only members may commit for a group that has them
        return NONE

    async def commit(self, group: str, offsets: Mapping[TopicPartition, OffsetValue]) -> None:
        """Append the commits as one batch to the group's offsets partition, then cache them."""
        if not offsets:
            return
        builder = RecordBatchBuilder()
        now = self._clock()
        for tp, value in offsets.items():
            key = OffsetKey(group, tp.topic, tp.partition)
            builder.append(encode_offset_value(value), key=encode_offset_key(key), timestamp=now)
        await self._append(self.partition_of(group), builder.build())
        if group not in self._groups:
            self._groups[group] = Group(group, state_timestamp=now)
        self._offsets.setdefault(group, {}).update(offsets)

    async def on_partitions_deleted(self, partitions: Iterable[TopicPartition]) -> int:
        """Remove every group's offsets of deleted partitions, as Kafka's onPartitionsDeleted.

        Committed offsets and those open transactions hold are dropped from the cache
        at once and tombstoned in each group's offsets partition, so a topic created
        again under the name starts without them, after a restart too. A failed
        tombstone append is logged and the rest go on: the topic is gone whatever
        happens here. Returns the number of committed offsets removed.
        """
        deleted = set(partitions)
        keys: dict[str, set[TopicPartition]] = {}
        for group_id, stored in list(self._offsets.items()):
            gone = deleted.intersection(stored)
            for tp in gone:
                del stored[tp]
            if gone:
                keys.setdefault(group_id, set()).update(gone)
            if not stored:
                del self._offsets[group_id]
        removed = sum(len(tps) for tps in keys.values())
        for by_group in self._pending_txn.values():
            for group_id, held in by_group.items():
                gone = deleted.intersection(held)
                for tp in gone:
                    del held[tp]
                keys.setdefault(group_id, set()).update(gone)
        by_partition: dict[TopicPartition, list[OffsetKey]] = {}
        for group_id, tps in keys.items():
            by_partition.setdefault(self.partition_of(group_id), []).extend(
                OffsetKey(group_id, tp.topic, tp.partition) for tp in sorted(tps)
            )
        now = self._clock()
        for offsets_tp, offset_keys in sorted(by_partition.items()):
            if not offset_keys:
                continue
            builder = RecordBatchBuilder()
            for key in offset_keys:
                builder.append(None, key=encode_offset_key(key), timestamp=now)
            try:
                await self._append(offsets_tp, builder.build())
            except Exception as exc:
                # Safe to go on: the cache no longer holds them and the topic is gone; a
                # restart would bring them back, so the error names the groups.
                log.error(
                    "writing %d tombstones for offsets of deleted partitions to %s failed "
                    "(groups %s): %s",
                    len(offset_keys), offsets_tp, sorted({k.group for k in offset_keys}), exc,
                )  # fmt: skip
        if removed:
            log.info("removed %d committed offsets of deleted partitions", removed)
        return removed

    def committed(
        self, group: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetValue | None]:
        """The group's committed offsets (all of them when ``partitions`` is None)."""
        stored = self._offsets.get(group, {})
        if partitions is None:
            return dict(stored)
        return {tp: stored.get(tp) for tp in partitions}

    async def commit_transactional(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets: Mapping[TopicPartition, OffsetValue],
    ) -> None:
        """TxnOffsetCommit: append as the producer's transactional batch; visible on commit."""
        if not offsets:
            return
        builder = RecordBatchBuilder(
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=0,
            is_transactional=True,
        )
        now = self._clock()
        for tp, value in offsets.items():
            key = OffsetKey(group_id, tp.topic, tp.partition)
            builder.append(encode_offset_value(value), key=encode_offset_key(key), timestamp=now)
        await self._append(self.partition_of(group_id), builder.build())
        self._pending_txn.setdefault(producer_id, {}).setdefault(group_id, {}).update(offsets)

    def on_txn_marker(self, tp: TopicPartition, producer_id: int, commit: bool) -> None:
        """A COMMIT/ABORT marker reached an offsets partition: publish or drop the pending."""
        if tp.topic != OFFSETS_TOPIC:
            return
        by_group = self._pending_txn.get(producer_id)
        if not by_group:
            return
        for group_id in [g for g in by_group if self.partition_of(g) == tp]:
            offsets = by_group.pop(group_id)
            if commit:
                if group_id not in self._groups:
                    self._groups[group_id] = Group(group_id, state_timestamp=self._clock())
                self._offsets.setdefault(group_id, {}).update(offsets)
        if not by_group:
            del self._pending_txn[producer_id]

    def has_pending_transactional(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether an open transaction holds an offset for ``tp`` (UNSTABLE_OFFSET_COMMIT)."""
        return any(tp in groups.get(group_id, {}) for groups in self._pending_txn.values())

    async def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[int, dict[TopicPartition, int]]:
        """OffsetDelete: drop committed offsets the group no longer consumes."""
        group = self._groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return GROUP_ID_NOT_FOUND, {}
        subscribed: set[str] = set()
        if not group.is_(GroupState.EMPTY):
            if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
                return NON_EMPTY_GROUP, {}
            try:
                subscribed = self._subscribed_topics(group)
            except CorruptRecordError:
                return NON_EMPTY_GROUP, {}
        codes: dict[TopicPartition, int] = {}
        deletable = []
        stored = self._offsets.get(group_id, {})
        for tp in partitions:
            if tp.topic in subscribed:
                codes[tp] = GROUP_SUBSCRIBED_TO_TOPIC
                continue
            codes[tp] = NONE
            if tp in stored:
                deletable.append(tp)
        try:
            await self._write_tombstones(group_id, deletable, group_record=False)
        except Exception as exc:
            # The offsets stay: nothing changes before a successful write.
            log.warning("group %s: writing offset deletions failed: %s", group_id, exc)
            return write_error_code(exc), {}
        return NONE, codes

    def _subscribed_topics(self, group: Group) -> set[str]:
        topics: set[str] = set()
        for member in group.members.values():
            metadata = member.metadata(group.protocol_name)
            topics.update(parse_subscription(metadata).topics)
        return topics

    async def _write_tombstones(
        self, group_id: str, partitions: list[TopicPartition], *, group_record: bool
    ) -> None:
        if not partitions and not group_record:
            return
        builder = RecordBatchBuilder()
        now = self._clock()
        for tp in partitions:
            key = encode_offset_key(OffsetKey(group_id, tp.topic, tp.partition))
            builder.append(None, key=key, timestamp=now)
        if group_record:
            builder.append(None, key=encode_group_metadata_key(group_id), timestamp=now)
        await self._append(self.partition_of(group_id), builder.build())
        stored = self._offsets.get(group_id)
        if stored is not None:
            for tp in partitions:
                stored.pop(tp, None)
            if not stored:
                del self._offsets[group_id]
        for by_group in self._pending_txn.values():
            # A tombstone also drops what open transactions hold for its key, as the
            # loader replays it (and Kafka's OffsetMetadataManager.replay).
            held = by_group.get(group_id, {})
            for tp in partitions:
                held.pop(tp, None)

    async def _expire_periodically(self) -> None:
        interval = self.config.retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.expire_offsets()
            except Exception:
                log.exception("offset expiry failed")

    async def expire_offsets(self) -> int:
        """Remove offsets past ``offsets.retention.minutes``; empty groups without offsets die.

        An empty group's offsets expire that long after the group became empty (or
        after the commit, for groups that never had members); a group with members
        keeps the offsets of the topics it subscribes to.
        """
        now = self._clock()
        retention = self.config.offsets_retention_ms
        removed = 0
        for group_id, group in list(self._groups.items()):
            stored = self._offsets.get(group_id, {})
            expired: list[TopicPartition] = []
            if group.is_(GroupState.EMPTY):
                for tp, value in stored.items():
                    base = group.state_timestamp if group.state_timestamp >= 0 else -1
                    if base < 0:
                        base = value.commit_timestamp
                    if base + retention <= now:
                        expired.append(tp)
            elif group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.is_(GroupState.STABLE):
                try:
                    subscribed = self._subscribed_topics(group)
                except CorruptRecordError:
                    continue
                expired = [
                    tp
                    for tp, value in stored.items()
                    if tp.topic not in subscribed and value.commit_timestamp + retention <= now
                ]
            dies = group.is_(GroupState.EMPTY) and len(expired) == len(stored)
            if expired or dies:
                await self._write_tombstones(group_id, expired, group_record=dies)
                removed += len(expired)
            if dies and group.is_(GroupState.EMPTY) and not self._offsets.get(group_id):
                self._transition(group, GroupState.DEAD)
                group.cancel_timers()
                self._groups.pop(group_id, None)
        if removed:
            log.info("expired %d committed offsets", removed)
        return removed

    # -- group admin -------------------------------------------------------------------
    def list_groups(self) -> list[tuple[str, str, str]]:
        """``(group_id, protocol_type, state)`` of every live group."""
        return [
            (g.group_id, g.protocol_type or "", g.state.value)
            for g in self._groups.values()
            if not g.is_(GroupState.DEAD)
        ]

    def describe(self, group_id: str) -> GroupDescription:
        group = self._groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return GroupDescription(group_id, GroupState.DEAD.value, "", "")
        stable = group.is_(GroupState.STABLE)
        members = [
            MemberDescription(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        return GroupDescription(
            group_id,
            group.state.value,
            group.protocol_type or "",
            (group.protocol_name or "") if stable else "",
            members,
        )

    async def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        results: dict[str, int] = {}
        for group_id in group_ids:
            group = self._groups.get(group_id)
            if not group_id:
                results[group_id] = INVALID_GROUP_ID
            elif group is None or group.is_(GroupState.DEAD):
                results[group_id] = GROUP_ID_NOT_FOUND
            elif not group.is_(GroupState.EMPTY):
                results[group_id] = NON_EMPTY_GROUP
            else:
                partitions = list(self._offsets.get(group_id, {}))
                try:
                    await self._write_tombstones(group_id, partitions, group_record=True)
                except Exception as exc:
                    # The group stays as it was: nothing changes before a successful write.
                    results[group_id] = write_error_code(exc)
                    log.warning("group %s: writing its deletion failed: %s", group_id, exc)
                    continue
                self._transition(group, GroupState.DEAD)
                group.cancel_timers()
                self._groups.pop(group_id, None)
                self._offsets.pop(group_id, None)
                results[group_id] = NONE
                log.info("group %s deleted", group_id)
        return results

    def groups(self) -> list[str]:
        return sorted(self._groups)

    # -- persistence -------------------------------------------------------------------
    async def _store_group(
        self, group: Group, assignment: Mapping[str, bytes] | None = None
    ) -> None:
        members = tuple(
            MemberMetadata(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(group.protocol_name),
                m.assignment if assignment is None else assignment.get(m.member_id, b""),
            )
            for m in group.members.values()
        )
        value = GroupMetadataValue(
            group.protocol_type or "",
            group.generation,
            group.protocol_name,
            group.leader_id,
            group.state_timestamp,
            members,
        )
        builder = RecordBatchBuilder()
        builder.append(
            encode_group_metadata_value(value),
            key=encode_group_metadata_key(group.group_id),
            timestamp=self._clock(),
        )
        await self._append(self.partition_of(group.group_id), builder.build())
