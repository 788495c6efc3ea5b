"""The schema registry on one broker of a three-broker ZooKeeper cluster."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from samsa.testing import start_cluster

pytestmark = pytest.mark.timeout(180)

QUIET = {"log_level": 3}
EVENT = json.dumps(
    {"type": "record", "name": "Event", "fields": [{"name": "kind", "type": "string"}]}
)


def test_a_cluster_broker_serves_the_registry_for_records_on_the_whole_cluster(
    tmp_path: Path,
) -> None:
    cluster = start_cluster(tmp_path / "cluster", 3, schema_registry=True)
    try:
        registry = SchemaRegistryClient({"url": cluster.brokers[1].schema_registry_url})
        context = SerializationContext("events", MessageField.VALUE)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, **QUIET})
        producer.produce("events", AvroSerializer(registry, EVENT)({"kind": "a"}, context))
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "e", **QUIET})
        consumer.assign([TopicPartition("events", 0, 0)])
        deadline = time.monotonic() + 30
        message = None
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
        consumer.close()
        assert message is not None
        assert AvroDeserializer(registry)(message.value(), context) == {"kind": "a"}
        assert cluster.leader_of("_schemas") in cluster.alive()
    finally:
        cluster.close()
