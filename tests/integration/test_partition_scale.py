"""Many partitions on one broker: descriptors, all-or-nothing creation, a free loop, recovery.

Real ``samsa serve`` processes over loopback; records go in and out through
librdkafka (confluent-kafka), requests whose answers the test inspects byte by
byte through :mod:`tests.rawclient`. Descriptors are counted in
``/proc/<pid>/fd`` and memory read from ``/proc/<pid>/status``; a broker's
descriptor limit is lowered with ``prlimit`` once it runs. The figures at
10,000 partitions are in ``bench/RESULTS.md`` (``bench/partition_scale_bench.py``).
"""

from __future__ import annotations

import json
import os
import resource
import selectors
import socket
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from tests.rawclient import exchange, read_response, request_frame

from samsa.testing import BrokerProcess, start_broker

pytestmark = pytest.mark.timeout(180)

CREATE_TOPICS, API_VERSIONS = 19, 18
KAFKA_STORAGE_ERROR = 56
PARTITIONS = 500


def _pid(broker: BrokerProcess) -> int:
    assert broker.process is not None
    return broker.process.pid


def _descriptors(broker: BrokerProcess) -> int:
    return len(os.listdir(f"/proc/{_pid(broker)}/fd"))


def _peak_rss_mb(broker: BrokerProcess) -> float:
    for line in Path(f"/proc/{_pid(broker)}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc/<pid>/status")


def _create_topics_values(name: str, partitions: int) -> dict[str, object]:
    return {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                    "assignments": [], "configs": []}],
        "timeout": 120_000, "validate_only": False,
    }  # fmt: skip


def _create_topic(broker: BrokerProcess, name: str, partitions: int) -> int:
    """CreateTopics v5 for one topic; its error code."""
    response = exchange(broker.bootstrap, CREATE_TOPICS, 5, _create_topics_values(name, partitions))
    return int(response.topics[0].error_code)


def _produce_one_each(broker: BrokerProcess, topic: str, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
    failed: list[str] = []

    def delivered(err: object, _message: object) -> None:
        if err is not None:
            failed.append(str(err))

    for partition in range(partitions):
        producer.produce(topic, b"v%d" % partition, partition=partition, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert failed == []


def _fetch_all(broker: BrokerProcess, topic: str, partitions: int) -> dict[int, list[bytes]]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "log_level": 3})  # fmt: skip
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    found: dict[int, list[bytes]] = {}
    deadline = time.monotonic() + 60
    while sum(map(len, found.values())) < partitions and time.monotonic() < deadline:
        for message in consumer.consume(1000, 0.5):
            if message.error() is None:
                found.setdefault(message.partition(), []).append(message.value())
    consumer.close()
    return found


def _topic_table(data_dir: Path) -> list[str]:
    """Topic names in the topic table (none before the first topic is saved)."""
    table = data_dir / "samsa-topics.json"
    if not table.exists():
        return []
    return [t["name"] for t in json.loads(table.read_text())["topics"]]


def _descriptors_into(broker: BrokerProcess, prefix: str) -> int:
    """Descriptors of the broker open on files of partitions whose directory starts ``prefix``."""
    fd_dir = f"/proc/{_pid(broker)}/fd"
    targets = []
    for fd in os.listdir(fd_dir):
        try:
            targets.append(os.readlink(f"{fd_dir}/{fd}"))
        except FileNotFoundError:
            continue  # closed meanwhile
    return sum(1 for t in targets if Path(t).parent.name.startswith(prefix))


def test_a_partition_costs_one_descriptor_created_and_served(tmp_path: Path) -> None:
    with start_broker(tmp_path / "data") as broker:
        before = _descriptors(broker)
        assert _create_topic(broker, "wide", PARTITIONS) == 0
        _produce_one_each(broker, "wide", PARTITIONS)
        found = _fetch_all(broker, "wide", PARTITIONS)
        assert found == {p: [b"v%d" % p] for p in range(PARTITIONS)}
        # One .log per partition: the indexes are mapped without keeping a descriptor.
        assert _descriptors_into(broker, "wide-") == PARTITIONS
        # The consumer made __consumer_offsets (50 partitions); a few spare for the loop.
        assert _descriptors(broker) - before <= PARTITIONS + 50 + 10


def test_a_topic_whose_partitions_do_not_all_fit_is_not_created(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with start_broker(data_dir) as broker:
        spare = 60
        limit = _descriptors(broker) + spare
        resource.prlimit(_pid(broker), resource.RLIMIT_NOFILE, (limit, limit))
        assert _create_topic(broker, "too-wide", 4 * spare) == KAFKA_STORAGE_ERROR
        assert "too-wide" not in _topic_table(data_dir)
        assert not [p for p in data_dir.iterdir() if p.name.startswith("too-wide")]
        # The broker goes on: a topic that fits is created and served.
        assert _create_topic(broker, "fits", 4) == 0
        _produce_one_each(broker, "fits", 4)
        assert _fetch_all(broker, "fits", 4) == {p: [b"v%d" % p] for p in range(4)}
    with start_broker(data_dir) as broker:  # and a restart finds nothing of the failed one
        assert "too-wide" not in _topic_table(data_dir)
        assert not [p for p in data_dir.iterdir() if "too-wide" in p.name]


def test_another_client_is_answered_while_a_big_create_topics_runs(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    broker = start_broker(data_dir)
    try:
        host, port = broker.bootstrap.rsplit(":", 1)
        creating = socket.create_connection((host, int(port)), timeout=120)
        other = socket.create_connection((host, int(port)), timeout=120)
        with creating, other:
            creating.sendall(request_frame(CREATE_TOPICS, 5, _create_topics_values("big", 3000)))
            first_dir = data_dir / "big-0"
            while not first_dir.exists():  # the broker is making the topic's logs
                time.sleep(0.01)
            other.sendall(request_frame(API_VERSIONS, 0, {}))
            selector = selectors.DefaultSelector()
            selector.register(creating, selectors.EVENT_READ, "CreateTopics")
            selector.register(other, selectors.EVENT_READ, "ApiVersions")
            ready = selector.select(timeout=120)
            answered_first = {key.data for key, _ in ready}
            assert answered_first == {"ApiVersions"}
            assert read_response(other, API_VERSIONS, 0).error_code == 0
            assert read_response(creating, CREATE_TOPICS, 5).topics[0].error_code == 0
        assert "big" in _topic_table(data_dir)
    finally:
        broker.kill()  # a clean stop of 3,000 partitions may take longer than stop() waits


def test_a_create_topics_whose_client_goes_away_leaves_no_partition_behind(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    broker = start_broker(data_dir)
    try:
        host, port = broker.bootstrap.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=120) as creating:
            creating.sendall(request_frame(CREATE_TOPICS, 5, _create_topics_values("big", 3000)))
            while not (data_dir / "big-0").exists():  # the broker is making the topic's logs
                time.sleep(0.01)
        # The connection is closed mid-creation: every log made is removed again.
        while [p for p in data_dir.iterdir() if p.name.startswith("big-")]:
            time.sleep(0.05)  # the pytest timeout catches a broker that leaves them
        assert "big" not in _topic_table(data_dir)
        assert _create_topic(broker, "big", 4) == 0  # the name is free again
        _produce_one_each(broker, "big", 4)
        assert _fetch_all(broker, "big", 4) == {p: [b"v%d" % p] for p in range(4)}
    finally:
        broker.kill()


def test_recovery_after_kill_9_of_many_nearly_empty_partitions_keeps_memory_small(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    broker = start_broker(data_dir)
    try:
        assert _create_topic(broker, "wide", PARTITIONS) == 0
        _produce_one_each(broker, "wide", PARTITIONS)
        broker.kill()
        broker.start(timeout=120)
        # Each crashed log used to fault in ~1.4 MB of its pre-allocated indexes.
        assert _peak_rss_mb(broker) < 200
        assert _fetch_all(broker, "wide", PARTITIONS) == {
            p: [b"v%d" % p] for p in range(PARTITIONS)
        }
    finally:
        broker.kill()


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_ten_thousand_partitions_are_created_served_and_restarted_under_the_limit(
    tmp_path: Path,
) -> None:
    # This machine's default limit is 20,000; three descriptors a partition needed 30,000.
    wide = 10_000
    data_dir = tmp_path / "data"
    broker = start_broker(data_dir)
    try:
        limit = 20_000
        resource.prlimit(_pid(broker), resource.RLIMIT_NOFILE, (limit, limit))
        assert _create_topic(broker, "wide", wide) == 0
        _produce_one_each(broker, "wide", wide)
        assert _fetch_all(broker, "wide", wide) == {p: [b"v%d" % p] for p in range(wide)}
        assert broker.stop(timeout=600) == 0
        broker.start(timeout=600)
        resource.prlimit(_pid(broker), resource.RLIMIT_NOFILE, (limit, limit))
        assert _descriptors_into(broker, "wide-") == wide
        broker.kill()
        broker.start(timeout=600)
        assert _peak_rss_mb(broker) < 300
        assert _fetch_all(broker, "wide", wide) == {p: [b"v%d" % p] for p in range(wide)}
    finally:
        broker.kill()
