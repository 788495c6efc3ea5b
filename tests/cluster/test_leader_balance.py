"""Leader elections on request (ElectLeaders, ``samsa leader-election``) and by the controller
itself (``auto.leader.rebalance.enable``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic
from tests.cluster.conftest import GROUP_SETTINGS, SESSION_TIMEOUT_MS
from tests.rawclient import exchange

from samsa.client.admin import Admin, ElectionType
from samsa.errors import ElectionNotNeededError
from samsa.testing.cluster import LocalCluster
from samsa.types import TopicPartition

QUIET = {"log_level": 3}
CREATE_TOPICS = 19


def _create(cluster: LocalCluster, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, partitions, 3)])[topic].result(30)
    for partition in range(partitions):
        cluster.wait_for_leader(topic, partition)


def _restart_a_leader(cluster: LocalCluster, topic: str) -> int:
    """Kill the leader of partition 0 and bring it back: it returns as a follower."""
    victim = cluster.leader_of(topic, 0)
    cluster.kill(victim)
    cluster.wait_for_leader(topic, 0, not_in=[victim])
    cluster.start_broker(victim)
    cluster.wait_until(lambda: victim in cluster.isr_of(topic, 0), f"{victim} back in the ISR")
    return victim


def test_a_preferred_election_gives_leadership_back_to_a_restarted_broker(
    cluster: LocalCluster,
) -> None:
    _create(cluster, "balance", 3)
    victim = _restart_a_leader(cluster, "balance")
    assert cluster.leader_of("balance", 0) != victim
    tool = subprocess.run(
        [sys.executable, "-m", "samsa", "leader-election", "--bootstrap-server",
         cluster.bootstrap, "--election-type", "preferred", "--all-topic-partitions"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert tool.returncode == 0, tool.stderr
    assert "Successfully completed leader election (PREFERRED) for partitions" in tool.stdout
    assert "balance-0" in tool.stdout.splitlines()[0]
    for partition in range(3):
        assert (
            cluster.leader_of("balance", partition) == cluster.replicas_of("balance", partition)[0]
        )
    again = subprocess.run(
        [sys.executable, "-m", "samsa", "leader-election", "--bootstrap-server",
         cluster.bootstrap, "--election-type", "preferred", "--topic", "balance",
         "--partition", "0"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert again.stdout.strip() == "Valid replica already elected for partitions balance-0"


def test_an_unclean_election_brings_back_a_partition_whose_isr_is_gone(
    cluster: LocalCluster,
) -> None:
    response = exchange(f"127.0.0.1:{cluster.brokers[1].port}", CREATE_TOPICS, 5, {
        "topics": [{"name": "lost", "num_partitions": -1, "replication_factor": -1,
                    "assignments": [{"partition_index": 0, "broker_ids": [1, 2]}],
                    "configs": []}],
        "timeout": 30_000, "validate_only": False,
    })  # fmt: skip
    assert response.topics[0].error_code == 0
    cluster.wait_until(lambda: sorted(cluster.isr_of("lost", 0)) == [1, 2], "both in sync")
    cluster.kill(2)
    cluster.wait_until(lambda: cluster.isr_of("lost", 0) == [1], "broker 2 out of the ISR")
    cluster.kill(1)
    cluster.wait_until(lambda: cluster.leader_of("lost", 0) == -1, "the partition offline")
    cluster.start_broker(2)
    cluster.wait_until(lambda: 2 in cluster.registered(), "broker 2 back")
    assert cluster.leader_of("lost", 0) == -1  # not in the ISR: no clean election
    with Admin({"bootstrap.servers": f"127.0.0.1:{cluster.brokers[3].port}"}) as admin:
        results = admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition("lost", 0)])
        assert results == {TopicPartition("lost", 0): None}
        assert cluster.wait_for_leader("lost", 0) == 2
        again = admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition("lost", 0)])
    assert isinstance(again[TopicPartition("lost", 0)], ElectionNotNeededError)


def test_the_controller_gives_leadership_back_by_itself(tmp_path: Path, zk_connect: str) -> None:
    with LocalCluster(
        tmp_path,
        3,
        [*GROUP_SETTINGS, "leader.imbalance.check.interval.seconds=1",
         "leader.imbalance.per.broker.percentage=0"],
        zookeeper_connect=zk_connect,
        session_timeout_ms=SESSION_TIMEOUT_MS,
    ).start() as cluster:  # fmt: skip
        _create(cluster, "rebalanced", 3)
        victim = _restart_a_leader(cluster, "rebalanced")
        cluster.wait_until(
            lambda: cluster.leader_of("rebalanced", 0) == victim,
            "the preferred leader leads again without being asked",
        )
