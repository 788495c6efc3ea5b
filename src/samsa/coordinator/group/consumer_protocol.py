"""Moved to :mod:`samsa.protocol.consumer_protocol`, which clients share; kept for old imports.

The names and ``__all__`` are the new module's, so the two cannot drift apart.
"""

from samsa.protocol.consumer_protocol import *  # noqa: F403
from samsa.protocol.consumer_protocol import __all__  # noqa: F401
