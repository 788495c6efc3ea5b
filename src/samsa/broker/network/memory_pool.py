"""Memory held by received requests: ``queued.max.request.bytes``.

Kafka's ``queued.max.request.bytes`` (default -1: no limit) bounds the bytes of
requests a broker holds, from the moment a frame's size prefix is read until
the request has been handled. samsa accounts the same way — a frame's declared
size is reserved when its prefix arrives (no memory is committed from it: a
page of its buffer is touched only when bytes land in it) and released once its
response is written —
and, like Kafka, stops reading from a connection whose next frame does not fit
until other requests release memory. A frame is always admitted when nothing
else is held, so a limit below ``socket.request.max.bytes`` slows large
requests down but never stalls them for good. The bytes already read past the
prefix when a connection is stopped (one socket read) are held beyond the limit.

The buffers frames are received into are in :mod:`samsa.broker.network.frame_buffers`
(a frame cut off midway goes back there, or is unmapped).

Owned by the event loop; not thread-safe.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Callable

__all__ = ["RequestMemoryPool"]

log = logging.getLogger(__name__)


class RequestMemoryPool:
    """Bytes reserved by frames being received, queued or handled, under ``limit`` (-1: none).

    A waiter is a callable that tries its reservation again and returns True when it got
    it; waiters are woken in order whenever memory is released.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._waiters: deque[Callable[[], bool]] = deque()

    @property
    def bounded(self) -> bool:
        return self.limit >= 0

    def try_reserve(self, size: int) -> bool:
        if self.limit >= 0 and self.used and self.used + size > self.limit:
            return False
        self.used += size
        return True

    def add(self, size: int) -> None:
        """Count bytes already held whatever the limit (frames read in the same chunk)."""
        self.used += size

    def release(self, size: int) -> None:
        self.used -= size
        while self._waiters and (self.limit < 0 or self.used < self.limit):
            if not self._waiters[0]():
                break
            self._waiters.popleft()

    def wait(self, retry: Callable[[], bool]) -> None:
        self._waiters.append(retry)

    def forget(self, retry: Callable[[], bool]) -> None:
        with contextlib.suppress(ValueError):  # not waiting
            self._waiters.remove(retry)
