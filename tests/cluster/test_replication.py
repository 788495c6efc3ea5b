"""Replication rules a client sees: min.insync.replicas, controller failover, metadata."""

from __future__ import annotations

import socket
import time
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic
from tests.cluster.conftest import replica_records, wait_until_served
from tests.rawclient import exchange, read_response_with_id, request_frame

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
    wait_until_served(cluster, leader, topic)
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

    def metadata() -> Any:
        return exchange(
            f"127.0.0.1:{cluster.brokers[alive].port}",
            METADATA,
            12,
            {
                "topics": [{"name": "described", "topic_id": None}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )

    def settled() -> bool:
        response = metadata()
        return victim not in {b.node_id for b in response.brokers} and all(
            victim not in p.isr_nodes for p in response.topics[0].partitions
        )

    # The controller drops the victim from each partition's ISR in its own write, and the
    # broker asked sees each write through its watch: wait until all have arrived.
    cluster.wait_until(settled, "the victim gone from the broker's metadata and every ISR")
    response = metadata()
    assert sorted(b.node_id for b in response.brokers) == sorted(cluster.alive())
    assert response.controller_id in cluster.alive()
    (topic,) = response.topics
    for partition in topic.partitions:
        assert sorted(partition.replica_nodes) == [1, 2, 3]
        assert victim not in partition.isr_nodes
        assert list(partition.offline_replicas) == [victim]
        assert partition.leader_id in cluster.alive()
        assert partition.leader_epoch >= 0


def _produce_frame(topic: str, value: bytes, acks: int, correlation_id: int) -> bytes:
    builder = RecordBatchBuilder()
    builder.append(value, timestamp=int(time.time() * 1000))
    return request_frame(PRODUCE, 9, {
        "transactional_id": None, "acks": acks, "timeout": 2000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0,
                                                         "records": builder.build()}]}],
    }, correlation_id)  # fmt: skip


def test_an_acks_all_produce_its_isr_holds_at_once_is_answered_behind_one_still_waiting(
    patient_cluster: LocalCluster,
) -> None:
    cluster = patient_cluster
    _create(cluster, "waits")
    leader = cluster.wait_for_leader("waits")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})
    alone = NewTopic("alone", 1, replica_assignment=[[leader]])  # ISR: the leader alone
    admin.create_topics([alone])["alone"].result(30)
    cluster.wait_for_leader("alone")
    for topic in ("waits", "alone"):
        wait_until_served(cluster, leader, topic)
    for follower in (b for b in cluster.brokers if b != leader):
        cluster.pause(follower)  # still in the ISR of "waits": acks=all waits for them
    with socket.create_connection(("127.0.0.1", cluster.brokers[leader].port), 30) as sock:
        sock.sendall(_produce_frame("waits", b"waits", -1, 1))
        sock.sendall(_produce_frame("alone", b"at once", -1, 2))
        first_id, first = read_response_with_id(sock, PRODUCE, 9)
        second_id, second = read_response_with_id(sock, PRODUCE, 9)
    waited, answered = (r.responses[0].partition_responses[0] for r in (first, second))
    assert (first_id, second_id) == (1, 2)
    assert waited.error_code == ErrorCode.REQUEST_TIMED_OUT
    assert (answered.error_code, answered.base_offset) == (ErrorCode.NONE, 0)
    assert [v for _, v in replica_records(cluster, leader, "alone", 0)] == [b"at once"]


def test_an_acks_all_produce_waiting_for_replicas_does_not_hold_up_the_next_requests(
    patient_cluster: LocalCluster,
) -> None:
    cluster = patient_cluster  # the frozen followers stay registered, so in the ISR
    _create(cluster, "pipelined")
    leader = cluster.wait_for_leader("pipelined")
    wait_until_served(cluster, leader, "pipelined")
    for follower in (b for b in cluster.brokers if b != leader):
        cluster.pause(follower)  # still in the ISR: acks=all waits for them
    with socket.create_connection(("127.0.0.1", cluster.brokers[leader].port), 30) as sock:
        sock.sendall(_produce_frame("pipelined", b"waits", -1, 1))
        sock.sendall(_produce_frame("pipelined", b"next", 1, 2))
        # While the first waits (2 s) for the frozen followers, the second is appended.
        cluster.wait_until(
            lambda: (
                [v for _, v in replica_records(cluster, leader, "pipelined", 0)]
                == [b"waits", b"next"]
            ),
            "the request behind the waiting one appended",
            timeout=1.5,
        )
        first_id, first = read_response_with_id(sock, PRODUCE, 9)
        second_id, second = read_response_with_id(sock, PRODUCE, 9)
    waited, answered = (r.responses[0].partition_responses[0] for r in (first, second))
    # Answered in request order: the acks=all one timed out waiting for the frozen
    # followers, the acks=1 one behind it was appended right after it.
    assert (first_id, second_id) == (1, 2)
    assert waited.error_code == ErrorCode.REQUEST_TIMED_OUT
    assert (answered.error_code, answered.base_offset) == (ErrorCode.NONE, waited.base_offset + 1)
