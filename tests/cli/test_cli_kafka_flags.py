"""Flags Kafka users type, run as a user runs them (``python -m samsa`` against a real
broker): ``--version`` on every subcommand, ``--broker-list``, the reset options
``--by-duration``, ``--to-datetime``, ``--shift-by``, ``--from-file`` and ``--export``,
and dump-log's decoders of the coordinators' topics. Effects are read back with
confluent-kafka (committed offsets, records) rather than with samsa itself."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import BrokerProcess, start_broker

pytestmark = pytest.mark.timeout(180)

QUIET = {"log_level": 3}
COMMAND_TIMEOUT_S = 60
SUBCOMMANDS = [
    "serve", "dump-log", "topics", "consumer-groups", "console-producer", "console-consumer",
    "producer-perf-test", "consumer-perf-test", "leader-election", "log-dirs", "configs",
    "reassign-partitions", "console", "acls", "top",
]  # fmt: skip


def samsa(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "samsa", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"{result.args}: exit {result.returncode}\n{result.stderr}"
    return result.stdout


def new_topic(broker: BrokerProcess, partitions: int = 1) -> str:
    name = f"flags-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=20)
    return name


def produce(broker: BrokerProcess, topic: str, timestamps_ms: list[int]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    for n, timestamp in enumerate(timestamps_ms):
        producer.produce(topic, f"v{n}".encode(), partition=0, timestamp=timestamp)
    assert producer.flush(20) == 0


def committed(broker: BrokerProcess, group: str, topic: str, partitions: int = 1) -> list[int]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **QUIET})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 20)
        return [tp.offset for tp in found]
    finally:
        consumer.close()


def reset(broker: BrokerProcess, group: str, *args: str) -> str:
    return ok(samsa("consumer-groups", "--bootstrap-server", broker.bootstrap,
                    "--reset-offsets", "--group", group, *args))  # fmt: skip


def record_count(broker: BrokerProcess, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "count", **QUIET})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), 20)[1])
    finally:
        consumer.close()


# -- --version and --broker-list ------------------------------------------------------------


@pytest.mark.parametrize("subcommand", SUBCOMMANDS)
def test_every_subcommand_prints_the_version_and_exits_0(subcommand: str) -> None:
    result = samsa(subcommand, "--version")

    assert result.returncode == 0, result.stderr
    assert re.fullmatch(r"samsa \d+\.\d+\S*\n", result.stdout)
    assert result.stdout == samsa("--version").stdout


def test_console_producer_takes_broker_list(samsa_broker: BrokerProcess) -> None:
    topic = new_topic(samsa_broker)

    ok(samsa("console-producer", "--broker-list", samsa_broker.bootstrap, "--topic", topic,
             stdin="a\nb\nc\n"))  # fmt: skip

    assert record_count(samsa_broker, topic) == 3


def test_the_perf_tools_take_broker_list(samsa_broker: BrokerProcess) -> None:
    topic = new_topic(samsa_broker)

    ok(samsa("producer-perf-test", "--broker-list", samsa_broker.bootstrap, "--topic", topic,
             "--num-records", "20", "--record-size", "10", "--throughput", "-1"))  # fmt: skip
    consumed = ok(samsa("consumer-perf-test", "--broker-list", samsa_broker.bootstrap,
                        "--topic", topic, "--messages", "20"))  # fmt: skip

    assert record_count(samsa_broker, topic) == 20
    assert consumed.splitlines()[-1].split(", ")[4] == "20"  # data.consumed.in.nMsg


# -- --reset-offsets ------------------------------------------------------------------------


def test_by_duration_resets_to_the_first_record_within_that_long(
    samsa_broker: BrokerProcess,
) -> None:
    topic, group = new_topic(samsa_broker), f"g-{uuid.uuid4().hex[:8]}"
    now = int(time.time() * 1000)
    hours_ago = [now - 3 * 3_600_000 + n for n in range(4)]
    produce(samsa_broker, topic, [*hours_ago, now - 60_000, now - 30_000])

    reset(samsa_broker, group, "--topic", topic, "--by-duration", "PT1H", "--execute")

    assert committed(samsa_broker, group, topic) == [4]


def test_to_datetime_takes_kafkas_format_in_local_time(samsa_broker: BrokerProcess) -> None:
    topic, group = new_topic(samsa_broker), f"g-{uuid.uuid4().hex[:8]}"
    moment = int(datetime.fromisoformat("2026-01-01T00:00:00").timestamp() * 1000)
    produce(samsa_broker, topic, [moment - 2000, moment - 1, moment, moment + 5000])

    reset(samsa_broker, group, "--topic", topic, "--to-datetime", "2026-01-01T00:00:00.000",
          "--execute")  # fmt: skip

    assert committed(samsa_broker, group, topic) == [2]


def test_shift_by_moves_the_committed_offset(samsa_broker: BrokerProcess) -> None:
    topic, group = new_topic(samsa_broker), f"g-{uuid.uuid4().hex[:8]}"
    now = int(time.time() * 1000)
    produce(samsa_broker, topic, [now] * 10)
    reset(samsa_broker, group, "--topic", topic, "--to-offset", "6", "--execute")

    reset(samsa_broker, group, "--topic", topic, "--shift-by", "-4", "--execute")

    assert committed(samsa_broker, group, topic) == [2]


def test_export_prints_the_plan_as_kafkas_csv(samsa_broker: BrokerProcess) -> None:
    topic, group = new_topic(samsa_broker, partitions=2), f"g-{uuid.uuid4().hex[:8]}"
    produce(samsa_broker, topic, [int(time.time() * 1000)] * 5)
    other = f"{group}-other"

    one = reset(samsa_broker, group, "--topic", topic, "--to-latest", "--export", "--dry-run")
    two = reset(samsa_broker, group, "--group", other, "--topic", topic, "--to-earliest",
                "--export")  # fmt: skip

    assert one == f"{topic},0,5\n{topic},1,0\n\n"
    assert (
        two
        == f"{group},{topic},0,0\n{group},{topic},1,0\n{other},{topic},0,0\n{other},{topic},1,0\n\n"
    )
    assert committed(samsa_broker, group, topic, 2) == [-1001, -1001]  # nothing executed


def test_from_file_commits_what_export_wrote(samsa_broker: BrokerProcess, tmp_path: Path) -> None:
    topic, group = new_topic(samsa_broker, partitions=2), f"g-{uuid.uuid4().hex[:8]}"
    produce(samsa_broker, topic, [int(time.time() * 1000)] * 8)
    plan = tmp_path / "plan.csv"
    plan.write_text(f"{topic},0,3\n{topic},1,0\n\n")

    reset(samsa_broker, group, "--from-file", str(plan), "--execute")

    assert committed(samsa_broker, group, topic, 2) == [3, 0]
    exported = reset(samsa_broker, group, "--topic", topic, "--to-current", "--export")
    assert exported == plan.read_text()


def test_reset_options_that_cannot_be_read_are_usage_errors(
    samsa_broker: BrokerProcess, tmp_path: Path
) -> None:
    bad_duration = samsa("consumer-groups", "--bootstrap-server", samsa_broker.bootstrap,
                         "--reset-offsets", "--group", "g", "--all-topics",
                         "--by-duration", "one hour")  # fmt: skip
    plan = tmp_path / "bad.csv"
    plan.write_text("topic-without-offset,0\n")
    bad_file = samsa("consumer-groups", "--bootstrap-server", samsa_broker.bootstrap,
                     "--reset-offsets", "--group", "g", "--from-file", str(plan))  # fmt: skip

    assert bad_duration.returncode == 2 and "ISO-8601 duration" in bad_duration.stderr
    assert bad_file.returncode == 1 and "line 1" in bad_file.stderr
    assert "Traceback" not in bad_duration.stderr + bad_file.stderr


# -- dump-log's decoders --------------------------------------------------------------------


def _payloads(dump: str) -> list[tuple[dict[str, object], object]]:
    """(key, payload) of each record line, as JSON (payload "<DELETE>" stays a string)."""
    found = []
    for line in dump.splitlines():
        match = re.match(r"^\| .* key: (\{.*\}) payload: (.*)$", line)
        if match:
            payload = match.group(2)
            found.append((json.loads(match.group(1)),
                          payload if payload == "<DELETE>" else json.loads(payload)))  # fmt: skip
    return found


def test_dump_log_decodes_the_offsets_and_transaction_topics(tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "data", overrides=["group.initial.rebalance.delay.ms=0"])
    try:
        topic = new_topic(broker)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tx-dump",
                             **QUIET})  # fmt: skip
        producer.init_transactions(20)
        producer.begin_transaction()
        for n in range(3):
            producer.produce(topic, f"v{n}".encode(), partition=0)
        producer.commit_transaction(20)
        del producer
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "dumped",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             **QUIET})  # fmt: skip
        consumer.subscribe([topic])
        read = 0
        deadline = time.monotonic() + 30
        while read < 3 and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and not message.error():
                read += 1
        assert read == 3
        consumer.commit(asynchronous=False)
        position = consumer.committed([TopicPartition(topic, 0)], 20)[0].offset
        consumer.close()
    finally:
        broker.stop()
    logs = sorted((tmp_path / "data").glob("*/00000000000000000000.log"))
    offsets_logs = [str(p) for p in logs if p.parent.name.startswith("__consumer_offsets-")]
    txn_logs = [str(p) for p in logs if p.parent.name.startswith("__transaction_state-")]

    offsets = _payloads(
        ok(samsa("dump-log", "--offsets-decoder", "--files", ",".join(offsets_logs)))
    )
    txns = _payloads(ok(samsa("dump-log", "--transaction-log-decoder", *txn_logs)))

    commits = [(k, v) for k, v in offsets if k["type"] == "1"]
    assert commits and commits[-1][0] == {
        "type": "1", "data": {"group": "dumped", "topic": topic, "partition": 0},
    }  # fmt: skip
    commit_value = commits[-1][1]
    assert isinstance(commit_value, dict) and commit_value["version"] == "3"
    assert commit_value["data"]["offset"] == position
    groups = [v for k, v in offsets if k == {"type": "2", "data": {"group": "dumped"}}]
    stable = [g for g in groups if isinstance(g, dict) and g["data"]["members"]]
    assert stable, groups
    member = stable[0]["data"]["members"][0]
    assert stable[0]["data"]["protocolType"] == "consumer"
    assert member["subscription"]["topics"] == [topic]
    assert member["assignment"]["assignedPartitions"] == [{"topic": topic, "partitions": [0]}]
    states = [v for k, v in txns if k == {"type": "0", "data": {"transactionalId": "tx-dump"}}]
    assert [s["data"]["transactionStatus"] for s in states if isinstance(s, dict)][-1] == 4
    ongoing = [s for s in states if isinstance(s, dict) and s["data"]["transactionStatus"] == 1]
    assert ongoing[0]["data"]["transactionPartitions"] == [{"topic": topic, "partitionIds": [0]}]
