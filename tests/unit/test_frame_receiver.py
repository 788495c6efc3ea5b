"""FrameReceiver: request frames received in place, as a BufferedProtocol's transport fills them.

Each test plays the kernel: it asks the receiver for a buffer, writes the next
bytes of the stream into it (at most ``read_size`` at a time), and reports how
many it wrote.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Iterable

import pytest

from samsa.broker.network.frame_buffers import FrameBufferPool
from samsa.broker.network.frame_receiver import SHARED_BUFFER_BYTES, Frame, FrameReceiver
from samsa.protocol.framing import FrameError

MAX_FRAME_SIZE = 8 * 1024 * 1024


def framed(*bodies: bytes) -> bytes:
    return b"".join(len(body).to_bytes(4, "big") + body for body in bodies)


def deliver(receiver: FrameReceiver, stream: bytes, read_sizes: Iterable[int]) -> list[Frame]:
    """Write ``stream`` into the buffers ``receiver`` hands out, in reads of the given sizes."""
    frames: list[Frame] = []
    position = 0
    for read_size in itertools.cycle(read_sizes):
        if position >= len(stream):
            return frames
        buffer = receiver.get_buffer()
        assert len(buffer) > 0
        size = min(len(buffer), read_size, len(stream) - position)
        buffer[:size] = stream[position : position + size]
        position += size
        frames += receiver.received(size)
    raise AssertionError("unreachable")


def contents(frames: list[Frame]) -> list[bytes]:
    return [bytes(frame.data) for frame in frames]


def new_receiver(pool: FrameBufferPool | None = None) -> FrameReceiver:
    return FrameReceiver(MAX_FRAME_SIZE, pool if pool is not None else FrameBufferPool())


def test_frames_arriving_a_byte_per_read_come_out_whole_and_in_order() -> None:
    bodies = [b"first", b"", b"a third, longer frame" * 10]
    receiver = new_receiver()
    assert contents(deliver(receiver, framed(*bodies), [1])) == bodies
    assert receiver.buffered == 0


def test_many_frames_in_one_read_all_come_out_in_order() -> None:
    bodies = [bytes([i % 256]) * i for i in range(300)]
    stream = framed(*bodies)
    receiver = new_receiver()
    assert contents(deliver(receiver, stream, [len(stream)])) == bodies


def test_a_frame_larger_than_the_shared_buffer_arrives_whole_in_one_pooled_buffer() -> None:
    body = bytes(range(256)) * (3 * SHARED_BUFFER_BYTES // 256 + 7)
    pool = FrameBufferPool()
    receiver = new_receiver(pool)
    frames = deliver(receiver, framed(b"before", body, b"after"), [1, 70_000, 3, 5000])
    assert contents(frames) == [b"before", body, b"after"]
    assert isinstance(frames[1].data, memoryview) and not frames[1].data.readonly
    assert pool.created == 1


def test_a_large_frame_split_into_tiny_reads_arrives_whole() -> None:
    body = bytes(range(251)) * 400  # ~100 KB, larger than the shared buffer
    receiver = new_receiver()
    assert contents(deliver(receiver, framed(body, b"x"), [1, 2, 3, 4096])) == [body, b"x"]


def on_a_loop(scenario: Callable[[], None]) -> None:
    """Run ``scenario`` on an event loop, as a connection runs (the pool sets timers)."""

    async def run() -> None:
        scenario()

    asyncio.run(run())


def test_released_large_frames_reuse_one_buffer_across_requests() -> None:
    pool = FrameBufferPool()
    receiver = new_receiver(pool)

    def scenario() -> None:
        for i in range(20):
            body = bytes([i]) * (200_000 + i)
            (frame,) = deliver(receiver, framed(body), [65536])
            assert bytes(frame.data) == body
            frame.release()

    on_a_loop(scenario)
    assert pool.created == 1


def test_a_large_frame_still_viewed_after_release_is_not_reused() -> None:
    pool = FrameBufferPool()
    receiver = new_receiver(pool)

    def scenario() -> None:
        (first,) = deliver(receiver, framed(b"a" * 200_000), [65536])
        kept = first.data[10:20]  # held past the request, against the rules
        first.release()
        (second,) = deliver(receiver, framed(b"b" * 200_000), [65536])
        assert bytes(kept) == b"a" * 10
        assert bytes(second.data) == b"b" * 200_000

    on_a_loop(scenario)
    assert pool.created == 2


def test_free_buffers_are_unmapped_once_no_large_frame_came_for_a_while() -> None:
    pool = FrameBufferPool(idle_release_s=0.01)
    receiver = new_receiver(pool)

    async def scenario() -> None:
        (frame,) = deliver(receiver, framed(b"c" * 200_000), [65536])
        frame.release()
        assert pool.retained > 0
        deadline = time.monotonic() + 30
        while pool.retained and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    asyncio.run(scenario())
    assert pool.retained == 0


def test_an_oversized_frame_is_refused_from_its_prefix_before_any_buffer_is_taken() -> None:
    pool = FrameBufferPool()
    receiver = FrameReceiver(100_000, pool)
    buffer = receiver.get_buffer()
    buffer[:4] = (100_001).to_bytes(4, "big")
    with pytest.raises(FrameError):
        receiver.received(4)
    assert pool.created == 0


def test_a_negative_frame_size_is_refused() -> None:
    receiver = new_receiver()
    with pytest.raises(FrameError):
        deliver(receiver, b"\xff\xff\xff\xff", [4])


def test_a_large_frame_takes_its_buffer_only_when_more_bytes_are_wanted() -> None:
    pool = FrameBufferPool()
    receiver = new_receiver(pool)
    buffer = receiver.get_buffer()
    buffer[:8] = (1_000_000).to_bytes(4, "big") + b"head"
    assert receiver.received(8) == []
    assert receiver.frame_size == 1_000_000
    assert pool.created == 0  # reading paused here (queued.max.request.bytes) takes nothing
    receiver.get_buffer()
    assert pool.created == 1


def test_produce_frames_come_out_writable_and_others_as_bytes() -> None:
    produce = b"\x00\x00\x00\x09" + b"rest of a produce request"
    metadata = b"\x00\x03\x00\x0c" + b"rest of a metadata request"
    frames = deliver(new_receiver(), framed(produce, metadata), [1000])
    assert isinstance(frames[0].data, bytearray)
    assert isinstance(frames[1].data, bytes)


def test_buffered_counts_the_bytes_of_an_incomplete_frame() -> None:
    receiver = new_receiver()
    deliver(receiver, framed(b"0123456789")[:9], [9])
    assert receiver.buffered == 9
    assert receiver.frame_size == 10


def test_the_frame_size_cap_can_be_raised_for_later_frames() -> None:
    receiver = FrameReceiver(10, FrameBufferPool())
    receiver.max_frame_size = 100
    assert contents(deliver(receiver, framed(b"z" * 50), [100])) == [b"z" * 50]
