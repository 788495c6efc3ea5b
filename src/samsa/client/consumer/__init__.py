"""The consumer's partition assignors (the consumer itself is not built yet).

The assignor classes are in :mod:`samsa.client.consumer.assignors`; a consumer
picks them by name with :func:`assignor_for`.
"""

from samsa.client.consumer.assignors import Assignor, RebalanceProtocol, assignor_for

__all__ = ["Assignor", "RebalanceProtocol", "assignor_for"]
