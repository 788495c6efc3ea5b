"""Malformed and hostile batches: each is refused with the error class a broker maps to a code.

Hostile batches are made by editing a valid batch's bytes and then recomputing its
CRC, so that the reader, not the checksum, has to catch them.
"""

from __future__ import annotations

import contextlib
import struct
import tracemalloc
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.errors import (
    CompressionError,
    CorruptRecordError,
    MessageTooLargeError,
    SamsaError,
    TruncatedBatchError,
    UnsupportedCompressionTypeError,
)
from samsa.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    CompressionType,
    Record,
    RecordBatchBuilder,
    iter_batches,
    iter_records,
    read_batch,
)
from samsa.records.batch import (
    ATTRIBUTES_POS,
    BATCH_LENGTH_POS,
    CRC_POS,
    LAST_OFFSET_DELTA_POS,
    MAGIC_POS,
    RECORD_COUNT_POS,
    compute_crc,
)
from samsa.records.compression import compress, decompress
from samsa.records.varint import encode_varint

COMPRESSED_CODECS = [c for c in CompressionType if c is not CompressionType.NONE]
MiB = 1024 * 1024


def codec_name(codec: CompressionType) -> str:
    return codec.name


def valid_batch(codec: CompressionType = CompressionType.NONE, base_offset: int = 0) -> bytes:
    builder = RecordBatchBuilder(compression=codec, base_offset=base_offset)
    builder.append(b"value-0", key=b"key-0", timestamp=1000, headers=[("h", b"x")])
    builder.append(None, key=b"key-1", timestamp=1001)
    builder.append(b"value-2", timestamp=999)
    return builder.build()


def recrc(buf: bytearray) -> bytes:
    """``buf`` with its length field and CRC made to agree with its bytes."""
    struct.pack_into(">i", buf, BATCH_LENGTH_POS, len(buf) - LOG_OVERHEAD)
    struct.pack_into(">I", buf, CRC_POS, compute_crc(buf))
    return bytes(buf)


def with_header_field(buf: bytes, pos: int, fmt: str, value: int) -> bytes:
    out = bytearray(buf)
    struct.pack_into(fmt, out, pos, value)
    return recrc(out)


def with_records(
    records: bytes,
    *,
    count: int,
    last_offset_delta: int,
    codec: CompressionType = CompressionType.NONE,
) -> bytes:
    """A CRC-valid batch whose records section is ``records`` (compressed with ``codec``)."""
    out = bytearray(valid_batch()[:HEADER_SIZE] + compress(codec, records))
    struct.pack_into(">h", out, ATTRIBUTES_POS, int(codec))
    struct.pack_into(">i", out, LAST_OFFSET_DELTA_POS, last_offset_delta)
    struct.pack_into(">i", out, RECORD_COUNT_POS, count)
    return recrc(out)


def raw_record(*fields: bytes) -> bytes:
    """A record from its already-encoded fields, with its length prefix."""
    body = b"".join(fields)
    return encode_varint(len(body)) + body


def v(value: int) -> bytes:
    return encode_varint(value)


ATTRS, TS_DELTA, OFFSET_DELTA = b"\x00", v(0), v(0)
NULL = v(-1)
GOOD_RECORD = raw_record(ATTRS, TS_DELTA, OFFSET_DELTA, v(1), b"k", v(1), b"v", v(0))


def read_all(buf: bytes, **kwargs: int) -> list[Record]:
    batch = read_batch(buf)
    batch.validate()
    return list(iter_records(batch, **kwargs))


def test_hand_made_record_is_read_back() -> None:
    # The baseline the hostile variants below depart from.
    (record,) = read_all(with_records(GOOD_RECORD, count=1, last_offset_delta=0))
    assert record.key == b"k"
    assert record.value == b"v"


# -- framing -----------------------------------------------------------------------


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.GZIP], ids=codec_name)
def test_batch_truncated_at_every_byte_boundary_raises_truncated_batch(
    codec: CompressionType,
) -> None:
    buf = valid_batch(codec)
    for end in range(len(buf)):
        with pytest.raises(TruncatedBatchError):
            read_batch(buf[:end])


@pytest.mark.parametrize("length", [48, 0, -1, -(2**31)])
def test_length_field_below_the_header_size_raises_corrupt_record(length: int) -> None:
    buf = bytearray(valid_batch())
    struct.pack_into(">i", buf, BATCH_LENGTH_POS, length)
    with pytest.raises(CorruptRecordError) as info:
        read_batch(buf)
    assert info.type is CorruptRecordError


def test_length_field_of_exactly_the_header_size_frames_an_empty_batch() -> None:
    empty = RecordBatchBuilder().build()
    assert read_batch(empty).batch_length == HEADER_SIZE - LOG_OVERHEAD


@pytest.mark.parametrize("magic", [0, 1, 3, 255])
def test_batch_with_a_magic_other_than_2_raises_corrupt_record(magic: int) -> None:
    buf = bytearray(valid_batch())
    buf[MAGIC_POS] = magic
    with pytest.raises(CorruptRecordError) as info:
        read_batch(buf)
    assert info.type is CorruptRecordError


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.LZ4], ids=codec_name)
def test_batch_with_any_flipped_byte_under_the_crc_fails_validation(
    codec: CompressionType,
) -> None:
    buf = valid_batch(codec)
    for pos in range(CRC_POS, len(buf)):  # the stored CRC, then everything it covers
        flipped = bytearray(buf)
        flipped[pos] ^= 0x01
        batch = read_batch(flipped)
        assert not batch.is_valid()
        with pytest.raises(CorruptRecordError):
            batch.validate()


def test_batch_with_a_flipped_byte_in_base_offset_or_leader_epoch_stays_valid() -> None:
    # Kafka leaves these two fields outside the CRC so a broker can rewrite them.
    buf = valid_batch()
    for pos in [*range(0, 8), *range(12, 16)]:
        flipped = bytearray(buf)
        flipped[pos] ^= 0xFF
        read_batch(flipped).validate()


def test_batch_larger_than_max_size_raises_message_too_large() -> None:
    buf = valid_batch()
    with pytest.raises(MessageTooLargeError):
        read_batch(buf, max_size=len(buf) - 1)


def test_batch_of_exactly_max_size_is_read() -> None:
    buf = valid_batch()
    assert read_batch(buf, max_size=len(buf)).size == len(buf)


def test_length_field_claiming_2_gib_raises_truncated_without_allocating() -> None:
    buf = bytearray(valid_batch()[:HEADER_SIZE] + b"abc")
    struct.pack_into(">i", buf, BATCH_LENGTH_POS, 2**31 - 1)
    tracemalloc.start()
    try:
        with pytest.raises(TruncatedBatchError):
            read_batch(bytes(buf))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MiB


def test_length_field_claiming_2_gib_is_too_large_before_it_is_truncated() -> None:
    buf = bytearray(valid_batch()[:HEADER_SIZE])
    struct.pack_into(">i", buf, BATCH_LENGTH_POS, 2**31 - 1)
    with pytest.raises(MessageTooLargeError):
        read_batch(buf, max_size=MiB)


def test_iter_batches_raises_truncated_batch_on_a_torn_tail() -> None:
    first, second = valid_batch(base_offset=0), valid_batch(base_offset=3)
    seen = []
    with pytest.raises(TruncatedBatchError):
        for batch in iter_batches(first + second[:-1]):
            seen.append(batch.base_offset)
    assert seen == [0]


def test_iter_batches_raises_truncated_batch_on_a_tail_shorter_than_a_length_field() -> None:
    with pytest.raises(TruncatedBatchError):
        list(iter_batches(valid_batch() + b"\x00" * 5))


@pytest.mark.parametrize("count", [-1, -(2**31)])
def test_negative_record_count_fails_validation(count: int) -> None:
    buf = with_header_field(valid_batch(), RECORD_COUNT_POS, ">i", count)
    with pytest.raises(CorruptRecordError):
        read_batch(buf).validate()


def test_negative_last_offset_delta_fails_validation() -> None:
    buf = with_header_field(valid_batch(), LAST_OFFSET_DELTA_POS, ">i", -1)
    with pytest.raises(CorruptRecordError):
        read_batch(buf).validate()


# -- hostile record fields --------------------------------------------------------------


@pytest.mark.parametrize("codec", list(CompressionType), ids=codec_name)
def test_record_count_of_2_to_the_31_minus_1_with_one_record_raises_corrupt_record(
    codec: CompressionType,
) -> None:
    buf = with_records(GOOD_RECORD, count=2**31 - 1, last_offset_delta=0, codec=codec)
    with pytest.raises(CorruptRecordError):
        read_all(buf)


def test_record_count_of_zero_with_records_present_raises_corrupt_record() -> None:
    buf = with_records(GOOD_RECORD, count=0, last_offset_delta=0)
    with pytest.raises(CorruptRecordError):
        read_all(buf)


def test_trailing_garbage_after_the_last_record_raises_corrupt_record() -> None:
    buf = with_records(GOOD_RECORD + b"\x00\x01\x02", count=1, last_offset_delta=0)
    with pytest.raises(CorruptRecordError):
        read_all(buf)


@pytest.mark.parametrize("last_offset_delta", [0, 1])
def test_last_offset_delta_below_the_last_record_raises_corrupt_record(
    last_offset_delta: int,
) -> None:
    buf = with_header_field(valid_batch(), LAST_OFFSET_DELTA_POS, ">i", last_offset_delta)
    with pytest.raises(CorruptRecordError):
        read_all(buf)


@pytest.mark.parametrize("last_offset_delta", [3, 5])
def test_last_offset_delta_beyond_the_last_record_is_a_compacted_batch(
    last_offset_delta: int,
) -> None:
    # Compaction drops a batch's last records but keeps its last offset delta (Kafka does too).
    buf = with_header_field(valid_batch(), LAST_OFFSET_DELTA_POS, ">i", last_offset_delta)
    assert [r.offset for r in read_all(buf)] == [0, 1, 2]


@pytest.mark.parametrize(
    "record",
    [
        pytest.param(
            raw_record(ATTRS, TS_DELTA, OFFSET_DELTA, v(2**31 - 1), b"k", NULL, v(0)),
            id="key-length-2**31-1",
        ),
        pytest.param(
            raw_record(ATTRS, TS_DELTA, OFFSET_DELTA, v(2), b"k", NULL, v(0)),
            id="key-length-one-past-the-record",
        ),
        pytest.param(
            raw_record(ATTRS, TS_DELTA, OFFSET_DELTA, v(-5), NULL, v(0)),
            id="key-length-negative",
        ),
        pytest.param(
            raw_record(ATTRS, TS_DELTA, OFFSET_DELTA, NULL, v(2**31 - 1), b"v", v(0)),
            id="value-length-2**31-1",
        ),
        pytest.param(
            raw_record(ATTRS, TS_DELTA, OFFSET_DELTA, NULL, NULL, v(2**31 - 1)),
            id="header-count-2**31-1",
        ),
        pytest.param(
            raw_record(ATTRS, TS_DELTA, OFFSET_DELTA, NULL, NULL, v(-1)),
            id="header-count-negative",
        ),
        pytest.param(
            raw_record(ATTRS, TS_DELTA, OFFSET_DELTA, NULL, NULL, v(3), v(1), b"h", NULL),
            id="header-count-past-the-headers",
        ),
        pytest.param(
            raw_record(ATTRS, TS_DELTA, OFFSET_DELTA, NULL, NULL, v(1), v(2**31 - 1), b"h", NULL),
            id="header-key-length-2**31-1",
        ),
        pytest.param(
            raw_record(ATTRS, TS_DELTA, OFFSET_DELTA, NULL, NULL, v(1), NULL, NULL),
            id="header-key-null",
        ),
        pytest.param(
            raw_record(ATTRS, TS_DELTA, OFFSET_DELTA, NULL, NULL, v(1), v(2), b"\xff\xfe", NULL),
            id="header-key-not-utf8",
        ),
        pytest.param(
            raw_record(ATTRS, TS_DELTA, OFFSET_DELTA, NULL, NULL, v(1), v(1), b"h", v(9), b"x"),
            id="header-value-length-past-the-record",
        ),
        pytest.param(
            raw_record(ATTRS, TS_DELTA, OFFSET_DELTA, NULL, NULL, v(0), b"extra"),
            id="bytes-after-the-last-header",
        ),
        pytest.param(
            raw_record(ATTRS, TS_DELTA, b"\x80\x80\x80\x80\x80\x01", NULL, NULL, v(0)),
            id="offset-delta-varint-longer-than-5-bytes",
        ),
        pytest.param(v(2**31 - 1) + ATTRS + TS_DELTA, id="record-length-2**31-1"),
        pytest.param(v(3) + ATTRS + TS_DELTA + OFFSET_DELTA, id="record-length-below-minimum"),
        pytest.param(v(-7) + ATTRS, id="record-length-negative"),
        pytest.param(
            v(6) + ATTRS + TS_DELTA + OFFSET_DELTA + NULL + NULL + v(1) + v(1) + b"h" + NULL,
            id="fields-run-past-the-record-length",
        ),
        pytest.param(b"\x80", id="record-length-cut-off"),
    ],
)
def test_hostile_record_raises_corrupt_record(record: bytes) -> None:
    buf = with_records(record, count=1, last_offset_delta=0)
    with pytest.raises(CorruptRecordError):
        read_all(buf)


# -- codecs ----------------------------------------------------------------------------


@pytest.mark.parametrize("compression_id", [5, 6, 7])
def test_compression_id_kafka_does_not_define_raises_unsupported_compression_type(
    compression_id: int,
) -> None:
    buf = with_header_field(valid_batch(), ATTRIBUTES_POS, ">h", compression_id)
    batch = read_batch(buf)
    batch.validate()
    with pytest.raises(UnsupportedCompressionTypeError):
        list(iter_records(batch))


@pytest.mark.parametrize("codec", COMPRESSED_CODECS, ids=codec_name)
@pytest.mark.parametrize(
    "garbage",
    [b"this is not compressed data at all" * 3, bytes(range(256)), b"\xff" * 64],
    ids=["text", "bytes", "ff"],
)
def test_garbage_compressed_records_section_raises_compression_error(
    codec: CompressionType, garbage: bytes
) -> None:
    buf = bytearray(valid_batch()[:HEADER_SIZE] + garbage)
    struct.pack_into(">h", buf, ATTRIBUTES_POS, int(codec))
    with pytest.raises(CompressionError):
        read_all(recrc(buf))


@pytest.mark.parametrize(
    "codec", [CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4], ids=codec_name
)
def test_truncated_compressed_records_section_raises_compression_error(
    codec: CompressionType,
) -> None:
    buf = bytearray(valid_batch(codec)[:-4])
    with pytest.raises(CompressionError):
        read_all(recrc(buf))


@pytest.mark.parametrize("codec", COMPRESSED_CODECS, ids=codec_name)
def test_batch_inflating_past_max_decompressed_raises_compression_error(
    codec: CompressionType,
) -> None:
    builder = RecordBatchBuilder(compression=codec)
    builder.append(bytes(2 * MiB), timestamp=0)
    with pytest.raises(CompressionError):
        read_all(builder.build(), max_decompressed=MiB)


@pytest.mark.parametrize("codec", COMPRESSED_CODECS, ids=codec_name)
def test_batch_inflating_to_exactly_max_decompressed_is_read(codec: CompressionType) -> None:
    builder = RecordBatchBuilder(compression=codec)
    builder.append(bytes(100_000), timestamp=0)
    buf = builder.build()
    inflated = len(decompress(codec, buf[HEADER_SIZE:]))
    (record,) = read_all(buf, max_decompressed=inflated)
    assert record.value == bytes(100_000)


@pytest.mark.parametrize("codec", COMPRESSED_CODECS, ids=codec_name)
def test_decompression_bomb_is_refused_without_inflating_it(codec: CompressionType) -> None:
    bomb = compress(codec, bytes(32 * MiB))
    tracemalloc.start()
    try:
        with pytest.raises(CompressionError):
            decompress(codec, bomb, max_size=MiB)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * MiB


@pytest.mark.parametrize("codec", COMPRESSED_CODECS, ids=codec_name)
def test_small_batch_does_not_reserve_the_default_decompression_limit(
    codec: CompressionType,
) -> None:
    section = compress(codec, b"small records section" * 10)
    tracemalloc.start()
    try:
        decompress(codec, section)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * MiB


def test_raw_snappy_block_declaring_2_gib_is_refused() -> None:
    # A raw snappy block opens with its uncompressed length as an unsigned varint.
    section = bytes([0x80, 0x80, 0x80, 0x80, 0x08]) + b"\x00" * 8
    buf = bytearray(valid_batch()[:HEADER_SIZE] + section)
    struct.pack_into(">h", buf, ATTRIBUTES_POS, int(CompressionType.SNAPPY))
    with pytest.raises(CompressionError):
        read_all(recrc(buf), max_decompressed=MiB)


def test_xerial_block_length_past_the_section_raises_compression_error() -> None:
    section = bytearray(valid_batch(CompressionType.SNAPPY)[HEADER_SIZE:])
    struct.pack_into(">I", section, 16, 2**31)  # first block's length
    with pytest.raises(CompressionError):
        decompress(CompressionType.SNAPPY, section)


def test_gzip_section_of_a_different_container_raises_compression_error() -> None:
    zlib_not_gzip = zlib.compress(b"records")
    with pytest.raises(CompressionError):
        decompress(CompressionType.GZIP, zlib_not_gzip)


# -- fuzzing ---------------------------------------------------------------------------


@pytest.mark.parametrize("codec", list(CompressionType), ids=codec_name)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_mutated_records_section_yields_records_or_a_samsa_error(
    codec: CompressionType, data: st.DataObject
) -> None:
    buf = bytearray(valid_batch(codec))
    edits = data.draw(
        st.lists(
            st.tuples(st.integers(HEADER_SIZE, len(buf) - 1), st.integers(0, 255)),
            min_size=1,
            max_size=4,
        )
    )
    for pos, byte in edits:
        buf[pos] = byte
    cut = data.draw(st.integers(HEADER_SIZE, len(buf)))
    batch = read_batch(recrc(buf[:cut]))
    batch.validate()
    with contextlib.suppress(SamsaError):
        list(iter_records(batch))


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_after_a_valid_header_raise_only_samsa_errors(tail: bytes) -> None:
    buf = bytearray(valid_batch()[:HEADER_SIZE] + tail)
    with contextlib.suppress(SamsaError):
        for batch in iter_batches(recrc(buf)):
            batch.validate()
            list(iter_records(batch))
