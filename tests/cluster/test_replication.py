"""Replication rules a client sees: min.insync.replicas, controller failover, metadata."""

from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient, NewTopic
from tests.rawclient import exchange

from samsa.errors import ErrorCode
from samsa.records import RecordBatchBuilder
from samsa.testing.cluster import LocalCluster

PRODUCE, METADATA = 0, 3
QUIET = {"log_level": 3}


def _create(cluster: LocalCluster, topic: str, partitions: int = 1, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, partitions, 3, config=config)])[topic].result(30)


def _produce(cluster: LocalCluster, topic: str, value: bytes) -> ErrorCode:
    """One acks=all Produce (v9) to the partition's leader; its error code."""
    leader = cluster.wait_for_leader(topic, 0)
    builder = RecordBatchBuilder()
    builder.append(value, timestamp=int(time.time() * 1000))
    response = exchange(
        f"127.0.0.1:{cluster.brokers[leader].port}",
        PRODUCE,
        9,
        {
            "transactional_id": None,
            "acks": -1,
            "timeout": 5000,
            "topic_data": [
                {"name": topic, "partition_data": [{"index": 0, "records": builder.build()}]}
            ],
        },
    )
    return ErrorCode(response.responses[0].partition_responses[0].error_code)


def test_acks_all_with_one_in_sync_replica_is_refused_until_a_follower_catches_up(
    cluster: LocalCluster,
) -> None:
    _create(cluster, "guarded", **{"min.insync.replicas": "2"})
    assert _produce(cluster, "guarded", b"three in sync") == ErrorCode.NONE
    leader = cluster.leader_of("guarded")
    followers = [b for b in cluster.brokers if b != leader]
    for follower in followers:
        cluster.kill(follower)
    cluster.wait_until(lambda: cluster.isr_of("guarded") == [leader], "the ISR down to the leader")
    assert _produce(cluster, "guarded", b"alone") == ErrorCode.NOT_ENOUGH_REPLICAS

    cluster.start_broker(followers[0])
    cluster.wait_until(lambda: len(cluster.isr_of("guarded")) == 2, "a follower back in the ISR")
    assert _produce(cluster, "guarded", b"two in sync") == ErrorCode.NONE


def test_a_killed_controller_is_replaced_and_leadership_still_moves(
    cluster: LocalCluster,
) -> None:
    _create(cluster, "after-failover", 3)
    first = cluster.controller()
    cluster.kill(first)
    cluster.wait_until(
        lambda: cluster.controller() not in (-1, first), "another broker becomes the controller"
    )
    second = cluster.controller()
    for partition in range(3):
        cluster.wait_for_leader("after-failover", partition, not_in=[first])
    # The new controller moves leadership off a broker that dies now.
    victim = next(b for b in cluster.alive() if b != second)
    cluster.kill(victim)
    for partition in range(3):
        assert cluster.wait_for_leader("after-failover", partition, not_in=[victim, first]) == (
            second
        )
    assert _produce(cluster, "after-failover", b"still served") == ErrorCode.NONE


def test_metadata_names_every_live_broker_and_each_partitions_replicas(
    cluster: LocalCluster,
) -> None:
    _create(cluster, "described", 2)
    victim = cluster.leader_of("described", 0)
    cluster.kill(victim)
    cluster.wait_for_leader("described", 0, not_in=[victim])
    alive = next(b for b in cluster.alive())
    response = exchange(
        f"127.0.0.1:{cluster.brokers[alive].port}",
        METADATA,
        12,
        {
            "topics": [{"name": "described", "topic_id": None}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )
    assert sorted(b.node_id for b in response.brokers) == sorted(cluster.alive())
    assert response.controller_id in cluster.alive()
    (topic,) = response.topics
    for partition in topic.partitions:
        assert sorted(partition.replica_nodes) == [1, 2, 3]
        assert victim not in partition.isr_nodes
        assert list(partition.offline_replicas) == [victim]
        assert partition.leader_id in cluster.alive()
        assert partition.leader_epoch >= 0
