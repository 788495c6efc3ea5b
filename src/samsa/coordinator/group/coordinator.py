"""Committed offsets of consumer groups, kept in the compacted ``__consumer_offsets`` topic.

A group's offsets live in partition ``abs(hash(group)) % offsets.topic.num.partitions``
(Kafka's rule), as OffsetCommitKey/OffsetCommitValue records (see
:mod:`samsa.coordinator.group.records`). The cache in memory answers
OffsetFetch; every commit is appended (as one batch) before the cache changes,
and the cache is rebuilt from the topic at start-up.

This slice serves "simple" groups — consumers that ``assign()`` partitions and
commit with generation -1 and no member id. Group membership (JoinGroup,
SyncGroup, Heartbeat, rebalances) comes next.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from samsa.coordinator.group.records import (
    GROUP_METADATA_KEY_VERSION,
    OffsetKey,
    OffsetValue,
    decode_offset_key,
    decode_offset_value,
    encode_offset_key,
    encode_offset_value,
    key_version,
    partition_for,
)
from samsa.errors import KafkaError
from samsa.records import RecordBatchBuilder, iter_records, read_batch
from samsa.storage import Log
from samsa.types import TopicPartition

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "104857600"}

AppendFn = Callable[[TopicPartition, bytes], Awaitable[Any]]


class GroupCoordinator:
    """Owner of every group's committed offsets (one writer: the broker's loop)."""

    def __init__(self, partitions: int, append: AppendFn, clock: Callable[[], int]) -> None:
        self.partitions = partitions
        self._append = append
        self._clock = clock
        self._offsets: dict[str, dict[TopicPartition, OffsetValue]] = {}

    def partition_of(self, group: str) -> TopicPartition:
        return TopicPartition(OFFSETS_TOPIC, partition_for(group, self.partitions))

    # -- loading ---------------------------------------------------------------------
    def load(self, logs: Iterable[Log]) -> None:
        """Rebuild the cache from the offsets topic's partitions (latest record per key wins)."""
        loaded = 0
        for partition_log in logs:
            for key, value in _key_values(partition_log):
                try:
                    if key_version(key) == GROUP_METADATA_KEY_VERSION:
                        continue  # group metadata: read once membership is served
                    offset_key = decode_offset_key(key)
                    tp = TopicPartition(offset_key.topic, offset_key.partition)
                    if value is None:
                        self._offsets.get(offset_key.group, {}).pop(tp, None)
                    else:
                        self._offsets.setdefault(offset_key.group, {})[tp] = decode_offset_value(
                            value
                        )
                        loaded += 1
                except KafkaError as exc:
                    # One unreadable record must not hide every other group's offsets.
                    log.warning("skipping an unreadable %s record: %s", OFFSETS_TOPIC, exc)
        if loaded:
            log.info("loaded committed offsets of %d groups", len(self._offsets))

    # -- commits and fetches ---------------------------------------------------------------
    async def commit(self, group: str, offsets: Mapping[TopicPartition, OffsetValue]) -> None:
        """Append the commits as one batch to the group's offsets partition, then cache them."""
        if not offsets:
            return
        builder = RecordBatchBuilder()
        now = self._clock()
        for tp, value in offsets.items():
            key = OffsetKey(group, tp.topic, tp.partition)
            builder.append(encode_offset_value(value), key=encode_offset_key(key), timestamp=now)
        await self._append(self.partition_of(group), builder.build())
        self._offsets.setdefault(group, {}).update(offsets)

    def committed(
        self, group: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetValue | None]:
        """The group's committed offsets (all of them when ``partitions`` is None)."""
        stored = self._offsets.get(group, {})
        if partitions is None:
            return dict(stored)
        return {tp: stored.get(tp) for tp in partitions}

    def groups(self) -> list[str]:
        return sorted(self._offsets)


def _key_values(partition_log: Log) -> Iterable[tuple[bytes, bytes | None]]:
    """Every (key, value) of a log, batch by batch, from its start to its end."""
    offset = partition_log.log_start_offset
    while offset < partition_log.log_end_offset:
        data = partition_log.read(offset, 1 << 20).region.read()
        position, progressed = 0, False
        while len(data) - position >= 12:
            size = int.from_bytes(data[position + 8 : position + 12], "big") + 12
            if position + size > len(data):
                break
            batch = read_batch(data, position)
            if not batch.is_control:
                for record in iter_records(batch):
                    if record.key is not None:
                        yield record.key, record.value
            offset = max(offset, batch.next_offset)
            position += size
            progressed = True
        if not progressed:
            break  # a batch larger than a read: stop rather than loop (cannot happen below 1 MiB)
