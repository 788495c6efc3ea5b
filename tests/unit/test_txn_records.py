"""``__transaction_state`` records: key version 0, value versions 0 and 1.

Expected bytes are assembled here field by field from Kafka's TransactionLogKey.json
and TransactionLogValue.json, so these tests pin the layout rather than echo the
encoder.
"""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from samsa.coordinator.transaction.records import (
    TransactionLogValue,
    decode_transaction_log_key,
    decode_transaction_log_value,
    encode_transaction_log_key,
    encode_transaction_log_value,
)
from samsa.errors import CorruptRecordError

ONGOING, EMPTY, COMPLETE_COMMIT = 1, 0, 4


def i8(value: int) -> bytes:
    return struct.pack(">b", value)


def i16(value: int) -> bytes:
    return struct.pack(">h", value)


def i32(value: int) -> bytes:
    return struct.pack(">i", value)


def i64(value: int) -> bytes:
    return struct.pack(">q", value)


def string(value: str) -> bytes:
    raw = value.encode()
    return i16(len(raw)) + raw


# Compact (flexible) types; every length here is below 127, so a varint is one byte.
def uvarint(value: int) -> bytes:
    assert 0 <= value < 0x80
    return bytes([value])


def compact_string(value: str) -> bytes:
    raw = value.encode()
    return uvarint(len(raw) + 1) + raw


ONGOING_VALUE = TransactionLogValue(
    producer_id=4001,
    producer_epoch=7,
    transaction_timeout_ms=60_000,
    transaction_status=ONGOING,
    transaction_partitions=(("orders", (0, 2)), ("__consumer_offsets", (31,))),
    last_update_timestamp_ms=1_700_000_000_500,
    start_timestamp_ms=1_700_000_000_000,
)

COMMON_HEAD = i64(4001) + i16(7) + i32(60_000) + i8(ONGOING)
TIMESTAMPS = i64(1_700_000_000_500) + i64(1_700_000_000_000)


def test_key_is_version_0_and_a_classic_string() -> None:
    encoded = encode_transaction_log_key("txn-é")
    assert encoded == i16(0) + i16(6) + "txn-é".encode()
    assert decode_transaction_log_key(encoded) == "txn-é"


def test_value_version_1_is_compact_with_an_empty_tagged_section() -> None:
    expected = (
        i16(1)
        + COMMON_HEAD
        + uvarint(3)  # two topics
        + compact_string("orders") + uvarint(3) + i32(0) + i32(2) + uvarint(0)
        + compact_string("__consumer_offsets") + uvarint(2) + i32(31) + uvarint(0)
        + TIMESTAMPS
        + uvarint(0)  # no tagged fields: all at their defaults
    )  # fmt: skip
    assert encode_transaction_log_value(ONGOING_VALUE) == expected
    assert decode_transaction_log_value(expected) == ONGOING_VALUE


def test_value_version_0_is_classic_without_tagged_fields() -> None:
    expected = (
        i16(0)
        + COMMON_HEAD
        + i32(2)
        + string("orders") + i32(2) + i32(0) + i32(2)
        + string("__consumer_offsets") + i32(1) + i32(31)
        + TIMESTAMPS
    )  # fmt: skip
    assert encode_transaction_log_value(ONGOING_VALUE, version=0) == expected
    assert decode_transaction_log_value(expected) == ONGOING_VALUE


def test_empty_state_writes_null_partitions_in_both_versions() -> None:
    value = TransactionLogValue(9, 0, 1000, EMPTY, None, 5, -1)
    head = i64(9) + i16(0) + i32(1000) + i8(EMPTY)
    tail = i64(5) + i64(-1)
    assert encode_transaction_log_value(value, 0) == i16(0) + head + i32(-1) + tail
    v1 = i16(1) + head + uvarint(0) + tail + uvarint(0)
    assert encode_transaction_log_value(value) == v1
    assert decode_transaction_log_value(v1) == value


def test_completed_state_writes_an_empty_array() -> None:
    value = TransactionLogValue(9, 3, 1000, COMPLETE_COMMIT, (), 5, 4)
    encoded = encode_transaction_log_value(value)
    assert encoded == (
        i16(1) + i64(9) + i16(3) + i32(1000) + i8(COMPLETE_COMMIT)
        + uvarint(1) + i64(5) + i64(4) + uvarint(0)
    )  # fmt: skip
    assert decode_transaction_log_value(encoded) == value


def test_tagged_fields_are_written_only_when_not_default_and_in_tag_order() -> None:
    value = TransactionLogValue(
        9, 0, 1000, EMPTY, None, 5, -1,
        previous_producer_id=8, next_producer_id=10,
        client_transaction_version=2, next_producer_epoch=1,
    )  # fmt: skip
    encoded = encode_transaction_log_value(value)
    assert encoded.endswith(
        uvarint(4)
        + uvarint(0) + uvarint(8) + i64(8)
        + uvarint(1) + uvarint(8) + i64(10)
        + uvarint(2) + uvarint(2) + i16(2)
        + uvarint(3) + uvarint(2) + i16(1)
    )  # fmt: skip
    assert decode_transaction_log_value(encoded) == value


def test_unknown_tagged_fields_are_skipped() -> None:
    value = TransactionLogValue(9, 0, 1000, EMPTY, None, 5, -1)
    base = encode_transaction_log_value(value)[:-1]  # drop the empty tagged section
    with_unknown = base + uvarint(1) + uvarint(9) + uvarint(3) + b"abc"
    assert decode_transaction_log_value(with_unknown) == value


def every_truncation(data: bytes) -> list[bytes]:
    return [data[:cut] for cut in range(len(data))]


@pytest.mark.parametrize("version", [0, 1])
def test_every_truncated_value_is_corrupt(version: int) -> None:
    for truncated in every_truncation(encode_transaction_log_value(ONGOING_VALUE, version)):
        with pytest.raises(CorruptRecordError):
            decode_transaction_log_value(truncated)


def test_every_truncated_key_is_corrupt() -> None:
    for truncated in every_truncation(encode_transaction_log_key("txn")):
        with pytest.raises(CorruptRecordError):
            decode_transaction_log_key(truncated)


@pytest.mark.parametrize(
    "data",
    [
        encode_transaction_log_value(ONGOING_VALUE) + b"\x00",  # bytes after the value
        i16(2) + encode_transaction_log_value(ONGOING_VALUE)[2:],  # unknown version
        i16(-1) + encode_transaction_log_value(ONGOING_VALUE)[2:],
        # a partition array claiming more elements than bytes remain
        i16(0) + COMMON_HEAD + i32(1_000_000) + TIMESTAMPS,
        # a negative length other than the null marker
        i16(0) + COMMON_HEAD + i32(-2) + TIMESTAMPS,
        # a tagged field of the wrong size for its type
        i16(1) + COMMON_HEAD + uvarint(0) + TIMESTAMPS + uvarint(1) + uvarint(0)
        + uvarint(4) + i32(8),
        # tags out of order
        i16(1) + COMMON_HEAD + uvarint(0) + TIMESTAMPS + uvarint(2)
        + uvarint(1) + uvarint(8) + i64(1) + uvarint(0) + uvarint(8) + i64(1),
    ],
)  # fmt: skip
def test_malformed_values_are_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decode_transaction_log_value(data)


@pytest.mark.parametrize(
    "data",
    [
        i16(1) + string("txn"),  # a version this key never had
        encode_transaction_log_key("txn") + b"\x00",
        i16(0) + i16(-1),  # a null transactional id
        i16(0) + i16(2) + b"\xff\xfe",  # not UTF-8
    ],
)
def test_malformed_keys_are_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decode_transaction_log_key(data)


# The loader must survive any bytes: each decoder returns or raises CorruptRecordError.
@given(st.binary(max_size=64))
def test_any_bytes_decode_as_a_key_or_are_corrupt(data: bytes) -> None:
    with contextlib.suppress(CorruptRecordError):
        decode_transaction_log_key(data)


@given(st.binary(max_size=96))
def test_any_bytes_decode_as_a_value_or_are_corrupt(data: bytes) -> None:
    with contextlib.suppress(CorruptRecordError):
        decode_transaction_log_value(data)


@given(st.sampled_from([0, 1]), st.binary(max_size=96))
def test_random_bytes_after_a_known_value_version_decode_or_are_corrupt(
    version: int, body: bytes
) -> None:
    with contextlib.suppress(CorruptRecordError):
        decode_transaction_log_value(i16(version) + body)


@given(st.sampled_from([0, 1]), st.integers(min_value=0), st.binary(min_size=1, max_size=4))
def test_any_mangled_value_decodes_or_is_corrupt(
    version: int, position: int, replacement: bytes
) -> None:
    raw = encode_transaction_log_value(ONGOING_VALUE, version)
    position %= len(raw)
    hostile = raw[:position] + replacement + raw[position + len(replacement) :]
    with contextlib.suppress(CorruptRecordError):
        decode_transaction_log_value(hostile)


@given(st.integers(min_value=0), st.binary(min_size=1, max_size=4))
def test_any_mangled_key_decodes_or_is_corrupt(position: int, replacement: bytes) -> None:
    raw = encode_transaction_log_key("tränsaction-1")
    position %= len(raw)
    hostile = raw[:position] + replacement + raw[position + len(replacement) :]
    with contextlib.suppress(CorruptRecordError):
        decode_transaction_log_key(hostile)
