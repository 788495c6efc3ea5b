"""Where a new topic's replicas go: Kafka's replica assignment, racks included.

The controller calls :func:`assign_replicas` for a topic created without an
explicit assignment, and for partitions added to a topic (``first_partition``
> 0). The rule is Kafka's, so a cluster spreads its replicas as an operator
expects from Kafka:

- brokers in id order; the first replica of partition ``p`` is broker
  ``(p + start) mod n`` — a round robin from a random start;
- every other replica is shifted from the first by ``1 + (shift + j) mod (n-1)``,
  and the shift grows by one each time the partitions wrap around the broker
  list, so the followers of one broker's partitions spread over the others;
- when every broker names a rack (``broker.rack``), the round robin runs over
  the brokers alternated by rack (rack-a's first, rack-b's first, …, rack-a's
  second …) and a follower is skipped while its rack, or the broker itself,
  already holds a replica and some rack (or broker) holds none — so replicas
  land on as many racks as there are. Some brokers with a rack and some
  without is an error, as in Kafka.

``start`` and ``shift`` are random unless given (tests give them).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from samsa.errors import InvalidPartitionsError, InvalidReplicationFactorError, InvalidRequestError


def assign_replicas(
    racks: Mapping[int, str | None],
    partitions: int,
    replication_factor: int,
    *,
    first_partition: int = 0,
    start: int | None = None,
    shift: int | None = None,
) -> dict[int, tuple[int, ...]]:
    """Replicas for partitions ``first_partition …`` of a topic, over brokers ``racks``.

    ``racks`` maps every live broker id to its rack (None: no rack).
    """
    if partitions <= 0:
        raise InvalidPartitionsError("the number of partitions must be larger than 0")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("the replication factor must be larger than 0")
    if replication_factor > len(racks):
        raise InvalidReplicationFactorError(
            f"replication factor {replication_factor} is larger than the "
            f"{len(racks)} available brokers"
        )
    with_rack = {broker: rack for broker, rack in racks.items() if rack is not None}
    if with_rack and len(with_rack) != len(racks):
        raise InvalidRequestError(
            "not all brokers have a rack (broker.rack) for a rack-aware assignment"
        )
    brokers = rack_alternated(with_rack) if with_rack else sorted(racks)
    count = len(brokers)
    start = random.randrange(count) if start is None else start
    shift = random.randrange(count) if shift is None else shift
    n_racks = len(set(with_rack.values())) if with_rack else 1
    result: dict[int, tuple[int, ...]] = {}
    for partition in range(first_partition, first_partition + partitions):
        if partition > 0 and partition % count == 0:
            shift += 1
        first = (partition + start) % count
        if with_rack:
            result[partition] = _rack_aware(
                brokers,
                with_rack,
                n_racks=n_racks,
                first=first,
                shift=shift,
                replication_factor=replication_factor,
            )
        else:
            followers = (
                brokers[_follower_index(first, shift, j, count)]
                for j in range(replication_factor - 1)
            )
            result[partition] = (brokers[first], *followers)
    return result


def _follower_index(first: int, shift: int, j: int, count: int) -> int:
    return (first + 1 + (shift + j) % (count - 1)) % count


def _rack_aware(
    brokers: Sequence[int],
    racks: Mapping[int, str],
    *,
    n_racks: int,
    first: int,
    shift: int,
    replication_factor: int,
) -> tuple[int, ...]:
    leader = brokers[first]
    replicas = [leader]
    racks_used = {racks[leader]}
    candidate = 0
    while len(replicas) < replication_factor:
        broker = brokers[_follower_index(first, shift * n_racks, candidate, len(brokers))]
        candidate += 1
        rack = racks[broker]
        rack_ok = rack not in racks_used or len(racks_used) == n_racks
        broker_ok = broker not in replicas or len(replicas) == len(brokers)
        if rack_ok and broker_ok:
            replicas.append(broker)
            racks_used.add(rack)
    return tuple(replicas)


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Brokers alternated by rack: racks in name order, brokers in id order within each."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    deepest = max(len(column) for column in columns)
    return [column[i] for i in range(deepest) for column in columns if i < len(column)]
