"""A consumer group of the KIP-848 protocol: its members, epochs and assignments.

Three epochs order a group's changes, as in Kafka's ``ConsumerGroup``:

* the **group epoch** grows when membership or subscriptions change (a member joins,
  leaves or is fenced, changes its subscription, or a subscribed topic changes);
* the **assignment epoch** is the group epoch the target assignment was computed at;
* each **member epoch** is the assignment epoch the member has reconciled to.

The group also knows who holds each partition (``partition_epoch``: the epoch of the
member holding or revoking it), so a partition is handed to its new owner only once
the old one has released it (:mod:`.reconciliation`). States, as Kafka names them:
Empty (no member), Assigning (the target is behind the group epoch), Reconciling
(some member is not at the target yet), Stable. Not thread-safe: the coordinator's
loop owns it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from samsa.coordinator.group.assignors import Assignment
from samsa.coordinator.group.reconciliation import MemberAssignmentState, MemberState
from samsa.coordinator.timer import TimerHandle

CONSUMER_PROTOCOL_TYPE = "consumer"


@dataclass(slots=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = -1
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Mapping[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    pending_revocation: Mapping[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    session_timer: TimerHandle | None = None
    rebalance_timer: TimerHandle | None = None

    def assignment_state(self) -> MemberAssignmentState:
        return MemberAssignmentState(
            self.member_epoch,
            self.previous_member_epoch,
            self.state,
            self.assigned,
            self.pending_revocation,
        )

    def cancel_timers(self) -> None:
        for handle in (self.session_timer, self.rebalance_timer):
            if handle is not None:
                handle.cancel()
        self.session_timer = self.rebalance_timer = None


class ConsumerGroup:
    """One consumer group's state (see the module docstring)."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target: dict[str, Assignment] = {}
        self.subscribed_topics: dict[str, tuple[uuid.UUID, int]] = {}
        """Name → (id, partition count) of the subscribed topics, as of the last check."""
        self._partition_epochs: dict[tuple[uuid.UUID, int], int] = {}
        self.regex_topics: dict[str, frozenset[str]] = {}
        """The topics each subscribed regex of the members matches, as of the last check."""
        self.written: dict[bytes, bytes] = {}
        """The group's records as last written to the offsets topic (key → value)."""

    # -- state ---------------------------------------------------------------------------
    @property
    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(
            m.member_epoch != self.assignment_epoch or m.state != MemberState.STABLE
            for m in self.members.values()
        ):
            return "Reconciling"
        return "Stable"

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        for member in self.members.values():
            if member.instance_id == instance_id:
                return member
        return None

    # -- who holds which partition --------------------------------------------------------
    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The epoch of the member holding or revoking the partition; -1 when free."""
        return self._partition_epochs.get((topic_id, partition), -1)

    def release(self, member: ConsumerGroupMember) -> None:
        """Forget the member's hold on its assigned and revoking partitions."""
        for parts in (member.assigned, member.pending_revocation):
            for topic, ps in parts.items():
                for p in ps:
                    self._partition_epochs.pop((topic, p), None)

    def hold(self, member: ConsumerGroupMember) -> None:
        """Record the member's hold on its assigned and revoking partitions."""
        for parts in (member.assigned, member.pending_revocation):
            for topic, ps in parts.items():
                for p in ps:
                    self._partition_epochs[(topic, p)] = member.member_epoch

    def update_member(self, member: ConsumerGroupMember, new: MemberAssignmentState) -> None:
        self.release(member)
        member.member_epoch = new.member_epoch
        member.previous_member_epoch = new.previous_member_epoch
        member.state = new.state
        member.assigned = new.assigned
        member.pending_revocation = new.pending_revocation
        self.hold(member)

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.release(member)
            member.cancel_timers()
            self.target.pop(member_id, None)
        return member

    # -- what the members subscribe to ------------------------------------------------------
    def member_topics(self, member: ConsumerGroupMember) -> set[str]:
        """The topics the member subscribes to: by name, and through its regex."""
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            names.update(self.regex_topics.get(member.subscribed_topic_regex, ()))
        return names

    def subscribed_topic_names(self) -> set[str]:
        names: set[str] = set()
        for member in self.members.values():
            names.update(self.member_topics(member))
        return names

    def subscribed_regexes(self) -> set[str]:
        return {m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex}

    def preferred_assignor(self, default: str) -> str:
        """The assignor most members ask for (ties: by name), else ``default``."""
        counts: dict[str, int] = {}
        for member in self.members.values():
            if member.server_assignor:
                counts[member.server_assignor] = counts.get(member.server_assignor, 0) + 1
        if not counts:
            return default
        return min(counts, key=lambda name: (-counts[name], name))
