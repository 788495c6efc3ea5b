"""Authorized operations (Metadata v8–v10, DescribeCluster) with no authorizer configured.

librdkafka's DescribeTopics and DescribeCluster ask Metadata for the authorized
operations; Kafka without an authorizer answers every operation its ACL model
defines on a topic or on the cluster.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic
from tests.rawclient import exchange

from samsa.testing import BrokerProcess

QUIET = {"log_level": 3}
TIMEOUT_S = 10
METADATA = 3
OMITTED = -(2**31)

TOPIC_OPERATIONS = {
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.CREATE,
    AclOperation.DELETE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
}
CLUSTER_OPERATIONS = {
    AclOperation.CREATE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
    AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE,
}


def _admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})


def _new_topic(broker: BrokerProcess) -> str:
    name = f"authops-{uuid.uuid4().hex[:10]}"
    admin = _admin(broker)
    admin.create_topics([NewTopic(name, 2, 1)])[name].result(TIMEOUT_S)
    return name


def test_describe_topics_lists_every_topic_operation(samsa_broker: BrokerProcess) -> None:
    topic = _new_topic(samsa_broker)
    admin = _admin(samsa_broker)
    futures = admin.describe_topics(
        TopicCollection([topic]), include_authorized_operations=True, request_timeout=TIMEOUT_S
    )
    description = futures[topic].result(TIMEOUT_S)
    assert len(description.partitions) == 2
    assert set(description.authorized_operations) == TOPIC_OPERATIONS


def test_describe_cluster_lists_every_cluster_operation(samsa_broker: BrokerProcess) -> None:
    admin = _admin(samsa_broker)
    future = admin.describe_cluster(include_authorized_operations=True, request_timeout=TIMEOUT_S)
    cluster = future.result(TIMEOUT_S)
    assert set(cluster.authorized_operations) == CLUSTER_OPERATIONS


@pytest.mark.parametrize("version", [8, 9, 10])
def test_metadata_answers_both_bitfields_when_asked(
    samsa_broker: BrokerProcess, version: int
) -> None:
    topic = _new_topic(samsa_broker)
    response = exchange(
        samsa_broker.bootstrap,
        METADATA,
        version,
        {
            "topics": [{"name": topic}],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": True,
            "include_topic_authorized_operations": True,
        },
    )
    assert response.cluster_authorized_operations == sum(1 << op.value for op in CLUSTER_OPERATIONS)
    [entry] = response.topics
    assert entry.topic_authorized_operations == sum(1 << op.value for op in TOPIC_OPERATIONS)


def test_metadata_leaves_the_bitfields_omitted_when_not_asked(
    samsa_broker: BrokerProcess,
) -> None:
    topic = _new_topic(samsa_broker)
    response = exchange(
        samsa_broker.bootstrap,
        METADATA,
        10,
        {
            "topics": [{"name": topic}],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        },
    )
    assert response.cluster_authorized_operations == OMITTED
    assert response.topics[0].topic_authorized_operations == OMITTED
