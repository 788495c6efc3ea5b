"""Offset arithmetic for planning reads: JSON form, ranges, splitting and rate limits.

Offsets travel through Spark's checkpoint as JSON in the Kafka source's shape,
``{"topic": {"0": 42, "1": 7}}``: the partition keys are strings. Nothing here
talks to a broker or imports pyspark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from samsa.types import TopicPartition

__all__ = [
    "OffsetRange",
    "limit_offsets",
    "offsets_from_json",
    "offsets_to_json",
    "split_ranges",
]


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{TopicPartition: offset}`` in the checkpoint's shape, sorted for stable output."""
    result: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        result.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return result


def offsets_from_json(value: Mapping[str, Any] | None) -> dict[TopicPartition, int]:
    """The inverse of :func:`offsets_to_json` (partition keys arrive as strings)."""
    if not value:
        return {}
    return {
        TopicPartition(topic, int(partition)): int(offset)
        for topic, partitions in value.items()
        for partition, offset in partitions.items()
    }


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets ``[from_offset, until_offset)`` of one partition: what one Spark task reads."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        return max(0, self.until_offset - self.from_offset)


def split_ranges(ranges: Iterable[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Ranges cut so that there are at least ``min_partitions`` of them where sizes allow.

    Each range gets a share of ``min_partitions`` in proportion to its size (at least
    one piece, never more pieces than offsets), cut into near-equal consecutive pieces.
    The result depends only on the input, so a replayed micro-batch is planned the same.
    """
    ranges = [r for r in ranges if r.size > 0]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    result: list[OffsetRange] = []
    for r in ranges:
        pieces = min(r.size, max(1, round(r.size / total * min_partitions)))
        step, extra = divmod(r.size, pieces)
        start = r.from_offset
        for i in range(pieces):
            end = start + step + (1 if i < extra else 0)
            result.append(OffsetRange(r.topic, r.partition, start, end))
            start = end
    return result


def limit_offsets(
    start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], max_rows: int
) -> dict[TopicPartition, int]:
    """End offsets that take at most ``max_rows`` offsets past ``start``, shared in
    proportion to what each partition has waiting.

    Shares are rounded down and the offsets left over go one each to the partitions
    with the largest remainders, so a batch takes exactly ``min(max_rows, waiting)``.
    """
    waiting = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(waiting.values())
    if total <= max_rows:
        return dict(latest)
    shares = {tp: max_rows * size / total for tp, size in waiting.items()}
    taken = {tp: int(share) for tp, share in shares.items()}
    left = max_rows - sum(taken.values())
    by_remainder = sorted(shares, key=lambda tp: (-(shares[tp] - taken[tp]), tp))
    for tp in by_remainder[:left]:
        taken[tp] += 1
    return {tp: start.get(tp, latest[tp]) + taken[tp] for tp in latest}
