"""Metrics of a three-broker cluster: the controller, replication bytes, ISR changes.

One cluster for the module, each broker serving ``/metrics`` on a free port; a
topic replicated on all three, written with acks=all by confluent-kafka.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families
from tests.cluster.conftest import GROUP_SETTINGS

from samsa.testing.cluster import LocalCluster
from samsa.testing.waiting import wait_until
from samsa.testing.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.timeout(180)

QUIET = {"log_level": 3}
TOPIC = "replicated-metered"
RECORDS = 300
WAIT_S = 30
LAG_MS = 1500
"""replica.lag.time.max.ms: a stopped follower leaves the ISR within a few seconds."""


def scrape(cluster: LocalCluster, broker_id: int) -> dict[str, float]:
    """Broker ``broker_id``'s samples without labels or summed over their labels, by name;
    ``name{topic}`` entries hold the samples of topic TOPIC, ``name{Produce}`` those of
    one request type."""
    url = cluster.brokers[broker_id].metrics_url
    with urllib.request.urlopen(url, timeout=WAIT_S) as response:
        text = response.read().decode()
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name
            if sample.labels.get("topic") == TOPIC:
                name = f"{name}{{topic}}"
            elif "request" in sample.labels:
                name = f"{name}{{{sample.labels['request']}}}"
            found[name] = found.get(name, 0.0) + sample.value
    return found


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperServer) -> Iterator[
    LocalCluster
]:  # fmt: skip
    local = LocalCluster(
        Path(tmp_path_factory.mktemp("metrics-cluster")),
        3,
        [*GROUP_SETTINGS, "metrics.listeners=http://127.0.0.1:0",
         f"replica.lag.time.max.ms={LAG_MS}"],
        zookeeper_connect=f"{zookeeper.connect}/metrics-cluster",
        session_timeout_ms=30_000,
    )  # fmt: skip
    local.start()
    try:
        admin = AdminClient({"bootstrap.servers": local.bootstrap, **QUIET})
        admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(WAIT_S)
        local.wait_for_leader(TOPIC, 0)
        producer = Producer({"bootstrap.servers": local.bootstrap, "acks": "all", **QUIET})
        for _ in range(RECORDS):
            producer.produce(TOPIC, b"r" * 100, partition=0)
        assert producer.flush(WAIT_S) == 0
        yield local
    finally:
        local.close()


def test_exactly_one_broker_is_the_active_controller(cluster: LocalCluster) -> None:
    def one() -> bool:
        counts = [scrape(cluster, b)["kafka_controller_kafkacontroller_activecontrollercount"]
                  for b in cluster.alive()]  # fmt: skip
        return sorted(counts) == [0, 0, 1]

    wait_until(one, "one active controller", timeout=WAIT_S, interval=0.1)


def test_followers_take_in_as_replication_bytes_what_the_leader_took_in(
    cluster: LocalCluster,
) -> None:
    leader = cluster.leader_of(TOPIC, 0)
    led = scrape(cluster, leader)
    assert led["kafka_server_brokertopicmetrics_messagesin_total{topic}"] == RECORDS
    bytes_in = led["kafka_server_brokertopicmetrics_bytesin_total{topic}"]
    for follower in (b for b in cluster.alive() if b != leader):
        wait_until(
            lambda f=follower: scrape(cluster, f)[
                "kafka_server_brokertopicmetrics_replicationbytesin_total{topic}"
            ] == bytes_in,
            f"broker {follower} to count the leader's bytes as replication bytes in",
            timeout=WAIT_S, interval=0.1,
        )  # fmt: skip
    assert (
        scrape(cluster, leader)["kafka_server_brokertopicmetrics_replicationbytesout_total{topic}"]
        >= 2 * bytes_in
    )
    assert led["kafka_network_requestmetrics_requests_total{FetchFollower}"] > 0  # fmt: skip


def test_a_frozen_follower_shrinks_the_isr_and_its_thaw_expands_it(
    cluster: LocalCluster,
) -> None:
    leader = cluster.leader_of(TOPIC, 0)
    follower = next(b for b in cluster.alive() if b != leader and b != cluster.controller())
    before = scrape(cluster, leader)
    cluster.pause(follower)  # SIGSTOP: it stops fetching, its ZooKeeper session lives on
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": 1, **QUIET})
    producer.produce(TOPIC, b"past the frozen follower", partition=0)
    assert producer.flush(WAIT_S) == 0
    try:
        wait_until(
            lambda: (
                scrape(cluster, leader)["kafka_server_replicamanager_isrshrinks_total"]
                > before["kafka_server_replicamanager_isrshrinks_total"]
            ),
            "the ISR to shrink",
            timeout=WAIT_S,
            interval=0.1,
        )
        assert scrape(cluster, leader)["kafka_server_replicamanager_underreplicatedpartitions"] >= 1
    finally:
        cluster.resume(follower)
    wait_until(
        lambda: (
            scrape(cluster, leader)["kafka_server_replicamanager_isrexpands_total"]
            > before["kafka_server_replicamanager_isrexpands_total"]
        ),
        "the ISR to expand",
        timeout=WAIT_S,
        interval=0.1,
    )


def _names_topic(cluster: LocalCluster, broker_id: int, topic: str) -> bool:
    """Whether a series of broker ``broker_id``'s scrape is labelled with ``topic``."""
    with urllib.request.urlopen(cluster.brokers[broker_id].metrics_url, timeout=WAIT_S) as r:
        text = r.read().decode()
    return f'topic="{topic}"' in text


def test_a_deleted_topics_series_leave_every_brokers_scrape(cluster: LocalCluster) -> None:
    topic = "replicated-short-lived"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(WAIT_S)
    cluster.wait_for_leader(topic, 0)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", **QUIET})
    for _ in range(10):
        producer.produce(topic, b"r" * 100, partition=0)
    assert producer.flush(WAIT_S) == 0
    del producer
    brokers = cluster.alive()
    wait_until(
        lambda: all(_names_topic(cluster, b, topic) for b in brokers),
        "every broker's scrape names the topic",
        timeout=WAIT_S,
    )

    admin.delete_topics([topic])[topic].result(WAIT_S)
    wait_until(
        lambda: not any(_names_topic(cluster, b, topic) for b in brokers),
        "no broker's scrape names the deleted topic",
        timeout=WAIT_S,
    )
