"""ListOffsets and DeleteRecords called directly, without a socket, over a real
ReplicaManager and logs in a tmp dir; ListOffsets v0 (which kio lacks) through the
registry and back in its own layout."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.delete_records.v2.request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.schema.list_offsets.v11.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64
from tests.conftest import make_batch

from samsa.broker.handlers.delete_records import delete_records
from samsa.broker.handlers.list_offsets import list_offsets, register
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.replication.replica_manager import ReplicaManager
from samsa.cluster.local import LocalMetadataStore
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import build
from samsa.protocol.codec import RequestHeader, encode_response_for
from samsa.protocol.legacy import decode_legacy_response, legacy_version
from samsa.storage import LogConfig, LogManager
from samsa.types import TopicPartition

TP = TopicPartition("events", 0)
T0 = 1_700_000_000_000
EARLIEST, LATEST = -2, -1


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[ReplicaManager]:
    log_manager = LogManager([tmp_path])
    log_manager.startup()
    metadata = LocalMetadataStore((tmp_path,), 0)
    metadata.load()
    metadata.create_topic(TP.topic, 1)
    manager = ReplicaManager(log_manager, metadata, LogConfig())
    manager.load()
    asyncio.run(manager.append(TP, make_batch([b"a", b"b", b"c"], timestamp=T0), required_acks=1))
    yield manager
    log_manager.close()


def request(*timestamps: int, topic: str = TP.topic) -> ListOffsetsRequest:
    return ListOffsetsRequest(
        replica_id=BrokerId(-1), isolation_level=i8(0),
        timeout=i32Timedelta.parse(datetime.timedelta(0)),
        topics=(ListOffsetsTopic(name=TopicName(topic), partitions=tuple(
            ListOffsetsPartition(partition_index=i32(0), timestamp=i64(t)) for t in timestamps
        )),),
    )  # fmt: skip


def test_earliest_and_latest_are_the_log_start_and_the_high_watermark(
    replicas: ReplicaManager,
) -> None:
    header = RequestHeader(ApiKey.LIST_OFFSETS, 11, 1, "c")
    response = asyncio.run(list_offsets(replicas, header, request(EARLIEST, LATEST, T0)))
    [topic] = response.topics
    assert [(p.error_code, p.offset) for p in topic.partitions] == [
        (KioErrorCode.none, 0), (KioErrorCode.none, 3), (KioErrorCode.none, 0),
    ]  # fmt: skip


def test_a_timestamp_past_every_record_answers_no_offset(replicas: ReplicaManager) -> None:
    header = RequestHeader(ApiKey.LIST_OFFSETS, 11, 1, "c")
    response = asyncio.run(list_offsets(replicas, header, request(T0 + 60_000)))
    [partition] = response.topics[0].partitions
    assert (partition.error_code, partition.offset, partition.timestamp) == (
        KioErrorCode.none, -1, -1,
    )  # fmt: skip


def test_a_v0_request_is_answered_with_old_style_offsets(replicas: ReplicaManager) -> None:
    registry = ApiRegistry()
    register(registry, replicas=replicas)
    handle = registry.handler_for(ApiKey.LIST_OFFSETS, 0)
    assert handle is not None
    legacy = legacy_version(ApiKey.LIST_OFFSETS, 0)
    assert legacy is not None
    v1 = build(legacy.request_class, {"replica_id": -1, "topics": [
        {"name": "events", "partitions": [{"partition_index": 0, "timestamp": LATEST}]},
    ]})  # fmt: skip
    header = RequestHeader(ApiKey.LIST_OFFSETS, 0, 1, "c")
    frame = encode_response_for(ApiKey.LIST_OFFSETS, 0, 1, asyncio.run(handle(header, v1)))
    answer = decode_legacy_response(legacy, frame[8:])
    [partition] = answer["topics"][0]["partitions"]
    assert (partition["error_code"], partition["old_style_offsets"]) == (0, [3])


class RecordsBroker:
    def __init__(self, replicas: ReplicaManager) -> None:
        self.replica_manager = replicas
        self.metadata = replicas.metadata


def test_delete_records_moves_the_log_start_offset_and_answers_the_low_watermark(
    replicas: ReplicaManager,
) -> None:
    deletion = DeleteRecordsRequest(
        topics=(DeleteRecordsTopic(name=TopicName(TP.topic), partitions=(
            DeleteRecordsPartition(partition_index=i32(0), offset=i64(2)),
        )),),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=1)),
    )  # fmt: skip
    header = RequestHeader(ApiKey.DELETE_RECORDS, 2, 1, "c")
    response = asyncio.run(delete_records(RecordsBroker(replicas), header, deletion))
    [partition] = response.topics[0].partitions
    assert (partition.error_code, partition.low_watermark) == (KioErrorCode.none, 2)
    earliest = asyncio.run(list_offsets(replicas, header, request(EARLIEST)))
    assert earliest.topics[0].partitions[0].offset == 2
