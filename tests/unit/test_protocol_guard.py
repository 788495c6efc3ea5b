"""check_entity: walking kio's wire layouts so kio never allocates from a count the bytes lack."""

from __future__ import annotations

import contextlib
import datetime
import io
import struct
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.describe_topic_partitions.v0.request import (
    Cursor,
    DescribeTopicPartitionsRequest,
    TopicRequest,
)
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v4 import request as fetch_v4
from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.fetch.v12 import response as fetch_v12_response
from kio.schema.index import api_key_map, schema_name_map
from kio.schema.metadata.v12.request import MetadataRequest as MetadataRequestV12
from kio.schema.produce.v3 import request as produce_v3
from kio.schema.produce.v9 import request as produce_v9
from kio.serial import entity_reader, entity_writer
from kio.serial.writers import write_unsigned_varint

from samsa.protocol import GuardError, check_entity


def encoded(obj: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(obj))(buffer, obj)
    return buffer.getvalue()


def uvarint(value: int) -> bytes:
    buffer = io.BytesIO()
    write_unsigned_varint(buffer, value)
    return buffer.getvalue()


def produce_v9_request(records: bytes | None) -> Any:
    return produce_v9.ProduceRequest(
        acks=1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(
            produce_v9.TopicProduceData(
                name="orders",
                partition_data=(produce_v9.PartitionProduceData(index=0, records=records),),
            ),
        ),
    )


def fetch_v4_request(partitions: int) -> Any:
    return fetch_v4.FetchRequest(
        max_wait=datetime.timedelta(milliseconds=100),
        min_bytes=1,
        topics=(
            fetch_v4.FetchTopic(
                topic="orders",
                partitions=tuple(
                    fetch_v4.FetchPartition(partition=i, fetch_offset=0, partition_max_bytes=100)
                    for i in range(partitions)
                ),
            ),
        ),
    )


def fetch_v12_request(cluster_id: str | None) -> Any:
    return fetch_v12.FetchRequest(
        cluster_id=cluster_id,
        max_wait=datetime.timedelta(milliseconds=100),
        min_bytes=1,
        topics=(),
        forgotten_topics_data=(),
    )


def fetch_v12_response_with_tagged_structs() -> Any:
    partition = fetch_v12_response.PartitionData(
        partition_index=0,
        error_code=ErrorCode.none,
        high_watermark=10,
        diverging_epoch=fetch_v12_response.EpochEndOffset(epoch=3, end_offset=7),
        current_leader=fetch_v12_response.LeaderIdAndEpoch(leader_id=1, leader_epoch=3),
        aborted_transactions=(
            fetch_v12_response.AbortedTransaction(producer_id=9, first_offset=2),
        ),
        records=b"opaque",
    )
    return fetch_v12_response.FetchResponse(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        responses=(
            fetch_v12_response.FetchableTopicResponse(topic="orders", partitions=(partition,)),
        ),
    )


def describe_topic_partitions(cursor: Cursor | None) -> Any:
    return DescribeTopicPartitionsRequest(
        topics=(TopicRequest(name="orders"),), response_partition_limit=10, cursor=cursor
    )


WELL_FORMED = {
    "produce-v3": produce_v3.ProduceRequest(
        acks=-1,
        timeout=datetime.timedelta(seconds=1),
        topic_data=(
            produce_v3.TopicProduceData(
                name="t",
                partition_data=(produce_v3.PartitionProduceData(index=1, records=b"batch"),),
            ),
        ),
    ),
    "produce-v9": produce_v9_request(b"batch" * 100),
    "produce-v9-null-records": produce_v9_request(None),
    "fetch-v4-fixed-size-partitions": fetch_v4_request(3),
    "fetch-v12-tagged-cluster-id": fetch_v12_request("cluster-1"),
    "fetch-v12-response-tagged-structs": fetch_v12_response_with_tagged_structs(),
    "metadata-v12-null-topics": MetadataRequestV12(
        topics=None, include_topic_authorized_operations=False
    ),
    "nullable-struct-present": describe_topic_partitions(Cursor(topic_name="t", partition_index=2)),
    "nullable-struct-null": describe_topic_partitions(None),
}


@pytest.mark.parametrize("entity", list(WELL_FORMED.values()), ids=list(WELL_FORMED))
def test_check_entity_ends_where_kios_reader_ends(entity: Any) -> None:
    data = b"\xaa" * 5 + encoded(entity)
    _, size = entity_reader(type(entity))(data, 5)
    assert check_entity(type(entity), data, 5) == 5 + size


def test_check_entity_accepts_a_memoryview() -> None:
    data = encoded(produce_v9_request(b"batch"))
    assert check_entity(produce_v9.ProduceRequest, memoryview(data)) == len(data)


def test_records_are_passed_over_whatever_bytes_they_hold() -> None:
    hostile_looking = uvarint(2**32 + 1) * 50 + b"\xff" * 100
    data = encoded(produce_v9_request(hostile_looking))
    assert check_entity(produce_v9.ProduceRequest, data) == len(data)


def test_a_walker_exists_for_every_request_and_response_kio_knows() -> None:
    checked = 0
    for api_key, name in api_key_map.items():
        for version in schema_name_map[name]:
            for cls in (
                load_request_schema(api_key, version),
                load_response_schema(api_key, version),
            ):
                # Empty bytes are truncated for any entity with fields; building is what counts.
                with contextlib.suppress(GuardError):
                    check_entity(cls, b"")
                checked += 1
    assert checked > 500


def test_a_compact_array_count_larger_than_the_bytes_left_is_rejected() -> None:
    data = uvarint(2**32 + 1) + bytes(50)
    with pytest.raises(GuardError, match="array count"):
        check_entity(MetadataRequestV12, data)


def test_a_legacy_array_count_larger_than_the_bytes_left_is_rejected() -> None:
    data = struct.pack(">hhii", -1, 1, 1000, 2**31 - 1) + bytes(50)
    with pytest.raises(GuardError, match="array count"):
        check_entity(produce_v3.ProduceRequest, data)


def test_a_legacy_array_count_below_minus_one_is_rejected() -> None:
    data = struct.pack(">hhii", -1, 1, 1000, -2) + bytes(50)
    with pytest.raises(GuardError, match="negative"):
        check_entity(produce_v3.ProduceRequest, data)


def test_an_array_of_fixed_size_elements_longer_than_the_bytes_left_is_rejected() -> None:
    data = encoded(fetch_v4_request(3))
    with pytest.raises(GuardError):
        check_entity(fetch_v4.FetchRequest, data[:-1])


def test_a_compact_string_longer_than_the_bytes_left_is_rejected() -> None:
    data = b"\x00" + struct.pack(">hi", 1, 1000) + uvarint(2) + uvarint(200) + b"abc"
    with pytest.raises(GuardError, match="runs past the end"):
        check_entity(produce_v9.ProduceRequest, data)


def test_a_legacy_bytes_length_longer_than_the_bytes_left_is_rejected() -> None:
    data = encoded(WELL_FORMED["produce-v3"])
    with pytest.raises(GuardError):
        check_entity(produce_v3.ProduceRequest, data[:-1])


def test_a_negative_legacy_string_length_other_than_null_is_rejected() -> None:
    data = struct.pack(">h", -2) + bytes(50)
    with pytest.raises(GuardError, match="negative length"):
        check_entity(produce_v3.ProduceRequest, data)


def test_a_null_legacy_array_the_schema_does_not_allow_null_is_rejected() -> None:
    # kio would decode it as None; Kafka's readers refuse it as unparseable.
    data = encoded(
        produce_v3.ProduceRequest(acks=1, timeout=datetime.timedelta(seconds=1), topic_data=None)
    )
    with pytest.raises(GuardError, match="non-nullable array topic_data is null"):
        check_entity(produce_v3.ProduceRequest, data)


def test_a_null_compact_array_the_schema_does_not_allow_null_is_rejected() -> None:
    data = b"\x00" + struct.pack(">hi", 1, 1000) + uvarint(0) + b"\x00"
    with pytest.raises(GuardError, match="non-nullable array topic_data is null"):
        check_entity(produce_v9.ProduceRequest, data)


def test_a_null_legacy_string_the_schema_does_not_allow_null_is_rejected() -> None:
    data = struct.pack(">hhiih", -1, 1, 1000, 1, -1) + bytes(50)  # one topic, name null
    with pytest.raises(GuardError, match="non-nullable string is null"):
        check_entity(produce_v3.ProduceRequest, data)


def test_a_null_compact_string_the_schema_does_not_allow_null_is_rejected() -> None:
    data = b"\x00" + struct.pack(">hi", 1, 1000) + uvarint(2) + uvarint(0) + bytes(10)
    with pytest.raises(GuardError, match="non-nullable string is null"):
        check_entity(produce_v9.ProduceRequest, data)


def test_a_varint_longer_than_five_bytes_is_rejected() -> None:
    data = b"\x80\x80\x80\x80\x80\x01" + bytes(10)
    with pytest.raises(GuardError, match="longer than 5 bytes"):
        check_entity(MetadataRequestV12, data)


def test_an_unknown_tag_is_rejected() -> None:
    data = encoded(fetch_v12_request(None))
    assert data.endswith(b"\x00")  # the empty tagged-field section
    with pytest.raises(GuardError, match="unknown tagged field 7"):
        check_entity(fetch_v12.FetchRequest, data[:-1] + b"\x01" + uvarint(7) + uvarint(1) + b"x")


def test_a_tag_whose_value_does_not_fill_its_declared_size_is_rejected() -> None:
    data = encoded(fetch_v12_request("cluster-1"))
    tail = b"\x01\x00\x0a\x0acluster-1"  # one tag: tag 0, size 10, compact string "cluster-1"
    assert data.endswith(tail)
    bad = data[: -len(tail)] + b"\x01\x00\x0b\x0acluster-1!"
    with pytest.raises(GuardError, match="does not fill its size"):
        check_entity(fetch_v12.FetchRequest, bad)


def test_a_tag_running_past_the_end_is_rejected() -> None:
    data = encoded(fetch_v12_request(None))
    with pytest.raises(GuardError, match="runs past the end"):
        check_entity(fetch_v12.FetchRequest, data[:-1] + b"\x01\x00\x40")


def test_a_tagged_field_count_larger_than_the_bytes_left_is_rejected() -> None:
    data = encoded(fetch_v12_request(None))
    with pytest.raises(GuardError, match="tagged fields exceed"):
        check_entity(fetch_v12.FetchRequest, data[:-1] + uvarint(2**32))


@pytest.mark.parametrize("marker", [0, 2, -2])
def test_a_nullable_struct_marker_other_than_minus_one_or_one_is_rejected(marker: int) -> None:
    data = bytearray(encoded(describe_topic_partitions(Cursor(topic_name="t", partition_index=2))))
    marker_at = data.index(struct.pack(">i", 10)) + 4  # after response_partition_limit
    assert data[marker_at] == 1
    data[marker_at] = marker & 0xFF
    with pytest.raises(GuardError, match="marker"):
        check_entity(DescribeTopicPartitionsRequest, bytes(data))


def test_a_fixed_size_field_cut_short_is_rejected() -> None:
    data = encoded(produce_v9_request(None))
    with pytest.raises(GuardError, match="truncated"):
        check_entity(produce_v9.ProduceRequest, data[:3])
