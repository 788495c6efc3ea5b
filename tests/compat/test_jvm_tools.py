"""Kafka's own command-line tools (kafka-tools 4.x) against samsa, run by class name with
``java -cp`` as the ``bin/kafka-*.sh`` scripts run them: kafka-topics (TopicCommand),
kafka-console-producer and -consumer, kafka-consumer-groups (ConsumerGroupCommand),
kafka-get-offsets (GetOffsetShell) against one broker, and kafka-dump-log
(DumpLogSegments) over the segment, offset index and time index files samsa wrote.

The console tools' ``--reader-property`` and ``--formatter-property`` are Kafka 4's names
for what older releases (and many guides) call ``--property``, still accepted but deprecated.
Each tool run is a JVM start (a second or two), so each test starts few.
"""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tests.compat.jvm import java_command

from samsa.client.producer.partitioner import partition_for_key
from samsa.testing import BrokerProcess

# Each tool run starts a JVM (several seconds on a busy 2-core machine, some 80 s for the
# file): the suite runs in ``make test-slow``; Kafka's Java clients stay in ``make test``.
pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
GET_OFFSETS = "org.apache.kafka.tools.GetOffsetShell"
DUMP_LOG = "org.apache.kafka.tools.DumpLogSegments"
QUIET = {"log_level": 3}
WAIT_S = 30


def run_tool(
    main_class: str, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        java_command(main_class, *args),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )


def ok(done: subprocess.CompletedProcess[str]) -> str:
    """The tool's stdout, once it exited 0."""
    assert done.returncode == 0, (
        f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    )
    return done.stdout


def unique(stem: str) -> str:
    return f"cli-{stem}-{uuid.uuid4().hex[:8]}"


def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})


def create_topic(broker: BrokerProcess, topic: str, partitions: int, **configs: str) -> None:
    client = admin(broker)  # kept until the future is done: its handle answers it
    client.create_topics([NewTopic(topic, partitions, 1, config=configs)])[topic].result(WAIT_S)


def partition_count(broker: BrokerProcess, topic: str) -> int | None:
    """The topic's partitions, None if it does not exist (every topic is listed: a Metadata
    request for one topic by librdkafka's admin client would create it)."""
    client = admin(broker)
    found = client.list_topics(timeout=WAIT_S).topics.get(topic)
    return None if found is None or found.error is not None else len(found.partitions)


# --- kafka-topics ---------------------------------------------------------------------


def test_kafka_topics_creates_a_topic(jvm_broker: BrokerProcess) -> None:
    topic = unique("created")
    out = ok(run_tool(TOPIC_COMMAND, "--bootstrap-server", jvm_broker.bootstrap, "--create",
                      "--topic", topic, "--partitions", "3",
                      "--replication-factor", "1"))  # fmt: skip
    assert f"Created topic {topic}." in out
    assert partition_count(jvm_broker, topic) == 3


def test_kafka_topics_lists_and_describes_a_topic(jvm_broker: BrokerProcess) -> None:
    topic = unique("described")
    create_topic(jvm_broker, topic, 2, **{"retention.ms": "3600000"})
    listed = ok(run_tool(TOPIC_COMMAND, "--bootstrap-server", jvm_broker.bootstrap, "--list"))
    assert topic in listed.split()
    out = ok(run_tool(TOPIC_COMMAND, "--bootstrap-server", jvm_broker.bootstrap, "--describe",
                      "--topic", topic))  # fmt: skip
    summary, *partitions = [line.strip() for line in out.strip().splitlines()]
    fields = dict(re.findall(r"(\w+): ([^\t]*)", summary))
    assert fields["Topic"] == topic
    assert (fields["PartitionCount"], fields["ReplicationFactor"]) == ("2", "1")
    assert "retention.ms=3600000" in fields["Configs"]
    assert len(fields["TopicId"]) == 22  # a base64 Uuid
    described = [dict(re.findall(r"(\w+): ([^\t]*)", line)) for line in partitions]
    assert [(p["Partition"], p["Leader"], p["Replicas"], p["Isr"]) for p in described] == [
        ("0", "0", "0", "0"), ("1", "0", "0", "0")
    ]  # fmt: skip


def test_kafka_topics_adds_partitions_and_deletes_a_topic(jvm_broker: BrokerProcess) -> None:
    topic = unique("altered")
    create_topic(jvm_broker, topic, 1)
    ok(run_tool(TOPIC_COMMAND, "--bootstrap-server", jvm_broker.bootstrap, "--alter",
                "--topic", topic, "--partitions", "3"))  # fmt: skip
    assert partition_count(jvm_broker, topic) == 3
    ok(run_tool(TOPIC_COMMAND, "--bootstrap-server", jvm_broker.bootstrap, "--delete",
                "--topic", topic))  # fmt: skip
    deadline = time.monotonic() + WAIT_S
    while partition_count(jvm_broker, topic) is not None:
        assert time.monotonic() < deadline, f"{topic} still listed after kafka-topics --delete"
        time.sleep(0.1)


# --- console producer and consumer, consumer groups, get-offsets -------------------------

# (headers, key, value) as the console producer reads them: headers, tab, key, tab, value.
CONSOLE_RECORDS = [
    ({"source": "console", "n": str(i)}, f"key-{i}", f"value {i} with spaces") for i in range(8)
]  # fmt: skip
CONSOLE_PARTITIONS = 3


@dataclass(frozen=True)
class ConsoleRun:
    topic: str
    group: str
    consumer_stdout: str


@pytest.fixture(scope="module")
def console_run(jvm_broker: BrokerProcess) -> Iterator[ConsoleRun]:
    """A topic written by the console producer, then read by the console consumer in a group."""
    topic, group = unique("console"), unique("console-group")
    create_topic(jvm_broker, topic, CONSOLE_PARTITIONS)
    lines = "".join(
        ",".join(f"{k}:{v}" for k, v in headers.items()) + f"\t{key}\t{value}\n"
        for headers, key, value in CONSOLE_RECORDS
    )
    ok(run_tool(CONSOLE_PRODUCER, "--bootstrap-server", jvm_broker.bootstrap, "--topic", topic,
                "--reader-property", "parse.key=true", "--reader-property", "parse.headers=true",
                stdin=lines))  # fmt: skip
    consumed = ok(run_tool(
        CONSOLE_CONSUMER, "--bootstrap-server", jvm_broker.bootstrap, "--topic", topic,
        "--from-beginning", "--group", group, "--max-messages", str(len(CONSOLE_RECORDS)),
        "--timeout-ms", str(WAIT_S * 1000),
        "--formatter-property", "print.key=true", "--formatter-property", "print.headers=true",
        "--formatter-property", "print.partition=true",
    ))  # fmt: skip
    yield ConsoleRun(topic, group, consumed)


def read_with_confluent(broker: BrokerProcess, topic: str, count: int) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("reader"),
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         **QUIET})  # fmt: skip
    try:
        consumer.subscribe([topic])
        received: list[Any] = []
        deadline = time.monotonic() + WAIT_S
        while len(received) < count and time.monotonic() < deadline:
            received += [m for m in consumer.consume(count, 0.5) if m.error() is None]
        return received
    finally:
        consumer.close()


def test_console_producer_writes_keys_headers_and_values_to_the_keys_partitions(
    jvm_broker: BrokerProcess, console_run: ConsoleRun
) -> None:
    received = read_with_confluent(jvm_broker, console_run.topic, len(CONSOLE_RECORDS))
    got = sorted(
        (m.key().decode(), m.value().decode(), m.partition(),
         {k: v.decode() for k, v in m.headers() or []})
        for m in received
    )  # fmt: skip
    expected = [
        (key, value, partition_for_key(key.encode(), CONSOLE_PARTITIONS), headers)
        for headers, key, value in CONSOLE_RECORDS
    ]
    assert got == expected


def test_console_consumer_prints_every_record_from_the_beginning_with_keys_and_headers(
    console_run: ConsoleRun,
) -> None:
    printed = sorted(console_run.consumer_stdout.strip().splitlines())
    expected = sorted(
        f"Partition:{partition_for_key(key.encode(), CONSOLE_PARTITIONS)}\t"
        + ",".join(f"{k}:{v}" for k, v in headers.items()) + f"\t{key}\t{value}"
        for headers, key, value in CONSOLE_RECORDS
    )  # fmt: skip
    assert printed == expected


def end_offsets(topic: str, partitions: int) -> dict[int, int]:
    counts = [partition_for_key(key.encode(), partitions) for _, key, _ in CONSOLE_RECORDS]
    return {p: counts.count(p) for p in range(partitions)}


def test_consumer_groups_describes_the_console_consumers_group_at_the_log_end(
    jvm_broker: BrokerProcess, console_run: ConsoleRun
) -> None:
    out = ok(run_tool(CONSUMER_GROUPS, "--bootstrap-server", jvm_broker.bootstrap,
                      "--describe", "--group", console_run.group))  # fmt: skip
    rows = [line.split() for line in out.splitlines() if line.startswith(console_run.group)]
    described = {int(row[2]): (int(row[3]), int(row[4]), int(row[5])) for row in rows}
    ends = end_offsets(console_run.topic, CONSOLE_PARTITIONS)
    assert described == {p: (end, end, 0) for p, end in ends.items()}  # current, log end, lag
    assert all(row[1] == console_run.topic for row in rows)


def test_consumer_groups_resets_a_groups_offsets_to_the_earliest(
    jvm_broker: BrokerProcess, console_run: ConsoleRun
) -> None:
    group = unique("reset-group")
    ends = end_offsets(console_run.topic, CONSOLE_PARTITIONS)
    consumer = Consumer({"bootstrap.servers": jvm_broker.bootstrap, "group.id": group, **QUIET})
    try:
        partitions = [ConfluentPartition(console_run.topic, p, end) for p, end in ends.items()]
        consumer.commit(offsets=partitions, asynchronous=False)
    finally:
        consumer.close()
    out = ok(run_tool(CONSUMER_GROUPS, "--bootstrap-server", jvm_broker.bootstrap, "--group",
                      group, "--topic", console_run.topic, "--reset-offsets", "--to-earliest",
                      "--execute"))  # fmt: skip
    rows = [line.split() for line in out.splitlines() if line.startswith(group)]
    assert sorted((int(row[2]), int(row[3])) for row in rows) == [
        (p, 0) for p in range(CONSOLE_PARTITIONS)
    ]  # fmt: skip
    reader = Consumer({"bootstrap.servers": jvm_broker.bootstrap, "group.id": group, **QUIET})
    try:
        committed = reader.committed(
            [ConfluentPartition(console_run.topic, p) for p in range(CONSOLE_PARTITIONS)], WAIT_S
        )
    finally:
        reader.close()
    assert [c.offset for c in committed] == [0] * CONSOLE_PARTITIONS


def test_get_offsets_prints_each_partitions_latest_offset(
    jvm_broker: BrokerProcess, console_run: ConsoleRun
) -> None:
    out = ok(run_tool(GET_OFFSETS, "--bootstrap-server", jvm_broker.bootstrap,
                      "--topic", console_run.topic))  # fmt: skip
    ends = end_offsets(console_run.topic, CONSOLE_PARTITIONS)
    assert sorted(out.split()) == sorted(f"{console_run.topic}:{p}:{e}" for p, e in ends.items())


# --- kafka-dump-log over samsa's files ----------------------------------------------------

DUMP_BATCHES, DUMP_RECORDS_PER_BATCH = 24, 3
DUMP_BASE_TIMESTAMP = 1_700_000_000_000
BATCH_LINE = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .* isvalid: (\w+)")
RECORD_LINE = re.compile(r"^\| offset: (\d+) CreateTime: (\d+) .* key: (\S+) payload: (\S+)$")
INDEX_LINE = re.compile(r"^offset: (\d+) position: (\d+)$")
TIME_INDEX_LINE = re.compile(r"^timestamp: (\d+) offset: (\d+)$")


def dump_record(offset: int) -> tuple[int, int, str, str]:
    """(offset, timestamp, key, value) of the dump-log topic's record at ``offset``."""
    return offset, DUMP_BASE_TIMESTAMP + offset, f"k{offset}", f"v{offset}-" + "x" * 120


@pytest.fixture(scope="module")
def dumped_partition(jvm_broker: BrokerProcess) -> Path:
    """A partition of small segments (several rolled) with an index entry for most batches,
    written in batches of three, the first half uncompressed and the second gzip'd. The
    timestamps are years old: retention by time is off, or it could delete the segments."""
    topic = unique("dump")
    configs = {"segment.bytes": "2048", "index.interval.bytes": "100", "retention.ms": "-1"}
    create_topic(jvm_broker, topic, 1, **configs)
    offset = 0
    for compression in ("none", "gzip"):
        producer = Producer({"bootstrap.servers": jvm_broker.bootstrap, "linger.ms": 1000,
                             "compression.type": compression, **QUIET})  # fmt: skip
        for _ in range(DUMP_BATCHES // 2):
            for _ in range(DUMP_RECORDS_PER_BATCH):
                _, timestamp, key, value = dump_record(offset)
                producer.produce(topic, value.encode(), key.encode(), partition=0,
                                 timestamp=timestamp)  # fmt: skip
                offset += 1
            assert producer.flush(WAIT_S) == 0
    return jvm_broker.data_dir / f"{topic}-0"


def test_dump_log_reads_samsa_segments_offset_indexes_and_time_indexes(
    dumped_partition: Path,
) -> None:
    segments = sorted(p.with_suffix("") for p in dumped_partition.glob("*.log"))
    assert len(segments) >= 3, "the topic's segments did not roll"
    chosen = [segments[0], segments[-1]]  # a rolled segment and the active one
    files = [f"{s}{suffix}" for s in chosen for suffix in (".log", ".index", ".timeindex")]
    done = run_tool(DUMP_LOG, "--files", ",".join(files), "--print-data-log")
    out = ok(done)
    # Kafka's own checks of index against log (mismatched entries, timestamps out of order,
    # offsets not found, gaps) print to stderr. It counts offsets from -1 in every segment,
    # so a segment not starting at 0 "follows -1" in Kafka's own logs too: that one is not a gap.
    errors = done.stderr
    for segment in chosen:
        errors = errors.replace(
            f"Non-consecutive offsets in {segment}.log\n  -1 is followed by {int(segment.name)}\n",
            "",
        )
    assert not re.search(r"mismatch|out of order|not found|non-consecutive", errors, re.I), errors

    sections = re.split(r"^Dumping (\S+)$", out, flags=re.M)[1:]
    by_file = dict(zip(sections[::2], (s.strip() for s in sections[1::2]), strict=True))
    assert list(by_file) == files
    for segment in chosen:
        base = int(segment.name)
        log = by_file[f"{segment}.log"].splitlines()
        batches = [BATCH_LINE.match(line) for line in log if line.startswith("baseOffset:")]
        assert batches and all(b is not None and b.group(4) == "true" for b in batches)
        records = [RECORD_LINE.match(line) for line in log if line.startswith("|")]
        assert records and all(r is not None for r in records)
        read = [(int(r[1]), int(r[2]), r[3], r[4]) for r in records if r is not None]
        assert read == [dump_record(o) for o in range(base, base + len(read))]
        last_offsets = {int(b[2]): int(b[1]) for b in batches if b is not None}

        index = [INDEX_LINE.match(line) for line in by_file[f"{segment}.index"].splitlines()]
        assert index and all(e is not None for e in index), by_file[f"{segment}.index"]
        # Each entry is a batch's last offset (Kafka's checks above found it at its position).
        assert all(int(e[1]) in last_offsets for e in index if e is not None)

        time_index = by_file[f"{segment}.timeindex"].splitlines()
        entries = [TIME_INDEX_LINE.match(line) for line in time_index]
        assert entries and all(e is not None for e in entries), time_index
        for entry in entries:
            assert entry is not None
            assert int(entry[1]) == DUMP_BASE_TIMESTAMP + int(entry[2])  # the batch's max
