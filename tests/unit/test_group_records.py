"""Group metadata records of ``__consumer_offsets``: key version 2, value versions 0–4.

Expected bytes are assembled here field by field from Kafka's GroupMetadataKey.json
and GroupMetadataValue.json, so these tests pin the layout rather than echo the
encoder.
"""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.coordinator.group.records import (
    GroupMetadataValue,
    MemberMetadata,
    OffsetKey,
    decode_group_metadata_key,
    decode_group_metadata_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_key,
)
from samsa.errors import CorruptRecordError

SUBSCRIPTION = b"\x00\x00subscription"
ASSIGNMENT = b"\x00\x00assignment"


# Classic (non-flexible) types: int16-length strings, int32-length bytes and arrays.
def string(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def blob(value: bytes) -> bytes:
    return struct.pack(">i", len(value)) + value


# Compact (flexible) types: unsigned varint of length + 1, 0 for null. Every length
# used here is below 127, so the varint is one byte.
def uvarint(value: int) -> bytes:
    assert 0 <= value < 0x80
    return bytes([value])


def compact_string(value: str | None) -> bytes:
    if value is None:
        return uvarint(0)
    raw = value.encode()
    return uvarint(len(raw) + 1) + raw


def compact_blob(value: bytes) -> bytes:
    return uvarint(len(value) + 1) + value


NO_TAGGED_FIELDS = uvarint(0)


# Two members: the first static (a group instance id, from v3 on), the second not.
MEMBERS = (
    ("m-1", "instance-1", "client-1", "/10.0.0.1", 300_000, 10_000, SUBSCRIPTION, ASSIGNMENT),
    ("m-2", None, "client-2", "/10.0.0.2", 60_000, 45_000, b"", b""),
)
# Unknown tagged fields a v4 reader must skip: count, then tag, size, value each.
MEMBER_TAGS = uvarint(1) + uvarint(5) + uvarint(3) + b"xyz"
VALUE_TAGS = uvarint(2) + uvarint(0) + uvarint(1) + b"a" + uvarint(9) + uvarint(0)


def value_bytes(version: int) -> bytes:
    """GroupMetadataValue at ``version``, one field at a time in the JSON's order."""
    flexible = version >= 4
    text = compact_string if flexible else string
    data = compact_blob if flexible else blob
    parts = [
        struct.pack(">h", version),
        text("consumer"),  # protocol type
        struct.pack(">i", 7),  # generation
        text("range"),  # protocol
        text("m-1"),  # leader
    ]
    if version >= 2:
        parts.append(struct.pack(">q", 1_700_000_000_000))  # current state timestamp
    parts.append(uvarint(len(MEMBERS) + 1) if flexible else struct.pack(">i", len(MEMBERS)))
    for member_id, instance_id, client_id, host, rebalance, session, sub, assign in MEMBERS:
        parts.append(text(member_id))
        if version >= 3:
            parts.append(text(instance_id))
        parts += [text(client_id), text(host)]
        if version >= 1:
            parts.append(struct.pack(">i", rebalance))
        parts += [struct.pack(">i", session), data(sub), data(assign)]
        if flexible:
            parts.append(MEMBER_TAGS if member_id == "m-1" else NO_TAGGED_FIELDS)
    if flexible:
        parts.append(VALUE_TAGS)
    return b"".join(parts)


def expected_value(version: int) -> GroupMetadataValue:
    members = tuple(
        MemberMetadata(
            member_id=member_id,
            group_instance_id=instance_id if version >= 3 else None,
            client_id=client_id,
            client_host=host,
            # Version 0 had one timeout; like Kafka, it stands for the rebalance timeout too.
            rebalance_timeout=rebalance if version >= 1 else session,
            session_timeout=session,
            subscription=sub,
            assignment=assign,
        )
        for member_id, instance_id, client_id, host, rebalance, session, sub, assign in MEMBERS
    )
    timestamp = 1_700_000_000_000 if version >= 2 else -1
    return GroupMetadataValue("consumer", 7, "range", "m-1", timestamp, members)


VALUE_VERSIONS = [0, 1, 2, 3, 4]


def test_group_metadata_key_has_kafkas_version_2_layout() -> None:
    raw = encode_group_metadata_key("my-group")
    assert raw == struct.pack(">hh", 2, 8) + b"my-group"
    assert decode_group_metadata_key(raw) == "my-group"


def test_group_metadata_key_round_trips_non_ascii_group_ids() -> None:
    assert decode_group_metadata_key(encode_group_metadata_key("grüppe-✓")) == "grüppe-✓"


def test_offset_commit_key_is_not_a_group_metadata_key() -> None:
    with pytest.raises(CorruptRecordError, match="not a group metadata key"):
        decode_group_metadata_key(encode_offset_key(OffsetKey("g", "t", 0)))


def test_group_metadata_key_with_trailing_bytes_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError):
        decode_group_metadata_key(encode_group_metadata_key("g") + b"\x00")


def test_group_metadata_value_is_written_as_version_3() -> None:
    assert encode_group_metadata_value(expected_value(3)) == value_bytes(3)


def test_group_metadata_value_version_3_round_trips() -> None:
    value = expected_value(3)
    assert decode_group_metadata_value(encode_group_metadata_value(value)) == value


def test_empty_group_with_null_protocol_and_leader_round_trips() -> None:
    # What Kafka writes for a group whose members all left: no protocol, no leader.
    empty = GroupMetadataValue("", 0, None, None, 1_700_000_000_000, ())
    raw = encode_group_metadata_value(empty)
    assert raw == struct.pack(">hhihhqi", 3, 0, 0, -1, -1, 1_700_000_000_000, 0)
    assert decode_group_metadata_value(raw) == empty


@pytest.mark.parametrize("version", VALUE_VERSIONS)
def test_value_decodes_kafkas_layout(version: int) -> None:
    # v1 adds the rebalance timeout, v2 the state timestamp, v3 the group instance id,
    # v4 compact types and tagged fields (unknown ones are skipped).
    assert decode_group_metadata_value(value_bytes(version)) == expected_value(version)


def test_value_version_4_null_protocol_and_leader_are_compact_zero() -> None:
    raw = (
        struct.pack(">h", 4)
        + compact_string("")
        + struct.pack(">i", 0)
        + compact_string(None)
        + compact_string(None)
        + struct.pack(">q", -1)
        + uvarint(0 + 1)
        + NO_TAGGED_FIELDS
    )
    assert decode_group_metadata_value(raw) == GroupMetadataValue("", 0, None, None, -1, ())


@pytest.mark.parametrize("version", [-1, 5, 0x7FFF])
def test_unknown_value_version_is_corrupt(version: int) -> None:
    with pytest.raises(CorruptRecordError, match="version"):
        decode_group_metadata_value(struct.pack(">h", version) + value_bytes(3)[2:])


@pytest.mark.parametrize("version", VALUE_VERSIONS)
def test_value_truncated_at_any_byte_is_corrupt(version: int) -> None:
    raw = value_bytes(version)
    decode_group_metadata_value(raw)  # the whole value is fine
    for end in range(len(raw)):
        with pytest.raises(CorruptRecordError):
            decode_group_metadata_value(raw[:end])


def test_key_truncated_at_any_byte_is_corrupt() -> None:
    raw = encode_group_metadata_key("my-group")
    for end in range(len(raw)):
        with pytest.raises(CorruptRecordError):
            decode_group_metadata_key(raw[:end])


@pytest.mark.parametrize("version", VALUE_VERSIONS)
def test_value_with_trailing_bytes_is_corrupt(version: int) -> None:
    with pytest.raises(CorruptRecordError, match="follow the end"):
        decode_group_metadata_value(value_bytes(version) + b"\x00")


def test_member_count_larger_than_the_bytes_is_corrupt_before_reading_members() -> None:
    raw = struct.pack(">hhihhqi", 3, 0, 0, -1, -1, -1, 2**31 - 1)
    with pytest.raises(CorruptRecordError, match="exceeds the remaining bytes"):
        decode_group_metadata_value(raw)


def test_null_member_id_is_corrupt() -> None:
    raw = value_bytes(0)
    members_at = 2 + len(string("consumer")) + 4 + len(string("range")) + len(string("m-1"))
    member_id_at = members_at + 4
    hostile = raw[:member_id_at] + string(None) + raw[member_id_at + len(string("m-1")) :]
    with pytest.raises(CorruptRecordError, match="null"):
        decode_group_metadata_value(hostile)


def test_null_subscription_bytes_are_corrupt() -> None:
    raw = struct.pack(">hhihhi", 0, 0, 0, -1, -1, 1) + string("m") + string("c") + string("h")
    raw += struct.pack(">iii", 10_000, -1, 0)
    with pytest.raises(CorruptRecordError, match="null"):
        decode_group_metadata_value(raw)


def test_string_length_below_minus_one_is_corrupt() -> None:
    raw = struct.pack(">hh", 3, -2) + value_bytes(3)[2 + len(string("consumer")) :]
    with pytest.raises(CorruptRecordError, match="negative length"):
        decode_group_metadata_value(raw)


def test_invalid_utf8_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="UTF-8"):
        decode_group_metadata_key(struct.pack(">hh", 2, 2) + b"\xff\xfe")


def test_varint_longer_than_five_bytes_is_corrupt() -> None:
    raw = struct.pack(">h", 4) + b"\x80\x80\x80\x80\x80\x01"
    with pytest.raises(CorruptRecordError, match="varint"):
        decode_group_metadata_value(raw)


def test_varint_above_32_bits_is_corrupt() -> None:
    raw = struct.pack(">h", 4) + b"\xff\xff\xff\xff\x7f"
    with pytest.raises(CorruptRecordError, match="32 bits"):
        decode_group_metadata_value(raw)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(VALUE_VERSIONS), st.integers(min_value=2), st.binary(min_size=1, max_size=4))
def test_any_mangled_value_decodes_or_is_corrupt(
    version: int, position: int, replacement: bytes
) -> None:
    raw = value_bytes(version)
    position %= len(raw)
    hostile = raw[:position] + replacement + raw[position + len(replacement) :]
    with contextlib.suppress(CorruptRecordError):
        decode_group_metadata_value(hostile)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=4), st.binary(max_size=64))
def test_random_bytes_after_a_known_version_decode_or_are_corrupt(
    version: int, body: bytes
) -> None:
    with contextlib.suppress(CorruptRecordError):
        decode_group_metadata_value(struct.pack(">h", version) + body)


def test_value_version_4_reads_multi_byte_varint_lengths() -> None:
    subscription = bytes(range(200))
    raw = b"".join(
        [
            struct.pack(">h", 4),
            compact_string("consumer"),
            struct.pack(">i", 1),
            compact_string("range"),
            compact_string("m"),
            struct.pack(">q", 5),
            uvarint(1 + 1),
            compact_string("m"),
            compact_string(None),
            compact_string("c"),
            compact_string("h"),
            struct.pack(">ii", 20, 10),
            b"\xc9\x01" + subscription,  # 201 = 0b1_1001001: low seven bits first
            compact_blob(b""),
            NO_TAGGED_FIELDS,
            NO_TAGGED_FIELDS,
        ]
    )
    member = MemberMetadata("m", None, "c", "h", 20, 10, subscription, b"")
    assert decode_group_metadata_value(raw) == GroupMetadataValue(
        "consumer", 1, "range", "m", 5, (member,)
    )
