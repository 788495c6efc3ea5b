"""Kafka's client-side partition assignors: range, roundrobin, sticky and cooperative-sticky.

The leader of a consumer group runs the assignor the group agreed on over every
member's subscription (the JoinGroup metadata) and sends each member its
assignment in SyncGroup. Both payloads are the consumer protocol's
(:mod:`samsa.protocol.consumer_protocol`); an assignor is pure logic on them:

- :class:`RangeAssignor` (``range``): per topic, members subscribed to it sorted
  by member id get consecutive ranges of its partitions; the first
  ``partitions % members`` get one more.
- :class:`RoundRobinAssignor` (``roundrobin``): every subscribed partition, in
  (topic, partition) order, goes to the next member in member-id order,
  skipping members not subscribed to its topic.
- :class:`StickyAssignor` (``sticky``, eager): balanced, and keeps the previous
  assignment each member reports in its user data as far as balance allows.
- :class:`CooperativeStickyAssignor` (``cooperative-sticky``): the same
  assignment from the subscription's ``owned_partitions`` and generation, except
  that a partition another member still owns is left out until that member has
  revoked it: the group rebalances again and it is assigned then.

Deviation: Kafka sorts static members by ``group.instance.id`` rather than member
id; a :class:`Subscription` does not carry it, so member ids are used. Rack-aware
assignment (``client.rack``) is not done.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable, Mapping
from enum import IntEnum
from typing import Protocol

from samsa.client.consumer.sticky import (
    NO_GENERATION,
    OwnedPartitions,
    all_partitions,
    sticky_assignment,
)
from samsa.errors import ConfigError, CorruptRecordError
from samsa.protocol.consumer_protocol import (
    MAX_KNOWN_VERSION,
    Assignment,
    Subscription,
    TopicPartitions,
    encode_sticky_user_data,
    parse_sticky_user_data,
)
from samsa.types import TopicPartition

__all__ = [
    "ASSIGNMENT_VERSION",
    "Assignor",
    "CooperativeStickyAssignor",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "assignor_for",
    "group_partitions",
    "ungroup_partitions",
]

log = logging.getLogger(__name__)

ASSIGNMENT_VERSION = MAX_KNOWN_VERSION
"""The ConsumerProtocolAssignment version written, as Kafka's leader writes (all versions
share one layout, and readers take a higher version as the highest they know)."""
_GENERATION = struct.Struct(">i")


class RebalanceProtocol(IntEnum):
    """How members give up partitions (Kafka's ids): all before rejoining, or only those moved."""

    EAGER = 0
    COOPERATIVE = 1


class Assignor(Protocol):
    """What a consumer group leader calls; implementations hold no state between calls."""

    @property
    def name(self) -> str:
        """The protocol name members list in JoinGroup."""
        ...

    @property
    def supported_protocols(self) -> tuple[RebalanceProtocol, ...]:
        """The rebalance protocols it can serve, the preferred one first."""
        ...

    def subscription_user_data(
        self, owned_partitions: TopicPartitions, generation: int
    ) -> bytes | None:
        """The ``user_data`` a member with this assignment and generation sends when it joins."""
        ...

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        """An assignment for every member of ``subscriptions`` (empty for some, perhaps).

        ``partitions_per_topic`` holds the topics that exist; members' subscribed topics
        missing from it are not assigned.
        """
        ...


def group_partitions(partitions: Iterable[TopicPartition]) -> TopicPartitions:
    """Partitions as the consumer protocol lists them: by topic, both sorted."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return tuple((topic, tuple(sorted(by_topic[topic]))) for topic in sorted(by_topic))


def ungroup_partitions(topic_partitions: TopicPartitions) -> list[TopicPartition]:
    """The consumer protocol's per-topic lists as partitions."""
    return [TopicPartition(topic, p) for topic, partitions in topic_partitions for p in partitions]


def _assignments(assigned: Mapping[str, Iterable[TopicPartition]]) -> dict[str, Assignment]:
    return {
        member: Assignment(ASSIGNMENT_VERSION, group_partitions(partitions), None)
        for member, partitions in assigned.items()
    }


class _EagerWithoutUserData:
    """Assignors that need nothing from members but their topics."""

    supported_protocols = (RebalanceProtocol.EAGER,)

    def subscription_user_data(
        self, owned_partitions: TopicPartitions, generation: int
    ) -> bytes | None:
        return None


class RangeAssignor(_EagerWithoutUserData):
    """Kafka's RangeAssignor: consecutive partitions of each topic per member."""

    name = "range"

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        assigned: dict[str, list[TopicPartition]] = {member: [] for member in subscriptions}
        members_by_topic: dict[str, list[str]] = {}
        for member in sorted(subscriptions):
            for topic in set(subscriptions[member].topics):
                if topic in partitions_per_topic:
                    members_by_topic.setdefault(topic, []).append(member)
        for topic, members in members_by_topic.items():
            per_member, extra = divmod(partitions_per_topic[topic], len(members))
            start = 0
            for index, member in enumerate(members):
                end = start + per_member + (1 if index < extra else 0)
                assigned[member].extend(TopicPartition(topic, p) for p in range(start, end))
                start = end
        return _assignments(assigned)


class RoundRobinAssignor(_EagerWithoutUserData):
    """Kafka's RoundRobinAssignor: all partitions dealt out in turn to their subscribers."""

    name = "roundrobin"

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        assigned: dict[str, list[TopicPartition]] = {member: [] for member in subscriptions}
        members = sorted(subscriptions)
        topics_by_member = {member: set(subscriptions[member].topics) for member in members}
        subscribed = set().union(*topics_by_member.values())
        turn = 0
        for tp in all_partitions(partitions_per_topic, subscribed):
            # The turn passes on from where the last partition left it, as Kafka's
            # circular iterator does; some member subscribes to every topic here.
            while tp.topic not in topics_by_member[members[turn % len(members)]]:
                turn += 1
            assigned[members[turn % len(members)]].append(tp)
            turn += 1
        return _assignments(assigned)


def _topics_by_member(subscriptions: Mapping[str, Subscription]) -> dict[str, frozenset[str]]:
    return {member: frozenset(sub.topics) for member, sub in subscriptions.items()}


class StickyAssignor:
    """Kafka's StickyAssignor (eager): balanced, keeping each member's previous assignment.

    The previous assignment and generation travel in the subscription's user data
    (StickyAssignorUserData), since eager members revoke everything before they join.
    """

    name = "sticky"
    supported_protocols = (RebalanceProtocol.EAGER,)

    def subscription_user_data(
        self, owned_partitions: TopicPartitions, generation: int
    ) -> bytes | None:
        return encode_sticky_user_data(owned_partitions, generation)

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        owned = {member: _previous_assignment(member, sub) for member, sub in subscriptions.items()}
        result = sticky_assignment(partitions_per_topic, _topics_by_member(subscriptions), owned)
        return _assignments(result.target)


def _previous_assignment(member: str, subscription: Subscription) -> OwnedPartitions:
    if not subscription.user_data:
        return OwnedPartitions(())
    try:
        partitions, generation = parse_sticky_user_data(subscription.user_data)
    except CorruptRecordError as exc:
        # Safe to drop: the member is assigned as if new, which costs stickiness only.
        log.warning("member %s sent sticky user data that cannot be read: %s", member, exc)
        return OwnedPartitions(())
    return OwnedPartitions(tuple(ungroup_partitions(partitions)), generation)


class CooperativeStickyAssignor:
    """Kafka's CooperativeStickyAssignor: sticky, and a moving partition is revoked first.

    A partition the target gives to a member is left out of this round if another
    member claims it in ``owned_partitions`` and the receiver is not its resolved
    owner. The members that must give up partitions see them missing from their
    assignment, revoke them and rejoin; the next rebalance assigns them.
    """

    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def subscription_user_data(
        self, owned_partitions: TopicPartitions, generation: int
    ) -> bytes | None:
        # For members that speak subscription v0 or v1, which have no generation_id.
        return _GENERATION.pack(generation)

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        owned = {
            member: OwnedPartitions(
                tuple(ungroup_partitions(sub.owned_partitions)), _generation(sub)
            )
            for member, sub in subscriptions.items()
        }
        result = sticky_assignment(partitions_per_topic, _topics_by_member(subscriptions), owned)
        assigned = {
            member: [
                tp
                for tp in partitions
                if result.owners.get(tp) == member
                or result.claimants.get(tp, frozenset()) <= {member}
            ]
            for member, partitions in result.target.items()
        }
        return _assignments(assigned)


def _generation(subscription: Subscription) -> int:
    if subscription.version >= 2 or subscription.generation_id >= 0:
        return subscription.generation_id
    user_data = subscription.user_data
    if user_data is not None and len(user_data) >= _GENERATION.size:
        return int(_GENERATION.unpack_from(user_data)[0])
    return NO_GENERATION


_BY_NAME: dict[str, type[Assignor]] = {
    "range": RangeAssignor,
    "roundrobin": RoundRobinAssignor,
    "sticky": StickyAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
}
_JAVA_PACKAGE = "org.apache.kafka.clients.consumer."


def assignor_for(name: str) -> Assignor:
    """The assignor of a ``partition.assignment.strategy`` entry.

    Takes Kafka's protocol names (``range``, ``roundrobin``, ``sticky``,
    ``cooperative-sticky``) and the Java class names users copy from Java
    configurations (``org.apache.kafka.clients.consumer.RangeAssignor``); raises
    :class:`~samsa.errors.ConfigError` naming any other.
    """
    key = name.strip()
    for assignor_name, cls in _BY_NAME.items():
        if key in (assignor_name, _JAVA_PACKAGE + cls.__name__):
            return cls()
    known = ", ".join(_BY_NAME)
    raise ConfigError(f"partition.assignment.strategy: unknown assignor {name!r} (known: {known})")
