"""The message browser's reads: the newest N records of a topic, or N from an offset or
a time, of one partition or all, with an optional text filter.

Each browse is a short-lived :class:`~samsa.client.consumer.AsyncConsumer` without a group
(it assigns itself the partitions, seeks, reads up to the high watermark it saw at the
start and closes), so it works on any Kafka-compatible broker and leaves nothing behind.
A browse reads at most :data:`SCAN_LIMIT` records a partition and stops after
``deadline_s``: a filter that matches nothing does not read a whole topic.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from samsa.client.consumer import AsyncConsumer, ConsumerRecord
from samsa.types import TopicPartition

__all__ = ["MODES", "SCAN_LIMIT", "BrowseRequest", "BrowseResult", "browse", "matches"]

MODES = ("newest", "offset", "timestamp")
SCAN_LIMIT = 5000
"""Records read a partition at most, to find ``limit`` that match a filter."""


@dataclass(frozen=True, slots=True)
class BrowseRequest:
    """What to read: ``partitions`` (None: all of the topic's), where to start (``mode``:
    newest, or from ``offset``, or from ``timestamp_ms``), how many records to show and
    a case-insensitive ``text_filter`` on keys, values and headers ('' for none)."""

    partitions: Sequence[int] | None
    mode: str = "newest"
    offset: int = 0
    timestamp_ms: int = 0
    limit: int = 50
    text_filter: str = ""


@dataclass(slots=True)
class BrowseResult:
    """The records to show, how many were read to find them, and each partition's
    (log start, high watermark) when the browse began."""

    records: list[ConsumerRecord]
    scanned: int
    watermarks: dict[int, tuple[int, int]] = field(default_factory=dict)
    timed_out: bool = False


def matches(record: ConsumerRecord, needle: str) -> bool:
    """Whether ``needle`` (lower-case) is in the record's key, value or a header, read as
    UTF-8 text (bytes that are not UTF-8 are matched as far as they decode)."""

    def has(data: bytes | None) -> bool:
        return data is not None and needle in data.decode("utf-8", "replace").lower()

    return (
        has(record.key)
        or has(record.value)
        or any(needle in name.lower() or has(value) for name, value in record.headers)
    )


async def browse(
    config: Mapping[str, Any],
    topic: str,
    partition_count: int,
    request: BrowseRequest,
    *,
    deadline_s: float = 10.0,
) -> BrowseResult:
    """Read records of ``topic`` as ``request`` says, with client ``config`` (the console's
    connection properties)."""
    numbers = range(partition_count) if request.partitions is None else request.partitions
    tps = [TopicPartition(topic, p) for p in numbers if 0 <= p < partition_count]
    needle = request.text_filter.strip().lower()
    window = SCAN_LIMIT if needle else request.limit
    consumer = AsyncConsumer(
        {
            **config,
            "group.id": None,
            "enable.auto.commit": False,
            "max.poll.records": 1000,
            "fetch.max.wait.ms": 100,
        }
    )
    result = BrowseResult([], 0)
    try:
        await consumer.start()
        low = await consumer.beginning_offsets(tps)
        high = await consumer.end_offsets(tps)
        result.watermarks = {tp.partition: (low[tp], high[tp]) for tp in tps}
        starts = await _starts(consumer, tps, request, low, high, window=window)
        stops = {
            tp: high[tp] if request.mode == "newest" else min(high[tp], starts[tp] + window)
            for tp in tps
        }
        wanted = [tp for tp in tps if starts[tp] < stops[tp]]
        if not wanted:
            return result
        consumer.assign(wanted)
        for tp in wanted:
            consumer.seek(tp, starts[tp])
        found: list[ConsumerRecord] = []
        open_ = set(wanted)
        give_up = time.monotonic() + deadline_s
        while open_:
            if time.monotonic() > give_up:
                result.timed_out = True
                break
            for record in await consumer.poll(0.2):
                tp = record.topic_partition
                if tp not in open_ or record.offset >= stops[tp]:
                    continue
                result.scanned += 1
                if not needle or matches(record, needle):
                    found.append(record)
            for tp in list(open_):
                if await consumer.position(tp) >= stops[tp]:
                    open_.discard(tp)
                    consumer.pause([tp])
    finally:
        await consumer.close()
    if request.mode == "newest":
        found.sort(key=lambda r: (r.timestamp, r.offset), reverse=True)
    else:
        found.sort(key=lambda r: (r.timestamp, r.partition, r.offset))
    result.records = found[: request.limit]
    return result


async def _starts(
    consumer: AsyncConsumer,
    tps: list[TopicPartition],
    request: BrowseRequest,
    low: Mapping[TopicPartition, int],
    high: Mapping[TopicPartition, int],
    *,
    window: int,
) -> dict[TopicPartition, int]:
    if request.mode == "newest":
        return {tp: max(low[tp], high[tp] - window) for tp in tps}
    if request.mode == "offset":
        return {tp: min(max(request.offset, low[tp]), high[tp]) for tp in tps}
    by_time = await consumer.offsets_for_times(dict.fromkeys(tps, max(0, request.timestamp_ms)))
    # No record at or after the time: nothing to show from that partition.
    starts: dict[TopicPartition, int] = {}
    for tp in tps:
        at = by_time.get(tp)
        starts[tp] = high[tp] if at is None else at[0]
    return starts
