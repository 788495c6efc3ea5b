"""One consumer group of the classic protocol: its members, state and generation.

A group moves through Kafka's states::

    Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
      ▲                 ▲        │                                   │ leader's SyncGroup
      │                 │        └── no member left ──▶ Empty        ▼
      └── last member leaves ◀───────────────────────────────────  Stable
    (any) ──deleted / offsets expired──▶ Dead

This module holds the data and the pure decisions (protocol selection, member
lookups); :mod:`samsa.coordinator.group.group_metadata_manager` drives the
transitions, timers and persistence.

A join costs the same whatever the group's size: the group counts the members
supporting each protocol (so whether a joining member's protocols fit is a lookup
per protocol it names, as Kafka's ``supportedProtocols``) and the JoinGroup requests
waiting for an answer (so whether every member has rejoined is a comparison, with
a walk over the members only once the count says they may all have). Work in
proportion to the members is done once per rebalance: choosing the protocol,
answering every member, storing the group.
"""

from __future__ import annotations

import asyncio
import enum
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from samsa.coordinator.group.records import GroupMetadataValue, MemberMetadata
from samsa.coordinator.timer import TimerHandle
from samsa.errors import ErrorCode
from samsa.protocol.consumer_protocol import parse_subscription


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """The broker's ``group.*`` and ``offsets.*`` settings the coordinator uses."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 1000
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


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str = ""
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass(slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(eq=False, slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None
    session_timer: TimerHandle | None = None
    is_new: bool = False

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None and not self.join_future.done()

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None and not self.sync_future.done()

    def metadata(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Whether a rejoin names the same protocols with the same metadata, in order."""
        return self.protocols == protocols

    def complete_join(self, result: JoinResult) -> None:
        if self.join_future is not None and not self.join_future.done():
            self.join_future.set_result(result)
        self.join_future = None

    def complete_sync(self, result: SyncResult) -> None:
        if self.sync_future is not None and not self.sync_future.done():
            self.sync_future.set_result(result)
        self.sync_future = None

    def cancel_session_timer(self) -> None:
        if self.session_timer is not None:
            self.session_timer.cancel()
            self.session_timer = None


@dataclass(eq=False, slots=True)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id → member id
    pending_members: dict[str, TimerHandle] = field(default_factory=dict)
    state_timestamp: int = -1  # wall-clock ms of the last state change
    join_timer: TimerHandle | None = None
    sync_timer: TimerHandle | None = None
    pending_sync: set[str] = field(default_factory=set)  # members yet to send SyncGroup
    initial_delay_active: bool = False
    new_member_added: bool = False  # a member joined during the initial delay
    initial_delay_remaining_ms: int = 0
    protocol_support: Counter[str] = field(default_factory=Counter)  # members naming each
    awaiting_joins: int = 0
    """JoinGroup requests of members not answered yet (:meth:`expect_join`); at least the
    members :attr:`Member.awaiting_join`, the same once callbacks of answered ones ran."""

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.restore(member)
        if self.leader_id is None:
            self.leader_id = member.member_id

    def restore(self, member: Member) -> None:
        """Take ``member`` as it was stored (type, protocol and leader are the group's)."""
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self._count_protocols(member.protocols, 1)

    def replace(self, old_id: str, member: Member) -> None:
        """``member`` (a static member's new id) takes ``old_id``'s place, in its order."""
        old = self.members[old_id]
        self._count_protocols(old.protocols, -1)
        self.members = {(member.member_id if k == old_id else k): (member if k == old_id else v)
                        for k, v in self.members.items()}  # fmt: skip
        self._count_protocols(member.protocols, 1)

    def set_protocols(self, member: Member, protocols: list[tuple[str, bytes]]) -> None:
        """A member's protocols, changed by its rejoin."""
        self._count_protocols(member.protocols, -1)
        member.protocols = list(protocols)
        self._count_protocols(member.protocols, 1)

    def _count_protocols(self, protocols: list[tuple[str, bytes]], delta: int) -> None:
        for name in {name for name, _ in protocols}:
            count = self.protocol_support[name] + delta
            if count:
                self.protocol_support[name] = count
            else:
                del self.protocol_support[name]

    def expect_join(self, member: Member, fut: asyncio.Future[JoinResult]) -> None:
        """``member`` waits in JoinGroup for ``fut``: counted until it is answered."""
        member.join_future = fut
        self.awaiting_joins += 1
        fut.add_done_callback(self._join_answered)

    def _join_answered(self, fut: asyncio.Future[JoinResult]) -> None:
        self.awaiting_joins -= 1

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        member.cancel_session_timer()
        self._count_protocols(member.protocols, -1)
        instance = member.group_instance_id
        if instance is not None and self.static_members.get(instance) == member_id:
            del self.static_members[instance]
        if self.leader_id == member_id:
            # Prefer a member already waiting in JoinGroup: it can lead this rebalance.
            waiting = [m for m in self.members.values() if m.awaiting_join]
            others = waiting or list(self.members.values())
            self.leader_id = others[0].member_id if others else None
        return member

    def static_member_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """A request from a static member whose id was replaced by a newer join."""
        if instance_id is None:
            return False
        known = self.static_members.get(instance_id)
        return known is not None and known != member_id

    def all_members_joined(self) -> bool:
        if self.pending_members or self.awaiting_joins < len(self.members):
            return False  # the count is an upper bound: fewer waiting than members
        return all(m.awaiting_join for m in self.members.values())

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def candidate_protocols(self) -> list[str]:
        """Protocols every member supports, in the order the first member prefers them."""
        size = len(self.members)
        if not size:
            return []
        first = next(iter(self.members.values()))
        return [name for name, _ in first.protocols if self.protocol_support[name] == size]

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not protocol_type or not protocols:
            return False
        if not self.members:
            return True
        size = len(self.members)
        return protocol_type == self.protocol_type and any(
            self.protocol_support[name] == size for name, _ in protocols
        )

    def select_protocol(self) -> str:
        """Each member votes for its most preferred common protocol; most votes wins."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError(f"group {self.group_id} has no protocol every member supports")
        votes = Counter(
            next(name for name, _ in m.protocols if name in candidates)
            for m in self.members.values()
        )
        best = max(votes.values())
        return next(name for name in candidates if votes[name] == best)

    def member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        return [
            (m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        ]

    def validate_offset_commit(
        self, generation: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        """Kafka's ``ClassicGroup.validateOffsetCommit``: may this member commit now?

        A commit naming no member (generation -1, no ids) is only taken while the
        group has no members, as a simple consumer's or an admin tool's.
        """
        if self.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation >= 0 or member_id or group_instance_id is not None:
            if self.static_member_fenced(member_id, group_instance_id):
                return ErrorCode.FENCED_INSTANCE_ID
            if member_id not in self.members:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if generation != self.generation:
                return ErrorCode.ILLEGAL_GENERATION
            if self.is_(GroupState.COMPLETING_REBALANCE):
                return ErrorCode.REBALANCE_IN_PROGRESS
            return ErrorCode.NONE
        if not self.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID  # only members may commit for a group that has them
        return ErrorCode.NONE

    def subscribed_topics(self) -> set[str]:
        """Topics the members subscribe to (consumer protocol); raises CorruptRecordError."""
        topics: set[str] = set()
        for member in self.members.values():
            topics.update(parse_subscription(member.metadata(self.protocol_name)).topics)
        return topics

    def metadata_value(self, assignment: Mapping[str, bytes] | None = None) -> GroupMetadataValue:
        """The group as its GroupMetadataValue record stores it (with a planned ``assignment``)."""
        members = tuple(
            MemberMetadata(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(self.protocol_name),
                m.assignment if assignment is None else assignment.get(m.member_id, b""),
            )
            for m in self.members.values()
        )
        return GroupMetadataValue(
            self.protocol_type or "",
            self.generation,
            self.protocol_name,
            self.leader_id,
            self.state_timestamp,
            members,
        )

    def cancel_timers(self) -> None:
        for timer in (self.join_timer, self.sync_timer, *self.pending_members.values()):
            if timer is not None:
                timer.cancel()
        self.join_timer = self.sync_timer = None
        self.pending_members.clear()
        for member in self.members.values():
            member.cancel_session_timer()
