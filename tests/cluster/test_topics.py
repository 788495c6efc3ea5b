"""Topics of a cluster: created, changed and deleted through any broker, seen by all."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from tests.rawclient import exchange

from samsa.testing.cluster import LocalCluster

QUIET = {"log_level": 3}
CREATE_TOPICS = 19


def _admin(cluster: LocalCluster, broker_id: int) -> AdminClient:
    """An admin client that talks to one broker only."""
    port = cluster.brokers[broker_id].port
    return AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", **QUIET})


def test_an_explicit_assignment_is_kept_and_its_first_replica_leads(
    cluster: LocalCluster,
) -> None:
    response = exchange(f"127.0.0.1:{cluster.brokers[1].port}", CREATE_TOPICS, 5, {
        "topics": [{"name": "placed", "num_partitions": -1, "replication_factor": -1,
                    "assignments": [{"partition_index": 0, "broker_ids": [3, 1]},
                                    {"partition_index": 1, "broker_ids": [2, 3]}],
                    "configs": []}],
        "timeout": 30_000, "validate_only": False,
    })  # fmt: skip
    assert response.topics[0].error_code == 0
    assert cluster.wait_for_leader("placed", 0) == 3
    assert cluster.wait_for_leader("placed", 1) == 2
    assert sorted(cluster.isr_of("placed", 0)) == [1, 3]
    # Broker 1 creates its replica when it sees the partition's state, after ZooKeeper has it.
    cluster.wait_until(
        (cluster.brokers[1].data_dir / "placed-0").is_dir,
        "broker 1's replica of placed-0",
    )
    assert not (cluster.brokers[2].data_dir / "placed-0").exists()


def test_a_deleted_topic_leaves_every_broker(cluster: LocalCluster) -> None:
    admin = _admin(cluster, 2)
    admin.create_topics([NewTopic("doomed", 2, 3)])["doomed"].result(30)
    cluster.wait_for_leader("doomed", 1)
    admin.delete_topics(["doomed"])["doomed"].result(30)
    cluster.wait_until(
        lambda: (
            not any(
                (broker.data_dir / f"doomed-{p}").exists()
                for broker in cluster.brokers.values()
                for p in range(2)
            )
        ),
        "the partition directories gone from every broker",
    )
    assert cluster.partition_state("doomed", 0) is None
    other = _admin(cluster, 3)
    names = other.list_topics(timeout=10).topics
    assert "doomed" not in names


def test_configs_and_partitions_changed_through_one_broker_reach_the_others(
    cluster: LocalCluster,
) -> None:
    first, second, third = (_admin(cluster, b) for b in (1, 2, 3))
    first.create_topics([NewTopic("changing", 1, 3)])["changing"].result(30)
    resource = ConfigResource(
        "topic", "changing",
        incremental_configs=[ConfigEntry("retention.ms", "12345",
                                         incremental_operation=AlterConfigOpType.SET)],
    )  # fmt: skip
    first.incremental_alter_configs([resource])[resource].result(30)
    third.create_partitions([NewPartitions("changing", 3)])["changing"].result(30)

    def seen_by_broker_2() -> bool:
        described = second.describe_configs([ConfigResource("topic", "changing")])
        entries = next(iter(described.values())).result(10)
        return bool(entries["retention.ms"].value == "12345")

    cluster.wait_until(seen_by_broker_2, "broker 2 describes the new retention.ms")
    metadata = second.list_topics("changing", timeout=10)
    assert sorted(metadata.topics["changing"].partitions) == [0, 1, 2]
    for partition in range(3):
        cluster.wait_for_leader("changing", partition)


def test_kcat_produces_and_consumes_through_the_cluster(cluster: LocalCluster) -> None:
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    assert kcat, "kcat is not installed: `make test` installs it (Debian package kcat)"
    admin = _admin(cluster, 1)
    admin.create_topics([NewTopic("kcat", 2, 3)])["kcat"].result(30)
    for partition in range(2):
        cluster.wait_for_leader("kcat", partition)
    lines = "".join(f"k{i}:v{i}\n" for i in range(20))
    subprocess.run([kcat, "-b", cluster.bootstrap, "-t", "kcat", "-P", "-K:",
                    "-X", "request.required.acks=all"],
                   input=lines.encode(), check=True, timeout=60)  # fmt: skip
    read = subprocess.run([kcat, "-b", cluster.bootstrap, "-t", "kcat", "-C", "-e",
                           "-f", "%k:%s\n"],
                          capture_output=True, check=True, timeout=60)  # fmt: skip
    assert sorted(read.stdout.decode().splitlines()) == sorted(lines.splitlines())


def _metadata_leaders(cluster: LocalCluster, broker_id: int, topic: str) -> dict[int, int]:
    """Each partition's leader as ``broker_id`` answers Metadata v12."""
    response = exchange(f"127.0.0.1:{cluster.brokers[broker_id].port}", 3, 12, {
        "topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False})  # fmt: skip
    return {int(p.partition_index): int(p.leader_id) for p in response.topics[0].partitions}


@pytest.mark.slow
def test_metadata_names_the_new_leader_after_the_old_leaders_broker_dies(
    cluster: LocalCluster,
) -> None:
    admin = _admin(cluster, 1)
    admin.create_topics([NewTopic("moving", 2, 3)])["moving"].result(30)
    for partition in range(2):
        cluster.wait_for_leader("moving", partition)
    victim = cluster.leader_of("moving", 0)
    asker = next(b for b in cluster.brokers if b != victim)
    cluster.wait_until(
        lambda: _metadata_leaders(cluster, asker, "moving")[0] == victim, "metadata answered"
    )  # the answer as it was is what a cache would keep

    cluster.kill(victim)
    leader = cluster.wait_for_leader("moving", 0, not_in=[victim])

    cluster.wait_until(
        lambda: _metadata_leaders(cluster, asker, "moving")[0] == leader,
        f"broker {asker} answering {leader} as the new leader",
    )
