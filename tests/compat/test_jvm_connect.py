"""Kafka Connect (connect-runtime 4.x) in distributed mode against samsa.

A worker (``org.apache.kafka.connect.cli.ConnectDistributed``, as ``connect-distributed.sh``
runs it) keeps its connector configs, source offsets and statuses in three compacted topics
on samsa, which it creates. Over its REST API the tests create a ``FileStreamSource``
reading a file into a topic and a ``FileStreamSink`` writing that topic into another
file, then check that the sink's file holds the source's lines and that the API lists both
connectors, running.

Delivery, as Connect documents it:

- exactly-once source (``exactly.once.source.support=enabled``, KIP-618): each poll's
  records and the source offsets after them are written in one transaction, so a
  ``read_committed`` reader sees each line in the topic exactly once, in order, even when
  the worker is killed;
- otherwise at-least-once: the source's offsets are committed every
  ``offset.flush.interval.ms``; a worker killed in between reads the lines after the last
  committed offset again, so the topic holds them twice;
- the file sink is at-least-once either way: a killed worker writes again what it wrote
  after its consumer's last committed offset.

So after a kill every line is in the sink's file, the first copies in order, and a line
is repeated only as part of a replay of what followed a commit.
"""

from __future__ import annotations

import itertools
import json
import signal
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient, ConfigResource
from tests.compat.jvm_process import JavaProcess

from samsa.testing import BrokerProcess
from samsa.testing.waiting import wait_until
from samsa.testing.zookeeper import free_port

pytestmark = pytest.mark.timeout(300)

WORKER = "org.apache.kafka.connect.cli.ConnectDistributed"
QUIET = {"log_level": 3}
WAIT_S = 120
NUDGE_S = 3


class ConnectWorker:
    """One distributed worker: its properties file, its internal topics, its JVM."""

    def __init__(self, bootstrap: str, tmp_path: Path, *, exactly_once: bool) -> None:
        self.bootstrap = bootstrap
        self.name = f"connect-{uuid.uuid4().hex[:8]}"
        self.port = free_port()
        self.internal = {kind: f"{self.name}-{kind}" for kind in ("configs", "offsets", "status")}
        settings = {
            "bootstrap.servers": bootstrap,
            "group.id": self.name,
            "listeners": f"http://127.0.0.1:{self.port}",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "config.storage.topic": self.internal["configs"],
            "offset.storage.topic": self.internal["offsets"],
            "status.storage.topic": self.internal["status"],
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "offset.storage.partitions": "5",
            "status.storage.partitions": "3",
            "offset.flush.interval.ms": "1000",
            # The connectors come from the classpath, found by their service manifests.
            "plugin.discovery": "service_load",
            # A restarted worker takes over the killed one's connectors at once, rather than
            # waiting up to five minutes for the killed one to come back.
            "scheduled.rebalance.max.delay.ms": "0",
            "session.timeout.ms": "6000",
            "heartbeat.interval.ms": "1000",
            # Likewise the sink's consumer group (whose members a killed worker leaves
            # behind until their sessions expire: 45 s by default).
            "consumer.session.timeout.ms": "6000",
            "consumer.heartbeat.interval.ms": "1000",
            # A killed exactly-once task leaves a transaction open on the offsets topic,
            # which the restarted worker reads read_committed to its end: it waits until
            # the coordinator aborts the transaction at this timeout (60 s by default).
            "producer.transaction.timeout.ms": "10000",
            "exactly.once.source.support": "enabled" if exactly_once else "disabled",
        }
        properties = tmp_path / f"{self.name}.properties"
        properties.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        # The worker's own decisions (rebalances, tasks started, offsets committed) are
        # logged, which a failure needs.
        self.process = JavaProcess(tmp_path / f"{self.name}.log", WORKER, str(properties),
                                   info=("org.apache.kafka.connect",))  # fmt: skip

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def rest(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url(path), data, method=method,
                                         headers={"Content-Type": "application/json"})  # fmt: skip
        with urllib.request.urlopen(request, timeout=30) as answer:
            text = answer.read()
        return json.loads(text) if text else None

    def serving(self) -> bool:
        """The REST API answers and the worker has joined its group (it lists connectors)."""
        assert self.process.running, self.process.details()
        try:
            self.rest("GET", "/connectors")
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False
        return True

    def start(self) -> None:
        self.process.start()
        wait_until(
            self.serving, "the Connect worker's REST API answers", timeout=WAIT_S, interval=0.5
        )

    def running(self, connector: str) -> bool:
        """The connector and each of its tasks run (a failed one fails the test)."""
        try:
            status = self.rest("GET", f"/connectors/{connector}/status")
        except urllib.error.HTTPError as error:
            if error.code in (404, 409):  # not yet known / rebalancing
                return False
            raise
        states = [status["connector"]["state"], *(task["state"] for task in status["tasks"])]
        assert "FAILED" not in states, json.dumps(status)
        return bool(status["tasks"]) and set(states) == {"RUNNING"}

    def create(self, configs: dict[str, dict[str, str]]) -> None:
        """Create the connectors and wait until they run."""
        for connector, config in configs.items():
            self.rest("PUT", f"/connectors/{connector}/config", config)
        self.wait_running(*configs)

    def wait_running(self, *connectors: str) -> None:
        wait_until(lambda: all(self.running(c) for c in connectors),
                   f"{', '.join(connectors)} running", timeout=WAIT_S, interval=0.3)  # fmt: skip

    def stop(self) -> int:
        """SIGTERM: the worker's shutdown hook stops the connectors and leaves the group."""
        assert self.process.process is not None
        self.process.process.send_signal(signal.SIGTERM)
        return self.process.process.wait(60)


class Pipeline:
    """A source file → FileStreamSource → a topic → FileStreamSink → a sink file."""

    def __init__(self, worker: ConnectWorker, tmp_path: Path) -> None:
        self.worker = worker
        self.topic = f"{worker.name}-lines"
        self.source_file = tmp_path / f"{worker.name}-in.txt"
        self.sink_file = tmp_path / f"{worker.name}-out.txt"
        self.source_file.write_text("")
        self.lines: list[str] = []

    def start(self, *, exactly_once: bool) -> None:
        source = {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "tasks.max": "1",
            "file": str(self.source_file),
            "topic": self.topic,
            "batch.size": "50",
        }
        if exactly_once:  # refused, rather than run at-least-once, if it cannot be had
            source["exactly.once.support"] = "required"
        sink = {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "tasks.max": "1",
            "file": str(self.sink_file),
            "topics": self.topic,
        }
        self.worker.create({"file-source": source, "file-sink": sink})

    def append(self, count: int) -> None:
        new = [f"line {len(self.lines) + i:05d} {uuid.uuid4().hex}" for i in range(count)]
        with self.source_file.open("a") as source:
            source.write("".join(f"{line}\n" for line in new))
        self.lines += new

    def sunk(self) -> list[str]:
        if not self.sink_file.exists():
            return []
        text = self.sink_file.read_text()
        return text.splitlines() if text.endswith("\n") else text.splitlines()[:-1]

    def wait_sunk(self, what: str) -> None:
        """Until every line appended so far is in the sink's file.

        FileStreamSourceTask reads the file while it has bytes to read, and a poll that
        reaches ``batch.size`` records returns with the rest of what it read still in its
        buffer: those lines go out with the next poll that finds new bytes. So, while lines
        are missing, one more line is appended every few seconds (a file being written to,
        as the connector expects)."""
        nudged = [time.monotonic()]

        def all_sunk() -> bool:
            if set(self.lines) <= set(self.sunk()):
                return True
            if time.monotonic() - nudged[0] > NUDGE_S:
                self.append(1)
                nudged[0] = time.monotonic()
            return False

        try:
            wait_until(all_sunk, f"{what}: every line sunk", timeout=WAIT_S, interval=0.2)
        except AssertionError as failure:
            missing = [line for line in self.lines if line not in set(self.sunk())]
            uncommitted = self.topic_lines("read_uncommitted")
            raise AssertionError(
                f"{failure}: {len(missing)} missing from {missing[0]}; the topic ends at "
                f"{self.end_offset()}, has {len(uncommitted)} records of which "
                f"{len(set(missing) & set(uncommitted))} missing ones"
            ) from None

    def end_offset(self) -> int:
        consumer = Consumer({"bootstrap.servers": self.worker.bootstrap, "group.id": "-", **QUIET})
        try:
            end = consumer.get_watermark_offsets(ConfluentPartition(self.topic, 0), timeout=WAIT_S)[
                1
            ]
            return int(end)
        finally:
            consumer.close()

    def topic_lines(self, isolation: str = "read_committed") -> list[str]:
        """The topic's records, in order (one partition)."""
        consumer = Consumer(
            {"bootstrap.servers": self.worker.bootstrap, "group.id": f"{self.topic}-check",
             "isolation.level": isolation, "enable.auto.commit": False, **QUIET}
        )  # fmt: skip
        read: list[str] = []
        try:
            consumer.assign([ConfluentPartition(self.topic, 0, 0)])
            end = consumer.get_watermark_offsets(ConfluentPartition(self.topic, 0), timeout=WAIT_S)[
                1
            ]

            def at_end() -> bool:
                for message in consumer.consume(1000, 0.5):
                    assert message.error() is None, message.error()
                    read.append(message.value().decode())
                (position,) = consumer.position([ConfluentPartition(self.topic, 0)])
                return bool(position.offset >= end)

            wait_until(at_end, f"{self.topic} read to its end", timeout=WAIT_S)
        finally:
            consumer.close()
        return read


def replays_only(written: list[str], lines: list[str]) -> None:
    """``written`` is ``lines`` in order, where a stretch may be written again from an earlier
    line (at-least-once after a kill): each line's first copy comes in order, and each
    repeated stretch repeats lines already written, consecutive in ``lines``."""
    index = {line: i for i, line in enumerate(lines)}
    assert set(written) == set(lines), sorted(set(lines) - set(written))[:5]
    firsts = [line for i, line in enumerate(written) if line not in written[:i]]
    assert firsts == lines
    for before, after in itertools.pairwise(written):
        assert index[after] == index[before] + 1 or index[after] <= index[before], (before, after)


@pytest.fixture
def worker_factory(jvm_broker: BrokerProcess, tmp_path: Path) -> Iterator[Any]:
    workers: list[ConnectWorker] = []

    def make(*, exactly_once: bool) -> ConnectWorker:
        workers.append(ConnectWorker(jvm_broker.bootstrap, tmp_path, exactly_once=exactly_once))
        return workers[-1]

    try:
        yield make
    finally:
        for worker in workers:
            worker.process.close()


def test_connect_distributed_file_source_to_file_sink_exactly_once(
    worker_factory: Any, jvm_broker: BrokerProcess, tmp_path: Path
) -> None:
    worker: ConnectWorker = worker_factory(exactly_once=True)
    worker.start()
    pipeline = Pipeline(worker, tmp_path)
    pipeline.append(200)
    pipeline.start(exactly_once=True)
    pipeline.wait_sunk("first lines")
    pipeline.append(100)
    pipeline.wait_sunk("more lines")
    assert pipeline.sunk() == pipeline.lines
    assert pipeline.topic_lines() == pipeline.lines
    # Written in transactions: each one's commit marker takes an offset of its own.
    assert pipeline.end_offset() > len(pipeline.lines)
    # The REST API lists both connectors and their status.
    assert sorted(worker.rest("GET", "/connectors")) == ["file-sink", "file-source"]
    expanded = worker.rest("GET", "/connectors?expand=status&expand=info")
    for name, kind in (("file-source", "source"), ("file-sink", "sink")):
        assert expanded[name]["status"]["type"] == kind
        assert expanded[name]["status"]["connector"]["state"] == "RUNNING"
        assert [task["state"] for task in expanded[name]["status"]["tasks"]] == ["RUNNING"]
        assert expanded[name]["info"]["config"]["tasks.max"] == "1"
    # Its internal topics on samsa are compacted, as it created them.
    admin = AdminClient({"bootstrap.servers": jvm_broker.bootstrap, **QUIET})
    resources = [ConfigResource("topic", topic) for topic in worker.internal.values()]
    for future in admin.describe_configs(resources).values():
        assert future.result(WAIT_S)["cleanup.policy"].value == "compact"
    assert worker.stop() in (0, 128 + signal.SIGTERM)


@contextmanager
def appending(pipeline: Pipeline) -> Iterator[None]:
    """Lines appended to the source file on a thread, 10 at a time, all the while."""
    stop = threading.Event()

    def append() -> None:
        while not stop.wait(0.05):
            pipeline.append(10)

    appender = threading.Thread(target=append)
    appender.start()
    try:
        yield
    finally:
        stop.set()
        appender.join()


def sink_grows(pipeline: Pipeline) -> Callable[[], bool]:
    """A condition: the sink's file gained lines since it was made."""
    before = len(pipeline.sunk())
    return lambda: len(pipeline.sunk()) > before


@pytest.mark.slow
@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_connect_worker_killed_and_restarted(
    worker_factory: Any, tmp_path: Path, exactly_once: bool
) -> None:
    worker: ConnectWorker = worker_factory(exactly_once=exactly_once)
    worker.start()
    pipeline = Pipeline(worker, tmp_path)
    pipeline.append(500)
    pipeline.start(exactly_once=exactly_once)
    with appending(pipeline):
        for _ in range(2):
            wait_until(sink_grows(pipeline), "lines sunk", timeout=WAIT_S)
            worker.process.kill()  # SIGKILL: no offsets flushed, no group left
            worker.start()
            worker.wait_running("file-source", "file-sink")
        wait_until(sink_grows(pipeline), "lines sunk after two kills", timeout=WAIT_S)
    pipeline.wait_sunk("after two kills")
    replays_only(pipeline.sunk(), pipeline.lines)
    in_topic = pipeline.topic_lines()
    if exactly_once:
        assert in_topic == pipeline.lines
    else:
        replays_only(in_topic, pipeline.lines)
