"""Message formats v0/v1: read into RecordBatch v2 on produce, written back on fetch.

Message sets are built and read back with kafka-python's own implementation of
the old formats, so samsa's reader and writer are checked against another one.
"""

from __future__ import annotations

import struct
import zlib

import lz4.frame
import pytest
from kafka.record import MemoryRecords
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from samsa.errors import (
    CorruptRecordError,
    MessageTooLargeError,
    UnsupportedCompressionTypeError,
)
from samsa.records.batch import CompressionType, read_batch
from samsa.records.builder import RecordBatchBuilder
from samsa.records.control import ControlRecordType, build_end_transaction_batch
from samsa.records.legacy import (
    InflationBudget,
    down_convert,
    message_set_to_batch,
    read_message_set,
)
from samsa.records.reader import read_records

NOW = 1_700_000_000_000
GZIP, SNAPPY, LZ4 = 1, 2, 3


def _message_set(magic: int, codec: int, records: list[tuple[bytes | None, bytes]]) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i, (key, value) in enumerate(records):
        builder.append(i, timestamp=NOW - 1000 + i if magic else None, key=key, value=value)
    return bytes(builder.build())


def _legacy_records(data: bytes) -> list[tuple[int, int | None, bytes | None, bytes | None]]:
    out = []
    for batch in MemoryRecords(data):
        assert batch.magic in (0, 1)
        for record in batch:
            assert record.validate_crc()
            out.append((record.offset, record.timestamp, record.key, record.value))
    return out


def _set_crc(message: bytearray) -> bytearray:
    struct.pack_into(">I", message, 12, zlib.crc32(message[16:]))
    return message


@pytest.mark.parametrize("codec", [0, GZIP, SNAPPY, LZ4])
def test_a_magic_1_set_becomes_one_v2_batch_with_its_keys_values_and_timestamps(codec: int) -> None:
    sent = [(b"k0", b"v0"), (None, b"v1"), (b"k2", b"")]
    batch = message_set_to_batch(_message_set(1, codec, sent), now_ms=NOW)
    records = read_records(batch)
    assert [(r.key, r.value) for r in records] == sent
    assert [r.timestamp for r in records] == [NOW - 1000, NOW - 999, NOW - 998]
    assert read_batch(batch).compression == CompressionType(codec)


@pytest.mark.parametrize("codec", [0, GZIP, SNAPPY, LZ4])
def test_magic_0_records_are_stamped_with_the_broker_time(codec: int) -> None:
    batch = message_set_to_batch(_message_set(0, codec, [(b"k", b"v"), (b"k", b"w")]), now_ms=NOW)
    assert [(r.value, r.timestamp) for r in read_records(batch)] == [(b"v", NOW), (b"w", NOW)]


def test_plain_and_compressed_messages_of_one_set_keep_their_order() -> None:
    data = (
        _message_set(0, 0, [(None, b"a")])
        + _message_set(0, GZIP, [(None, b"b"), (None, b"c")])
        + _message_set(0, SNAPPY, [(None, b"d")])
    )
    records = read_records(message_set_to_batch(data, now_ms=NOW))
    assert [r.value for r in records] == [b"a", b"b", b"c", b"d"]


def test_a_message_failing_its_crc_is_corrupt() -> None:
    data = bytearray(_message_set(1, 0, [(b"k", b"value")]))
    data[-1] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC"):
        read_message_set(bytes(data))


def test_a_set_ending_in_a_partial_message_is_corrupt() -> None:
    data = _message_set(1, 0, [(b"k", b"v"), (b"k", b"w")])
    with pytest.raises(CorruptRecordError):
        read_message_set(data[:-3])


def test_a_message_size_beyond_the_set_is_corrupt() -> None:
    data = bytearray(_message_set(0, 0, [(b"k", b"v")]))
    struct.pack_into(">i", data, 8, 1 << 30)
    with pytest.raises(CorruptRecordError, match="declares"):
        read_message_set(bytes(data))


def test_a_key_length_running_past_its_message_is_corrupt() -> None:
    data = bytearray(_message_set(0, 0, [(b"k", b"v")]))
    struct.pack_into(">i", data, 18, 1000)  # the key length of a magic-0 message
    with pytest.raises(CorruptRecordError, match="key"):
        read_message_set(bytes(_set_crc(data)))


def test_a_compressed_message_inside_a_compressed_message_is_corrupt() -> None:
    value = _gzip(_message_set(1, GZIP, [(None, b"x")]))  # a gzip wrapper around a gzip wrapper
    body = bytes((1, GZIP)) + struct.pack(">q", NOW) + struct.pack(">i", -1)
    body += struct.pack(">i", len(value)) + value
    wrapper = struct.pack(">qiI", 0, len(body) + 4, zlib.crc32(body)) + body
    with pytest.raises(CorruptRecordError, match="wraps another"):
        read_message_set(wrapper)


def _gzip(data: bytes) -> bytes:
    compressor = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


def test_zstd_in_an_old_message_format_is_an_unsupported_compression_type() -> None:
    data = bytearray(_message_set(1, 0, [(None, b"v")]))
    data[17] = 4  # attributes: zstd
    with pytest.raises(UnsupportedCompressionTypeError):
        read_message_set(bytes(_set_crc(data)))


def test_magic_0_lz4_with_kafkas_old_header_checksum_is_read() -> None:
    inner = _message_set(0, 0, [(b"k", b"lz4 value")])
    frame = bytearray(lz4.frame.compress(inner, store_size=False))
    frame[6] ^= 0x5A  # a header checksum computed over the wrong bytes
    body = bytes((0, LZ4)) + struct.pack(">i", -1) + struct.pack(">i", len(frame)) + frame
    wrapper = struct.pack(">qiI", 0, len(body) + 4, zlib.crc32(body)) + body
    records, codec = read_message_set(wrapper)
    assert codec is CompressionType.LZ4
    assert [(r.key, r.value) for r in records] == [(b"k", b"lz4 value")]


def _stored(codec: CompressionType, base_offset: int = 0, count: int = 3) -> bytes:
    builder = RecordBatchBuilder(compression=codec, base_offset=base_offset)
    for i in range(count):
        builder.append(b"value-%d" % i, key=b"key-%d" % i, headers=[("h", b"x")],
                       timestamp=NOW + i)  # fmt: skip
    return builder.build()


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize(
    "codec", [CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY,
              CompressionType.LZ4, CompressionType.ZSTD],
)  # fmt: skip
def test_down_converted_batches_read_back_with_their_offsets_keys_and_values(
    magic: int, codec: CompressionType
) -> None:
    stored = _stored(codec, base_offset=10) + _stored(codec, base_offset=13)
    converted = down_convert(stored, magic, 10, 1 << 20, min_one_message=True)
    expected_ts = [NOW + i % 3 if magic else None for i in range(6)]
    assert _legacy_records(converted) == [
        (10 + i, expected_ts[i], b"key-%d" % (i % 3), b"value-%d" % (i % 3)) for i in range(6)
    ]


def test_down_conversion_leaves_out_records_below_the_fetch_offset() -> None:
    converted = down_convert(_stored(CompressionType.GZIP), 1, 2, 1 << 20, min_one_message=True)
    assert [offset for offset, *_ in _legacy_records(converted)] == [2]


def test_down_conversion_skips_transaction_markers() -> None:
    marker = build_end_transaction_batch(
        ControlRecordType.COMMIT, producer_id=7, producer_epoch=0, coordinator_epoch=0,
        base_offset=3, timestamp=NOW,
    )  # fmt: skip
    stored = _stored(CompressionType.NONE) + marker + _stored(CompressionType.NONE, 4)
    offsets = [o for o, *_ in _legacy_records(down_convert(stored, 1, 0, 1 << 20,
                                                           min_one_message=True))]  # fmt: skip
    assert offsets == [0, 1, 2, 4, 5, 6]


def test_down_conversion_stops_before_the_message_that_passes_max_bytes() -> None:
    stored = _stored(CompressionType.NONE, count=10)
    one = len(down_convert(stored, 1, 0, 1, min_one_message=True))
    converted = down_convert(stored, 1, 0, 3 * one + one // 2, min_one_message=True)
    assert [o for o, *_ in _legacy_records(converted)] == [0, 1, 2]


def test_down_conversion_returns_the_first_message_whatever_its_size_when_asked() -> None:
    stored = _stored(CompressionType.NONE)
    assert len(_legacy_records(down_convert(stored, 0, 0, 1, min_one_message=True))) == 1
    assert down_convert(stored, 0, 0, 1, min_one_message=False) == b""


def test_a_partial_batch_at_the_end_of_a_read_is_left_out() -> None:
    stored = _stored(CompressionType.NONE) + _stored(CompressionType.NONE, 3)[:-5]
    converted = down_convert(stored, 1, 0, 1 << 20, min_one_message=True)
    assert [o for o, *_ in _legacy_records(converted)] == [0, 1, 2]


def test_wrappers_inflating_past_the_limit_together_are_too_large() -> None:
    wrapper = _message_set(1, GZIP, [(None, b"z" * 600)])
    read_message_set(wrapper * 2, max_decompressed=1300)  # two inflate to ~1270 bytes
    with pytest.raises(MessageTooLargeError):
        read_message_set(wrapper * 3, max_decompressed=1300)


def test_uncompressed_messages_count_towards_the_limit_with_the_inflated_ones() -> None:
    plain = _message_set(1, 0, [(None, b"p" * 400)])  # 434 bytes
    wrapper = _message_set(1, GZIP, [(None, b"z" * 600)])  # inflates to 634 bytes
    read_message_set(plain + wrapper, max_decompressed=434 + 634)
    with pytest.raises(MessageTooLargeError):
        read_message_set(plain + wrapper, max_decompressed=434 + 633)
    with pytest.raises(MessageTooLargeError):
        message_set_to_batch(plain * 3, now_ms=NOW, max_decompressed=3 * 434 - 1)


def _bomb(codec: CompressionType, base_offset: int = 0, count: int = 4) -> bytes:
    """A batch of ``count`` records of 100 KiB of zeros: a few hundred bytes stored."""
    builder = RecordBatchBuilder(compression=codec, base_offset=base_offset)
    for _ in range(count):
        builder.append(bytes(100 * 1024), timestamp=NOW)
    return builder.build()


@pytest.mark.parametrize(
    "codec", [CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4,
              CompressionType.ZSTD],
)  # fmt: skip
def test_down_conversion_stops_before_a_batch_inflating_past_max_bytes(
    codec: CompressionType,
) -> None:
    stored = b"".join(_bomb(codec, base_offset=4 * i) for i in range(5))  # ~2 MB inflated
    converted = down_convert(stored, 1, 0, 1 << 20, min_one_message=True)
    assert len(converted) < 1 << 20
    assert [o for o, *_ in _legacy_records(converted)] == list(range(8))  # 2 × 400 KiB fit


def test_down_conversion_shares_its_inflation_budget_between_calls() -> None:
    budget = InflationBudget(1 << 20)
    first = down_convert(_bomb(CompressionType.GZIP), 1, 0, 1 << 20, min_one_message=True,
                         inflation=budget)  # fmt: skip
    assert len(_legacy_records(first)) == 4
    assert (1 << 20) - budget.left >= 4 * 100 * 1024  # the messages it made, at least
    second = _bomb(CompressionType.GZIP, 4) + _bomb(CompressionType.GZIP, 8)
    converted = down_convert(second, 1, 4, 1 << 20, min_one_message=False, inflation=budget)
    assert [o for o, *_ in _legacy_records(converted)] == [4, 5, 6, 7]


def test_a_first_batch_inflating_past_its_limit_is_announced_as_a_message_too_large() -> None:
    stored = _bomb(CompressionType.GZIP, base_offset=7)
    converted = down_convert(stored, 0, 8, 1000, min_one_message=True,
                             max_first_inflated=200_000)  # fmt: skip
    offset, size = struct.unpack(">qi", converted)
    assert (offset, size) == (8, 200_001)  # a message bigger than the 0 bytes after it
    assert _legacy_records(converted) == []


def test_a_first_batch_within_max_first_inflated_goes_out_whatever_max_bytes() -> None:
    converted = down_convert(_bomb(CompressionType.GZIP), 1, 0, 1000, min_one_message=True,
                             max_first_inflated=1 << 20)  # fmt: skip
    assert [o for o, *_ in _legacy_records(converted)] == [0, 1, 2, 3]
