"""Server-side partition assignors of consumer groups (KIP-848): ``uniform`` and ``range``.

The coordinator computes a group's target assignment with the assignor the members
ask for (``ServerAssignor`` in ConsumerGroupHeartbeat, the client's
``group.remote.assignor``), else the first of the broker's ``group.consumer.assignors``
(Kafka's default list: ``uniform,range``).

* ``uniform`` spreads every subscribed partition so that member counts differ by at
  most one where subscriptions allow it, and keeps each member's current partitions
  where balance allows (sticky), as Kafka's ``UniformAssignor``.
* ``range`` gives each member, topic by topic, a contiguous range of partitions: the
  members subscribed to the topic in member-id order, the first ``partitions % members``
  one partition more (so co-partitioned topics go to the same members), as Kafka's
  server-side ``RangeAssignor`` does for members with equal subscriptions.

Both are pure functions of their input: no I/O, no clock. Rack ids are not used yet.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

Assignment = dict[uuid.UUID, frozenset[int]]
"""Partitions by topic id."""


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """What the assignor knows of one member: its subscribed topics (by id) and the
    partitions of its current target assignment."""

    subscribed_topic_ids: frozenset[uuid.UUID]
    assignment: Mapping[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    rack_id: str | None = None


class PartitionAssignor(Protocol):
    name: str

    def assign(
        self, members: Mapping[str, MemberSubscription], topics: Mapping[uuid.UUID, int]
    ) -> dict[str, Assignment]:
        """Every member's new target assignment; ``topics``: partition count by topic id."""
        ...


def _freeze(owned: dict[uuid.UUID, set[int]]) -> Assignment:
    return {topic: frozenset(parts) for topic, parts in owned.items() if parts}


class UniformAssignor:
    """Balanced and sticky (see the module docstring)."""

    name = "uniform"

    def assign(
        self, members: Mapping[str, MemberSubscription], topics: Mapping[uuid.UUID, int]
    ) -> dict[str, Assignment]:
        order = sorted(members)
        owned: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in order}
        taken: set[tuple[uuid.UUID, int]] = set()
        # Keep what each member has and still may have (a partition claimed twice goes
        # to the first member in id order).
        for member_id in order:
            spec = members[member_id]
            for topic, parts in spec.assignment.items():
                if topic not in spec.subscribed_topic_ids or topic not in topics:
                    continue
                for p in parts:
                    if p < topics[topic] and (topic, p) not in taken:
                        owned[member_id].add((topic, p))
                        taken.add((topic, p))
        subscribers: dict[uuid.UUID, list[str]] = {}
        for member_id in order:
            for topic in members[member_id].subscribed_topic_ids:
                if topic in topics:
                    subscribers.setdefault(topic, []).append(member_id)
        # Every free partition to its least-loaded subscriber.
        for topic in sorted(subscribers, key=str):
            for p in range(topics[topic]):
                if (topic, p) in taken:
                    continue
                target = min(subscribers[topic], key=lambda m: (len(owned[m]), m))
                owned[target].add((topic, p))
                taken.add((topic, p))
        self._balance(owned, members)
        result: dict[str, Assignment] = {}
        for member_id, pairs in owned.items():
            by_topic: dict[uuid.UUID, set[int]] = {}
            for topic, p in pairs:
                by_topic.setdefault(topic, set()).add(p)
            result[member_id] = _freeze(by_topic)
        return result

    @staticmethod
    def _balance(
        owned: dict[str, set[tuple[uuid.UUID, int]]], members: Mapping[str, MemberSubscription]
    ) -> None:
        """Move partitions from the most to the least loaded members that may take them,
        while some member has two more than another that could take one of its
        partitions; each move lowers the sum of squared counts, so this ends."""
        moved = True
        while moved:
            moved = False
            for giver in sorted(owned, key=lambda m: (-len(owned[m]), m)):
                takers = sorted(
                    (m for m in owned if len(owned[m]) < len(owned[giver]) - 1),
                    key=lambda m: (len(owned[m]), m),
                )
                for taker in takers:
                    movable = sorted(
                        (pair for pair in owned[giver]
                         if pair[0] in members[taker].subscribed_topic_ids),
                        key=lambda pair: (str(pair[0]), -pair[1]),
                    )  # fmt: skip
                    if movable:
                        owned[giver].discard(movable[0])
                        owned[taker].add(movable[0])
                        moved = True
                        break
                if moved:
                    break


class RangeAssignor:
    """Contiguous ranges per topic (see the module docstring)."""

    name = "range"

    def assign(
        self, members: Mapping[str, MemberSubscription], topics: Mapping[uuid.UUID, int]
    ) -> dict[str, Assignment]:
        result: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
        for topic, count in topics.items():
            subscribed = sorted(m for m, spec in members.items()
                                if topic in spec.subscribed_topic_ids)  # fmt: skip
            if not subscribed:
                continue
            quota, extra = divmod(count, len(subscribed))
            start = 0
            for i, member_id in enumerate(subscribed):
                size = quota + (1 if i < extra else 0)
                if size:
                    result[member_id][topic] = set(range(start, start + size))
                start += size
        return {m: _freeze(owned) for m, owned in result.items()}


ASSIGNORS: dict[str, PartitionAssignor] = {a.name: a for a in (UniformAssignor(), RangeAssignor())}
"""The server-side assignors by name (``group.consumer.assignors`` picks among them)."""
