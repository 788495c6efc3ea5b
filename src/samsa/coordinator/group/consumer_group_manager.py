"""ConsumerGroupHeartbeat's state machine: joining, reconciling, leaving, timing out.

Kafka's ``GroupMetadataManager`` for groups of the consumer protocol (KIP-848). A
heartbeat carries what changed since the last one; the coordinator answers with the
member's epoch and, when it changed (or on a join or a full request), its assignment.

* **Join** (member epoch 0): v1 clients send their own member id, v0 may leave it
  empty and get one from the coordinator. The first request must carry the
  subscription and the rebalance timeout, and no owned partitions.
* **Epochs**: a member ahead of the group's record of it is FENCED_MEMBER_EPOCH; one
  behind is accepted only at its previous epoch while it owns no more than it was
  given (a lost response), else fenced too. A member the group does not know is
  UNKNOWN_MEMBER_ID.
* **Leave**: epoch -1 leaves; a static member (instance id) leaving with -2 keeps its
  partitions until its session expires or it rejoins with the same instance id.
* **Timeouts**: ``group.consumer.session.timeout.ms`` (default 45 s) without a
  heartbeat, or a member that keeps partitions it was asked to revoke past its
  rebalance timeout, is fenced: removed, and the group rebalances.

Every change of membership, subscription or subscribed topics' partitions bumps the
group epoch, and the target assignment is recomputed with the group's assignor
(:mod:`.assignors`) before the member reconciles (:mod:`.reconciliation`).
Not thread-safe: the broker's event loop owns every group.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from samsa.coordinator.group import topic_regex
from samsa.coordinator.group.assignors import ASSIGNORS, MemberSubscription
from samsa.coordinator.group.consumer_group import ConsumerGroup, ConsumerGroupMember
from samsa.coordinator.group.reconciliation import MemberState, Partitions, reconcile
from samsa.coordinator.timer import Timer
from samsa.errors import ErrorCode

log = logging.getLogger(__name__)

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

TopicLookup = Callable[[str], tuple[uuid.UUID, int] | None]
"""A topic's id and partition count by name (None: no such topic)."""


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    """The broker's ``group.consumer.*`` settings (Kafka's defaults)."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    assignors: tuple[str, ...] = ("uniform", "range")
    max_size: int = 2**31 - 1


@dataclass(slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    api_version: int = 1
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Partitions | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None


class HeartbeatError(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


class ConsumerGroupManager:
    """Every consumer group of one coordinator (see the module docstring)."""

    def __init__(self, timer: Timer, config: ConsumerGroupConfig | None = None) -> None:
        self._timer = timer
        self.config = config or ConsumerGroupConfig()
        self._groups: dict[str, ConsumerGroup] = {}
        self.on_change: Callable[[ConsumerGroup], None] = lambda group: None
        """Called after a group changed (the coordinator writes its records)."""

    # -- lookups ---------------------------------------------------------------------------
    def get(self, group_id: str) -> ConsumerGroup | None:
        return self._groups.get(group_id)

    def groups(self) -> Iterator[ConsumerGroup]:
        return iter(list(self._groups.values()))

    def remove_group(self, group_id: str) -> None:
        group = self._groups.pop(group_id, None)
        if group is not None:
            for member in group.members.values():
                member.cancel_timers()

    def add_group(self, group: ConsumerGroup) -> None:
        """A group loaded from the offsets topic (members' sessions armed by :meth:`start`)."""
        self._groups[group.group_id] = group

    def start(self, groups: set[str] | None = None) -> None:
        """Arm the session of every loaded member (of ``groups``, else of all)."""
        for group in self.groups():
            if groups is None or group.group_id in groups:
                for member in group.members.values():
                    self._arm_session(group, member)

    def shutdown(self) -> None:
        for group in self._groups.values():
            for member in group.members.values():
                member.cancel_timers()

    # -- ConsumerGroupHeartbeat --------------------------------------------------------------
    def heartbeat(
        self,
        req: HeartbeatRequest,
        topics: TopicLookup,
        all_topics: Callable[[], Iterable[str]] = tuple,
    ) -> HeartbeatResult:
        """``all_topics``: every topic a regex may match (internal ones left out)."""
        try:
            self._validate(req)
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(req)
            return self._heartbeat(req, topics, all_topics)
        except HeartbeatError as exc:
            return HeartbeatResult(exc.error, exc.message)

    def _validate(self, req: HeartbeatRequest) -> None:
        def invalid(message: str) -> HeartbeatError:
            return HeartbeatError(ErrorCode.INVALID_REQUEST, message)

        if not req.group_id:
            raise invalid("GroupId can't be empty.")
        if req.instance_id == "":
            raise invalid("InstanceId can't be empty.")
        if req.rack_id == "":
            raise invalid("RackId can't be empty.")
        if req.api_version >= 1 and not req.member_id:
            raise invalid("MemberId can't be empty.")
        if (req.member_epoch > 0 or req.member_epoch in (-1, -2)) and not req.member_id:
            raise invalid("MemberId can't be empty.")
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.owned:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise invalid(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                    "(re-)joining."
                )
        elif req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.instance_id is None:
                raise invalid("InstanceId can't be null.")
        elif req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise invalid(f"MemberEpoch {req.member_epoch} is invalid.")
        if req.subscribed_topic_regex:  # "" clears a regex (librdkafka sends it with names)
            try:
                topic_regex.validate(req.subscribed_topic_regex)
            except topic_regex.InvalidRegex as exc:
                raise HeartbeatError(
                    ErrorCode.INVALID_REGULAR_EXPRESSION,
                    f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a valid regular "
                    f"expression: {exc}.",
                ) from None
        if req.server_assignor is not None and req.server_assignor not in self._assignors():
            raise HeartbeatError(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                f"{', '.join(self._assignors())}.",
            )

    def _assignors(self) -> tuple[str, ...]:
        known = tuple(name for name in self.config.assignors if name in ASSIGNORS)
        return known or ("uniform",)

    def _leave(self, req: HeartbeatRequest) -> HeartbeatResult:
        group = self._groups.get(req.group_id)
        if group is None:
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
        member = group.members.get(req.member_id)
        if member is None:
            raise HeartbeatError(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {req.member_id} is not a member of group {req.group_id}.",
            )
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and member.instance_id:
            # Kept with its partitions until it rejoins or its session expires.
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH
            self._arm_session(group, member)
            self.on_change(group)
        else:
            self._remove(group, member.member_id, "left")
        return HeartbeatResult(member_id=req.member_id, member_epoch=req.member_epoch)

    def _member_for(self, group: ConsumerGroup, req: HeartbeatRequest) -> ConsumerGroupMember:
        member = group.members.get(req.member_id) if req.member_id else None
        if req.member_epoch != 0:
            if member is None:
                raise HeartbeatError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {req.member_id} is not a member of group {req.group_id}.",
                )
            self._check_epoch(member, req)
            return member
        if req.instance_id is not None:
            static = group.static_member(req.instance_id)
            if static is not None and static.member_id != req.member_id:
                if static.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    raise HeartbeatError(
                        ErrorCode.UNRELEASED_INSTANCE_ID,
                        f"Static member with instance id {req.instance_id} is still in use.",
                    )
                # The static member is back under a new member id: it takes over the
                # old member's partitions and epoch.
                del group.members[static.member_id]
                static.cancel_timers()
                group.target[req.member_id] = group.target.pop(static.member_id, {})
                static.member_id = req.member_id or str(uuid.uuid4())
                static.member_epoch = static.previous_member_epoch
                group.members[static.member_id] = static
                return static
        if member is None:
            if len(group.members) >= self.config.max_size:
                raise HeartbeatError(
                    ErrorCode.GROUP_MAX_SIZE_REACHED,
                    f"The consumer group has reached its maximum capacity of "
                    f"{self.config.max_size} members.",
                )
            member = ConsumerGroupMember(req.member_id or str(uuid.uuid4()))
            group.members[member.member_id] = member
        # A known member sending epoch 0 again is answered as a full heartbeat (as Kafka
        # does): it keeps its epoch and assignment.
        return member

    @staticmethod
    def _check_epoch(member: ConsumerGroupMember, req: HeartbeatRequest) -> None:
        received = req.member_epoch
        if received == member.member_epoch:
            return
        if received < member.member_epoch and received == member.previous_member_epoch:
            owned = req.owned
            # A lost response: the member may stay at its previous epoch as long as it
            # owns nothing beyond what it was given.
            if owned is not None and all(
                parts <= member.assigned.get(topic, frozenset()) for topic, parts in owned.items()
            ):
                return
        raise HeartbeatError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a greater member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must "
            "abandon all its partitions and rejoin."
            if received > member.member_epoch
            else f"The consumer group member has a smaller member epoch ({received}) than the "
            f"one known by the group coordinator ({member.member_epoch}). The member must "
            "abandon all its partitions and rejoin.",
        )

    def _heartbeat(
        self, req: HeartbeatRequest, topics: TopicLookup, all_topics: Callable[[], Iterable[str]]
    ) -> HeartbeatResult:
        group = self._groups.get(req.group_id)
        if group is None:
            if req.member_epoch != 0:
                raise HeartbeatError(
                    ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {req.group_id} not found."
                )
            group = self._groups[req.group_id] = ConsumerGroup(req.group_id)
        created = group.group_epoch == 0 and not group.members
        try:
            member = self._member_for(group, req)
        except HeartbeatError:
            if created:
                del self._groups[req.group_id]  # created for this request only
            raise
        previous_assigned = dict(member.assigned)
        previous_epoch = member.member_epoch
        joining = req.member_epoch == 0
        # One bump of the group epoch for whatever this request changed.
        changed_group = self._update_subscription(member, req) or (
            joining and member.member_epoch == 0
        )
        member.client_id = req.client_id or member.client_id
        member.client_host = req.client_host or member.client_host
        regexes = group.subscribed_regexes()
        if regexes or group.regex_topics:
            names = list(all_topics())
            group.regex_topics = {r: topic_regex.matching_topics(r, names) for r in regexes}
        changed_group |= self._refresh_topics(group, topics)
        if changed_group:
            group.group_epoch += 1
        self._update_target(group)
        new = reconcile(
            member.assignment_state(),
            group.assignment_epoch,
            group.target.get(member.member_id, {}),
            group.partition_epoch,
            req.owned,
        )
        group.update_member(member, new)
        self._arm_rebalance_timeout(group, member)
        self._arm_session(group, member)
        full = (
            req.rebalance_timeout_ms != -1
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
            and req.owned is not None
        )
        changed = dict(member.assigned) != previous_assigned
        if changed or member.member_epoch != previous_epoch or joining:
            self.on_change(group)
        return HeartbeatResult(
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            assignment=dict(member.assigned) if joining or full or changed else None,
        )

    @staticmethod
    def _update_subscription(member: ConsumerGroupMember, req: HeartbeatRequest) -> bool:
        """Apply what the request changes; True if the subscription changed."""
        changed = False
        if req.instance_id is not None:
            member.instance_id = req.instance_id
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if req.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.subscribed_topic_names is not None:
            names = tuple(sorted(set(req.subscribed_topic_names)))
            changed |= names != member.subscribed_topic_names
            member.subscribed_topic_names = names
        if req.subscribed_topic_regex is not None:
            regex = req.subscribed_topic_regex or None
            changed |= regex != member.subscribed_topic_regex
            member.subscribed_topic_regex = regex
        if req.server_assignor is not None and req.server_assignor != member.server_assignor:
            member.server_assignor = req.server_assignor
            changed = True
        return changed

    @staticmethod
    def _refresh_topics(group: ConsumerGroup, topics: TopicLookup) -> bool:
        """True when a subscribed topic appeared, went or grew."""
        current: dict[str, tuple[uuid.UUID, int]] = {}
        for name in group.subscribed_topic_names():
            found = topics(name)
            if found is not None:
                current[name] = found
        if current == group.subscribed_topics:
            return False
        group.subscribed_topics = current
        return True

    def _update_target(self, group: ConsumerGroup) -> None:
        if group.group_epoch <= group.assignment_epoch:
            return
        ids = dict(group.subscribed_topics.values())
        by_name = group.subscribed_topics
        specs = {
            m.member_id: MemberSubscription(
                frozenset(by_name[n][0] for n in group.member_topics(m) if n in by_name),
                group.target.get(m.member_id, {}),
                m.rack_id,
            )
            for m in group.members.values()
        }
        assignor = ASSIGNORS[group.preferred_assignor(self._assignors()[0])]
        group.target = assignor.assign(specs, ids)
        group.assignment_epoch = group.group_epoch

    # -- timeouts ---------------------------------------------------------------------------
    def _arm_session(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()

        def expire() -> None:
            if group.members.get(member.member_id) is member:
                self._remove(group, member.member_id, "session timed out")

        member.session_timer = self._timer.call_later(self.config.session_timeout_ms, expire)

    def _arm_rebalance_timeout(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """A member asked to revoke partitions must do so within its rebalance timeout."""
        if member.state != MemberState.UNREVOKED_PARTITIONS:
            if member.rebalance_timer is not None:
                member.rebalance_timer.cancel()
                member.rebalance_timer = None
            return
        if member.rebalance_timer is not None:
            return
        epoch = member.member_epoch

        def expire() -> None:
            if (
                group.members.get(member.member_id) is member
                and member.state == MemberState.UNREVOKED_PARTITIONS
                and member.member_epoch == epoch
            ):
                self._remove(group, member.member_id, "rebalance timed out")

        member.rebalance_timer = self._timer.call_later(max(member.rebalance_timeout_ms, 0), expire)

    def _remove(self, group: ConsumerGroup, member_id: str, why: str) -> None:
        if group.remove_member(member_id) is None:
            return
        group.group_epoch += 1
        log.info("consumer group %s: member %s %s (group epoch %d)", group.group_id,
                 member_id, why, group.group_epoch)  # fmt: skip
        self.on_change(group)

    # -- offsets ----------------------------------------------------------------------------
    def validate_offset_commit(
        self, group: ConsumerGroup, member_id: str, member_epoch: int, api_version: int
    ) -> ErrorCode:
        """Kafka's ``ConsumerGroup.validateOffsetCommit`` for a non-transactional commit."""
        if member_epoch < 0 and not group.members:
            return ErrorCode.NONE  # an admin client, or a consumer without a group
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def validate_offset_fetch(
        self, group: ConsumerGroup, member_id: str | None, member_epoch: int
    ) -> ErrorCode:
        """Kafka's ``ConsumerGroup.validateOffsetFetch``: only a member naming itself is
        checked (an admin fetch names none)."""
        if member_epoch < 0 and not member_id:
            return ErrorCode.NONE
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE


def topic_partitions(
    parts: Mapping[uuid.UUID, frozenset[int]],
) -> list[tuple[uuid.UUID, list[int]]]:
    """``(topic id, sorted partitions)`` pairs, for responses and records."""
    return [(topic, sorted(ps)) for topic, ps in sorted(parts.items(), key=lambda kv: str(kv[0]))]
