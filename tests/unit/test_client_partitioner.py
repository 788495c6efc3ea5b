"""The producer's partitioner places keys exactly where Kafka's default partitioner does.

The murmur2 vectors are those of Kafka's own ``UtilsTest.testMurmur2`` (clients
module); kafka-python's ``DefaultPartitioner`` (a port of Java's murmur2) is an
independent second opinion on random keys.
"""

from __future__ import annotations

import random

import pytest
from kafka.partitioner import DefaultPartitioner

from samsa.client.producer.partitioner import (
    StickyPartitioner,
    murmur2,
    partition_for_key,
    to_positive,
)

# Kafka's UtilsTest.testMurmur2: input bytes → Utils.murmur2 (a signed 32-bit int).
KAFKA_MURMUR2_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize(("data", "expected"), KAFKA_MURMUR2_VECTORS)
def test_murmur2_matches_kafkas_vectors(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_murmur2_of_empty_key_is_a_signed_int() -> None:
    assert -(2**31) <= murmur2(b"") < 2**31


def test_to_positive_clears_the_sign_bit_rather_than_negating() -> None:
    assert to_positive(-1) == 2**31 - 1
    assert to_positive(-(2**31)) == 0
    assert to_positive(5) == 5


@pytest.mark.parametrize(("data", "hashed"), KAFKA_MURMUR2_VECTORS)
@pytest.mark.parametrize("partitions", [1, 3, 7, 100, 1000])
def test_partition_is_the_positive_hash_modulo_the_partition_count(
    data: bytes, hashed: int, partitions: int
) -> None:
    assert partition_for_key(data, partitions) == (hashed & 0x7FFFFFFF) % partitions


def test_known_keys_land_in_kafkas_partitions() -> None:
    # Worked from the vectors: toPositive(-973932308) = 1173551340, and so on.
    assert [partition_for_key(b"21", n) for n in (3, 7, 100)] == [0, 3, 40]
    assert [partition_for_key(b"foobar", n) for n in (3, 7, 100)] == [0, 0, 66]
    assert [partition_for_key(b"abc", n) for n in (3, 7, 100)] == [0, 4, 7]


class _Cluster:
    """The three calls kafka-python's DefaultPartitioner makes of its cluster metadata."""

    def __init__(self, partitions: int) -> None:
        self.partitions = set(range(partitions))

    def topics(self) -> set[str]:
        return {"t"}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return self.partitions

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        return self.partitions


def test_partitions_agree_with_kafka_python_for_random_keys() -> None:
    rng = random.Random(20240611)
    reference = DefaultPartitioner()
    for _ in range(1000):
        key = rng.randbytes(rng.randrange(0, 64))
        partitions = rng.choice([1, 2, 3, 6, 12, 50, 997])
        expected = reference.partition("t", key, key, None, None, _Cluster(partitions))
        assert partition_for_key(key, partitions) == expected, key.hex()


def test_sticky_partition_holds_until_batch_size_bytes_then_moves() -> None:
    sticky = StickyPartitioner(batch_size=1000)
    first = sticky.partition("t", 4, [0, 1, 2, 3])
    for _ in range(9):
        assert sticky.partition("t", 4, [0, 1, 2, 3]) == first
        assert not sticky.record_appended("t", first, 100)
    assert sticky.record_appended("t", first, 100)
    assert sticky.next_partition("t", 4, [0, 1, 2, 3]) != first
    assert sticky.partition("t", 4, [0, 1, 2, 3]) != first


def test_sticky_partition_is_chosen_among_partitions_with_a_leader() -> None:
    sticky = StickyPartitioner(batch_size=1)
    seen = set()
    for _ in range(50):
        partition = sticky.partition("t", 5, [1, 3])
        seen.add(partition)
        if sticky.record_appended("t", partition, 10):
            sticky.next_partition("t", 5, [1, 3])
    assert seen == {1, 3}
