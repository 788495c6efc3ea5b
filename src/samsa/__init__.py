"""samsa: a streaming platform in Python that speaks the Apache Kafka wire protocol."""

from samsa.client import Admin, AsyncAdmin, AsyncProducer, Producer
from samsa.errors import KafkaError, SamsaError

__version__ = "0.1.0"

__all__ = [
    "Admin",
    "AsyncAdmin",
    "AsyncProducer",
    "KafkaError",
    "Producer",
    "SamsaError",
    "__version__",
]
