"""A real three-broker cluster per test, on the session's ZooKeeper (a chroot each)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.records import iter_batches, iter_records
from samsa.testing.cluster import LocalCluster

SESSION_TIMEOUT_MS = 3000
"""Short ZooKeeper sessions: a dead broker is noticed within a few seconds."""
GROUP_SETTINGS = ("group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000")
"""Groups form at once and may use the short sessions the test clients ask for."""


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[LocalCluster]:
    """Brokers 1, 2 and 3 and their own ZooKeeper chroot; every broker stopped afterwards."""
    local = LocalCluster(
        tmp_path,
        3,
        GROUP_SETTINGS,
        zookeeper_connect=zk_connect,
        session_timeout_ms=SESSION_TIMEOUT_MS,
    )
    local.start()
    try:
        yield local
    finally:
        local.close()


def replica_records(
    cluster: LocalCluster, broker_id: int, topic: str, partition: int
) -> list[tuple[int, bytes | None]]:
    """Every record of a replica's segment files, in offset order: ``(offset, value)``."""
    directory = cluster.brokers[broker_id].data_dir / f"{topic}-{partition}"
    records: list[tuple[int, bytes | None]] = []
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        for batch in iter_batches(memoryview(data)):
            if batch.is_control:
                continue
            records += [(r.offset, r.value) for r in iter_records(batch)]
    return records
