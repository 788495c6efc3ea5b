"""pytest plugin: the ``samsa_broker`` session fixture (a real broker process), the
``samsa_schema_registry`` session fixture (a broker serving the schema registry) and the
``samsa_cluster`` fixture (ZooKeeper and three brokers, for one test)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.testing.broker import BrokerProcess, start_broker
from samsa.testing.cluster import LocalCluster, start_cluster


@pytest.fixture(scope="session")
def samsa_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker for the whole test session; ``samsa_broker.bootstrap`` is its address."""
    broker = start_broker(tmp_path_factory.mktemp("samsa") / "data")
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def samsa_schema_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker serving the schema registry for the whole test session:
    ``samsa_schema_registry.schema_registry_url`` and ``.bootstrap`` are its addresses."""
    broker = start_broker(tmp_path_factory.mktemp("samsa-registry") / "data", schema_registry=True)
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def samsa_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """ZooKeeper and brokers 1, 2 and 3 for one test (it may kill, pause and restart them);
    ``samsa_cluster.bootstrap`` is their addresses. Needs Debian's ``zookeeper`` package."""
    cluster = start_cluster(tmp_path / "cluster", 3)
    try:
        yield cluster
    finally:
        cluster.close()
