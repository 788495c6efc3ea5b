"""The producer: :class:`AsyncProducer` (asyncio) and :class:`Producer` (blocking)."""

from samsa.client.producer.core import AsyncProducer
from samsa.client.producer.sync import Producer
from samsa.client.producer.types import (
    BatchDeliveryCallback,
    BatchMetadata,
    ConsumerGroupMetadata,
    DeliveryCallback,
    RecordMetadata,
)

__all__ = [
    "AsyncProducer",
    "BatchDeliveryCallback",
    "BatchMetadata",
    "ConsumerGroupMetadata",
    "DeliveryCallback",
    "Producer",
    "RecordMetadata",
]
