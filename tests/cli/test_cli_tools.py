"""``samsa topics`` and ``samsa consumer-groups`` as a user runs them: each command a
``python -m samsa`` process against a real broker, its output and exit code checked.

Groups are made and held by confluent-kafka consumers, and their committed offsets read
back with confluent-kafka's ``committed()``, so the tools are checked against another
client's view of the cluster, not against themselves. Output is not a terminal here, so
tables are plain columns separated by two or more spaces.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from samsa.testing import BrokerProcess, start_broker
from samsa.testing.waiting import wait_until

pytestmark = pytest.mark.timeout(120)

QUIET = {"log_level": 3}
PARTITIONS = 3
RECORDS_PER_PARTITION = 10
# A command against a reachable broker finishes in well under this; it only stops a hang.
COMMAND_TIMEOUT_S = 30
JOIN_TIMEOUT_S = 20


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(
        tmp_path_factory.mktemp("cli-tools") / "data",
        overrides=["group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000"],
    )
    try:
        yield process
    finally:
        process.stop()


def samsa(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "samsa", *args],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )


def topics(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return samsa("topics", "--bootstrap-server", broker.bootstrap, *args)


def groups(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return samsa("consumer-groups", "--bootstrap-server", broker.bootstrap, *args)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    """The stdout of a command that must succeed."""
    assert result.returncode == 0, f"{result.args}: exit {result.returncode}\n{result.stderr}"
    return result.stdout


def tables(stdout: str) -> list[list[dict[str, str]]]:
    """Plain-text tables (separated by blank lines) as rows of column → cell."""
    parsed = []
    for block in re.split(r"\n\s*\n", stdout.strip()):
        lines = [re.split(r"\s{2,}", line.strip()) for line in block.splitlines()]
        if lines:
            parsed.append([dict(zip(lines[0], row, strict=True)) for row in lines[1:]])
    return parsed


def table(stdout: str) -> list[dict[str, str]]:
    (only,) = tables(stdout)
    return only


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def fill_topic(broker: BrokerProcess, topic: str, timestamps: list[int] | None = None) -> None:
    """Create ``topic`` and write RECORDS_PER_PARTITION records to each partition."""
    create = f"--create --topic {topic} --partitions {PARTITIONS} --replication-factor 1"
    ok(topics(broker, *create.split()))
    producer = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    for partition in range(PARTITIONS):
        for i in range(RECORDS_PER_PARTITION):
            stamp = timestamps[i] if timestamps else 0
            producer.produce(topic, b"v%d" % i, partition=partition, timestamp=stamp)
    assert producer.flush(10) == 0


def group_consumer(broker: BrokerProcess, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            **QUIET,
        }
    )


def join(consumer: Consumer, topic: str) -> None:
    """Subscribe and poll until the group has given this consumer its partitions."""
    consumer.subscribe([topic])
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    while not consumer.assignment():
        assert time.monotonic() < deadline, "no assignment"
        consumer.poll(0.1)


def commit_and_leave(broker: BrokerProcess, group: str, topic: str, offsets: list[int]) -> None:
    """A confluent consumer joins ``group``, commits ``offsets`` (one per partition), closes."""
    consumer = group_consumer(broker, group)
    try:
        join(consumer, topic)
        consumer.commit(
            offsets=[TopicPartition(topic, p, o) for p, o in enumerate(offsets)],
            asynchronous=False,
        )
    finally:
        consumer.close()
    wait_until_empty(broker, group)


def wait_until_empty(broker: BrokerProcess, group: str) -> None:
    """Wait for the coordinator to have handled the member's LeaveGroup (confluent-kafka's
    close() need not wait for its answer)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})

    def empty() -> bool:
        (future,) = admin.describe_consumer_groups([group]).values()
        return bool(future.result(10).state == ConsumerGroupState.EMPTY)

    wait_until(empty, f"group {group} to have no members", timeout=JOIN_TIMEOUT_S)


def committed(broker: BrokerProcess, group: str, topic: str) -> list[int]:
    """The group's committed offsets, partition by partition, as confluent-kafka reads them."""
    consumer = group_consumer(broker, group)
    try:
        answer = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 10)
        return [tp.offset for tp in sorted(answer, key=lambda tp: tp.partition)]
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def filled_topic(broker: BrokerProcess) -> str:
    topic = unique("filled")
    fill_topic(broker, topic)
    return topic


@pytest.fixture(scope="module")
def active_group(broker: BrokerProcess, filled_topic: str) -> Iterator[tuple[str, Consumer]]:
    """A group with one live confluent consumer holding every partition, no commits."""
    group = unique("active")
    consumer = group_consumer(broker, group)
    join(consumer, filled_topic)
    yield group, consumer
    consumer.close()


# -- samsa topics ----------------------------------------------------------------------------


def test_python_m_samsa_lists_the_admin_tools() -> None:
    out = ok(samsa("--help"))
    assert "topics" in out
    assert "consumer-groups" in out


def test_a_created_topic_is_listed(broker: BrokerProcess) -> None:
    topic = unique("created")
    out = ok(
        topics(
            broker, "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "1"
        )
    )
    assert out.strip() == f"Created topic {topic}."
    listed = ok(topics(broker, "--list")).split()
    assert topic in listed


def test_describe_shows_partition_count_replicas_and_overridden_configs(
    broker: BrokerProcess,
) -> None:
    topic = unique("described")
    configs = ["--config", "retention.ms=60000", "--config", "cleanup.policy=compact"]
    ok(topics(broker, "--create", "--topic", topic, "--partitions", "3", *configs))
    described, partitions = tables(ok(topics(broker, "--describe", "--topic", topic)))
    assert len(described) == 1
    assert described[0]["Topic"] == topic
    assert uuid.UUID(described[0]["TopicId"])
    assert described[0]["PartitionCount"] == "3"
    assert described[0]["ReplicationFactor"] == "1"
    assert described[0]["Configs"] == "cleanup.policy=compact,retention.ms=60000"
    assert [(p["Topic"], p["Partition"]) for p in partitions] == [
        (topic, "0"),
        (topic, "1"),
        (topic, "2"),
    ]
    assert all(p["Leader"] == "0" and p["Replicas"] == "0" and p["Isr"] == "0" for p in partitions)


def test_topics_with_overrides_leaves_out_topics_on_defaults(broker: BrokerProcess) -> None:
    plain, tuned = unique("plain"), unique("tuned")
    ok(topics(broker, "--create", "--topic", plain))
    ok(topics(broker, "--create", "--topic", tuned, "--config", "retention.ms=1234"))
    rows = table(ok(topics(broker, "--describe", "--topics-with-overrides")))
    names = {row["Topic"] for row in rows}
    assert tuned in names
    assert plain not in names


def test_alter_raises_the_partition_count(broker: BrokerProcess) -> None:
    topic = unique("altered")
    ok(topics(broker, "--create", "--topic", topic, "--partitions", "1"))
    ok(topics(broker, "--alter", "--topic", topic, "--partitions", "4"))
    described, partitions = tables(ok(topics(broker, "--describe", "--topic", topic)))
    assert described[0]["PartitionCount"] == "4"
    assert [p["Partition"] for p in partitions] == ["0", "1", "2", "3"]


def test_delete_removes_the_topic(broker: BrokerProcess) -> None:
    topic = unique("deleted")
    ok(topics(broker, "--create", "--topic", topic))
    out = ok(topics(broker, "--delete", "--topic", topic))
    assert out.strip() == f"Deleted topic {topic}."
    assert topic not in ok(topics(broker, "--list")).split()


def test_creating_an_existing_topic_fails_with_the_if_not_exists_hint(
    broker: BrokerProcess,
) -> None:
    topic = unique("twice")
    ok(topics(broker, "--create", "--topic", topic))
    again = topics(broker, "--create", "--topic", topic)
    assert again.returncode == 1
    assert f"topic '{topic}' already exists; use --if-not-exists to ignore" in again.stderr
    ok(topics(broker, "--create", "--topic", topic, "--if-not-exists"))


def test_deleting_a_missing_topic_fails_unless_if_exists(broker: BrokerProcess) -> None:
    topic = unique("absent")
    result = topics(broker, "--delete", "--topic", topic)
    assert result.returncode == 1
    assert f"topic '{topic}' does not exist; use --if-exists" in result.stderr
    ok(topics(broker, "--delete", "--topic", topic, "--if-exists"))


def test_an_unreachable_broker_fails_at_once_saying_how_to_start_one(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{sock.getsockname()[1]}"
    config = tmp_path / "client.properties"
    config.write_text("request.timeout.ms=2000\ndefault.api.timeout.ms=3000\n")
    result = samsa(
        "topics", "--bootstrap-server", address, "--command-config", str(config), "--list"
    )
    assert result.returncode == 1
    assert f"cannot reach {address}" in result.stderr
    assert "is a broker running? start one with `make run` or `samsa serve`" in result.stderr
    assert result.stdout == ""


def test_an_unknown_client_property_fails_naming_it(broker: BrokerProcess, tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text("no.such.property=1\n")
    result = topics(broker, "--command-config", str(config), "--list")
    assert result.returncode == 1
    assert "no.such.property" in result.stderr


@pytest.mark.parametrize(
    "flags",
    [
        pytest.param([], id="no action"),
        pytest.param(["--list", "--describe"], id="two actions"),
        pytest.param(["--create"], id="create without a topic"),
        pytest.param(["--alter", "--topic", "t"], id="alter without partitions"),
        pytest.param(["--create", "--topic", "t", "--partitions", "0"], id="zero partitions"),
        pytest.param(["--list", "--if-exists"], id="if-exists with list"),
        pytest.param(["--list", "--no-such-flag"], id="unknown flag"),
    ],
)
def test_a_bad_command_line_exits_2(broker: BrokerProcess, flags: list[str]) -> None:
    result = topics(broker, *flags)
    assert result.returncode == 2
    assert "usage: samsa topics" in result.stderr


# -- samsa consumer-groups: inactive groups --------------------------------------------------


def test_list_shows_a_group_that_committed_and_left(
    broker: BrokerProcess, filled_topic: str
) -> None:
    group = unique("listed")
    commit_and_leave(broker, group, filled_topic, [1, 2, 3])
    assert group in ok(groups(broker, "--list")).split()
    rows = table(ok(groups(broker, "--list", "--state", "empty")))
    assert {"GROUP": group, "STATE": "Empty"} in rows


def test_describe_shows_current_offset_log_end_offset_and_lag(
    broker: BrokerProcess, filled_topic: str
) -> None:
    group = unique("lagging")
    commit_and_leave(broker, group, filled_topic, [4, 7, 10])
    result = groups(broker, "--describe", "--group", group)
    assert result.returncode == 0, result.stderr
    assert f"consumer group '{group}' has no active members" in result.stderr
    rows = table(result.stdout)
    assert [
        (r["TOPIC"], r["PARTITION"], r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"])
        for r in rows
    ] == [
        (filled_topic, "0", "4", "10", "6"),
        (filled_topic, "1", "7", "10", "3"),
        (filled_topic, "2", "10", "10", "0"),
    ]
    assert all(r["CONSUMER-ID"] == r["HOST"] == r["CLIENT-ID"] == "-" for r in rows)
    assert all(r["GROUP"] == group for r in rows)


def test_describe_of_a_missing_group_fails_saying_so(broker: BrokerProcess) -> None:
    group = unique("missing")
    result = groups(broker, "--describe", "--group", group)
    assert result.returncode == 1
    assert f"consumer group '{group}' does not exist" in result.stderr


def test_reset_to_earliest_is_a_dry_run_until_execute(
    broker: BrokerProcess, filled_topic: str
) -> None:
    group = unique("reset")
    commit_and_leave(broker, group, filled_topic, [4, 7, 10])
    dry = groups(
        broker, "--reset-offsets", "--group", group, "--topic", filled_topic, "--to-earliest"
    )
    assert dry.returncode == 0, dry.stderr
    assert "add --execute" in dry.stderr
    assert [
        (r["GROUP"], r["TOPIC"], r["PARTITION"], r["NEW-OFFSET"]) for r in table(dry.stdout)
    ] == [
        (group, filled_topic, "0", "0"),
        (group, filled_topic, "1", "0"),
        (group, filled_topic, "2", "0"),
    ]
    assert committed(broker, group, filled_topic) == [4, 7, 10]

    ok(
        groups(
            broker, *f"--reset-offsets --group {group} --all-topics --to-earliest --execute".split()
        )
    )
    assert committed(broker, group, filled_topic) == [0, 0, 0]


def test_reset_shift_by_moves_committed_offsets_within_the_log(
    broker: BrokerProcess, filled_topic: str
) -> None:
    group = unique("shift")
    commit_and_leave(broker, group, filled_topic, [4, 7, 10])
    shift = f"--reset-offsets --group {group} --topic {filled_topic}:0,1 --shift-by 5 --execute"
    out = ok(groups(broker, *shift.split()))
    assert [r["NEW-OFFSET"] for r in table(out)] == ["9", "10"]  # 7 + 5 stops at the log end
    assert committed(broker, group, filled_topic) == [9, 10, 10]
    ok(
        groups(
            broker,
            *f"--reset-offsets --group {group} --all-topics --shift-by -12 --execute".split(),
        )
    )
    assert committed(broker, group, filled_topic) == [0, 0, 0]  # stops at the log start


def test_reset_to_datetime_finds_the_first_record_at_or_after_it(broker: BrokerProcess) -> None:
    topic, group = unique("timed"), unique("datetime")
    start = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1000)
    minute = 60_000
    fill_topic(broker, topic, timestamps=[start + i * minute for i in range(RECORDS_PER_PARTITION)])
    commit_and_leave(broker, group, topic, [0, 0, 0])

    def reset_to(moment: str) -> list[str]:
        reset = f"--reset-offsets --group {group} --topic {topic} --to-datetime {moment} --execute"
        out = ok(groups(broker, *reset.split()))
        return [r["NEW-OFFSET"] for r in table(out)]

    assert reset_to("2026-01-01T00:02:30.000+00:00") == ["3", "3", "3"]
    assert committed(broker, group, topic) == [3, 3, 3]
    assert reset_to("2026-01-01T00:05:00Z") == ["5", "5", "5"]
    assert reset_to("2025-12-31T23:00:00+00:00") == ["0", "0", "0"]
    assert reset_to("2026-01-02T00:00:00+00:00") == ["10", "10", "10"]  # after all: log end


def test_delete_removes_an_empty_group(broker: BrokerProcess, filled_topic: str) -> None:
    group = unique("gone")
    commit_and_leave(broker, group, filled_topic, [1, 1, 1])
    ok(groups(broker, "--delete", "--group", group))
    assert group not in ok(groups(broker, "--list")).split()
    assert committed(broker, group, filled_topic) == [-1001, -1001, -1001]  # confluent: none


def test_delete_offsets_forgets_a_topic_of_an_empty_group(
    broker: BrokerProcess, filled_topic: str
) -> None:
    group = unique("forget")
    commit_and_leave(broker, group, filled_topic, [2, 2, 2])
    out = ok(groups(broker, "--delete-offsets", "--group", group, "--topic", f"{filled_topic}:1"))
    assert table(out) == [{"TOPIC": filled_topic, "PARTITION": "1", "STATUS": "Successful"}]
    assert committed(broker, group, filled_topic) == [2, -1001, 2]


# -- samsa consumer-groups: a group with a live member ---------------------------------------


def test_describe_of_an_active_group_shows_its_member_and_uncommitted_partitions(
    broker: BrokerProcess, filled_topic: str, active_group: tuple[str, Consumer]
) -> None:
    group, consumer = active_group
    rows = table(ok(groups(broker, "--describe", "--group", group)))
    assert [(r["TOPIC"], r["PARTITION"]) for r in rows] == [
        (filled_topic, str(p)) for p in range(PARTITIONS)
    ]
    for row in rows:
        assert row["CURRENT-OFFSET"] == "-"
        assert row["LAG"] == "-"
        assert row["LOG-END-OFFSET"] == str(RECORDS_PER_PARTITION)
        assert row["CONSUMER-ID"] == consumer.memberid()
        assert row["CLIENT-ID"] == "rdkafka"


def test_members_verbose_shows_each_members_assignment(
    broker: BrokerProcess, filled_topic: str, active_group: tuple[str, Consumer]
) -> None:
    group, consumer = active_group
    rows = table(ok(groups(broker, "--describe", "--group", group, "--members", "--verbose")))
    assert len(rows) == 1
    assert rows[0]["CONSUMER-ID"] == consumer.memberid()
    assert rows[0]["#PARTITIONS"] == str(PARTITIONS)
    assert rows[0]["ASSIGNMENT"] == f"{filled_topic}(0,1,2)"
    assert rows[0]["HOST"].endswith("127.0.0.1")


def test_state_shows_coordinator_strategy_and_member_count(
    broker: BrokerProcess, active_group: tuple[str, Consumer]
) -> None:
    group, _ = active_group
    rows = table(ok(groups(broker, "--describe", "--group", group, "--state")))
    assert rows == [
        {
            "GROUP": group,
            "COORDINATOR (ID)": f"{broker.bootstrap} (0)",
            "ASSIGNMENT-STRATEGY": "range",
            "STATE": "Stable",
            "#MEMBERS": "1",
        }
    ]


def test_reset_is_refused_while_the_group_has_active_members(
    broker: BrokerProcess, filled_topic: str
) -> None:
    group = unique("busy")
    consumer = group_consumer(broker, group)
    try:
        join(consumer, filled_topic)
        consumer.commit(
            offsets=[TopicPartition(filled_topic, p, 5) for p in range(PARTITIONS)],
            asynchronous=False,
        )
        result = groups(
            broker, *f"--reset-offsets --group {group} --all-topics --to-earliest --execute".split()
        )
    finally:
        consumer.close()
    assert result.returncode == 1
    assert f"cannot reset the offsets of group '{group}': it is Stable with 1 active member" in (
        result.stderr
    )
    assert "stop its consumers" in result.stderr
    assert committed(broker, group, filled_topic) == [5, 5, 5]


def test_delete_is_refused_while_the_group_has_active_members(
    broker: BrokerProcess, active_group: tuple[str, Consumer]
) -> None:
    group, _ = active_group
    result = groups(broker, "--delete", "--group", group)
    assert result.returncode == 1
    assert f"cannot delete group '{group}': it has active members" in result.stderr


@pytest.mark.parametrize(
    "flags",
    [
        pytest.param(["--describe"], id="describe without a group"),
        pytest.param(["--reset-offsets", "--group", "g", "--all-topics"], id="reset to nowhere"),
        pytest.param(["--reset-offsets", "--group", "g", "--to-latest"], id="reset no topics"),
        pytest.param(["--list", "--execute"], id="execute with list"),
        pytest.param(
            ["--reset-offsets", "--group", "g", "--all-topics", "--to-datetime", "yesterday"],
            id="not a datetime",
        ),
    ],
)
def test_a_bad_consumer_groups_command_line_exits_2(
    broker: BrokerProcess, flags: list[str]
) -> None:
    result = groups(broker, *flags)
    assert result.returncode == 2
    assert "usage: samsa consumer-groups" in result.stderr


# -- samsa console-producer and samsa producer-perf-test -------------------------------------


def pipe(
    tool: str, broker: BrokerProcess, stdin: bytes, *args: str
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "samsa", tool, "--bootstrap-server", broker.bootstrap, *args],
        input=stdin,
        capture_output=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )


def read_all(broker: BrokerProcess, topic: str, partitions: int, expected: int) -> list[Any]:
    """Every record of ``topic`` as confluent-kafka reads it (``expected`` of them)."""
    consumer = group_consumer(broker, unique("reader"))
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    records: list[Any] = []
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    try:
        while len(records) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                records.append(message)
    finally:
        consumer.close()
    return records


def test_console_producer_sends_keyed_lines_that_confluent_kafka_reads(
    broker: BrokerProcess,
) -> None:
    topic = unique("console")
    ok(topics(broker, "--create", "--topic", topic, "--partitions", "2"))
    lines = b"k1:hello\nk2:world: with a colon\nk1:again\r\n"
    flags = "--property parse.key=true --property key.separator=: --compression-codec zstd"
    result = pipe("console-producer", broker, lines, "--topic", topic, *flags.split())
    assert result.returncode == 0, result.stderr
    records = read_all(broker, topic, 2, 3)
    by_key: dict[bytes, list[bytes]] = {}
    for record in sorted(records, key=lambda r: (r.partition(), r.offset())):
        by_key.setdefault(record.key(), []).append(record.value())
    assert by_key == {b"k1": [b"hello", b"again"], b"k2": [b"world: with a colon"]}
    partition_of = {r.key(): r.partition() for r in records}
    assert len({r.partition() for r in records if r.key() == b"k1"}) == 1  # one key, one partition
    assert set(partition_of) == {b"k1", b"k2"}


def test_console_producer_reads_headers_and_the_null_marker(broker: BrokerProcess) -> None:
    topic = unique("headers")
    ok(topics(broker, "--create", "--topic", topic, "--partitions", "1"))
    lines = b"trace:abc,kind:x\tkey-1\tvalue-1\n\tNULL\tvalue-2\n"
    flags = "--property parse.key=true --property parse.headers=true --property null.marker=NULL"
    result = pipe("console-producer", broker, lines, "--topic", topic, *flags.split(), "--sync")
    assert result.returncode == 0, result.stderr
    first, second = read_all(broker, topic, 1, 2)
    assert (first.key(), first.value(), first.headers()) == (
        b"key-1",
        b"value-1",
        [("trace", b"abc"), ("kind", b"x")],
    )
    assert (second.key(), second.value(), second.headers()) == (None, b"value-2", None)


def test_console_producer_stops_at_a_line_without_the_key_separator(
    broker: BrokerProcess,
) -> None:
    topic = unique("nosep")
    flags = "--property parse.key=true --property key.separator=:"
    lines = b"a:1\nno separator\n"
    result = pipe("console-producer", broker, lines, "--topic", topic, *flags.split())
    assert result.returncode == 1
    assert b"no key separator found on line number 2: 'no separator'" in result.stderr


PERF_SUMMARY = re.compile(
    r"^(\d+) records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
    r"[\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.$"
)


def test_producer_perf_test_sends_the_records_and_prints_kafkas_summary(
    broker: BrokerProcess,
) -> None:
    topic = unique("perf")
    ok(topics(broker, "--create", "--topic", topic, "--partitions", "2"))
    flags = f"--topic {topic} --num-records 3000 --record-size 100 --throughput -1"
    props = f"--producer-props bootstrap.servers={broker.bootstrap} linger.ms=2"
    result = samsa("producer-perf-test", *flags.split(), *props.split())
    assert result.returncode == 0, result.stderr
    summary = result.stdout.strip().splitlines()[-1]
    match = PERF_SUMMARY.match(summary)
    assert match, summary
    assert match.group(1) == "3000"
    records = read_all(broker, topic, 2, 3000)
    assert len(records) == 3000
    assert all(len(r.value()) == 100 for r in records)
