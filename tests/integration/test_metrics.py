"""Prometheus metrics scraped over HTTP from a real broker after real traffic.

One broker with ``metrics.listeners`` on a free port; confluent-kafka produces a
known number of records to a two-partition topic, reads them all back, and a
group commits part of them. Each test scrapes ``GET /metrics`` and checks one
figure against what the clients did. The dashboard and docs/metrics.md are
checked against the names the broker really exports.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families
from tests.rawclient import exchange

from samsa.testing import BrokerProcess, start_broker

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
QUIET = {"log_level": 3}
TOPIC = "metered"
PARTITIONS = 2
RECORDS = 400  # per partition
VALUE = b"v" * 100
GROUP = "metered-readers"
COMMITTED = {0: 150, 1: 40}
FETCH = 1
WAIT_S = 20


@dataclass(frozen=True)
class Scrape:
    """One scrape: every sample by name and labels, and the families' names."""

    samples: dict[tuple[str, frozenset[tuple[str, str]]], float]
    families: set[str]

    def value(self, name: str, **labels: str) -> float:
        return self.samples[(name, frozenset(labels.items()))]

    def total(self, name: str, **labels: str) -> float:
        """The sum of ``name``'s samples whose labels include ``labels``."""
        wanted = set(labels.items())
        return sum(v for (n, ls), v in self.samples.items() if n == name and wanted <= ls)


def scrape(broker: BrokerProcess) -> Scrape:
    with urllib.request.urlopen(broker.metrics_url, timeout=WAIT_S) as response:
        text = response.read().decode()
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    families = set()
    for family in text_string_to_metric_families(text):
        families.add(family.name)
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return Scrape(samples, families)


def scrape_until(broker: BrokerProcess, ready: Callable[[Scrape], bool]) -> Scrape:
    """Scrape until ``ready`` holds (the broker counts a connection or a wait once its loop
    gets to it); the last scrape either way."""
    deadline = time.monotonic() + WAIT_S
    found = scrape(broker)
    while not ready(found) and time.monotonic() < deadline:
        time.sleep(0.05)
        found = scrape(broker)
    return found


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(
        tmp_path_factory.mktemp("metrics") / "data",
        overrides=["metrics.listeners=http://127.0.0.1:0", "group.initial.rebalance.delay.ms=0"],
    )
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def traffic(broker: BrokerProcess) -> BrokerProcess:
    """RECORDS per partition produced, all read back once, COMMITTED committed by GROUP;
    every client closed again."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(WAIT_S)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, **QUIET})
    for partition in range(PARTITIONS):
        for _ in range(RECORDS):
            producer.produce(TOPIC, VALUE, partition=partition)
    assert producer.flush(WAIT_S) == 0
    del producer
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": GROUP,
         "enable.auto.commit": False, **QUIET}
    )  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    read = 0
    deadline = time.monotonic() + WAIT_S
    while read < PARTITIONS * RECORDS and time.monotonic() < deadline:
        read += sum(1 for m in consumer.consume(500, 1) if m.error() is None)
    assert read == PARTITIONS * RECORDS
    consumer.commit(
        offsets=[TopicPartition(TOPIC, p, offset) for p, offset in COMMITTED.items()],
        asynchronous=False,
    )
    consumer.close()
    return broker


def test_messages_in_equals_the_records_produced_to_the_topic(traffic: BrokerProcess) -> None:
    found = scrape(traffic)
    assert found.value("kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == (
        PARTITIONS * RECORDS
    )


def test_bytes_in_equals_the_bytes_the_topic_logs_hold(traffic: BrokerProcess) -> None:
    found = scrape(traffic)
    bytes_in = found.value("kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC)
    assert bytes_in > PARTITIONS * RECORDS * len(VALUE)
    assert bytes_in == found.total("kafka_log_log_size_bytes", topic=TOPIC)


def test_bytes_out_covers_every_record_the_consumer_read(traffic: BrokerProcess) -> None:
    found = scrape(traffic)
    bytes_out = found.value("kafka_server_brokertopicmetrics_bytesout_total", topic=TOPIC)
    assert bytes_out >= found.value("kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC)
    assert (
        found.value("kafka_server_brokertopicmetrics_replicationbytesout_total", topic=TOPIC) == 0
    )


def test_log_end_offsets_and_segment_counts_are_exported_per_partition(
    traffic: BrokerProcess,
) -> None:
    found = scrape(traffic)
    for partition in range(PARTITIONS):
        labels = {"topic": TOPIC, "partition": str(partition)}
        assert found.value("kafka_log_log_logendoffset", **labels) == RECORDS
        assert found.value("kafka_log_log_logstartoffset", **labels) == 0
        assert found.value("kafka_log_log_numlogsegments", **labels) == 1


def test_every_produce_request_is_counted_with_its_times(traffic: BrokerProcess) -> None:
    found = scrape(traffic)
    produce = found.total("kafka_network_requestmetrics_requests_total", request="Produce")
    assert produce >= 1
    for time_metric in ("totaltime", "localtime", "requestqueuetime", "remotetime"):
        name = f"kafka_network_requestmetrics_{time_metric}_seconds_count"
        assert found.value(name, request="Produce") == produce
    assert found.value("kafka_network_requestmetrics_totaltime_seconds_sum", request="Produce") > 0


def test_group_lag_is_what_the_group_has_not_committed(traffic: BrokerProcess) -> None:
    found = scrape(traffic)
    for partition, committed in COMMITTED.items():
        labels = {"consumergroup": GROUP, "topic": TOPIC, "partition": str(partition)}
        assert found.value("kafka_consumergroup_current_offset", **labels) == committed
        assert found.value("kafka_consumergroup_lag", **labels) == RECORDS - committed


def test_partition_errors_are_counted_under_their_request_and_code(
    traffic: BrokerProcess,
) -> None:
    before = scrape(traffic)
    name, labels = "kafka_network_requestmetrics_errors_total", {
        "request": "FetchConsumer", "error": "UNKNOWN_TOPIC_OR_PARTITION"
    }  # fmt: skip
    missing = [{"partition": p, "fetch_offset": 0, "partition_max_bytes": 1024} for p in (7, 8)]
    response = exchange(
        traffic.bootstrap,
        FETCH,
        12,
        {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
         "topics": [{"topic": TOPIC, "partitions": missing}]},
    )  # fmt: skip
    assert [p.error_code for p in response.responses[0].partitions] == [3, 3]
    after = scrape(traffic)
    assert after.total(name, **labels) == before.total(name, **labels) + 2


def test_open_client_connections_are_counted_until_they_close(traffic: BrokerProcess) -> None:
    name = "kafka_server_socketservermetrics_connection_count"
    idle = scrape_until(traffic, lambda s: s.value(name) == 0).value(name)
    assert idle == 0
    host, port = traffic.bootstrap.rsplit(":", 1)
    sockets = [socket.create_connection((host, int(port)), timeout=WAIT_S) for _ in range(3)]
    try:
        assert scrape_until(traffic, lambda s: s.value(name) == 3).value(name) == 3
    finally:
        for sock in sockets:
            sock.close()
    assert scrape_until(traffic, lambda s: s.value(name) == 0).value(name) == 0


def test_a_consumer_waiting_for_records_is_in_the_fetch_purgatory(traffic: BrokerProcess) -> None:
    name, labels = "kafka_server_delayedoperationpurgatory_purgatorysize", {
        "delayedoperation": "Fetch"
    }  # fmt: skip
    consumer = Consumer(
        {"bootstrap.servers": traffic.bootstrap, "group.id": "metered-waiter",
         "fetch.wait.max.ms": 5000, **QUIET}
    )  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, 0, RECORDS)])  # at the end: nothing to read
    try:
        consumer.consume(1, 0.5)
        found = scrape_until(traffic, lambda s: s.value(name, **labels) >= 1)
        assert found.value(name, **labels) >= 1
    finally:
        consumer.close()


def test_the_process_reports_its_memory_and_open_descriptors(traffic: BrokerProcess) -> None:
    found = scrape(traffic)
    assert found.value("process_resident_memory_bytes") > 10 * 1024 * 1024
    assert found.value("process_open_fds") > PARTITIONS


def test_a_single_node_is_its_own_active_controller(traffic: BrokerProcess) -> None:
    found = scrape(traffic)
    assert found.value("kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert found.value("kafka_server_replicamanager_underreplicatedpartitions") == 0


def test_paths_other_than_metrics_are_not_found(traffic: BrokerProcess) -> None:
    url = traffic.metrics_url.removesuffix("/metrics") + "/status"
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(url, timeout=WAIT_S)
    assert raised.value.code == 404


def test_prometheus_asking_for_openmetrics_gets_openmetrics(traffic: BrokerProcess) -> None:
    request = urllib.request.Request(
        traffic.metrics_url,
        headers={"Accept": "application/openmetrics-text;version=1.0.0,text/plain;q=0.5"},
    )
    with urllib.request.urlopen(request, timeout=WAIT_S) as response:
        content_type = response.headers["Content-Type"]
        text = response.read().decode()
    assert content_type.startswith("application/openmetrics-text")
    families = {f.name: f for f in openmetrics_families(text)}  # raises on malformed text
    messages_in = {
        sample.labels["topic"]: sample.value
        for sample in families["kafka_server_brokertopicmetrics_messagesin"].samples
        if sample.name.endswith("_total")
    }
    assert messages_in[TOPIC] == PARTITIONS * RECORDS
    assert text.endswith("# EOF\n")


def test_a_request_that_is_not_http_is_answered_400_and_scrapes_go_on(
    traffic: BrokerProcess,
) -> None:
    host, port = traffic.metrics_url.removeprefix("http://").split("/", 1)[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=WAIT_S) as sock:
        sock.sendall(b"\x00\x00\x00\x10 not a request\r\n\r\n")
        answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert scrape(traffic).value("kafka_controller_kafkacontroller_activecontrollercount") == 1


def _queried_metrics() -> set[str]:
    """The metric names the Grafana dashboard's queries use."""
    dashboard = json.loads((ROOT / "docs" / "grafana" / "samsa.json").read_text())
    exprs = [
        target["expr"]
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
        if "expr" in target
    ]
    assert exprs, "the dashboard has no queries"
    names = set()
    for expr in exprs:
        names.update(re.findall(r"\b((?:kafka|process)_[a-z0-9_]+)", expr))
    return names


def _family_of(sample_name: str, families: set[str]) -> str | None:
    for suffix in ("", "_total", "_bucket", "_count", "_sum"):
        if sample_name.endswith(suffix) and sample_name.removesuffix(suffix) in families:
            return sample_name.removesuffix(suffix)
    return None


def test_every_metric_the_dashboard_queries_is_exported(traffic: BrokerProcess) -> None:
    families = scrape(traffic).families
    queried = _queried_metrics()
    assert sorted(n for n in queried if _family_of(n, families) is None) == []


def test_docs_list_exactly_the_metrics_the_broker_exports(traffic: BrokerProcess) -> None:
    families = scrape(traffic).families
    documented = set(
        re.findall(
            r"^\| `((?:kafka|process|samsa)_[a-z0-9_]+)`",
            (ROOT / "docs" / "metrics.md").read_text(),
            re.M,
        )
    )
    exported = {f"{name}_total" if f"{name}_total" in documented else name for name in families}
    assert sorted(documented - exported) == []
    assert sorted(exported - documented) == []


def test_samsa_top_once_shows_messages_in_per_topic_and_lag_per_group(
    traffic: BrokerProcess,
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "samsa", "top", "--bootstrap-server", traffic.bootstrap,
         "--once", "--interval", "0.2", "--topic", TOPIC, "--group", GROUP],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = [re.split(r"\s{2,}", line.strip()) for line in result.stdout.splitlines() if line]
    assert ["TOPIC", "PARTITIONS", "LOG-END-OFFSET", "MSG/S-IN"] in rows
    assert [TOPIC, str(PARTITIONS), str(PARTITIONS * RECORDS), "0.0"] in rows
    committed = sum(COMMITTED.values())
    lag = PARTITIONS * RECORDS - committed
    assert [GROUP, TOPIC, str(PARTITIONS), str(committed), str(PARTITIONS * RECORDS), str(lag),
            "0.0"] in rows  # fmt: skip


def _labelled(found: Scrape, label: str, value: str) -> list[str]:
    """The names of the samples with ``label`` = ``value``."""
    return sorted({name for name, labels in found.samples if (label, value) in labels})


def _produce_and_commit(broker: BrokerProcess, topic: str, group: str) -> None:
    """A topic of two partitions with a few records each, and a group that committed
    offset 1 of each and left."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(WAIT_S)
    producer = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    for partition in range(PARTITIONS):
        for _ in range(3):
            producer.produce(topic, VALUE, partition=partition)
    assert producer.flush(WAIT_S) == 0
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": group, **QUIET}
    )  # fmt: skip
    consumer.commit(
        offsets=[TopicPartition(topic, p, 1) for p in range(PARTITIONS)], asynchronous=False
    )
    consumer.close()


def test_the_metrics_of_a_deleted_topic_leave_the_scrape(broker: BrokerProcess) -> None:
    topic, group = "short-lived", "short-lived-readers"
    _produce_and_commit(broker, topic, group)
    found = scrape_until(
        broker, lambda s: "kafka_consumergroup_lag" in _labelled(s, "topic", topic)
    )
    assert {
        "kafka_server_brokertopicmetrics_messagesin_total",
        "kafka_log_log_logendoffset",
        "kafka_consumergroup_lag",
    } <= set(_labelled(found, "topic", topic))

    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    admin.delete_topics([topic])[topic].result(WAIT_S)
    found = scrape_until(broker, lambda s: not _labelled(s, "topic", topic))
    assert _labelled(found, "topic", topic) == []


def test_the_lag_of_a_deleted_group_leaves_the_scrape(broker: BrokerProcess) -> None:
    topic, group = "outlived", "departed-readers"
    _produce_and_commit(broker, topic, group)
    # A group whose members all left keeps its offsets, and its lag, as Kafka's does.
    found = scrape_until(broker, lambda s: bool(_labelled(s, "consumergroup", group)))
    assert found.value("kafka_consumergroup_lag", consumergroup=group, topic=topic,
                       partition="0") == 2  # fmt: skip

    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    admin.delete_consumer_groups([group])[group].result(WAIT_S)
    found = scrape_until(broker, lambda s: not _labelled(s, "consumergroup", group))
    assert _labelled(found, "consumergroup", group) == []
    assert "kafka_server_brokertopicmetrics_messagesin_total" in _labelled(found, "topic", topic)
