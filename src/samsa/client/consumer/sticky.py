"""The balancing at the heart of Kafka's sticky assignors (AbstractStickyAssignor).

Given the partitions of the subscribed topics, each member's subscription and the
partitions each member says it owns, :func:`sticky_assignment` finds a balanced
assignment that moves as few owned partitions as it can. Pure logic: no I/O, no
state between calls (the members carry their history in their subscriptions).

Ownership claims are resolved per partition: the claim of the highest generation
wins, and a partition claimed by several members of that generation (a split
brain Kafka also guards against) is owned by none of them. A claim counts only
for a partition that exists and whose topic the member still subscribes to.

When every member subscribes to the same topics (the common case), Kafka's
constrained algorithm applies: with ``n`` partitions and ``m`` members each
member gets ``n // m`` or one more, and exactly ``n % m`` members get the extra
one. Members keep their owned partitions up to that quota (the extra slots go to
the members owning the most, ties to the smaller member id); the rest are handed
out in partition order to the least loaded member.

Otherwise the general algorithm applies: owned partitions stay; the others, those
with the fewest possible consumers first, go to the least loaded member that
subscribes to their topic; then partitions move from a member to one holding two
or more fewer that can take them, newly handed-out partitions before owned ones,
until no such move is left (Kafka's balance condition).

Ties are broken by member id and partition order, so a result is reproducible.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from samsa.types import TopicPartition

__all__ = ["OwnedPartitions", "StickyAssignment", "sticky_assignment"]

NO_GENERATION = -1


@dataclass(frozen=True, slots=True)
class OwnedPartitions:
    """The partitions a member says it owns and the generation it owned them in (-1: unknown)."""

    partitions: tuple[TopicPartition, ...]
    generation: int = NO_GENERATION


@dataclass(frozen=True, slots=True)
class StickyAssignment:
    """A target assignment, with who owns each partition now.

    ``owners`` maps each partition with a resolved owner to it; ``claimants`` maps
    every existing partition any member claims (for any topic, subscribed or not)
    to the members claiming it.
    """

    target: dict[str, list[TopicPartition]]
    owners: dict[TopicPartition, str]
    claimants: dict[TopicPartition, frozenset[str]]


def all_partitions(
    partitions_per_topic: Mapping[str, int], topics: Iterable[str]
) -> list[TopicPartition]:
    """Partitions of the known ``topics``, in (topic, partition) order."""
    return [
        TopicPartition(topic, partition)
        for topic in sorted(set(topics))
        if topic in partitions_per_topic
        for partition in range(partitions_per_topic[topic])
    ]


def _exists(tp: TopicPartition, partitions_per_topic: Mapping[str, int]) -> bool:
    return 0 <= tp.partition < partitions_per_topic.get(tp.topic, 0)


def _resolve_owners(
    partitions_per_topic: Mapping[str, int],
    topics_by_member: Mapping[str, Collection[str]],
    owned: Mapping[str, OwnedPartitions],
) -> tuple[dict[TopicPartition, str], dict[TopicPartition, frozenset[str]]]:
    claimants: dict[TopicPartition, set[str]] = {}
    # Per partition: the highest generation claiming it, and who claims it in that generation.
    newest: dict[TopicPartition, tuple[int, list[str]]] = {}
    for member, claim in owned.items():
        if member not in topics_by_member:
            continue
        generation = max(claim.generation, NO_GENERATION)
        for tp in set(claim.partitions):
            if not _exists(tp, partitions_per_topic):
                continue
            claimants.setdefault(tp, set()).add(member)
            if tp.topic not in topics_by_member[member]:
                continue  # the member must give it up: its claim keeps it for nobody
            if tp not in newest or generation > newest[tp][0]:
                newest[tp] = (generation, [member])
            elif generation == newest[tp][0]:
                newest[tp][1].append(member)
    owners = {tp: members[0] for tp, (_, members) in newest.items() if len(members) == 1}
    return owners, {tp: frozenset(members) for tp, members in claimants.items()}


def sticky_assignment(
    partitions_per_topic: Mapping[str, int],
    topics_by_member: Mapping[str, Collection[str]],
    owned: Mapping[str, OwnedPartitions],
) -> StickyAssignment:
    """A balanced assignment of the members' subscribed partitions that keeps what it can.

    ``topics_by_member`` names every member of the group and its subscribed topics;
    topics missing from ``partitions_per_topic`` are ignored. ``owned`` may leave
    members out (they own nothing).
    """
    owners, claimants = _resolve_owners(partitions_per_topic, topics_by_member, owned)
    members = sorted(topics_by_member)
    if not members:
        return StickyAssignment({}, owners, claimants)
    owned_by_member: dict[str, list[TopicPartition]] = {member: [] for member in members}
    for tp, member in sorted(owners.items()):
        owned_by_member[member].append(tp)
    subscribed = {
        m: frozenset(t for t in topics_by_member[m] if t in partitions_per_topic) for m in members
    }
    if len(set(subscribed.values())) == 1:
        target = _constrained(
            all_partitions(partitions_per_topic, subscribed[members[0]]), owned_by_member
        )
    else:
        target = _general(partitions_per_topic, subscribed, owned_by_member)
    return StickyAssignment(target, owners, claimants)


def _constrained(
    partitions: list[TopicPartition], owned_by_member: dict[str, list[TopicPartition]]
) -> dict[str, list[TopicPartition]]:
    """Every member subscribes to ``partitions``: quotas of n // m, n % m of them one more."""
    min_quota, extra = divmod(len(partitions), len(owned_by_member))
    target: dict[str, list[TopicPartition]] = {}
    by_owned_count = sorted(owned_by_member, key=lambda m: (-len(owned_by_member[m]), m))
    for member in by_owned_count:
        quota = min_quota
        if extra and len(owned_by_member[member]) > min_quota:
            quota += 1
            extra -= 1
        target[member] = owned_by_member[member][:quota]
    kept = {tp for assigned in target.values() for tp in assigned}
    # Handing each partition to the least loaded member fills everyone to the minimum
    # quota first and gives the remaining extra slots out in member order.
    least_loaded = [(len(assigned), member) for member, assigned in target.items()]
    heapq.heapify(least_loaded)
    for tp in partitions:
        if tp in kept:
            continue
        count, member = heapq.heappop(least_loaded)
        target[member].append(tp)
        heapq.heappush(least_loaded, (count + 1, member))
    return target


def _general(
    partitions_per_topic: Mapping[str, int],
    subscribed: Mapping[str, frozenset[str]],
    owned_by_member: dict[str, list[TopicPartition]],
) -> dict[str, list[TopicPartition]]:
    """Members subscribe to different topics: keep owned, hand out the rest, then rebalance."""
    consumers: dict[TopicPartition, list[str]] = {}
    for member in sorted(subscribed):
        for tp in all_partitions(partitions_per_topic, subscribed[member]):
            consumers.setdefault(tp, []).append(member)
    holder: dict[TopicPartition, str] = {}
    count = {member: 0 for member in subscribed}
    for member, partitions in owned_by_member.items():
        for tp in partitions:
            holder[tp] = member
            count[member] += 1
    # Partitions few members can take are placed first, while there is still room.
    by_scarcity = sorted(consumers, key=lambda tp: (len(consumers[tp]), tp))
    for tp in by_scarcity:
        if tp not in holder:
            member = min(consumers[tp], key=lambda m: (count[m], m))
            holder[tp] = member
            count[member] += 1
    owned = {tp for partitions in owned_by_member.values() for tp in partitions}
    movable = sorted(
        (tp for tp in by_scarcity if len(consumers[tp]) > 1),
        key=lambda tp: (tp in owned, len(consumers[tp]), tp),
    )
    moved = True
    while moved:  # each move lowers the sum of squared counts, so this ends
        moved = False
        for tp in movable:
            current = holder[tp]
            other = min((m for m in consumers[tp] if m != current), key=lambda m: (count[m], m))
            if count[current] - count[other] >= 2:
                holder[tp] = other
                count[current] -= 1
                count[other] += 1
                moved = True
    target: dict[str, list[TopicPartition]] = {member: [] for member in subscribed}
    for tp in sorted(holder):
        target[holder[tp]].append(tp)
    return target
