"""Compressed batches, cross-checked with kafka-python's independent reader and writer."""

from __future__ import annotations

import struct

import cramjam
import lz4.block
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from samsa.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    CompressionType,
    Header,
    Record,
    RecordBatchBuilder,
    iter_records,
    read_batch,
)
from samsa.records.batch import ATTRIBUTES_POS, BATCH_LENGTH_POS, CRC_POS, compute_crc

ALL_CODECS = list(CompressionType)
COMPRESSED_CODECS = [c for c in CompressionType if c is not CompressionType.NONE]
BASE_TIMESTAMP = 1_700_000_000_000

# Records with everything a reader can get wrong: nulls, headers with unicode keys
# and null values, a timestamp before the first record's, and offset gaps.
SAMPLE = [
    Record(0, BASE_TIMESTAMP, b"key-0", b"value-0" * 20, (("trace-id", b"abc"),)),
    Record(1, BASE_TIMESTAMP + 250, None, b"value-1" * 20, ()),
    Record(4, BASE_TIMESTAMP - 1000, b"key-4", None, (("ünïcødé-ключ", None), ("", b""))),
    Record(5, BASE_TIMESTAMP + 10, b"", b"", (("a", b"1"), ("a", b"2"))),
]


def samsa_batch(
    records: list[Record], codec: CompressionType, base_offset: int = 0, **options: int
) -> bytes:
    """A batch of ``records``, whose offsets are taken as deltas from ``base_offset``."""
    builder = RecordBatchBuilder(compression=codec, base_offset=base_offset, **options)
    for r in records:
        builder.append(
            r.value,
            key=r.key,
            headers=r.headers,
            timestamp=r.timestamp,
            offset_delta=r.offset,
        )
    return builder.build()


def kafka_python_batch(records: list[Record], codec: CompressionType) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=16 * 1024 * 1024,
    )
    for r in records:
        builder.append(r.offset, r.timestamp, r.key, r.value, list(r.headers))
    return bytes(builder.build())


def read_with_samsa(buf: bytes) -> list[Record]:
    batch = read_batch(buf)
    batch.validate()
    return list(iter_records(batch))


def read_with_kafka_python(buf: bytes) -> tuple[DefaultRecordBatch, list[Record]]:
    batch = DefaultRecordBatch(buf)
    assert batch.validate_crc()
    records = [Record(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch]
    return batch, records


def with_records_section(buf: bytes, section: bytes, attributes: int) -> bytes:
    """``buf``'s header over a new records section, with length and CRC made to match."""
    out = bytearray(buf[:HEADER_SIZE] + section)
    struct.pack_into(">i", out, BATCH_LENGTH_POS, len(out) - LOG_OVERHEAD)
    struct.pack_into(">h", out, ATTRIBUTES_POS, attributes)
    struct.pack_into(">I", out, CRC_POS, compute_crc(out))
    return bytes(out)


def compressible(n: int) -> bytes:
    return (b"samsa speaks kafka " * (n // 19 + 1))[:n]


header_lists = st.lists(
    st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=10)), max_size=2
).map(tuple)
record_lists = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=3),
        st.integers(min_value=-(10**9), max_value=10**9),
        st.none() | st.binary(max_size=20),
        st.none() | st.binary(max_size=100),
        header_lists,
    ),
    min_size=1,
    max_size=8,
)


def to_records(
    raw: list[tuple[int, int, bytes | None, bytes | None, tuple[Header, ...]]],
) -> list[Record]:
    out = []
    offset = -1
    for gap, ts_delta, key, value, headers in raw:
        offset += 1 + gap
        out.append(Record(offset, BASE_TIMESTAMP + ts_delta, key, value, headers))
    return out


# -- samsa writes, kafka-python reads ------------------------------------------------


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name)
def test_kafka_python_reads_the_records_samsa_writes(codec: CompressionType) -> None:
    _, records = read_with_kafka_python(samsa_batch(SAMPLE, codec))
    assert records == SAMPLE


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name)
def test_kafka_python_reads_the_header_samsa_writes(codec: CompressionType) -> None:
    buf = samsa_batch(
        SAMPLE,
        codec,
        base_offset=1000,
        producer_id=42,
        producer_epoch=3,
        base_sequence=17,
        partition_leader_epoch=9,
    )
    batch = DefaultRecordBatch(buf)
    assert batch.validate_crc()
    assert batch.magic == 2
    assert batch.compression_type == int(codec)
    assert batch.base_offset == 1000
    assert batch.last_offset_delta == 5
    assert batch.leader_epoch == 9
    assert batch.first_timestamp == BASE_TIMESTAMP
    assert batch.max_timestamp == BASE_TIMESTAMP + 250
    assert batch.producer_id == 42
    assert batch.producer_epoch == 3
    assert batch.base_sequence == 17
    assert batch.records_count == len(SAMPLE)
    assert batch.size_in_bytes == len(buf)


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name)
@settings(max_examples=25, deadline=None)
@given(raw=record_lists)
def test_kafka_python_reads_any_records_samsa_writes(
    codec: CompressionType,
    raw: list[tuple[int, int, bytes | None, bytes | None, tuple[Header, ...]]],
) -> None:
    records = to_records(raw)
    _, read = read_with_kafka_python(samsa_batch(records, codec))
    assert read == records


# -- kafka-python writes, samsa reads -------------------------------------------------


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name)
def test_samsa_reads_the_records_kafka_python_writes(codec: CompressionType) -> None:
    records = [*SAMPLE, Record(6, BASE_TIMESTAMP, b"k", compressible(2000), ())]
    buf = kafka_python_batch(records, codec)
    assert read_batch(buf).compression is codec  # the batch really is compressed
    assert read_with_samsa(buf) == records


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name)
def test_samsa_reads_the_header_kafka_python_writes(codec: CompressionType) -> None:
    buf = kafka_python_batch([*SAMPLE, Record(6, BASE_TIMESTAMP, None, compressible(2000))], codec)
    batch = read_batch(buf)
    batch.validate()
    assert batch.base_offset == 0
    assert batch.last_offset_delta == 6
    assert batch.record_count == 5
    assert batch.base_timestamp == BASE_TIMESTAMP
    assert batch.max_timestamp == BASE_TIMESTAMP + 250
    assert batch.producer_id == -1


@pytest.mark.parametrize("codec", COMPRESSED_CODECS, ids=lambda c: c.name)
def test_samsa_reads_a_large_batch_kafka_python_writes(codec: CompressionType) -> None:
    # Larger than snappy's 32 KiB xerial blocks, lz4's 64 KiB blocks and 1 MiB.
    records = [Record(i, BASE_TIMESTAMP + i, None, compressible(40_000)) for i in range(40)]
    buf = kafka_python_batch(records, codec)
    assert read_batch(buf).compression is codec
    assert read_with_samsa(buf) == records


# -- both directions, large ---------------------------------------------------------------


@pytest.mark.parametrize("codec", COMPRESSED_CODECS, ids=lambda c: c.name)
def test_large_batch_round_trips_through_samsa(codec: CompressionType) -> None:
    records = [Record(i, BASE_TIMESTAMP, b"%d" % i, compressible(40_000)) for i in range(40)]
    assert read_with_samsa(samsa_batch(records, codec)) == records


@pytest.mark.parametrize("codec", COMPRESSED_CODECS, ids=lambda c: c.name)
def test_kafka_python_reads_a_large_batch_samsa_writes(codec: CompressionType) -> None:
    records = [Record(i, BASE_TIMESTAMP, b"%d" % i, compressible(40_000)) for i in range(40)]
    _, read = read_with_kafka_python(samsa_batch(records, codec))
    assert read == records


# -- what is on the wire --------------------------------------------------------------


@pytest.mark.parametrize(
    ("codec", "magic"),
    [
        pytest.param(CompressionType.GZIP, b"\x1f\x8b", id="GZIP"),
        pytest.param(
            CompressionType.SNAPPY,
            b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01",  # xerial, as Kafka's Java client
            id="SNAPPY",
        ),
        pytest.param(CompressionType.LZ4, b"\x04\x22\x4d\x18", id="LZ4"),
        pytest.param(CompressionType.ZSTD, b"\x28\xb5\x2f\xfd", id="ZSTD"),
    ],
)
def test_records_section_starts_with_the_codec_framing_kafka_expects(
    codec: CompressionType, magic: bytes
) -> None:
    batch = read_batch(samsa_batch(SAMPLE, codec))
    assert bytes(batch.records_data[: len(magic)]) == magic


def test_a_large_lz4_batch_is_a_kafka_frame_of_blocks_each_decodable_alone() -> None:
    # Kafka writes version 1, independent blocks, no content size or checksum, 64 KiB
    # blocks; Sarama's reader refuses linked blocks and Kafka's Java reader decodes each
    # block alone, so a frame past one block must not refer back into the previous one.
    records = [Record(i, BASE_TIMESTAMP, b"%d" % i, compressible(40_000)) for i in range(10)]
    plain = samsa_batch(records, CompressionType.NONE)
    frame = bytes(read_batch(samsa_batch(records, CompressionType.LZ4)).records_data)
    assert frame[4:6] == b"\x60\x40"
    position, blocks = 7, []
    while (size := int.from_bytes(frame[position : position + 4], "little")) != 0:
        data = frame[position + 4 : position + 4 + (size & 0x7FFFFFFF)]
        stored = size & 0x80000000
        blocks.append(data if stored else lz4.block.decompress(data, uncompressed_size=65536))
        position += 4 + (size & 0x7FFFFFFF)
    assert len(blocks) > 1
    assert b"".join(blocks) == plain[HEADER_SIZE:]


@pytest.mark.parametrize("codec", COMPRESSED_CODECS, ids=lambda c: c.name)
def test_compressed_batch_of_repetitive_records_is_smaller(codec: CompressionType) -> None:
    records = [Record(i, BASE_TIMESTAMP, None, compressible(1000)) for i in range(10)]
    plain = samsa_batch(records, CompressionType.NONE)
    assert len(samsa_batch(records, codec)) < len(plain) // 2


def test_samsa_reads_raw_snappy_as_librdkafka_writes_it() -> None:
    plain = samsa_batch(SAMPLE, CompressionType.NONE)
    raw = bytes(cramjam.snappy.compress_raw(plain[HEADER_SIZE:]))
    buf = with_records_section(plain, raw, int(CompressionType.SNAPPY))
    assert read_batch(buf).compression is CompressionType.SNAPPY
    assert read_with_samsa(buf) == SAMPLE


def test_samsa_reads_a_large_raw_snappy_records_section() -> None:
    records = [Record(i, BASE_TIMESTAMP, None, compressible(40_000)) for i in range(10)]
    plain = samsa_batch(records, CompressionType.NONE)
    raw = bytes(cramjam.snappy.compress_raw(plain[HEADER_SIZE:]))
    buf = with_records_section(plain, raw, int(CompressionType.SNAPPY))
    assert read_with_samsa(buf) == records


@pytest.mark.parametrize("codec", COMPRESSED_CODECS, ids=lambda c: c.name)
def test_compressed_batch_shares_header_fields_and_records_with_the_plain_one(
    codec: CompressionType,
) -> None:
    plain = samsa_batch(SAMPLE, CompressionType.NONE)
    compressed = samsa_batch(SAMPLE, codec)
    assert compressed[:ATTRIBUTES_POS] != plain[:ATTRIBUTES_POS]  # length and CRC differ
    assert compressed[ATTRIBUTES_POS + 2 : HEADER_SIZE] == plain[ATTRIBUTES_POS + 2 : HEADER_SIZE]
    assert read_with_samsa(compressed) == read_with_samsa(plain)
