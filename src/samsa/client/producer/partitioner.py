"""Kafka's default partitioner: murmur2 of the key, or a sticky partition for null keys.

A keyed record goes to ``toPositive(murmur2(key)) % numPartitions``, exactly as
Kafka's Java producer (``BuiltInPartitioner.partitionForKey``) and librdkafka's
``murmur2_random`` partitioner place it, so records keep their partition across
clients. murmur2 is Austin Appleby's MurmurHash2 (32-bit) with Kafka's seed
``0x9747b28c``, reading the key in little-endian 4-byte words; ``toPositive``
clears the sign bit (it is not ``abs``).

Records without a key (or all records, with ``partitioner.ignore.keys``) stick
to one partition until ``batch.size`` bytes have gone to it, then move to
another chosen at random among the partitions with a leader (KIP-794, without
the adaptive weighting): batches fill up, yet the load spreads.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Sequence

__all__ = ["StickyPartitioner", "murmur2", "partition_for_key", "to_positive"]

SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: the 32-bit hash of ``data`` as a signed int."""
    length = len(data)
    h = (SEED ^ length) & _MASK
    words = length // 4
    for (k,) in struct.iter_unpack("<I", data[: words * 4]):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail:
        rest = words * 4
        if tail == 3:
            h ^= data[rest + 2] << 16
        if tail >= 2:
            h ^= data[rest + 1] << 8
        h ^= data[rest]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Kafka's ``Utils.toPositive``: the low 31 bits (so -1 becomes 2147483647)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a serialized key."""
    return to_positive(murmur2(key)) % num_partitions


class StickyPartitioner:
    """The partition for records without a key, per topic (owned by the producer's loop)."""

    def __init__(self, batch_size: int) -> None:
        self.batch_size = max(batch_size, 1)
        self._current: dict[str, tuple[int, int]] = {}  # topic → (partition, bytes sent to it)

    def current(self, topic: str, num_partitions: int) -> int | None:
        """The sticky partition of ``topic``, or None when one must be chosen."""
        current = self._current.get(topic)
        if current is not None and current[0] < num_partitions:
            return current[0]
        return None

    def partition(self, topic: str, num_partitions: int, available: Sequence[int]) -> int:
        """The sticky partition of ``topic`` (``available``: partitions with a leader)."""
        current = self.current(topic, num_partitions)
        if current is not None:
            return current
        return self._choose(topic, num_partitions, available, None)

    def record_appended(self, topic: str, partition: int, size: int) -> bool:
        """Count ``size`` bytes sent to the sticky partition; True once ``batch.size`` is
        reached (then :meth:`next_partition` moves on)."""
        current = self._current.get(topic)
        if current is None or current[0] != partition:
            return False
        produced = current[1] + size
        self._current[topic] = (partition, produced)
        return produced >= self.batch_size

    def next_partition(self, topic: str, num_partitions: int, available: Sequence[int]) -> int:
        """Move ``topic`` to another partition (among ``available`` when possible)."""
        current = self._current.get(topic)
        return self._choose(topic, num_partitions, available, current and current[0])

    def _choose(
        self, topic: str, num_partitions: int, available: Sequence[int], previous: int | None
    ) -> int:
        candidates = [p for p in available if p != previous and p < num_partitions]
        if not candidates:
            candidates = [p for p in range(num_partitions) if p != previous] or [0]
        partition = random.choice(candidates)
        self._current[topic] = (partition, 0)
        return partition
