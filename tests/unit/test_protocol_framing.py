"""FrameDecoder: splitting a byte stream into size-prefixed Kafka frames."""

from __future__ import annotations

import itertools

import pytest

from samsa.errors import SamsaError
from samsa.protocol import FrameDecoder, FrameError

MAX_FRAME_SIZE = 1024


def framed(*bodies: bytes) -> bytes:
    return b"".join(len(body).to_bytes(4, "big") + body for body in bodies)


def test_frames_arriving_byte_by_byte_are_returned_whole_and_in_order() -> None:
    decoder = FrameDecoder(MAX_FRAME_SIZE)
    stream = framed(b"first", b"", b"third frame")
    frames: list[bytes] = []
    for i in range(len(stream)):
        frames += decoder.feed(stream[i : i + 1])
    assert frames == [b"first", b"", b"third frame"]
    assert decoder.buffered == 0


def test_many_frames_in_one_chunk_are_all_returned_in_order() -> None:
    bodies = [bytes([i]) * i for i in range(200)]
    decoder = FrameDecoder(MAX_FRAME_SIZE)
    assert decoder.feed(framed(*bodies)) == bodies


def test_a_chunk_ending_inside_a_frame_keeps_the_rest_for_the_next_feed() -> None:
    stream = framed(b"complete", b"split across two chunks", b"last")
    cut = len(framed(b"complete")) + 10
    decoder = FrameDecoder(MAX_FRAME_SIZE)
    assert decoder.feed(stream[:cut]) == [b"complete"]
    assert decoder.feed(stream[cut:]) == [b"split across two chunks", b"last"]


def test_a_large_frame_arriving_in_chunks_of_mixed_sizes_is_reassembled() -> None:
    body = bytes(range(256)) * 800
    stream = framed(body, b"next")
    decoder = FrameDecoder(len(body))
    frames: list[bytes] = []
    position = 0
    for size in itertools.cycle([1, 700, 5000, 20_000, 3]):
        frames += decoder.feed(stream[position : position + size])
        position += size
        if position >= len(stream):
            break
    assert frames == [body, b"next"]


def test_buffered_counts_the_bytes_held_for_an_incomplete_frame() -> None:
    decoder = FrameDecoder(MAX_FRAME_SIZE)
    decoder.feed(b"\x00\x00")
    assert decoder.buffered == 2
    decoder.feed(b"\x00\x0aabc")
    assert decoder.buffered == 7


def test_bytearray_and_memoryview_chunks_are_accepted() -> None:
    decoder = FrameDecoder(MAX_FRAME_SIZE)
    stream = framed(b"one", b"two")
    frames = decoder.feed(bytearray(stream[:5])) + decoder.feed(memoryview(stream)[5:])
    assert frames == [b"one", b"two"]


def test_a_frame_of_exactly_the_maximum_size_is_accepted() -> None:
    decoder = FrameDecoder(MAX_FRAME_SIZE)
    body = b"m" * MAX_FRAME_SIZE
    assert decoder.feed(framed(body)) == [body]


def test_a_returned_frame_does_not_change_when_the_fed_buffer_is_reused() -> None:
    decoder = FrameDecoder(MAX_FRAME_SIZE)
    buffer = bytearray(framed(b"abcd"))
    [frame] = decoder.feed(buffer)
    buffer[4:] = b"zzzz"
    assert frame == b"abcd"


@pytest.mark.parametrize(
    "size",
    [-1, -(2**31), 2**31 - 1, MAX_FRAME_SIZE + 1],
    ids=["minus-one", "most-negative", "int32-max", "max-plus-one"],
)
def test_a_bad_size_prefix_is_rejected_before_any_of_its_body_arrives(size: int) -> None:
    decoder = FrameDecoder(MAX_FRAME_SIZE)
    with pytest.raises(FrameError):
        decoder.feed(size.to_bytes(4, "big", signed=True))


def test_a_bad_size_prefix_split_across_feeds_is_rejected_when_its_last_byte_arrives() -> None:
    decoder = FrameDecoder(MAX_FRAME_SIZE)
    prefix = (MAX_FRAME_SIZE + 1).to_bytes(4, "big")
    for i in range(3):
        assert decoder.feed(prefix[i : i + 1]) == []
    with pytest.raises(FrameError):
        decoder.feed(prefix[3:])


def test_a_bad_size_prefix_after_good_frames_is_rejected_in_the_same_feed() -> None:
    decoder = FrameDecoder(MAX_FRAME_SIZE)
    with pytest.raises(FrameError):
        decoder.feed(framed(b"fine") + (-1).to_bytes(4, "big", signed=True))


def test_frame_error_is_a_samsa_error() -> None:
    assert issubclass(FrameError, SamsaError)


def test_a_fed_bytearray_can_be_resized_after_a_frame_error() -> None:
    decoder = FrameDecoder(MAX_FRAME_SIZE)
    buffer = bytearray((-1).to_bytes(4, "big", signed=True))
    with pytest.raises(FrameError) as raised:
        decoder.feed(buffer)
    # The error's traceback is still alive here; a view of the buffer it kept would
    # make the resize raise BufferError.
    buffer.extend(b"more")
    assert raised.value.__traceback__ is not None
    assert len(buffer) == 8
