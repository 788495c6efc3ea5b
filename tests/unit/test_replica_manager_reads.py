"""The replica manager is the handlers' one way to a partition's log: reads, offsets by
timestamp, DeleteRecords and the producers a partition remembers."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import make_batch

from samsa.broker.replication.replica_manager import ReplicaManager
from samsa.cluster.local import LocalMetadataStore
from samsa.errors import OffsetOutOfRangeError, PolicyViolationError
from samsa.records.builder import RecordBatchBuilder
from samsa.storage import LogConfig, LogManager
from samsa.types import TopicPartition

TP = TopicPartition("events", 0)
COMPACTED = TopicPartition("compacted", 0)
T0 = 1_700_000_000_000


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[ReplicaManager]:
    log_manager = LogManager([tmp_path])
    log_manager.startup()
    metadata = LocalMetadataStore((tmp_path,), 0)
    metadata.load()
    metadata.create_topic(TP.topic, 1)
    metadata.create_topic(COMPACTED.topic, 1, {"cleanup.policy": "compact"})
    manager = ReplicaManager(log_manager, metadata, LogConfig())
    manager.load()
    yield manager
    log_manager.close()


def _append(replicas: ReplicaManager, tp: TopicPartition, batch: bytearray) -> None:
    asyncio.run(replicas.append(tp, batch, required_acks=1))


def _idempotent_batch(producer_id: int, epoch: int, sequence: int) -> bytearray:
    builder = RecordBatchBuilder(
        producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence
    )
    builder.append(b"v", key=None, timestamp=T0)
    return bytearray(builder.build())


def test_delete_records_to_minus_one_moves_the_log_start_offset_to_the_high_watermark(
    replicas: ReplicaManager,
) -> None:
    _append(replicas, TP, make_batch([b"a", b"b", b"c"], timestamp=T0))
    assert replicas.delete_records(TP, -1) == 3
    result = replicas.read(TP, 0, None, read_committed=False, min_one_message=True)
    assert result.log_start_offset == 3


def test_delete_records_past_the_high_watermark_is_offset_out_of_range(
    replicas: ReplicaManager,
) -> None:
    _append(replicas, TP, make_batch([b"a"], timestamp=T0))
    with pytest.raises(OffsetOutOfRangeError):
        replicas.delete_records(TP, 2)


def test_delete_records_of_a_compacted_topic_is_a_policy_violation(
    replicas: ReplicaManager,
) -> None:
    _append(replicas, COMPACTED, make_batch([b"a"], timestamp=T0, keys=[b"k"]))
    with pytest.raises(PolicyViolationError, match=r"cleanup\.policy=compact"):
        replicas.delete_records(COMPACTED, 1)


def test_a_read_without_room_answers_the_partition_offsets_and_no_data(
    replicas: ReplicaManager,
) -> None:
    _append(replicas, TP, make_batch([b"a", b"b"], timestamp=T0))
    result = replicas.read(TP, 0, None, read_committed=False, min_one_message=False)
    assert (result.high_watermark, result.last_stable_offset, result.log_start_offset) == (2, 2, 0)
    assert result.data is None


def test_a_read_returns_the_batches_below_the_high_watermark(replicas: ReplicaManager) -> None:
    batch = make_batch([b"a", b"b"], timestamp=T0)
    _append(replicas, TP, batch)
    result = replicas.read(TP, 0, 1 << 20, read_committed=False, min_one_message=True)
    assert result.data is not None
    assert result.data.region.length == len(batch)


def test_offset_for_a_timestamp_is_the_first_record_at_or_after_it(
    replicas: ReplicaManager,
) -> None:
    _append(replicas, TP, make_batch([b"a", b"b"], timestamp=[T0, T0 + 10]))
    assert replicas.fetch_offset_for_timestamp(TP, T0 + 5, read_committed=False) == (1, T0 + 10, 0)
    assert replicas.fetch_offset_for_timestamp(TP, T0 + 11, read_committed=False) is None
    assert replicas.fetch_offset_for_timestamp(TP, -1, read_committed=False) == (2, -1, 0)


def test_active_producers_lists_each_producer_the_partition_remembers(
    replicas: ReplicaManager,
) -> None:
    _append(replicas, TP, _idempotent_batch(producer_id=7, epoch=2, sequence=0))
    _append(replicas, TP, _idempotent_batch(producer_id=9, epoch=0, sequence=0))
    _append(replicas, TP, _idempotent_batch(producer_id=7, epoch=2, sequence=1))
    producers = {p.producer_id: (p.epoch, p.last_sequence) for p in replicas.active_producers(TP)}
    assert producers == {7: (2, 1), 9: (0, 0)}


def test_a_logs_start_offset_and_recovery_point_cannot_be_assigned_from_outside(
    replicas: ReplicaManager,
) -> None:
    partition_log = replicas.partition(TP).log
    with pytest.raises(AttributeError):
        partition_log.log_start_offset = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        partition_log.recovery_point = 5  # type: ignore[misc]
