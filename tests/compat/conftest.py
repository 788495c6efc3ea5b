"""Compatibility with other clients and tools: Kafka's Java clients and command-line tools
(the JVM suites, sharing one broker per test process, below), librdkafka (confluent-kafka,
kcat), kafka-python, aiokafka, KafkaJS, Sarama and clients of the 0.8–0.11 era."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from samsa.testing import BrokerProcess, start_broker


@pytest.fixture(scope="session")
def jvm_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker for Kafka's Java clients and tools; a group's first member is assigned at
    once (no initial rebalance delay), as the programs start several groups one by one."""
    process = start_broker(
        tmp_path_factory.mktemp("jvm") / "data", ["group.initial.rebalance.delay.ms=0"]
    )
    try:
        yield process
    finally:
        process.stop()
