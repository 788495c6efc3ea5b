"""A broker's data lost or taken away never costs the acknowledged records of the others.

- A single broker started on the directory that holds a cluster's brokers (``make run``
  and ``make cluster`` once shared ``./data``) takes none of their data directories for
  partitions: it neither loads them nor moves them aside, and the cluster comes back
  with every record.
- The last in-sync replica of a partition, killed and wiped, comes back without its log:
  it does not lead from an empty log (its followers would truncate every acknowledged
  record to match); the partition stays offline, logged at ERROR with the choices, until
  an unclean election (which takes a replica that kept its log) or restored data brings
  it back.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tests.cluster.conftest import GROUP_SETTINGS, SESSION_TIMEOUT_MS

from samsa.client.admin import Admin, ElectionType
from samsa.testing.broker import BrokerProcess
from samsa.testing.cluster import LocalCluster
from samsa.types import TopicPartition

QUIET = {"log_level": 3}


def _create(bootstrap: str, topic: str, replicas: int, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, 1, replicas, config=config)])[topic].result(30)


def _produce(bootstrap: str, topic: str, count: int) -> None:
    """``count`` records with ``acks=all``, every one acknowledged."""
    failed: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **QUIET})
    for i in range(count):
        producer.produce(
            topic, f"record-{i}".encode(), on_delivery=lambda e, _m: e and failed.append(e)
        )
    assert producer.flush(60) == 0
    assert failed == []


def _values(cluster: LocalCluster, broker: int, topic: str) -> list[bytes | None]:
    return [value for _, value in cluster.replica_records(broker, topic, 0)]


def _logged(cluster: LocalCluster, text: str) -> bool:
    return any(
        b.log_path.exists() and text in b.log_path.read_text(errors="replace")
        for b in cluster.brokers.values()
    )


@pytest.mark.slow  # two cluster starts and stops: 35-60 s here
def test_a_single_broker_on_the_clusters_directory_takes_none_of_its_brokers_data(
    tmp_path: Path, zk_connect: str
) -> None:
    data = tmp_path / "data"
    single = BrokerProcess(data).start()
    _create(single.bootstrap, "solo", 1)
    single.stop()

    def cluster() -> LocalCluster:
        return LocalCluster(data, 3, GROUP_SETTINGS, zookeeper_connect=zk_connect,
                            session_timeout_ms=SESSION_TIMEOUT_MS)  # fmt: skip

    with cluster().start() as first:
        _create(first.bootstrap, "keep", 3)
        _produce(first.bootstrap, "keep", 1000)
        first.wait_until(lambda: sorted(first.isr_of("keep")) == [1, 2, 3], "all in sync")

    single.start()
    single.stop()

    expected = [f"record-{i}".encode() for i in range(1000)]
    with cluster().start() as second:
        second.wait_for_leader("keep")
        for broker in (1, 2, 3):
            assert _values(second, broker, "keep") == expected
        assert not _logged(second, "not in its data directories")
    assert not list(data.glob("*-stray"))
    log = single.log_path.read_text(errors="replace")
    assert "broker-1 holds meta.properties" in log
    assert "-stray" not in log


def _last_isr_member_wiped(cluster: LocalCluster) -> tuple[int, list[int], Path]:
    """Topic ``acked`` (RF 3, min.insync.replicas=2) with 200 acknowledged records; both
    followers killed (the ISR shrinks to the leader), then the leader killed and its log
    taken away (kept aside, returned). The followers come back: offline, as it must be."""
    _create(cluster.bootstrap, "acked", 3, **{"min.insync.replicas": "2"})
    cluster.wait_until(lambda: len(cluster.isr_of("acked")) == 3, "all in sync")
    _produce(cluster.bootstrap, "acked", 200)
    leader = cluster.leader_of("acked")
    followers = [b for b in (1, 2, 3) if b != leader]
    cluster.wait_until(
        lambda: all(len(_values(cluster, b, "acked")) == 200 for b in followers),
        "the followers hold every record",
    )
    for follower in followers:
        cluster.kill(follower)
    cluster.wait_until(lambda: cluster.isr_of("acked") == [leader], "the ISR shrunk to the leader")
    cluster.kill(leader)
    cluster.wait_until(lambda: leader not in cluster.registered(), "the leader gone")
    kept = cluster.brokers[leader].data_dir.parent / "kept-aside"
    shutil.move(cluster.brokers[leader].data_dir, kept)  # the data directory wiped
    for follower in followers:
        cluster.start_broker(follower)
    cluster.wait_until(lambda: set(followers) <= set(cluster.registered()), "followers back")
    assert cluster.leader_of("acked") == -1
    cluster.start_broker(leader)
    cluster.wait_until(
        lambda: _logged(cluster, "acked-0 stays offline"), "the controller refusing the leader"
    )
    assert cluster.leader_of("acked") == -1
    assert cluster.isr_of("acked") == [leader]
    assert _logged(cluster, "is new (this start wrote its meta.properties)")
    expected = [f"record-{i}".encode() for i in range(200)]
    for follower in followers:
        assert _values(cluster, follower, "acked") == expected
    return leader, followers, kept


@pytest.mark.slow  # a cluster started, killed whole and restarted: 45-60 s here
def test_a_wiped_last_isr_member_does_not_lead_until_an_unclean_election_takes_a_follower(
    cluster: LocalCluster,
) -> None:
    _, followers, _ = _last_isr_member_wiped(cluster)
    with Admin({"bootstrap.servers": f"127.0.0.1:{cluster.brokers[followers[0]].port}"}) as admin:
        results = admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition("acked", 0)])
    assert results == {TopicPartition("acked", 0): None}
    assert cluster.wait_for_leader("acked") in followers
    cluster.wait_until(lambda: len(cluster.isr_of("acked")) == 3, "every replica in sync again")
    expected = [f"record-{i}".encode() for i in range(200)]
    for broker in (1, 2, 3):
        assert _values(cluster, broker, "acked") == expected


@pytest.mark.slow  # a cluster started, killed whole and restarted: 45-60 s here
def test_a_wiped_last_isr_member_leads_again_once_its_data_is_restored(
    cluster: LocalCluster,
) -> None:
    leader, _, kept = _last_isr_member_wiped(cluster)
    cluster.kill(leader)
    cluster.wait_until(lambda: leader not in cluster.registered(), "the leader gone")
    shutil.rmtree(cluster.brokers[leader].data_dir)
    shutil.move(kept, cluster.brokers[leader].data_dir)
    cluster.start_broker(leader)
    assert cluster.wait_for_leader("acked") == leader
    cluster.wait_until(lambda: len(cluster.isr_of("acked")) == 3, "every replica in sync again")
    expected = [f"record-{i}".encode() for i in range(200)]
    for broker in (1, 2, 3):
        assert _values(cluster, broker, "acked") == expected
