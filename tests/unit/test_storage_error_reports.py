"""A partition whose appends fail in storage: KAFKA_STORAGE_ERROR, and one ERROR line a minute.

The failure is real: the process may not grow a file past ``RLIMIT_FSIZE``, so
every append to the partition fails with EFBIG. Time comes from a manual clock.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from tests.conftest import make_batch
from tests.resource_limits import file_size_limit

from samsa.broker.replication.replica_manager import ReplicaManager
from samsa.cluster.local import LocalMetadataStore
from samsa.errors import KafkaStorageError
from samsa.storage import LogConfig, LogManager
from samsa.types import TopicPartition

TP = TopicPartition("reports", 0)


class Seconds:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _failed_appends(replica_manager: ReplicaManager, count: int) -> None:
    async def append() -> None:
        with pytest.raises(KafkaStorageError):
            await replica_manager.append(
                TP, make_batch([b"x" * 100], timestamp=1_700_000_000_000), required_acks=1
            )

    for _ in range(count):
        asyncio.run(append())


def test_storage_failures_are_reported_once_per_partition_per_minute(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log_manager = LogManager([tmp_path])
    log_manager.startup()
    metadata = LocalMetadataStore((tmp_path,), 0)
    metadata.load()
    metadata.create_topic(TP.topic, 1)
    seconds = Seconds()
    replica_manager = ReplicaManager(log_manager, metadata, LogConfig(), monotonic=seconds)
    replica_manager.load()
    size = replica_manager.partition(TP).log.active_segment.size
    caplog.set_level(logging.ERROR, logger="samsa.broker.replication.replica_manager")
    with file_size_limit(size + 10):
        _failed_appends(replica_manager, 3)
        seconds.now += 59
        _failed_appends(replica_manager, 1)
        seconds.now += 2
        _failed_appends(replica_manager, 1)
    reports = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(reports) == 2
    assert all(str(tmp_path / "reports-0") in report for report in reports)
    assert "File too large" in reports[0]
    assert "3 failures not reported" in reports[1]
    log_manager.close()
