"""Sarama 1.22 (Debian 12's golang-github-shopify-sarama-dev) against a real samsa broker.

``sarama/main.go`` is samsa's own Go program on Sarama's API, built once per source hash
offline (GOPATH mode, Debian's Go sources under /usr/share/gocode) into the pytest cache.
It runs with Sarama's default configuration — ``Version`` V0_8_2_0: Produce v0 and Fetch v0
(message format v0), ListOffsets v0, Metadata v0, FindCoordinator v0, OffsetCommit v1 and
OffsetFetch v1 — and with ``Version`` V0_10_2_0 (Produce v2, Fetch v3, message format v1,
JoinGroup v1) and V2_0_0_0 (Produce v3, Fetch v4, RecordBatch v2), and prints one JSON
object a line per step, which these tests assert on.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from base64 import b64decode
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentPartition

from samsa.testing import BrokerProcess, start_broker

pytestmark = pytest.mark.timeout(180)

SOURCE = Path(__file__).parent / "sarama" / "main.go"
DEBIAN_GOPATH = Path("/usr/share/gocode")
# Sarama's Config.Version for each run: None keeps Sarama's default (V0_8_2_0).
VERSIONS = {"default-0.8.2": None, "0.10.2": "0.10.2.0", "2.0": "2.0.0"}
REPORTED_VERSION = {"default-0.8.2": "0.8.2.0", "0.10.2": "0.10.2.0", "2.0": "2.0.0"}
WITH_TIMESTAMPS = ["0.10.2", "2.0"]  # message format v1 and later
COUNT = 20
BIG = bytes((j // 7 * 31 + j) % 251 for j in range(150_000))  # main.go's bigValue
# Sarama refuses lz4 below Version 0.10 (message format v0 had no agreed lz4 framing).
ROUND_TRIPS = [(v, c) for v in VERSIONS for c in ("none", "gzip", "snappy", "lz4")
               if (v, c) != ("default-0.8.2", "lz4")]  # fmt: skip


def key(i: int) -> bytes:
    return b"key-%d" % i


def value(i: int) -> bytes:
    return bytes(range(i % 256)) + b"value-%d" % i


def round_trip_records() -> list[tuple[bytes, bytes]]:
    """What a round-trip step produces: COUNT records, then the big one."""
    return [(key(i), value(i)) for i in range(COUNT)] + [(b"key-big", BIG)]


@pytest.fixture(scope="session")
def sarama_check(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The program, built once for its source hash into the pytest cache."""
    go = shutil.which("go")
    assert go and (DEBIAN_GOPATH / "src/github.com/Shopify/sarama").is_dir(), (
        "Go or Sarama is missing: `make test` installs golang-go and "
        "golang-github-shopify-sarama-dev (Debian packages)"
    )
    cache = request.config.cache.mkdir("sarama")
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    binary = cache / f"sarama-check-{digest}"
    if binary.exists():
        return binary
    package = tmp_path_factory.mktemp("gopath") / "src" / "sarama-check"
    package.mkdir(parents=True)
    shutil.copy(SOURCE, package / "main.go")
    env = {**os.environ, "GO111MODULE": "off", "GOFLAGS": "", "GOPROXY": "off",
           "CGO_ENABLED": "0", "GOPATH": f"{package.parent.parent}:{DEBIAN_GOPATH}",
           "GOCACHE": str(cache / "go-build")}  # fmt: skip
    partial = cache / f"{binary.name}.{os.getpid()}"
    build = subprocess.run([go, "build", "-o", str(partial), "."], cwd=package, env=env,
                           capture_output=True, timeout=600, check=False)  # fmt: skip
    assert build.returncode == 0, build.stderr.decode()
    os.replace(partial, binary)  # atomic: another test process may build it too
    for stale in cache.glob("sarama-check-*"):
        if stale != binary and stale.suffix == "":
            stale.unlink(missing_ok=True)
    return binary


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(
        tmp_path_factory.mktemp("sarama") / "data", ["group.initial.rebalance.delay.ms=0"]
    )
    try:
        yield process
    finally:
        process.stop()


def run(program: Path, broker: BrokerProcess, version: str, *args: str) -> list[dict[str, Any]]:
    """Run one step of the program with Sarama's Version for ``version``; its JSON lines."""
    chosen = VERSIONS[version]
    command = [str(program), "-brokers", broker.bootstrap, "-timeout", "60s", *args]
    if chosen is not None:
        command += ["-version", chosen]
    done = subprocess.run(command, capture_output=True, timeout=150, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return [json.loads(line) for line in done.stdout.decode().splitlines()]


def step(program: Path, broker: BrokerProcess, version: str, *args: str) -> dict[str, Any]:
    [report] = run(program, broker, version, *args)
    assert report["error"] is None
    assert report["version"] == REPORTED_VERSION[version]
    return report


def confluent_read(broker: BrokerProcess, topic: str, count: int) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"{topic}-reader",
                         "enable.auto.commit": False, "log_level": 3})  # fmt: skip
    try:
        consumer.assign([ConfluentPartition(topic, 0, 0)])
        received: list[Any] = []
        deadline = time.monotonic() + 60
        while len(received) < count and time.monotonic() < deadline:
            received += [m for m in consumer.consume(count, 0.5) if m.error() is None]
    finally:
        consumer.close()
    return received


def name(*parts: str) -> str:
    return "sarama-" + "-".join(parts).replace(".", "_")


@pytest.mark.parametrize(
    ("version", "codec"), ROUND_TRIPS, ids=[f"{v}-{c}" for v, c in ROUND_TRIPS]
)
def test_sarama_reads_back_what_its_sync_producer_wrote_byte_exact(
    sarama_check: Path, broker: BrokerProcess, version: str, codec: str
) -> None:
    report = step(sarama_check, broker, version, "-step", "round-trip", "-codec", codec,
                  "-count", str(COUNT), "-prefix", name("round-trip", version, codec))  # fmt: skip
    assert report["produced_offsets"] == list(range(COUNT + 1))
    assert report["consumed_offsets"] == list(range(COUNT + 1))
    assert report["mismatches"] == []  # keys and values, the 150 kB one included
    if version in WITH_TIMESTAMPS:
        assert report["timestamps"] == [report["base_timestamp"] + i for i in range(COUNT + 1)]


@pytest.mark.parametrize("version", VERSIONS)
def test_sarama_commits_an_offset_through_its_offset_manager_that_every_client_reads(
    sarama_check: Path, broker: BrokerProcess, version: str
) -> None:
    group = name("offsets", version)
    report = step(sarama_check, broker, version, "-step", "offset-manager", "-prefix", group)
    assert (report["before"], report["after"], report["metadata"]) == (-1, 7, "sarama-meta")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "log_level": 3})  # fmt: skip
    try:
        [committed] = consumer.committed([ConfluentPartition(group, 0)], 30)
    finally:
        consumer.close()
    assert (committed.offset, committed.metadata) == (7, "sarama-meta")


def test_sarama_commits_with_offset_commit_v0_and_reads_it_with_offset_fetch_v0(
    sarama_check: Path, broker: BrokerProcess
) -> None:
    report = step(sarama_check, broker, "default-0.8.2", "-step", "offset-commit-v0",
                  "-prefix", name("offsets-v0"))  # fmt: skip
    assert (report["commit_error_code"], report["fetch_error_code"]) == (0, 0)
    assert (report["offset"], report["metadata"]) == (11, "v0-meta")


@pytest.mark.parametrize("version", WITH_TIMESTAMPS)  # Sarama's ConsumerGroup needs 0.10.2
def test_sarama_joins_a_consumer_group_consumes_and_commits_on_leaving(
    sarama_check: Path, broker: BrokerProcess, version: str
) -> None:
    group = name("group", version)
    report = step(sarama_check, broker, version, "-step", "consumer-group", "-prefix", group,
                  "-count", str(COUNT))  # fmt: skip
    assert report["claims"] == {group: [0]}
    assert (report["received"], report["mismatches"]) == (COUNT, [])
    assert report["committed"] == COUNT


@pytest.mark.parametrize("version", VERSIONS)
def test_confluent_kafka_reads_what_sarama_wrote(
    sarama_check: Path, broker: BrokerProcess, version: str
) -> None:
    topic = name("to-confluent", version)
    codec = "gzip" if version == "default-0.8.2" else "lz4"
    report = step(sarama_check, broker, version, "-step", "round-trip", "-codec", codec,
                  "-count", str(COUNT), "-prefix", topic)  # fmt: skip
    received = confluent_read(broker, topic, COUNT + 1)
    assert [(m.offset(), m.key(), m.value()) for m in received] == [
        (i, k, v) for i, (k, v) in enumerate(round_trip_records())
    ]
    if version in WITH_TIMESTAMPS:
        assert [m.timestamp()[1] for m in received] == [
            report["base_timestamp"] + i for i in range(COUNT + 1)
        ]


@pytest.mark.parametrize("version", VERSIONS)
def test_sarama_reads_what_confluent_kafka_wrote_with_headers(
    sarama_check: Path, broker: BrokerProcess, version: str
) -> None:
    topic = name("from-confluent", version)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "lz4",
                         "linger.ms": 5, "log_level": 3})  # fmt: skip
    base_ts = int(time.time() * 1000) - 10_000
    for i in range(COUNT):
        producer.produce(topic, value(i), key(i), partition=0, timestamp=base_ts + i,
                         headers=[("h", b"%d" % i), ("trace", b"t")])  # fmt: skip
    producer.produce(topic, BIG, b"key-big", partition=0, timestamp=base_ts + COUNT)
    assert producer.flush(30) == 0
    *records, summary = run(sarama_check, broker, version, "-step", "consume", "-topic", topic,
                            "-count", str(COUNT + 1))  # fmt: skip
    assert summary == {"records": COUNT + 1, "error": None}
    got = [(r["offset"], b64decode(r["key"]), b64decode(r["value"])) for r in records]
    assert got == [(i, k, v) for i, (k, v) in enumerate(round_trip_records())]
    if version == "2.0":  # RecordBatch v2: the headers come through
        assert [r["headers"] for r in records] == [
            [["h", str(i)], ["trace", "t"]] for i in range(COUNT)
        ] + [[]]
    else:  # message formats v0 and v1 have no headers
        assert all(r["headers"] == [] for r in records)
    if version in WITH_TIMESTAMPS:
        assert [r["timestamp"] for r in records] == [base_ts + i for i in range(COUNT + 1)]
