"""Transaction markers: the control batches a coordinator writes to end a transaction."""

from __future__ import annotations

import struct

import pytest
from kafka.record.default_records import DefaultRecordBatch

from samsa.errors import CorruptRecordError
from samsa.records import (
    CompressionType,
    ControlRecordType,
    EndTransactionMarker,
    Record,
    RecordBatchBuilder,
    build_end_transaction_batch,
    control_record_type,
    iter_records,
    parse_end_transaction_marker,
    read_batch,
)

MARKERS = [ControlRecordType.COMMIT, ControlRecordType.ABORT]


def marker_batch(marker: ControlRecordType = ControlRecordType.COMMIT, **options: int) -> bytes:
    fields = {"producer_id": 4242, "producer_epoch": 3, "coordinator_epoch": 17, **options}
    return build_end_transaction_batch(marker, **fields)


def only_record(buf: bytes) -> Record:
    batch = read_batch(buf)
    batch.validate()
    (record,) = iter_records(batch)
    return record


def control_record(key: bytes | None, value: bytes | None = b"\x00\x00\x00\x00\x00\x00") -> Record:
    return Record(0, 0, key, value)


def key(version: int, type_id: int) -> bytes:
    return struct.pack(">hh", version, type_id)


@pytest.mark.parametrize("marker", MARKERS, ids=lambda m: m.name)
def test_end_transaction_batch_is_a_control_batch_of_a_transaction(
    marker: ControlRecordType,
) -> None:
    batch = read_batch(marker_batch(marker))
    batch.validate()
    assert batch.is_control
    assert batch.is_transactional
    assert batch.record_count == 1


@pytest.mark.parametrize("marker", MARKERS, ids=lambda m: m.name)
def test_end_transaction_batch_carries_the_producer_id_and_epoch(
    marker: ControlRecordType,
) -> None:
    batch = read_batch(marker_batch(marker))
    assert batch.producer_id == 4242
    assert batch.producer_epoch == 3


def test_end_transaction_batch_has_no_sequence() -> None:
    assert read_batch(marker_batch()).base_sequence == -1


def test_end_transaction_batch_is_never_compressed() -> None:
    assert read_batch(marker_batch()).compression is CompressionType.NONE


@pytest.mark.parametrize("marker", MARKERS, ids=lambda m: m.name)
def test_end_transaction_marker_parses_back_with_its_type_and_coordinator_epoch(
    marker: ControlRecordType,
) -> None:
    parsed = parse_end_transaction_marker(only_record(marker_batch(marker)))
    assert parsed == EndTransactionMarker(marker, 17, 0)


def test_commit_marker_reports_committed() -> None:
    assert parse_end_transaction_marker(
        only_record(marker_batch(ControlRecordType.COMMIT))
    ).committed


def test_abort_marker_reports_not_committed() -> None:
    marker = parse_end_transaction_marker(only_record(marker_batch(ControlRecordType.ABORT)))
    assert not marker.committed


def test_end_transaction_batch_places_its_marker_at_the_base_offset() -> None:
    buf = marker_batch(base_offset=900, partition_leader_epoch=5, timestamp=1_234)
    batch = read_batch(buf)
    assert batch.partition_leader_epoch == 5
    record = only_record(buf)
    assert record.offset == 900
    assert record.timestamp == 1_234


def test_end_transaction_marker_key_and_value_are_kafkas_wire_layout() -> None:
    record = only_record(marker_batch(ControlRecordType.COMMIT, coordinator_epoch=0x01020304))
    assert record.key == b"\x00\x00\x00\x01"  # version 0, type 1 (COMMIT)
    assert record.value == b"\x00\x00\x01\x02\x03\x04"  # version 0, coordinator epoch


@pytest.mark.parametrize("marker", MARKERS, ids=lambda m: m.name)
def test_kafka_python_sees_the_marker_as_a_control_batch(marker: ControlRecordType) -> None:
    batch = DefaultRecordBatch(marker_batch(marker))
    assert batch.validate_crc()
    assert batch.is_control_batch
    assert batch.is_transactional
    assert batch.producer_id == 4242
    assert batch.producer_epoch == 3
    (record,) = list(batch)
    assert record.type == int(marker)
    assert record.commit is (marker is ControlRecordType.COMMIT)
    assert record.abort is (marker is ControlRecordType.ABORT)


@pytest.mark.parametrize(
    "marker",
    [t for t in ControlRecordType if t not in MARKERS],
    ids=lambda m: m.name,
)
def test_building_an_end_transaction_batch_of_another_type_raises_value_error(
    marker: ControlRecordType,
) -> None:
    with pytest.raises(ValueError):
        build_end_transaction_batch(marker, producer_id=1, producer_epoch=0, coordinator_epoch=0)


@pytest.mark.parametrize("control_type", list(ControlRecordType), ids=lambda m: m.name)
def test_control_record_type_reads_every_type_kafka_defines(
    control_type: ControlRecordType,
) -> None:
    assert control_record_type(control_record(key(0, control_type))) is control_type


def test_control_record_type_accepts_a_newer_key_version() -> None:
    assert control_record_type(control_record(key(3, 1))) is ControlRecordType.COMMIT


def test_leader_change_record_is_not_an_end_transaction_marker() -> None:
    record = control_record(key(0, ControlRecordType.LEADER_CHANGE))
    with pytest.raises(CorruptRecordError):
        parse_end_transaction_marker(record)


@pytest.mark.parametrize(
    "record_key",
    [None, b"", b"\x00\x00\x01", key(0, 99), key(0, -1), key(-1, 1)],
    ids=["null", "empty", "three-bytes", "unknown-type", "negative-type", "negative-version"],
)
def test_control_record_with_a_bad_key_raises_corrupt_record(record_key: bytes | None) -> None:
    with pytest.raises(CorruptRecordError):
        control_record_type(control_record(record_key))


@pytest.mark.parametrize(
    "value", [None, b"", b"\x00\x00\x00\x00\x00"], ids=["null", "empty", "five-bytes"]
)
def test_end_transaction_marker_with_a_short_value_raises_corrupt_record(
    value: bytes | None,
) -> None:
    with pytest.raises(CorruptRecordError):
        parse_end_transaction_marker(control_record(key(0, 1), value))


def test_marker_in_a_control_batch_built_by_hand_parses_like_a_built_one() -> None:
    builder = RecordBatchBuilder(
        producer_id=7, producer_epoch=1, is_transactional=True, is_control=True
    )
    builder.append(struct.pack(">hi", 0, 99), key=key(0, 0), timestamp=5)
    marker = parse_end_transaction_marker(only_record(builder.build()))
    assert marker == EndTransactionMarker(ControlRecordType.ABORT, 99)
