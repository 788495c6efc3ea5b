"""The producer: :class:`AsyncProducer` (asyncio) and :class:`Producer` (blocking)."""

from samsa.client.producer.core import AsyncProducer
from samsa.client.producer.sync import Producer
from samsa.client.producer.types import DeliveryCallback, RecordMetadata

__all__ = ["AsyncProducer", "DeliveryCallback", "Producer", "RecordMetadata"]
