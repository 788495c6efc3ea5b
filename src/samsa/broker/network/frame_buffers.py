"""Buffers that large request frames are received into, reused from one request to the next.

A frame larger than a connection's shared read buffer is received straight into
a buffer of its own (:mod:`samsa.broker.network.frame_receiver`), and the Produce path
hands slices of it to the log, which assigns offsets in place and writes from
it. Allocating such a buffer per request would cost a ``mmap``/``munmap`` (or a
heap growth and trim) and a page fault per page of every request, so buffers
go back here once their request has been handled and the next large frame
takes one of them.

Buffers are anonymous memory maps with power-of-two capacities (at least
128 KiB): a page is committed only when the kernel writes a received byte into
it, so a frame announced large and sent slowly holds no more memory than the
bytes that have arrived, as before. At most ``retained_bytes`` of free buffers
are kept; a buffer beyond that, or one still viewed by someone (a view kept past
its request would see the next request's bytes), is not reused and is unmapped
once nothing refers to it. Free buffers are all unmapped once no large frame
has taken one for ``idle_release_s`` (30 s), so an idle broker's RSS goes back
down after a burst of produce traffic.

Owned by the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import mmap

__all__ = ["FrameBufferPool"]

log = logging.getLogger(__name__)

MIN_CAPACITY = 128 * 1024
DEFAULT_RETAINED_BYTES = 16 * 1024 * 1024
DEFAULT_IDLE_RELEASE_S = 30.0


def capacity_for(size: int) -> int:
    """The capacity of the buffers that frames of ``size`` bytes are received into."""
    return max(MIN_CAPACITY, 1 << (size - 1).bit_length())


class FrameBufferPool:
    """Free receive buffers by capacity, at most ``retained_bytes`` of them in all."""

    def __init__(
        self,
        retained_bytes: int = DEFAULT_RETAINED_BYTES,
        idle_release_s: float = DEFAULT_IDLE_RELEASE_S,
    ) -> None:
        self.retained_bytes = retained_bytes
        self.idle_release_s = idle_release_s
        self.retained = 0  # bytes of capacity in the free lists
        self.created = 0  # buffers mapped since start (a steady load maps none)
        self._free: dict[int, list[mmap.mmap]] = {}
        self._taken_lately = False  # a buffer was taken since the last idle check
        self._idle_check: asyncio.TimerHandle | None = None

    def take(self, size: int) -> mmap.mmap:
        """A buffer of at least ``size`` bytes; its contents are undefined."""
        capacity = capacity_for(size)
        self._taken_lately = True
        free = self._free.get(capacity)
        if free:
            self.retained -= capacity
            return free.pop()
        self.created += 1
        return mmap.mmap(-1, capacity)

    def give_back(self, buffer: mmap.mmap) -> None:
        """Return a buffer nothing will read or write through again."""
        capacity = len(buffer)
        if self.retained + capacity > self.retained_bytes:
            self._unmap(buffer)
            return
        try:
            # Refused while any view of it is alive; on a free map, a same-size mremap.
            buffer.resize(capacity)
        except BufferError:
            log.debug("a %d-byte receive buffer is still viewed: not reused", capacity)
            return
        except (OSError, SystemError):  # no mremap on this system: nothing proves it unviewed
            self._unmap(buffer)
            return
        self._free.setdefault(capacity, []).append(buffer)
        self.retained += capacity
        if self._idle_check is None:
            self._idle_check = asyncio.get_running_loop().call_later(
                self.idle_release_s, self._release_if_idle
            )

    def _release_if_idle(self) -> None:
        self._idle_check = None
        if not self._taken_lately:
            self.clear()
            return
        self._taken_lately = False
        if self._free:
            self._idle_check = asyncio.get_running_loop().call_later(
                self.idle_release_s, self._release_if_idle
            )

    def clear(self) -> None:
        """Unmap every free buffer (the broker is stopping, or has been idle)."""
        for buffers in self._free.values():
            for buffer in buffers:
                self._unmap(buffer)
        self._free.clear()
        self.retained = 0

    @staticmethod
    def _unmap(buffer: mmap.mmap) -> None:
        with contextlib.suppress(BufferError):  # still viewed: unmapped when the last view goes
            buffer.close()
