"""A real three-broker cluster per test, on the session's ZooKeeper (a chroot each)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.rawclient import exchange

from samsa.errors import ErrorCode
from samsa.testing.cluster import LocalCluster

LIST_OFFSETS = 2

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
    return cluster.replica_records(broker_id, topic, partition)


@pytest.fixture
def patient_cluster(tmp_path: Path, zk_connect: str) -> Iterator[LocalCluster]:
    """The same three brokers with 30 s ZooKeeper sessions: a broker frozen for a test's
    few seconds stays registered (a 3 s session can expire before a busy machine gets
    the test's next request out)."""
    local = LocalCluster(tmp_path, 3, GROUP_SETTINGS, zookeeper_connect=zk_connect,
                         session_timeout_ms=30_000)  # fmt: skip
    local.start()
    try:
        yield local
    finally:
        local.close()


def wait_until_served(cluster: LocalCluster, broker: int, topic: str, partition: int = 0) -> None:
    """Until ``broker`` itself serves ``partition`` of ``topic`` as its leader (answers
    ListOffsets for it): ZooKeeper names a leader before that broker has seen the change
    through its watch, and a request in between gets UNKNOWN_TOPIC_OR_PARTITION."""

    def served() -> bool:
        response = exchange(f"127.0.0.1:{cluster.brokers[broker].port}", LIST_OFFSETS, 7, {
            "replica_id": -1, "isolation_level": 0,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": partition, "current_leader_epoch": -1, "timestamp": -1}]}],
        })  # fmt: skip
        return int(response.topics[0].partitions[0].error_code) == ErrorCode.NONE

    cluster.wait_until(served, f"{topic}-{partition} served by broker {broker} as its leader")
