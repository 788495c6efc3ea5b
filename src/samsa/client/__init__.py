"""samsa's Kafka clients: an asyncio core with a blocking facade on a private loop thread.

They are Kafka clients, not samsa-only ones: they speak the wire protocol to any
broker and use nothing of samsa's broker, storage or coordinators.
"""

from samsa.client.admin import Admin, AsyncAdmin
from samsa.client.consumer import AsyncConsumer, Consumer
from samsa.client.producer import AsyncProducer, Producer

__all__ = ["Admin", "AsyncAdmin", "AsyncConsumer", "AsyncProducer", "Consumer", "Producer"]
