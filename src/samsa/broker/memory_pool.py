"""Memory held by received requests: ``queued.max.request.bytes`` and giving freed memory back.

Kafka's ``queued.max.request.bytes`` (default -1: no limit) bounds the bytes of
requests a broker holds, from the moment a frame's size prefix is read until
the request has been handled. samsa accounts the same way — a frame's declared
size is reserved when its prefix arrives (nothing is allocated from it: the
bytes are kept only as they come) and released once its response is written —
and, like Kafka, stops reading from a connection whose next frame does not fit
until other requests release memory. A frame is always admitted when nothing
else is held, so a limit below ``socket.request.max.bytes`` slows large
requests down but never stalls them for good. The bytes already read past the
prefix when a connection is stopped (one socket read) are held beyond the limit.

A connection that dies holding half of a large frame leaves its pieces spread
through the allocator's heap, which glibc returns to the system only from its
top: :func:`release_freed_memory` asks glibc to give back every free page
(``malloc_trim``), in a worker thread, so a burst of abandoned frames does not
stay in the broker's RSS.

Owned by the event loop; not thread-safe (the trim runs off the loop but
touches only the C allocator).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import logging
from collections import deque
from collections.abc import Callable

__all__ = ["RequestMemoryPool", "release_freed_memory"]

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


def _load_malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


class _Trimmer:
    """Runs ``malloc_trim`` in a worker thread, one run at a time."""

    def __init__(self) -> None:
        self._trim = _load_malloc_trim()
        self._pending = False

    def request(self) -> None:
        if self._trim is None or self._pending:
            return
        self._pending = True
        future = asyncio.get_running_loop().run_in_executor(None, self._trim, 0)
        future.add_done_callback(self._done)

    def _done(self, _future: asyncio.Future[int]) -> None:
        self._pending = False


_trimmer = _Trimmer()


def release_freed_memory() -> None:
    """Return the allocator's free pages to the system soon (once, however often it is called
    before that happens). Without glibc, does nothing."""
    _trimmer.request()
