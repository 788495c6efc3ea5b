"""samsa: a streaming platform in Python that speaks the Apache Kafka wire protocol.

The client classes are imported on first use (PEP 562), so ``samsa serve`` and
the command-line tools do not pay for the client library unless they use it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from samsa.errors import KafkaError, SamsaError

if TYPE_CHECKING:
    from samsa.client import (
        Admin,
        AsyncAdmin,
        AsyncConsumer,
        AsyncProducer,
        Consumer,
        Producer,
    )

from samsa._version import __version__

__all__ = [
    "Admin",
    "AsyncAdmin",
    "AsyncConsumer",
    "AsyncProducer",
    "Consumer",
    "KafkaError",
    "Producer",
    "SamsaError",
    "__version__",
]

_LAZY = {"Admin", "AsyncAdmin", "AsyncConsumer", "AsyncProducer", "Consumer", "Producer"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module("samsa.client"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'samsa' has no attribute {name!r}")
