"""``__consumer_offsets`` record formats and Kafka's group → partition rule."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from samsa.coordinator.group.records import (
    OffsetKey,
    OffsetValue,
    decode_offset_key,
    decode_offset_value,
    encode_offset_key,
    encode_offset_value,
    java_string_hash,
    key_version,
    partition_for,
)
from samsa.errors import CorruptRecordError


@pytest.mark.parametrize(
    ("text", "expected"),
    # Values printed by a JVM (String.hashCode) on this machine.
    [
        ("", 0),
        ("hello", 99162322),
        ("my-group", -1906497762),
        ("ünïcode", -609351766),
        ("polygenelubricants", -(2**31)),
    ],
)
def test_group_hash_is_javas_string_hash_code(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_group_partition_is_the_absolute_hash_modulo_the_partition_count() -> None:
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("ünïcode", 50) == 609351766 % 50
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(Integer.MIN_VALUE) is 0


def test_offset_key_has_kafkas_version_1_layout() -> None:
    raw = encode_offset_key(OffsetKey("g", "orders", 7))
    assert raw == struct.pack(">hh", 1, 1) + b"g" + struct.pack(">h", 6) + b"orders" + struct.pack(
        ">i", 7
    )
    assert decode_offset_key(raw) == OffsetKey("g", "orders", 7)


def test_offset_value_has_kafkas_version_3_layout() -> None:
    raw = encode_offset_value(OffsetValue(42, 5, "meta", 1_700_000_000_000))
    assert raw == struct.pack(">hqih", 3, 42, 5, 4) + b"meta" + struct.pack(">q", 1_700_000_000_000)
    assert decode_offset_value(raw) == OffsetValue(42, 5, "meta", 1_700_000_000_000)


def test_older_value_versions_decode_without_a_leader_epoch() -> None:
    v1 = struct.pack(">hqh", 1, 9, 0) + struct.pack(">qq", 123, 456)
    assert decode_offset_value(v1) == OffsetValue(9, -1, "", 123)


def test_truncated_records_are_corrupt() -> None:
    with pytest.raises(CorruptRecordError):
        decode_offset_key(encode_offset_key(OffsetKey("group", "t", 0))[:-2])
    with pytest.raises(CorruptRecordError):
        decode_offset_value(encode_offset_value(OffsetValue(1, 1, "m", 1))[:-3])


def test_a_group_name_that_is_not_utf8_is_a_corrupt_key() -> None:
    raw = (
        struct.pack(">hh", 1, 2) + b"\xff\xfe" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 0)
    )
    with pytest.raises(CorruptRecordError):
        decode_offset_key(raw)


def test_metadata_that_is_not_utf8_is_a_corrupt_value() -> None:
    raw = struct.pack(">hqih", 3, 42, 5, 2) + b"\xc3\x28" + struct.pack(">q", 1)
    with pytest.raises(CorruptRecordError):
        decode_offset_value(raw)


def test_value_version_1_reads_the_commit_timestamp_before_the_expire_timestamp() -> None:
    v1 = struct.pack(">hqh", 1, 9, 1) + b"m" + struct.pack(">qq", 123, 456)
    assert decode_offset_value(v1) == OffsetValue(9, -1, "m", 123)


def test_value_version_4_is_flexible_and_skips_tagged_fields() -> None:
    # offset, leader epoch, compact "meta", commit timestamp, one unknown tagged field
    v4 = (
        struct.pack(">hqi", 4, 42, 5) + bytes([5]) + b"meta" + struct.pack(">q", 77)
        + bytes([1, 9, 2]) + b"xy"
    )  # fmt: skip
    assert decode_offset_value(v4) == OffsetValue(42, 5, "meta", 77)


@pytest.mark.parametrize("version", [-1, 5, 300])
def test_an_unknown_value_version_is_corrupt(version: int) -> None:
    raw = struct.pack(">h", version) + encode_offset_value(OffsetValue(1, 1, "m", 1))[2:]
    with pytest.raises(CorruptRecordError):
        decode_offset_value(raw)


def test_bytes_after_a_key_or_value_are_corrupt() -> None:
    with pytest.raises(CorruptRecordError):
        decode_offset_key(encode_offset_key(OffsetKey("g", "t", 0)) + b"\x00")
    with pytest.raises(CorruptRecordError):
        decode_offset_value(encode_offset_value(OffsetValue(1, 1, "m", 1)) + b"\x00")


def test_every_truncated_key_and_value_is_corrupt() -> None:
    key = encode_offset_key(OffsetKey("group", "orders", 3))
    value = encode_offset_value(OffsetValue(10, 2, "meta", 5))
    for cut in range(len(key)):
        with pytest.raises(CorruptRecordError):
            decode_offset_key(key[:cut])
    for cut in range(len(value)):
        with pytest.raises(CorruptRecordError):
            decode_offset_value(value[:cut])


# The loader must survive any bytes: each decoder returns or raises CorruptRecordError.
@given(st.binary(max_size=64))
def test_any_bytes_decode_as_an_offset_key_or_are_corrupt(data: bytes) -> None:
    with contextlib.suppress(CorruptRecordError):
        decode_offset_key(data)


@given(st.binary(max_size=64))
def test_any_bytes_decode_as_an_offset_value_or_are_corrupt(data: bytes) -> None:
    with contextlib.suppress(CorruptRecordError):
        decode_offset_value(data)


@given(st.integers(min_value=0, max_value=4), st.binary(max_size=48))
def test_random_bytes_after_a_known_value_version_decode_or_are_corrupt(
    version: int, body: bytes
) -> None:
    with contextlib.suppress(CorruptRecordError):
        decode_offset_value(struct.pack(">h", version) + body)


@given(st.sampled_from([0, 1]), st.binary(max_size=48))
def test_random_bytes_after_a_known_key_version_decode_or_are_corrupt(
    version: int, body: bytes
) -> None:
    with contextlib.suppress(CorruptRecordError):
        decode_offset_key(struct.pack(">h", version) + body)


@given(st.booleans(), st.integers(min_value=0), st.binary(min_size=1, max_size=4))
def test_any_mangled_key_or_value_decodes_or_is_corrupt(
    mangle_key: bool, position: int, replacement: bytes
) -> None:
    if mangle_key:
        raw, decode = encode_offset_key(OffsetKey("grüppe", "orders", 3)), decode_offset_key
    else:
        raw, decode = encode_offset_value(OffsetValue(10, 2, "mëta", 5)), decode_offset_value
    position %= len(raw)
    hostile = raw[:position] + replacement + raw[position + len(replacement) :]
    with contextlib.suppress(CorruptRecordError):
        decode(hostile)  # type: ignore[operator]


@pytest.mark.parametrize("key", [b"", b"\x00"])
def test_a_key_shorter_than_its_version_is_corrupt(key: bytes) -> None:
    with pytest.raises(CorruptRecordError, match="offsets record key"):
        key_version(key)


def test_the_key_version_is_the_leading_int16() -> None:
    assert key_version(encode_offset_key(OffsetKey("g", "t", 0))) == 1
    assert key_version(b"\x00\x02\x00\x01g") == 2
