"""Zig-zag varints: the length and delta encoding inside every record."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record import util as kafka_util

from samsa.errors import CorruptRecordError
from samsa.records.varint import (
    MAX_VARINT_BYTES,
    MAX_VARLONG_BYTES,
    decode_varint,
    encode_varint,
    size_of_varint,
)

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
INT32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)


def kafka_python_encoding(value: int) -> bytes:
    out = bytearray()
    kafka_util.encode_varint(value, out.append)
    return bytes(out)


@settings(max_examples=100, deadline=None)
@given(INT64)
def test_varint_round_trips_every_signed_64_bit_value(value: int) -> None:
    encoded = encode_varint(value)
    assert decode_varint(encoded, 0) == (value, len(encoded))


@settings(max_examples=100, deadline=None)
@given(INT64)
def test_size_of_varint_agrees_with_the_encoded_length(value: int) -> None:
    assert size_of_varint(value) == len(encode_varint(value))


@settings(max_examples=100, deadline=None)
@given(INT64)
def test_varint_encoding_matches_kafka_python(value: int) -> None:
    assert encode_varint(value) == kafka_python_encoding(value)


@settings(max_examples=100, deadline=None)
@given(INT32)
def test_every_signed_32_bit_value_fits_in_five_bytes(value: int) -> None:
    encoded = encode_varint(value)
    assert len(encoded) <= MAX_VARINT_BYTES
    assert decode_varint(encoded, 0, MAX_VARINT_BYTES) == (value, len(encoded))


@settings(max_examples=50, deadline=None)
@given(st.binary(max_size=20), INT64, st.binary(max_size=20))
def test_decode_reads_a_varint_in_the_middle_of_a_buffer(
    prefix: bytes, value: int, suffix: bytes
) -> None:
    buf = prefix + encode_varint(value) + suffix
    assert decode_varint(buf, len(prefix)) == (value, len(buf) - len(suffix))


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-64, b"\x7f"),
        (63, b"\x7e"),
        (64, b"\x80\x01"),
        (-65, b"\x81\x01"),
        (300, b"\xd8\x04"),
        (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
        (-(2**31), b"\xff\xff\xff\xff\x0f"),
        (2**63 - 1, b"\xfe" + b"\xff" * 8 + b"\x01"),
        (-(2**63), b"\xff" * 9 + b"\x01"),
    ],
)
def test_varint_encodes_known_values_as_protobuf_sint64(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview])
def test_decode_accepts_any_bytes_like_buffer(wrap: type) -> None:
    assert decode_varint(wrap(b"\xd8\x04"), 0) == (300, 2)


@pytest.mark.parametrize("buf", [b"", b"\x80", b"\xff\xff\xff"])
def test_varint_cut_off_mid_value_raises_corrupt_record(buf: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decode_varint(buf, 0)


def test_decode_at_the_end_of_a_buffer_raises_corrupt_record() -> None:
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\x02", 1)


def test_six_byte_varint_is_rejected_where_an_int32_is_expected() -> None:
    six_bytes = b"\x80\x80\x80\x80\x80\x01"
    with pytest.raises(CorruptRecordError):
        decode_varint(six_bytes, 0, MAX_VARINT_BYTES)


def test_six_byte_varint_is_accepted_where_an_int64_is_expected() -> None:
    six_bytes = b"\x80\x80\x80\x80\x80\x01"
    assert decode_varint(six_bytes, 0, MAX_VARLONG_BYTES) == (2**34, 6)


def test_endless_continuation_bits_raise_corrupt_record_after_ten_bytes() -> None:
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\x80" * 1000, 0)
