"""What the consumer hands back: records, and the rebalance listener it calls."""

from __future__ import annotations

from collections.abc import Awaitable, Collection
from dataclasses import dataclass
from typing import Any, Protocol

from samsa.records.record import Header
from samsa.types import TopicPartition

__all__ = ["CREATE_TIME", "LOG_APPEND_TIME", "ConsumerRecord", "RebalanceListener"]

CREATE_TIME = 0
LOG_APPEND_TIME = 1


@dataclass(slots=True, unsafe_hash=True)  # hashable as a frozen one, cheaper to build
class ConsumerRecord:
    """One record as ``poll()`` returns it (treat it as read-only; it is not frozen
    because a frozen dataclass costs more to build than the rest of a record's decoding).

    ``key`` and ``value`` are bytes (or None), or what ``key.deserializer`` /
    ``value.deserializer`` made of them. ``timestamp`` is epoch milliseconds of
    ``timestamp_type`` (0 CreateTime, 1 LogAppendTime). ``leader_epoch`` is the
    batch's partition leader epoch (-1 when unknown).
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: tuple[Header, ...] = ()
    leader_epoch: int = -1
    serialized_key_size: int = -1
    serialized_value_size: int = -1

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class RebalanceListener(Protocol):
    """Called by the consumer around a group rebalance (Java's ConsumerRebalanceListener).

    Each method may be a plain function or a coroutine function (the async consumer
    awaits it). They run inside ``poll()``, ``close()`` or ``unsubscribe()``:

    - ``on_partitions_revoked`` before partitions are given up while the member is
      still in the group (commit their offsets here); with the cooperative protocol
      only the partitions that move are revoked;
    - ``on_partitions_assigned`` after an assignment arrives, with the partitions
      added (positions are not fetched yet: seek here to start elsewhere);
    - ``on_partitions_lost`` when the member was dropped from the group (session or
      poll timeout, fenced): the partitions may already belong to another member,
      so committing them is pointless.

    The blocking ``Consumer`` runs them on the thread that called ``poll()``, so they
    may call the consumer's blocking methods (``commit``, ``seek``, ``position``…).
    """

    def on_partitions_revoked(
        self, partitions: Collection[TopicPartition]
    ) -> Awaitable[None] | None: ...

    def on_partitions_assigned(
        self, partitions: Collection[TopicPartition]
    ) -> Awaitable[None] | None: ...

    def on_partitions_lost(
        self, partitions: Collection[TopicPartition]
    ) -> Awaitable[None] | None: ...
