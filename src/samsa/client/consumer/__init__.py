"""The consumer: :class:`AsyncConsumer` (asyncio) and :class:`Consumer` (blocking).

The partition assignors are in :mod:`samsa.client.consumer.assignors`; a consumer
picks them by name (``partition.assignment.strategy``) with :func:`assignor_for`.
"""

from samsa.client.consumer.assignors import Assignor, RebalanceProtocol, assignor_for
from samsa.client.consumer.core import AsyncConsumer, CommitCallback, NoOffsetForPartitionError
from samsa.client.consumer.sync import Consumer
from samsa.client.consumer.types import ConsumerRecord, RebalanceListener

__all__ = [
    "Assignor",
    "AsyncConsumer",
    "CommitCallback",
    "Consumer",
    "ConsumerRecord",
    "NoOffsetForPartitionError",
    "RebalanceListener",
    "RebalanceProtocol",
    "assignor_for",
]
