"""RecordBatch v2: what the builder writes is what the view and reader give back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import samsa.records
from samsa.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    CompressionType,
    Header,
    Record,
    RecordBatchBuilder,
    TimestampType,
    batch_size_at,
    build_batch,
    iter_batches,
    iter_records,
    read_batch,
    read_records,
)

ALL_CODECS = list(CompressionType)
BASE_TIMESTAMP = 1_700_000_000_000


@dataclass(frozen=True)
class Spec:
    """One record as a test appends it: offset gap before it and absolute timestamp."""

    gap: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]


header_values = st.none() | st.binary(max_size=20)
headers = st.lists(st.tuples(st.text(max_size=8), header_values), max_size=3).map(tuple)
specs = st.builds(
    Spec,
    gap=st.integers(min_value=0, max_value=5),
    timestamp=st.integers(min_value=-(2**40), max_value=2**40),
    key=st.none() | st.binary(max_size=30),
    value=st.none() | st.binary(max_size=200),
    headers=headers,
)


def build(
    records: list[Spec], codec: CompressionType, base_offset: int
) -> tuple[bytes, list[Record]]:
    """The batch bytes and the records a reader should find in them."""
    builder = RecordBatchBuilder(compression=codec, base_offset=base_offset)
    expected = []
    delta = -1
    for spec in records:
        delta += 1 + spec.gap
        timestamp = BASE_TIMESTAMP + spec.timestamp
        builder.append(
            spec.value,
            key=spec.key,
            headers=spec.headers,
            timestamp=timestamp,
            offset_delta=delta,
        )
        expected.append(Record(base_offset + delta, timestamp, spec.key, spec.value, spec.headers))
    return builder.build(), expected


def read_back(buf: bytes) -> list[Record]:
    batch = read_batch(buf)
    batch.validate()
    return list(iter_records(batch))


def sample_batch(codec: CompressionType = CompressionType.NONE, **options: Any) -> bytes:
    builder = RecordBatchBuilder(compression=codec, **options)
    builder.append(b"v0", key=b"k0", timestamp=BASE_TIMESTAMP + 5)
    builder.append(None, key=b"k1", timestamp=BASE_TIMESTAMP + 9, headers=[("h", b"x")])
    builder.append(b"v2", timestamp=BASE_TIMESTAMP + 2)
    return builder.build()


# -- round trips ---------------------------------------------------------------


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name)
@settings(max_examples=50, deadline=None)
@given(
    records=st.lists(specs, min_size=1, max_size=12),
    base_offset=st.integers(min_value=0, max_value=2**62),
)
def test_records_round_trip_through_builder_and_reader(
    codec: CompressionType, records: list[Spec], base_offset: int
) -> None:
    buf, expected = build(records, codec, base_offset)
    assert read_back(buf) == expected


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name)
@settings(max_examples=25, deadline=None)
@given(records=st.lists(specs, min_size=1, max_size=12))
def test_header_summarises_the_records_it_holds(
    codec: CompressionType, records: list[Spec]
) -> None:
    buf, expected = build(records, codec, base_offset=0)
    batch = read_batch(buf)
    assert batch.size == len(buf)
    assert batch.batch_length == len(buf) - LOG_OVERHEAD
    assert batch.compression is codec
    assert batch.record_count == len(expected)
    assert batch.last_offset_delta == expected[-1].offset
    assert batch.base_timestamp == expected[0].timestamp
    assert batch.max_timestamp == max(r.timestamp for r in expected)


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name)
def test_empty_batch_is_valid_and_holds_no_records(codec: CompressionType) -> None:
    buf = RecordBatchBuilder(compression=codec).build()
    batch = read_batch(buf)
    batch.validate()
    assert batch.record_count == 0
    assert list(iter_records(batch)) == []


def test_records_without_offset_deltas_get_consecutive_offsets() -> None:
    builder = RecordBatchBuilder(base_offset=100)
    deltas = [builder.append(b"a"), builder.append(b"b"), builder.append(b"c")]
    assert deltas == [0, 1, 2]
    assert [r.offset for r in read_back(builder.build())] == [100, 101, 102]


def test_offset_delta_after_a_gap_continues_from_the_gap() -> None:
    builder = RecordBatchBuilder()
    builder.append(b"a", offset_delta=3)
    assert builder.append(b"b") == 4


def test_builder_rejects_an_offset_delta_that_goes_backwards() -> None:
    builder = RecordBatchBuilder()
    builder.append(b"a", offset_delta=5)
    with pytest.raises(ValueError):
        builder.append(b"b", offset_delta=5)


def test_builder_counts_the_records_appended() -> None:
    builder = RecordBatchBuilder()
    builder.append(b"a")
    builder.append(b"b")
    assert len(builder) == 2


def test_estimated_size_is_at_least_the_uncompressed_batch_size() -> None:
    builder = RecordBatchBuilder()
    builder.append(b"v" * 100, key=b"k" * 10, headers=[("name", b"value"), ("n", None)])
    builder.append(None, key=None)
    assert builder.estimated_size >= len(builder.build())


def test_build_batch_stamps_every_record_with_the_timestamp() -> None:
    buf = build_batch([b"a", None], keys=[b"k", None], timestamp=42, base_offset=7)
    assert read_back(buf) == [Record(7, 42, b"k", b"a"), Record(8, 42, None, None)]


def test_record_without_a_timestamp_is_stamped_with_the_current_time() -> None:
    builder = RecordBatchBuilder()
    builder.append(b"a")
    (record,) = read_back(builder.build())
    assert record.timestamp > BASE_TIMESTAMP


# -- header fields ---------------------------------------------------------------


def test_header_reads_back_the_producer_state_the_builder_wrote() -> None:
    batch = read_batch(
        sample_batch(
            producer_id=123_456_789_012,
            producer_epoch=7,
            base_sequence=1000,
            partition_leader_epoch=12,
            base_offset=500,
        )
    )
    assert batch.producer_id == 123_456_789_012
    assert batch.producer_epoch == 7
    assert batch.base_sequence == 1000
    assert batch.last_sequence == 1002
    assert batch.partition_leader_epoch == 12
    assert batch.base_offset == 500
    assert batch.last_offset == 502
    assert batch.next_offset == 503


def test_header_of_a_plain_batch_has_no_producer_state() -> None:
    batch = read_batch(sample_batch())
    assert batch.producer_id == -1
    assert batch.producer_epoch == -1
    assert batch.base_sequence == -1
    assert batch.last_sequence == -1
    assert batch.partition_leader_epoch == -1
    assert batch.magic == 2


def test_header_reports_the_transactional_bit() -> None:
    batch = read_batch(sample_batch(is_transactional=True, producer_id=1, producer_epoch=0))
    assert batch.is_transactional
    assert not batch.is_control


def test_header_reports_the_control_bit() -> None:
    batch = read_batch(sample_batch(is_control=True))
    assert batch.is_control
    assert not batch.is_transactional


def test_plain_batch_is_neither_transactional_nor_control() -> None:
    batch = read_batch(sample_batch())
    assert not batch.is_transactional
    assert not batch.is_control
    assert not batch.has_delete_horizon


def test_batch_defaults_to_create_time() -> None:
    assert read_batch(sample_batch()).timestamp_type is TimestampType.CREATE_TIME


def test_batch_built_as_log_append_time_reports_its_max_timestamp_for_every_record() -> None:
    batch = read_batch(sample_batch(timestamp_type=TimestampType.LOG_APPEND_TIME))
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert {r.timestamp for r in iter_records(batch)} == {BASE_TIMESTAMP + 9}


def test_header_records_base_and_max_timestamp() -> None:
    batch = read_batch(sample_batch())
    assert batch.base_timestamp == BASE_TIMESTAMP + 5
    assert batch.max_timestamp == BASE_TIMESTAMP + 9


def test_records_keep_timestamps_earlier_than_the_first_record() -> None:
    records = read_back(sample_batch())
    assert [r.timestamp for r in records] == [
        BASE_TIMESTAMP + 5,
        BASE_TIMESTAMP + 9,
        BASE_TIMESTAMP + 2,
    ]


def test_delete_horizon_becomes_the_base_timestamp_and_records_keep_theirs() -> None:
    buf = sample_batch(delete_horizon_ms=BASE_TIMESTAMP + 86_400_000)
    batch = read_batch(buf)
    assert batch.has_delete_horizon
    assert batch.base_timestamp == BASE_TIMESTAMP + 86_400_000
    assert [r.timestamp for r in read_back(buf)] == [
        BASE_TIMESTAMP + 5,
        BASE_TIMESTAMP + 9,
        BASE_TIMESTAMP + 2,
    ]


@pytest.mark.parametrize(
    ("base_sequence", "records", "last_sequence"),
    [
        (0, 1, 0),
        (2**31 - 1, 1, 2**31 - 1),
        (2**31 - 1, 2, 0),
        (2**31 - 2, 4, 1),
    ],
)
def test_last_sequence_wraps_at_2_to_the_31(
    base_sequence: int, records: int, last_sequence: int
) -> None:
    builder = RecordBatchBuilder(producer_id=9, producer_epoch=0, base_sequence=base_sequence)
    for _ in range(records):
        builder.append(b"x", timestamp=BASE_TIMESTAMP)
    assert read_batch(builder.build()).last_sequence == last_sequence


def test_view_repr_names_offsets_and_codec() -> None:
    text = repr(read_batch(sample_batch(CompressionType.GZIP, base_offset=10)))
    assert "base_offset=10" in text
    assert "last_offset=12" in text
    assert "GZIP" in text


# -- in-place rewrites -----------------------------------------------------------


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name)
def test_set_base_offset_keeps_the_crc_valid(codec: CompressionType) -> None:
    buf = bytearray(sample_batch(codec))
    batch = read_batch(buf)
    batch.set_base_offset(1_000_000)
    batch.validate()
    assert batch.base_offset == 1_000_000


def test_set_base_offset_moves_every_record_offset() -> None:
    buf = bytearray(sample_batch())
    read_batch(buf).set_base_offset(40)
    assert [r.offset for r in read_back(bytes(buf))] == [40, 41, 42]


def test_set_base_offset_changes_only_the_first_eight_bytes() -> None:
    original = sample_batch()
    buf = bytearray(original)
    read_batch(buf).set_base_offset(2**40)
    assert buf[8:] == original[8:]
    assert buf[:8] == (2**40).to_bytes(8, "big")


def test_set_partition_leader_epoch_keeps_the_crc_valid() -> None:
    buf = bytearray(sample_batch())
    batch = read_batch(buf)
    batch.set_partition_leader_epoch(77)
    batch.validate()
    assert read_batch(bytes(buf)).partition_leader_epoch == 77


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name)
def test_set_log_append_time_makes_every_record_report_the_append_time(
    codec: CompressionType,
) -> None:
    buf = bytearray(sample_batch(codec))
    read_batch(buf).set_log_append_time(BASE_TIMESTAMP + 60_000)
    assert {r.timestamp for r in read_back(bytes(buf))} == {BASE_TIMESTAMP + 60_000}


def test_set_log_append_time_keeps_the_batch_valid_and_marks_it() -> None:
    buf = bytearray(sample_batch(CompressionType.LZ4))
    batch = read_batch(buf)
    batch.set_log_append_time(BASE_TIMESTAMP + 60_000)
    batch.validate()
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert batch.max_timestamp == BASE_TIMESTAMP + 60_000
    assert batch.compression is CompressionType.LZ4


def test_set_log_append_time_keeps_record_keys_values_and_offsets() -> None:
    before = read_back(sample_batch())
    buf = bytearray(sample_batch())
    read_batch(buf).set_log_append_time(1)
    after = read_back(bytes(buf))
    assert [(r.offset, r.key, r.value, r.headers) for r in after] == [
        (r.offset, r.key, r.value, r.headers) for r in before
    ]


def test_rewriting_a_batch_held_in_immutable_bytes_fails() -> None:
    batch = read_batch(sample_batch())
    with pytest.raises(TypeError):
        batch.set_base_offset(1)


# -- framing of concatenated batches ------------------------------------------------


def test_iter_batches_yields_each_concatenated_batch_with_its_offsets() -> None:
    first = build_batch([b"a", b"b"], timestamp=1, base_offset=0)
    second = build_batch([b"c"], timestamp=2, base_offset=2, compression=CompressionType.ZSTD)
    third = build_batch([b"d", b"e", b"f"], timestamp=3, base_offset=3)
    batches = list(iter_batches(first + second + third))
    assert [(b.base_offset, b.last_offset) for b in batches] == [(0, 1), (2, 2), (3, 5)]
    assert [b.size for b in batches] == [len(first), len(second), len(third)]


def test_iter_batches_over_an_empty_buffer_yields_nothing() -> None:
    assert list(iter_batches(b"")) == []


def test_read_batch_at_a_position_reads_the_batch_that_starts_there() -> None:
    first = build_batch([b"a"], timestamp=1, base_offset=0)
    second = build_batch([b"b"], timestamp=1, base_offset=1)
    batch = read_batch(first + second, len(first))
    assert batch.base_offset == 1
    assert bytes(batch.buffer) == second


def test_read_records_returns_the_records_of_every_concatenated_batch() -> None:
    buf = build_batch([b"a", b"b"], timestamp=1) + build_batch(
        [b"c"], timestamp=2, base_offset=2, compression=CompressionType.GZIP
    )
    assert [(r.offset, r.value) for r in read_records(buf)] == [(0, b"a"), (1, b"b"), (2, b"c")]


def test_batch_size_at_is_none_until_the_length_field_is_there() -> None:
    buf = sample_batch()
    assert batch_size_at(buf[: LOG_OVERHEAD - 1]) is None
    assert batch_size_at(buf[:LOG_OVERHEAD]) == len(buf)


def test_batch_view_does_not_copy_the_buffer() -> None:
    buf = bytearray(sample_batch())
    batch = read_batch(buf)
    buf[HEADER_SIZE - 1] ^= 0xFF  # the last byte of recordCount
    assert batch.record_count != 3


def test_records_package_exports_its_public_surface() -> None:
    assert set(samsa.records.__all__) == {
        "HEADER_SIZE",
        "LOG_OVERHEAD",
        "CompressionType",
        "ControlRecordType",
        "EndTransactionMarker",
        "Header",
        "Record",
        "RecordBatchBuilder",
        "RecordBatchView",
        "TimestampType",
        "batch_size_at",
        "build_batch",
        "build_end_transaction_batch",
        "control_record_type",
        "iter_batches",
        "iter_records",
        "parse_end_transaction_marker",
        "read_batch",
        "read_records",
    }
    assert all(hasattr(samsa.records, name) for name in samsa.records.__all__)
