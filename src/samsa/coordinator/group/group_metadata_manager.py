"""The membership state machine of classic groups: join, sync, heartbeat, leave, rebalances.

Kafka's ``GroupMetadataManager`` for the classic protocol. Members join
(JoinGroup), the coordinator waits until every known member has rejoined — or the
rebalance timeout passes — then starts a new generation, hands the leader every
member's subscription, and passes the leader's assignment to each member
(SyncGroup). Heartbeats keep a member's session alive; a session that lapses
removes the member and starts a rebalance. Assignors run in the clients, so eager
and cooperative protocols both work unchanged.

Everything here runs on the broker's event loop (not thread-safe). Waiting is
event-driven: a JoinGroup or SyncGroup request awaits a future that a later
request or a timeout of the :class:`~samsa.coordinator.timer.Timer` completes — no
polling. A group's metadata (generation, protocol, leader, members with their
subscriptions and assignments) is appended to its ``__consumer_offsets``
partition when a generation becomes stable or empty; committed offsets are
:mod:`.offset_metadata_manager`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from functools import partial
from typing import Any

from samsa.coordinator.errors import write_error_code
from samsa.coordinator.group.group import (
    Group,
    GroupConfig,
    GroupState,
    JoinRequest,
    JoinResult,
    Member,
    SyncResult,
)
from samsa.coordinator.group.loader import restore_group
from samsa.coordinator.group.records import (
    GroupMetadataValue,
    encode_group_metadata_key,
    encode_group_metadata_value,
)
from samsa.coordinator.timer import Timer
from samsa.errors import ErrorCode, KafkaError, is_expected_error
from samsa.records import RecordBatchBuilder
from samsa.types import TopicPartition

log = logging.getLogger(__name__)

AppendFn = Callable[[TopicPartition, bytes], Awaitable[Any]]


class GroupMetadataManager:
    """Owner of every classic group's membership (one writer: the loop)."""

    def __init__(
        self,
        partition_of: Callable[[str], TopicPartition],
        append: AppendFn,
        timer: Timer,
        config: GroupConfig,
    ) -> None:
        self.config = config
        self._partition_of = partition_of
        self._append = append
        self._timer = timer
        self._groups: dict[str, Group] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- lifecycle -------------------------------------------------------------------
    def load(self, loaded: Mapping[str, GroupMetadataValue], with_offsets: Iterable[str]) -> None:
        """Take the groups the loader read, and an Empty group for each with offsets only."""
        for group_id, stored in loaded.items():
            self._groups[group_id] = restore_group(group_id, stored)
        for group_id in with_offsets:
            if group_id not in self._groups:
                self._groups[group_id] = Group(group_id, state_timestamp=-1)

    def start(self, group_ids: Iterable[str] | None = None) -> None:
        """Start the session timers of loaded members (of ``group_ids``, or every group)."""
        groups = (
            self._groups.values()
            if group_ids is None
            else [g for gid in group_ids if (g := self._groups.get(gid)) is not None]
        )
        for group in groups:
            for member in group.members.values():
                self._arm_session(group, member)
            if group.is_(GroupState.STABLE) and len(group.members) > self.config.max_size:
                # group.max.size was lowered: the members that rejoin past it are dropped.
                self._prepare_rebalance(group, "more members than group.max.size")

    def unload(self, owned_elsewhere: Callable[[str], bool]) -> int:
        """Forget the groups ``owned_elsewhere`` says this coordinator no longer owns (its
        offsets partition is led elsewhere now): their waiting requests are answered
        NOT_COORDINATOR, so the members find the new coordinator. Returns how many."""
        gone = [g for gid, g in self._groups.items() if owned_elsewhere(gid)]
        for group in gone:
            group.cancel_timers()
            for member in group.members.values():
                member.complete_join(JoinResult(ErrorCode.NOT_COORDINATOR, member.member_id))
                member.complete_sync(SyncResult(ErrorCode.NOT_COORDINATOR))
            del self._groups[group.group_id]
        return len(gone)

    async def shutdown(self) -> None:
        """Cancel every timer, answer waiting requests, let stores in flight finish."""
        for group in self._groups.values():
            group.cancel_timers()
            for member in group.members.values():
                member.complete_join(
                    JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member.member_id)
                )
                member.complete_sync(SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        for task in list(self._tasks):
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(task, 5)

    def _spawn(self, coro: Awaitable[Any], what: str) -> None:
        async def run() -> None:
            try:
                await coro
            except KafkaError as exc:
                if write_error_code(exc) == ErrorCode.UNKNOWN_SERVER_ERROR:
                    log.exception("group coordinator: %s failed", what)
                else:
                    # The offsets partition cannot take it now (no leader here, too few
                    # in-sync replicas, a timeout): the group lives on in memory and its
                    # next change is stored; a client is answered a retriable error.
                    log.warning("group coordinator: %s failed: %s", what, exc)
            except Exception:
                log.exception("group coordinator: %s failed", what)

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- JoinGroup ---------------------------------------------------------------------
    async def join(self, req: JoinRequest) -> JoinResult:
        cfg = self.config
        if not req.group_id:
            return JoinResult(ErrorCode.INVALID_GROUP_ID, req.member_id)
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, req.member_id)
        group = self._groups.get(req.group_id)
        if group is None:
            if req.member_id:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id)
            group = self._groups[req.group_id] = Group(
                req.group_id, state_timestamp=self._timer.now_ms()
            )
        if group.is_(GroupState.DEAD):
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, req.member_id)
        if not group.supports(req.protocol_type, req.protocols):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
        if not self._accepts(group, req):
            self._refuse(group, req.member_id)
            return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, req.member_id)
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

    def _accepts(self, group: Group, req: JoinRequest) -> bool:
        """Whether ``group.max.size`` lets the member in (Kafka's ``acceptJoiningMember``):
        an Empty group takes anyone; while it rebalances, a member already waiting in
        JoinGroup or any while fewer than the limit wait (a group over the limit after it
        was lowered keeps the first to rejoin); otherwise its members, and new ones while
        there are fewer than the limit. A static member coming back with a new member id
        takes its own place (samsa's: Kafka counts it as new)."""
        if group.is_(GroupState.EMPTY, GroupState.DEAD):
            return True
        instance = req.group_instance_id
        if instance is not None and instance in group.static_members:
            return True
        max_size = self.config.max_size
        member = group.members.get(req.member_id) if req.member_id else None
        if group.is_(GroupState.PREPARING_REBALANCE):
            return (member is not None and member.awaiting_join) or group.awaiting_joins < max_size
        return member is not None or len(group.members) < max_size

    def _refuse(self, group: Group, member_id: str) -> None:
        """A member refused by ``group.max.size`` is no member (Kafka removes it too)."""
        pending = group.pending_members.pop(member_id, None)
        if pending is not None:
            pending.cancel()
        member = group.members.get(member_id) if member_id else None
        if member is not None:
            self._remove_member(group, member, "group.max.size reached")

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
            group.pending_members[member_id] = self._timer.call_later(
                req.session_timeout_ms, partial(self._expire_pending, group, member_id)
            )
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id)
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
            return JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id)
        member = group.members.get(member_id)
        if member is None or group.is_(GroupState.EMPTY):
            return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
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
            ErrorCode.NONE, member_id, group.generation, group.protocol_type, group.protocol_name,
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
        old.complete_join(JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_id))
        old.complete_sync(SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        old.cancel_session_timer()
        old_protocols = old.protocols
        member = self._new_member(req, new_id)
        member.assignment = old.assignment
        group.replace(old_id, member)
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
                    ErrorCode.NONE, new_id, group.generation, group.protocol_type,
                    group.protocol_name, current_leader,
                )  # fmt: skip
            group.set_protocols(member, req.protocols)
            group.expect_join(member, fut)
            self._prepare_rebalance(group, f"static member {req.group_instance_id} rejoined")
            return None
        if group.is_(GroupState.COMPLETING_REBALANCE):
            group.expect_join(member, fut)
            self._prepare_rebalance(group, f"static member {req.group_instance_id} replaced")
            return None
        if group.is_(GroupState.PREPARING_REBALANCE):
            group.expect_join(member, fut)
            self._arm_session(group, member)
            return None
        group.set_protocols(member, old_protocols)
        return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, new_id)

    def _add_member_and_rebalance(
        self, group: Group, member: Member, fut: asyncio.Future[JoinResult]
    ) -> None:
        member.is_new = True
        group.add(member)
        group.expect_join(member, fut)
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
            member.complete_join(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        group.set_protocols(member, protocols)
        group.expect_join(member, fut)
        self._arm_session(group, member)
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")

    # -- rebalances ------------------------------------------------------------------
    def _transition(self, group: Group, state: GroupState) -> None:
        group.state = state
        group.state_timestamp = self._timer.now_ms()

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            for member in group.members.values():
                member.assignment = b""
                member.complete_sync(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
        group.pending_sync.clear()
        if group.join_timer is not None:
            group.join_timer.cancel()
        rebalance_timeout = group.rebalance_timeout_ms()
        if group.is_(GroupState.EMPTY):
            # Kafka's initial delay: wait for more of a starting group's members to arrive.
            delay = self.config.initial_rebalance_delay_ms
            group.initial_delay_active = True
            group.new_member_added = False
            group.initial_delay_remaining_ms = max(rebalance_timeout - delay, 0)
            group.join_timer = self._timer.call_later(
                delay, partial(self._initial_delay_expired, group)
            )
        else:
            group.join_timer = self._timer.call_later(
                rebalance_timeout, partial(self._complete_join, group)
            )
        self._transition(group, GroupState.PREPARING_REBALANCE)
        log.info(
            "group %s rebalancing (generation %d): %s", group.group_id, group.generation, reason
        )

    def _initial_delay_expired(self, group: Group) -> None:
        if group.new_member_added and group.initial_delay_remaining_ms > 0:
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, group.initial_delay_remaining_ms)
            group.initial_delay_remaining_ms -= delay
            group.join_timer = self._timer.call_later(
                delay, partial(self._initial_delay_expired, group)
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
        group.sync_timer = self._timer.call_later(
            group.rebalance_timeout_ms(), partial(self._sync_expired, group, group.generation)
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
                member.complete_sync(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
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
        member.session_timer = self._timer.call_later(
            member.session_timeout_ms, partial(self._session_expired, group, member)
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
        member.complete_join(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        member.complete_sync(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
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
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_(GroupState.DEAD):
            return SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.static_member_fenced(member_id, group_instance_id):
            return SyncResult(ErrorCode.FENCED_INSTANCE_ID)
        member = group.members.get(member_id)
        if member is None:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if generation != group.generation:
            return SyncResult(ErrorCode.ILLEGAL_GENERATION)
        group.pending_sync.discard(member_id)
        if group.is_(GroupState.EMPTY):
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        self._arm_session(group, member)
        if group.is_(GroupState.STABLE):
            return SyncResult(
                ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment
            )
        fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        if member.awaiting_sync:
            member.complete_sync(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
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
            log.warning("group %s: storing the assignment failed: %s", group.group_id, exc,
                        exc_info=not is_expected_error(exc))  # fmt: skip
            if group.is_(GroupState.COMPLETING_REBALANCE) and group.generation == generation:
                self._prepare_rebalance(group, "the assignment could not be stored")
            return
        if not group.is_(GroupState.COMPLETING_REBALANCE) or group.generation != generation:
            return  # the group moved on while the record was written
        self._transition(group, GroupState.STABLE)
        for member_id, member in group.members.items():
            member.assignment = planned.get(member_id, b"")
            member.complete_sync(
                SyncResult(
                    ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment
                )
            )
        log.info("group %s generation %d is stable", group.group_id, group.generation)

    def heartbeat(
        self, group_id: str, generation: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.static_member_fenced(member_id, group_instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None or group.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        self._arm_session(group, member)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Remove members (``(member_id, group_instance_id)`` pairs); top and per-member errors."""
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(members)
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, [ErrorCode.COORDINATOR_NOT_AVAILABLE] * len(
                members
            )
        errors: list[ErrorCode] = []
        for member_id, instance_id in members:
            if not member_id and instance_id is not None:
                member_id = group.static_members.get(instance_id, "")
                if not member_id:
                    errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
            if group.static_member_fenced(member_id, instance_id):
                errors.append(ErrorCode.FENCED_INSTANCE_ID)
                continue
            if member_id in group.pending_members:
                group.pending_members.pop(member_id).cancel()
                self._try_complete_join(group)
                errors.append(ErrorCode.NONE)
                continue
            member = group.members.get(member_id)
            if member is None:
                errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            log.info("group %s: member %s leaves", group_id, member_id)
            self._remove_member(group, member, "left the group")
            errors.append(ErrorCode.NONE)
        return ErrorCode.NONE, errors

    # -- what the offsets need -----------------------------------------------------------
    def validate_offset_commit(
        self, group_id: str, generation: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        """Kafka's checks of the committing member (``ClassicGroup.validateOffsetCommit``).

        NONE means the commit may be written; a member's commit also keeps its session.
        """
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.NONE if generation < 0 else ErrorCode.ILLEGAL_GENERATION
        error = group.validate_offset_commit(generation, member_id, group_instance_id)
        member = group.members.get(member_id)
        if error == ErrorCode.NONE and member is not None:
            self._arm_session(group, member)
        return error

    def get(self, group_id: str) -> Group | None:
        return self._groups.get(group_id)

    def get_or_create(self, group_id: str) -> Group:
        """The group, created Empty when offsets are committed for a group not seen yet."""
        group = self._groups.get(group_id)
        if group is None:
            group = self._groups[group_id] = Group(group_id, state_timestamp=self._timer.now_ms())
        return group

    def remove_group(self, group: Group) -> None:
        """The group is gone (deleted, or its last offsets expired): Dead, and forgotten."""
        self._transition(group, GroupState.DEAD)
        group.cancel_timers()
        self._groups.pop(group.group_id, None)

    def all_groups(self) -> list[Group]:
        return list(self._groups.values())

    def groups(self) -> list[str]:
        return sorted(self._groups)

    # -- persistence -------------------------------------------------------------------
    async def _store_group(
        self, group: Group, assignment: Mapping[str, bytes] | None = None
    ) -> None:
        """Append the group's metadata record (with ``assignment``, when one is planned)."""
        builder = RecordBatchBuilder()
        builder.append(
            encode_group_metadata_value(group.metadata_value(assignment)),
            key=encode_group_metadata_key(group.group_id),
            timestamp=self._timer.now_ms(),
        )
        await self._append(self._partition_of(group.group_id), builder.build())
