"""Receiving a connection's request frames in place, for an ``asyncio.BufferedProtocol``.

The transport asks for a buffer (:meth:`FrameReceiver.get_buffer`), the kernel
writes the received bytes straight into it, and :meth:`FrameReceiver.received`
splits them into frames (the bytes after each 4-byte big-endian size prefix):

- Between frames, and for frames that fit in it, reads go into one shared
  64 KiB buffer per connection (an anonymous map: a connection exchanging
  small requests touches only its first pages). Each small frame is copied out of it once,
  when complete: as ``bytes``, or as a ``bytearray`` for a Produce request
  (api key 0), whose records the log rewrites in place. The bytes of a frame
  split across reads stay in the shared buffer (moved to its front when a
  later read needs the room).
- A frame larger than the shared buffer is received into a buffer of its own
  from the broker's :class:`~samsa.broker.network.frame_buffers.FrameBufferPool`: the
  bytes of it that came with its prefix are copied there, and the kernel writes
  the rest straight into it. The frame is a writable ``memoryview`` of that
  buffer, which goes back to the pool when :meth:`Frame.release` is called —
  after the request has been handled, never before: its handler, the log
  append and anything else that reads the frame must be done with it. After a
  large frame the next read is kept short (4 KiB), so that the head of a
  following large frame is not copied through the shared buffer at length.

A size prefix that is negative or larger than ``max_frame_size``
(``socket.request.max.bytes``) raises :class:`~samsa.protocol.framing.FrameError`
before anything is allocated for that frame; the pooled buffer is taken only
when the transport next asks for room (not while reading is paused, e.g. for
``queued.max.request.bytes``), and its pages are committed only as bytes arrive.

Owned by one connection, on the event loop; not thread-safe. After it raises,
the stream has lost its framing and the receiver must not be used again.
"""

from __future__ import annotations

import contextlib
import mmap
import struct

from samsa.broker.network.frame_buffers import FrameBufferPool
from samsa.protocol.framing import FrameError

__all__ = ["Frame", "FrameReceiver"]

_SIZE = struct.Struct(">i")
_SIZE_BYTES = _SIZE.size
SHARED_BUFFER_BYTES = 64 * 1024
HEAD_READ_BYTES = 4096
"""A read just after a large frame asks for this much: the head of the next frame."""
_PRODUCE_KEY = b"\0\0"


class Frame:
    """One received frame, without its size prefix: ``data`` is ``bytes``, a ``bytearray``, or
    a writable ``memoryview`` of a pooled buffer that :meth:`release` gives back."""

    __slots__ = ("_buffer", "_pool", "data")

    def __init__(
        self,
        data: bytes | bytearray | memoryview,
        buffer: mmap.mmap | None = None,
        pool: FrameBufferPool | None = None,
    ) -> None:
        self.data = data
        self._buffer = buffer
        self._pool = pool

    def __len__(self) -> int:
        return len(self.data)

    def release(self) -> None:
        """The request is done with: a pooled buffer may take another frame (idempotent)."""
        buffer, self._buffer = self._buffer, None
        if buffer is None:
            return
        data = self.data
        self.data = b""
        if isinstance(data, memoryview):
            with contextlib.suppress(BufferError):  # still exported: the pool sees it
                data.release()
        assert self._pool is not None
        self._pool.give_back(buffer)


class FrameReceiver:
    """Frames in place out of reads into buffers this receiver hands out."""

    __slots__ = (
        "_after_large",
        "_end",
        "_frame_size",
        "_large",
        "_large_received",
        "_large_view",
        "_max_frame_size",
        "_pool",
        "_shared",
        "_shared_view",
        "_start",
    )

    def __init__(
        self,
        max_frame_size: int,
        pool: FrameBufferPool,
        shared_buffer_bytes: int = SHARED_BUFFER_BYTES,
    ) -> None:
        if max_frame_size < 0:
            raise ValueError(f"max_frame_size must not be negative, not {max_frame_size}")
        self._max_frame_size = max_frame_size
        self._pool = pool
        self._shared = mmap.mmap(-1, shared_buffer_bytes)
        self._shared_view = memoryview(self._shared)
        self._start = 0  # first byte of _shared not yet made into a frame
        self._end = 0  # end of the bytes received into _shared
        self._frame_size = -1  # size of the large frame being received, -1 if none
        self._large: mmap.mmap | None = None  # its buffer, once taken from the pool
        self._large_view: memoryview | None = None
        self._large_received = 0  # bytes of it in _large
        self._after_large = False

    @property
    def max_frame_size(self) -> int:
        return self._max_frame_size

    @max_frame_size.setter
    def max_frame_size(self, size: int) -> None:
        """A new cap for the frames whose size prefix has not been read yet."""
        if size < 0:
            raise ValueError(f"max_frame_size must not be negative, not {size}")
        self._max_frame_size = size

    @property
    def frame_size(self) -> int:
        """The declared size of the frame being received (its prefix read), or -1."""
        if self._frame_size >= 0:
            return self._frame_size
        if self._end - self._start >= _SIZE_BYTES:
            return int(_SIZE.unpack_from(self._shared, self._start)[0])
        return -1

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame (its prefix included)."""
        if self._frame_size >= 0:
            return _SIZE_BYTES + self._large_received + self._end - self._start
        return self._end - self._start

    def get_buffer(self) -> memoryview:
        """Where the next received bytes go (never empty)."""
        if self._frame_size >= 0:
            if self._large_view is None:
                self._take_large()
            assert self._large_view is not None
            return self._large_view[self._large_received : self._frame_size]
        start, end = self._start, self._end
        if start == end:
            start = end = self._start = self._end = 0
        elif start > 0:
            # The head of an incomplete frame: to the front, so that the frame fits.
            self._shared_view[: end - start] = self._shared_view[start:end]  # a memmove
            end = self._end = end - start
            start = self._start = 0
        limit = len(self._shared)
        if self._after_large:
            limit = min(limit, end + HEAD_READ_BYTES)
        return self._shared_view[end:limit]

    def _take_large(self) -> None:
        size = self._frame_size
        buffer = self._pool.take(size)
        view = memoryview(buffer)
        head = self._end - self._start
        view[:head] = self._shared_view[self._start : self._end]
        self._large, self._large_view, self._large_received = buffer, view, head
        self._start = self._end = 0

    def received(self, size: int) -> list[Frame]:
        """Take ``size`` bytes written into the last buffer handed out; return the frames now
        complete, in order. Raises :class:`FrameError` for a size prefix out of range."""
        if self._large_view is not None:
            self._large_received += size
            if self._large_received < self._frame_size:
                return []
            return [self._large_frame()]
        self._end += size
        return self._split()

    def _large_frame(self) -> Frame:
        assert self._large is not None and self._large_view is not None
        frame = Frame(self._large_view[: self._frame_size], self._large, self._pool)
        self._large_view.release()  # the frame's slice keeps the buffer viewed
        self._large = self._large_view = None
        self._large_received = 0
        self._frame_size = -1
        self._after_large = True
        return frame

    def _split(self) -> list[Frame]:
        shared, view = self._shared, self._shared_view
        position, end = self._start, self._end
        capacity = len(shared)
        frames: list[Frame] = []
        while end - position >= _SIZE_BYTES:
            (size,) = _SIZE.unpack_from(shared, position)
            if size < 0 or size > self._max_frame_size:
                raise FrameError(
                    f"frame size {size} is outside 0..{self._max_frame_size} "
                    "(socket.request.max.bytes)"
                )
            if size + _SIZE_BYTES > capacity:
                self._frame_size = size  # received into a buffer of its own, from here on
                position += _SIZE_BYTES
                break
            body = position + _SIZE_BYTES
            if end - body < size:
                break
            piece = view[body : body + size]
            if piece[:2] == _PRODUCE_KEY:
                frames.append(Frame(bytearray(piece)))
            else:
                frames.append(Frame(bytes(piece)))
            position = body + size
        if frames:
            self._after_large = False
        self._start = position
        return frames

    def clear(self) -> None:
        """Drop an incomplete frame (the connection is gone); the receiver is not used again."""
        buffer, view = self._large, self._large_view
        self._large = self._large_view = None
        self._frame_size = -1
        self._large_received = 0
        self._start = self._end = 0
        if view is not None:
            with contextlib.suppress(BufferError):
                view.release()
        if buffer is not None:
            self._pool.give_back(buffer)
