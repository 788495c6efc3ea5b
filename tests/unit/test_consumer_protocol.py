"""Consumer protocol payloads: JoinGroup subscriptions and SyncGroup assignments, v0–3.

Expected bytes are assembled here field by field from Kafka's
ConsumerProtocolSubscription.json and ConsumerProtocolAssignment.json; the
cross-checks run kafka-python's own encoder and decoder against ours.
"""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)

from samsa.errors import CorruptRecordError
from samsa.protocol.consumer_protocol import (
    Assignment,
    Subscription,
    encode_assignment,
    encode_subscription,
    parse_assignment,
    parse_subscription,
)

OWNED = (("orders", (0, 2)), ("payments", ()))


def string(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def blob(value: bytes | None) -> bytes:
    if value is None:
        return struct.pack(">i", -1)
    return struct.pack(">i", len(value)) + value


def int32_array(values: tuple[int, ...]) -> bytes:
    return struct.pack(f">i{len(values)}i", len(values), *values)


def topic_partitions(entries: tuple[tuple[str, tuple[int, ...]], ...]) -> bytes:
    return struct.pack(">i", len(entries)) + b"".join(
        string(topic) + int32_array(partitions) for topic, partitions in entries
    )


def subscription_bytes(version: int) -> bytes:
    parts = [struct.pack(">h", version), struct.pack(">i", 2), string("orders"), string("payments")]
    parts.append(blob(b"user"))
    if version >= 1:
        parts.append(topic_partitions(OWNED))
    if version >= 2:
        parts.append(struct.pack(">i", 12))
    if version >= 3:
        parts.append(string("rack-a"))
    return b"".join(parts)


def expected_subscription(version: int) -> Subscription:
    return Subscription(
        version=version,
        topics=("orders", "payments"),
        user_data=b"user",
        owned_partitions=OWNED if version >= 1 else (),
        generation_id=12 if version >= 2 else -1,
        rack_id="rack-a" if version >= 3 else None,
    )


def assignment_bytes(version: int) -> bytes:
    return struct.pack(">h", version) + topic_partitions(OWNED) + blob(b"ud")


VERSIONS = [0, 1, 2, 3]


@pytest.mark.parametrize("version", VERSIONS)
def test_subscription_decodes_kafkas_layout(version: int) -> None:
    assert parse_subscription(subscription_bytes(version)) == expected_subscription(version)


@pytest.mark.parametrize("version", VERSIONS)
def test_subscription_encodes_kafkas_layout(version: int) -> None:
    assert encode_subscription(expected_subscription(version)) == subscription_bytes(version)


@pytest.mark.parametrize("version", VERSIONS)
def test_assignment_decodes_and_encodes_kafkas_layout(version: int) -> None:
    expected = Assignment(version, OWNED, b"ud")
    assert parse_assignment(assignment_bytes(version)) == expected
    assert encode_assignment(expected) == assignment_bytes(version)


def test_null_user_data_and_rack_round_trip() -> None:
    sub = Subscription(3, ("t",), None, (), -1, None)
    raw = encode_subscription(sub)
    assert raw == struct.pack(">hi", 3, 1) + string("t") + struct.pack(">iiih", -1, 0, -1, -1)
    assert parse_subscription(raw) == sub


def test_fields_a_version_lacks_are_left_out_when_encoding() -> None:
    sub = Subscription(0, ("t",), b"", OWNED, 5, "rack")
    assert encode_subscription(sub) == struct.pack(">hi", 0, 1) + string("t") + blob(b"")


def test_empty_assignment_means_the_member_got_nothing() -> None:
    assert parse_assignment(b"") == Assignment(0, (), None)


@pytest.mark.parametrize("version", VERSIONS)
def test_subscription_with_trailing_bytes_is_read_up_to_its_known_fields(version: int) -> None:
    raw = subscription_bytes(version) + b"\x00\x01future-field"
    assert parse_subscription(raw) == expected_subscription(version)


def test_assignment_with_trailing_bytes_is_read_up_to_its_known_fields() -> None:
    assert parse_assignment(assignment_bytes(1) + b"\xff" * 7) == Assignment(1, OWNED, b"ud")


def test_higher_subscription_version_is_read_as_version_3() -> None:
    raw = struct.pack(">h", 9) + subscription_bytes(3)[2:] + struct.pack(">i", 77)
    parsed = parse_subscription(raw)
    assert parsed.version == 9
    assert parsed == Subscription(9, ("orders", "payments"), b"user", OWNED, 12, "rack-a")


def test_higher_assignment_version_is_read_as_version_3() -> None:
    raw = struct.pack(">h", 4) + assignment_bytes(3)[2:] + b"new"
    assert parse_assignment(raw) == Assignment(4, OWNED, b"ud")


@pytest.mark.parametrize("version", [-1, 4])
def test_versions_outside_0_to_3_cannot_be_encoded(version: int) -> None:
    with pytest.raises(ValueError, match="version"):
        encode_subscription(Subscription(version, (), None, (), -1, None))
    with pytest.raises(ValueError, match="version"):
        encode_assignment(Assignment(version, (), None))


def test_negative_version_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="negative version"):
        parse_subscription(struct.pack(">h", -1) + subscription_bytes(0)[2:])
    with pytest.raises(CorruptRecordError, match="negative version"):
        parse_assignment(struct.pack(">h", -3) + assignment_bytes(0)[2:])


@pytest.mark.parametrize("version", VERSIONS)
def test_subscription_truncated_at_any_byte_is_corrupt(version: int) -> None:
    raw = subscription_bytes(version)
    for end in range(len(raw)):
        with pytest.raises(CorruptRecordError):
            parse_subscription(raw[:end])


@pytest.mark.parametrize("version", VERSIONS)
def test_assignment_truncated_at_any_nonzero_byte_is_corrupt(version: int) -> None:
    raw = assignment_bytes(version)
    for end in range(1, len(raw)):
        with pytest.raises(CorruptRecordError):
            parse_assignment(raw[:end])


def test_topic_count_larger_than_the_bytes_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="exceeds the remaining bytes"):
        parse_subscription(struct.pack(">hi", 0, 2**31 - 1) + b"\x00" * 16)


def test_partition_count_larger_than_the_bytes_is_corrupt() -> None:
    raw = struct.pack(">hi", 0, 1) + string("t") + struct.pack(">i", 1_000_000) + b"\x00" * 8
    with pytest.raises(CorruptRecordError, match="exceeds the remaining bytes"):
        parse_assignment(raw)


def test_null_topic_name_is_corrupt() -> None:
    raw = struct.pack(">hi", 0, 1) + string(None) + blob(None)
    with pytest.raises(CorruptRecordError, match="null"):
        parse_subscription(raw)


def test_null_topic_array_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="null"):
        parse_subscription(struct.pack(">hi", 0, -1) + blob(None))


def test_invalid_utf8_topic_is_corrupt() -> None:
    raw = struct.pack(">hih", 0, 1, 1) + b"\xff" + blob(None)
    with pytest.raises(CorruptRecordError, match="UTF-8"):
        parse_subscription(raw)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_random_bytes_parse_or_are_corrupt(data: bytes) -> None:
    with contextlib.suppress(CorruptRecordError):
        parse_subscription(data)
    with contextlib.suppress(CorruptRecordError):
        parse_assignment(data)


# Cross-checks with kafka-python 3.x, whose consumer sends these payloads.


def kafka_python_subscription(version: int) -> ConsumerProtocolSubscription:
    expected = expected_subscription(version)
    return ConsumerProtocolSubscription(
        version=version,
        topics=list(expected.topics),
        user_data=expected.user_data,
        owned_partitions=[
            ConsumerProtocolSubscription.TopicPartition(topic=topic, partitions=list(partitions))
            for topic, partitions in expected.owned_partitions
        ],
        generation_id=expected.generation_id,
        rack_id=expected.rack_id,
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_subscription_encoded_by_kafka_python_parses(version: int) -> None:
    raw = kafka_python_subscription(version).encode()
    assert parse_subscription(raw) == expected_subscription(version)


@pytest.mark.parametrize("version", VERSIONS)
def test_subscription_we_encode_decodes_in_kafka_python(version: int) -> None:
    decoded = ConsumerProtocolSubscription.decode(
        encode_subscription(expected_subscription(version))
    )
    assert decoded == kafka_python_subscription(version)
    assert decoded.version == version  # kafka-python's equality leaves the version out


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("user_data", [None, b"", b"sticky-state"])
def test_assignment_round_trips_through_kafka_python(version: int, user_data: bytes | None) -> None:
    theirs = ConsumerProtocolAssignment(
        version=version,
        assigned_partitions=[
            ConsumerProtocolAssignment.TopicPartition(topic=topic, partitions=list(partitions))
            for topic, partitions in OWNED
        ],
        user_data=user_data,
    )
    ours = Assignment(version, OWNED, user_data)
    assert parse_assignment(theirs.encode()) == ours
    decoded = ConsumerProtocolAssignment.decode(encode_assignment(ours))
    assert decoded == theirs
    assert decoded.version == version
