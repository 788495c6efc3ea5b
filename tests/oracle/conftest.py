"""Apache Kafka (KRaft, one node) and samsa side by side, each started once for the suite.

Each test process that runs part of the suite starts its own pair (session fixtures).
Kafka's jars come from ``make jvm``; without them the suite fails (it never skips)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.oracle.differential import warm_up
from tests.rawclient import exchange

from samsa.testing import BrokerProcess, start_broker
from samsa.testing.kafka import QUICK_START, KafkaCluster

SETTINGS = {
    "num.partitions": "1",
    "auto.create.topics.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
}
"""Broker settings both are given, so that their defaults do not decide a comparison."""


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    cluster = KafkaCluster(
        tmp_path_factory.mktemp("kafka"), 1, overrides=SETTINGS, jvm_options=QUICK_START
    )
    cluster.start()
    warm_up(cluster.bootstrap)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def samsa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    overrides = [f"{key}={value}" for key, value in SETTINGS.items()]
    broker = start_broker(tmp_path_factory.mktemp("oracle-samsa") / "data", overrides)
    warm_up(broker.bootstrap)
    # Kafka's storage format writes min.insync.replicas as a cluster-wide dynamic default
    # (KIP-966); samsa is given the same, so that configs describe alike.
    answer = exchange(broker.bootstrap, 44, 1, {"validate_only": False, "resources": [{
        "resource_type": 4, "resource_name": "", "configs": [
            {"name": "min.insync.replicas", "config_operation": 0, "value": "1"}]}]})  # fmt: skip
    assert answer.responses[0].error_code == 0, answer.responses[0].error_message
    try:
        yield broker
    finally:
        broker.stop()
