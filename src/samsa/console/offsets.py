"""A consumer group's lag (committed offset against the log end, per partition and in
total) and the new offsets of a reset, with the asyncio admin client.

The rules are those of ``samsa consumer-groups`` (and Kafka's tool): a reset is allowed
only while the group has no active members; an offset out of range moves to the nearest
end of the log; a time with no record at or after it resets to the log end.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from samsa.client.admin import AsyncAdmin, GroupDescription, MemberDescription, OffsetSpec
from samsa.errors import KafkaError
from samsa.types import TopicPartition

__all__ = [
    "INACTIVE_STATES",
    "RESET_TARGETS",
    "PartitionLag",
    "group_lag",
    "log_end_offsets",
    "plan_reset",
    "total_lag",
]

INACTIVE_STATES = ("Empty", "Dead")
"""States in which a group's offsets may be changed: no consumer holds it."""
RESET_TARGETS = ("earliest", "latest", "timestamp", "offset")


@dataclass(frozen=True, slots=True)
class PartitionLag:
    """One partition of a group: its committed offset, the log end offset and the
    difference (None where either is unknown), and the member that reads it."""

    partition: TopicPartition
    committed: int | None
    log_end: int | None
    member: MemberDescription | None

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.log_end is None:
            return None
        return max(0, self.log_end - self.committed)


async def log_end_offsets(
    admin: AsyncAdmin, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, int]:
    """Log end offsets; partitions of topics that no longer exist are left out."""
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp)
    specs = {tp: int(OffsetSpec.LATEST) for tps in by_topic.values() for tp in tps}
    if not specs:
        return {}
    try:
        return {tp: r.offset for tp, r in (await admin.list_offsets(specs)).items()}
    except KafkaError:
        # One failed partition fails the whole call: ask topic by topic, keep what answers.
        found: dict[TopicPartition, int] = {}
        for tps in by_topic.values():
            try:
                answers = await admin.list_offsets(dict.fromkeys(tps, int(OffsetSpec.LATEST)))
            except KafkaError:
                continue  # a deleted topic: its rows show no log end offset
            found.update((tp, r.offset) for tp, r in answers.items())
        return found


async def group_lag(admin: AsyncAdmin, description: GroupDescription) -> list[PartitionLag]:
    """Every partition the group has committed or is assigned, sorted, with its lag."""
    committed = {
        tp: om.offset for tp, om in (await admin.list_group_offsets(description.group_id)).items()
    }
    owner = {tp: m for m in description.members for tp in m.assignment}
    partitions = sorted(set(committed) | set(owner))
    log_end = await log_end_offsets(admin, partitions)
    return [
        PartitionLag(tp, committed.get(tp), log_end.get(tp), owner.get(tp)) for tp in partitions
    ]


def total_lag(rows: Iterable[PartitionLag]) -> int:
    """The sum of the known lags."""
    return sum(row.lag or 0 for row in rows)


async def plan_reset(
    admin: AsyncAdmin,
    partitions: Iterable[TopicPartition],
    target: str,
    *,
    timestamp_ms: int = 0,
    offset: int = 0,
) -> dict[TopicPartition, int]:
    """The offsets a reset to ``target`` (one of :data:`RESET_TARGETS`) would commit."""
    wanted = sorted(partitions)
    if not wanted:
        return {}

    async def offsets(spec: int) -> Mapping[TopicPartition, int]:
        answers = await admin.list_offsets(dict.fromkeys(wanted, spec))
        return {tp: r.offset for tp, r in answers.items()}

    if target == "earliest":
        return dict(await offsets(OffsetSpec.EARLIEST))
    latest = await offsets(OffsetSpec.LATEST)
    if target == "latest":
        return dict(latest)
    if target == "timestamp":
        by_time = await offsets(max(0, timestamp_ms))
        return {tp: by_time[tp] if by_time[tp] >= 0 else latest[tp] for tp in wanted}
    if target != "offset":
        raise ValueError(f"unknown reset target {target!r}: use {', '.join(RESET_TARGETS)}")
    earliest = await offsets(OffsetSpec.EARLIEST)
    return {tp: min(max(offset, earliest[tp]), latest[tp]) for tp in wanted}
