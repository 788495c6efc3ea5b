"""Kafka in a box: three KRaft nodes from compat/jvm's jars replicate a topic, and samsa's
clients use them as they use samsa."""

from __future__ import annotations

from pathlib import Path

import pytest

from samsa.client import Admin, Consumer, Producer
from samsa.client.admin import NewTopic
from samsa.testing.kafka import start_kafka

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_a_three_node_kafka_replicates_what_samsas_clients_write(tmp_path: Path) -> None:
    with start_kafka(tmp_path, 3) as kafka:
        with Admin({"bootstrap.servers": kafka.bootstrap}) as admin:
            admin.create_topics([NewTopic("replicated", 3, 3)])
        with Producer({"bootstrap.servers": kafka.bootstrap, "acks": "all"}) as producer:
            for index in range(30):
                producer.send("replicated", b"value-%d" % index, key=b"%d" % index)
            producer.flush()
        config = {"bootstrap.servers": kafka.bootstrap, "group.id": "box",
                  "auto.offset.reset": "earliest"}  # fmt: skip
        with Consumer(config) as consumer:
            consumer.subscribe(["replicated"])
            values: set[bytes] = set()
            for _ in range(60):
                values |= {r.value for r in consumer.poll(1.0) if r.value is not None}
                if len(values) == 30:
                    break
        assert values == {b"value-%d" % index for index in range(30)}
