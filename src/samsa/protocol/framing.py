"""Kafka's framing and its one error (no I/O).

Every request and response travels as a 4-byte big-endian signed size followed by
that many bytes. A size that is negative or larger than the broker's
``socket.request.max.bytes`` ends the connection: the broker's
:class:`~samsa.broker.network.frame_receiver.FrameReceiver` raises :class:`FrameError`
the moment the prefix is complete, before it takes any memory for the body.
"""

from __future__ import annotations

from samsa.errors import SamsaError

__all__ = ["FrameError"]


class FrameError(SamsaError):
    """Raised when a frame's size prefix is negative or larger than the allowed maximum;
    the connection it came from must be closed."""
