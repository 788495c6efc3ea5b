"""``__consumer_offsets`` record formats and Kafka's group → partition rule."""

from __future__ import annotations

import struct

import pytest

from samsa.coordinator.group.records import (
    OffsetKey,
    OffsetValue,
    decode_offset_key,
    decode_offset_value,
    encode_offset_key,
    encode_offset_value,
    java_string_hash,
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
