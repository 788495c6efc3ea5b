"""Splitting a connection's byte stream into Kafka frames (no I/O).

Every request and response travels as a 4-byte big-endian signed size followed by
that many bytes. A size that is negative or larger than the broker's
``socket.request.max.bytes`` ends the connection: it is reported the moment its
prefix is complete, before any of the body it announces is kept, and a frame's
memory grows only with the bytes that actually arrive.
"""

from __future__ import annotations

import struct

from samsa.errors import SamsaError

__all__ = ["FrameDecoder", "FrameError"]

_SIZE = struct.Struct(">i")
_SIZE_BYTES = _SIZE.size
_SMALL_PIECE = 4096  # pieces of a split frame below this size are coalesced ...
_COALESCED = 65536  # ... into buffers of up to about this size


class FrameError(SamsaError):
    """Raised when a frame's size prefix is negative or larger than the allowed maximum;
    the connection it came from must be closed."""


class FrameDecoder:
    """Incremental splitter of a byte stream into Kafka frames (4-byte big-endian size prefix).

    Owned by one connection and not thread-safe. After it raises :class:`FrameError`
    the stream has lost its framing and the decoder must not be fed again.
    """

    __slots__ = ("_frame_size", "_max_frame_size", "_parts", "_prefix", "_received")

    def __init__(self, max_frame_size: int) -> None:
        if max_frame_size < 0:
            raise ValueError(f"max_frame_size must not be negative, not {max_frame_size}")
        self._max_frame_size = max_frame_size
        self._prefix = bytearray()  # a size prefix split across feeds
        # The received part of a frame split across feeds, joined once the frame is whole:
        # growing one bytearray instead would copy it again on every resize.
        self._parts: list[bytes | bytearray] = []
        self._received = 0  # bytes in _parts
        self._frame_size = -1  # size of the frame being received, -1 while reading a prefix

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame (its prefix included)."""
        if self._frame_size < 0:
            return len(self._prefix)
        return _SIZE_BYTES + self._received

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
        """The declared size of the frame being received, or -1 between frames."""
        return self._frame_size

    def clear(self) -> None:
        """Drop an incomplete frame (the connection is gone); the decoder is not fed again."""
        self._parts.clear()
        self._prefix.clear()
        self._received = 0
        self._frame_size = -1

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Append received bytes; return the complete frames (without the size prefix), in order.

        Raises :class:`FrameError` as soon as a size prefix is negative or larger than
        ``max_frame_size`` — before buffering or allocating anything for that frame's body.
        Frames that lie wholly inside ``data`` are copied once, straight out of it.
        """
        # Released on return, so a caller's bytearray can be resized again even after an error.
        with memoryview(data) as raw, raw.cast("B") as view:
            return self._split(view)

    def _split(self, view: memoryview) -> list[bytes]:
        end = len(view)
        position = 0
        frames: list[bytes] = []
        while position < end:
            if self._frame_size < 0:
                if not self._prefix and end - position >= _SIZE_BYTES:
                    (size,) = _SIZE.unpack_from(view, position)
                    position += _SIZE_BYTES
                else:
                    take = min(_SIZE_BYTES - len(self._prefix), end - position)
                    self._prefix += view[position : position + take]
                    position += take
                    if len(self._prefix) < _SIZE_BYTES:
                        break
                    (size,) = _SIZE.unpack_from(self._prefix)
                    self._prefix.clear()
                if size < 0 or size > self._max_frame_size:
                    raise FrameError(
                        f"frame size {size} is outside 0..{self._max_frame_size} "
                        "(socket.request.max.bytes)"
                    )
                if end - position >= size:
                    frames.append(bytes(view[position : position + size]))
                    position += size
                    continue
                self._frame_size = size
            take = min(self._frame_size - self._received, end - position)
            self._keep(view[position : position + take])
            position += take
            if self._received == self._frame_size:
                frames.append(b"".join(self._parts))
                self._parts.clear()
                self._received = 0
                self._frame_size = -1
        return frames

    def _keep(self, piece: memoryview) -> None:
        """Hold part of a frame's body; small pieces share one buffer so that a peer
        sending a byte at a time cannot make the per-object overhead outweigh the data."""
        last = self._parts[-1] if self._parts else None
        if len(piece) < _SMALL_PIECE and isinstance(last, bytearray) and len(last) < _COALESCED:
            last += piece
        elif len(piece) < _SMALL_PIECE:
            self._parts.append(bytearray(piece))
        else:
            self._parts.append(bytes(piece))
        self._received += len(piece)
