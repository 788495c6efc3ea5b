"""What the producer hands back: the metadata of a delivered record, and the callback type."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "BatchDeliveryCallback",
    "BatchMetadata",
    "ConsumerGroupMetadata",
    "DeliveryCallback",
    "RecordMetadata",
]


@dataclass(slots=True, unsafe_hash=True)  # hashable as a frozen one, cheaper to build
class RecordMetadata:
    """Where a record landed: its topic, partition, offset and timestamp (read-only by
    convention: a frozen dataclass costs ~1 µs more per record to build).

    ``offset`` is -1 with ``acks=0`` (the broker does not answer). ``timestamp`` is the
    record's create time, or the broker's append time for topics with
    ``message.timestamp.type=LogAppendTime``.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int = -1
    serialized_value_size: int = -1


DeliveryCallback = Callable[[RecordMetadata | None, BaseException | None], object]
"""``on_delivery(metadata, error)``: exactly one of them is None (Java's ``Callback``).

It runs on the producer's event-loop thread: keep it short, and do not call the
producer's blocking methods (``flush``, ``close``) from it.
"""


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """Where a batch of encoded records landed (what ``send_batch`` resolves to).

    Its records have offsets ``base_offset`` … ``base_offset + record_count - 1``;
    ``base_offset`` is -1 with ``acks=0``.
    """

    topic: str
    partition: int
    base_offset: int
    record_count: int


BatchDeliveryCallback = Callable[[BatchMetadata | None, BaseException | None], object]
"""``on_delivery(metadata, error)`` of ``send_batch``: exactly one of them is None; runs on
the producer's event-loop thread, like :data:`DeliveryCallback`."""


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadata:
    """The consumer group a transaction commits offsets for (Java's ``groupMetadata()``).

    A consumer in the group supplies its generation and member id, so the coordinator
    rejects offsets from a member that has been replaced (KIP-447); a group id alone
    (generation -1) commits without that check.
    """

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
