"""``samsa console-consumer`` and ``samsa consumer-perf-test`` as a user runs them: each
command a ``python -m samsa`` process against a real broker, its output checked byte for
byte against what kafka-console-consumer prints.

Records are written first by confluent-kafka (keys, headers, timestamps, transactions),
so the tools are checked against another client's writes; committed offsets are read
back with ``samsa consumer-groups --describe``.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from tests.cli.test_cli_tools import ok, samsa, table, unique

from samsa.testing import BrokerProcess, start_broker

pytestmark = pytest.mark.timeout(120)

QUIET = {"log_level": 3}
COMMAND_TIMEOUT_S = 30
T0 = 1_700_000_000_000  # the CreateTime of the first known record


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(
        tmp_path_factory.mktemp("cli-consumer") / "data",
        overrides=["group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000"],
    )
    try:
        yield process
    finally:
        process.stop()


def consume(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return samsa("console-consumer", "--bootstrap-server", broker.bootstrap, *args)


def create(broker: BrokerProcess, topic: str, partitions: int = 1) -> None:
    ok(
        samsa(
            "topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", topic,
            "--partitions", str(partitions),
        )
    )  # fmt: skip


def produce(
    broker: BrokerProcess,
    topic: str,
    records: list[tuple[int, bytes | None, bytes | None, int, list[tuple[str, bytes | None]]]],
) -> None:
    """Write (partition, key, value, timestamp, headers) records with confluent-kafka."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    for partition, key, value, timestamp, headers in records:
        producer.produce(
            topic, value, key, partition=partition, timestamp=timestamp, headers=headers or None
        )
    assert producer.flush(10) == 0


def fill(broker: BrokerProcess, topic: str, values: list[bytes], partitions: int = 1) -> None:
    """Create ``topic`` and write ``values`` to partition 0."""
    create(broker, topic, partitions)
    produce(broker, topic, [(0, None, v, T0, []) for v in values])


def processed(result: subprocess.CompletedProcess[str]) -> int:
    match = re.search(r"^Processed a total of (\d+) messages$", result.stderr, re.MULTILINE)
    assert match, result.stderr
    return int(match.group(1))


def describe_group(broker: BrokerProcess, group: str) -> list[tuple[str, str, str, str]]:
    """(topic, partition, current offset, log end offset) rows of the group."""
    out = ok(
        samsa("consumer-groups", "--bootstrap-server", broker.bootstrap, "--describe",
              "--group", group)
    )  # fmt: skip
    return [
        (r["TOPIC"], r["PARTITION"], r["CURRENT-OFFSET"], r["LOG-END-OFFSET"]) for r in table(out)
    ]


def assert_usage_error(result: subprocess.CompletedProcess[str], tool: str, message: str) -> None:
    """The tool refused its command line (exit 2), with its usage and ``message``."""
    assert result.returncode == 2
    assert f"usage: samsa {tool}" in result.stderr
    assert message in result.stderr


@pytest.fixture(scope="module")
def known(broker: BrokerProcess) -> str:
    """Two partitions of records with keys, null keys and values, headers and timestamps."""
    topic = unique("known")
    create(broker, topic, 2)
    produce(
        broker,
        topic,
        [
            (0, b"k0", b"v0", T0, [("trace", b"abc"), ("kind", b"x")]),
            (0, None, b"v1", T0 + 1, []),
            (0, b"k2", None, T0 + 2, []),
            (1, b"k3", b"v3", T0 + 3, []),
            (1, b"k4", b"v4", T0 + 4, [("n", None)]),
        ],
    )
    return topic


ALL_COLUMNS = [
    *("--property", "print.timestamp=true", "--property", "print.partition=true"),
    *("--property", "print.offset=true", "--property", "print.headers=true"),
    *("--property", "print.key=true"),
]


# -- what is printed -----------------------------------------------------------------------


def test_from_beginning_prints_every_value_and_the_count_on_stderr(
    broker: BrokerProcess, known: str
) -> None:
    result = consume(broker, "--topic", known, "--from-beginning", "--timeout-ms", "2000")
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == ["null", "v0", "v1", "v3", "v4"]
    assert processed(result) == 5


def test_print_properties_give_kafkas_columns(broker: BrokerProcess, known: str) -> None:
    result = consume(
        broker, "--topic", known, "--partition", "0", "--offset", "earliest",
        "--max-messages", "3", *ALL_COLUMNS,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        f"CreateTime:{T0}\tPartition:0\tOffset:0\ttrace:abc,kind:x\tk0\tv0\n"
        f"CreateTime:{T0 + 1}\tPartition:0\tOffset:1\tNO_HEADERS\tnull\tv1\n"
        f"CreateTime:{T0 + 2}\tPartition:0\tOffset:2\tNO_HEADERS\tk2\tnull\n"
    )
    assert processed(result) == 3


def test_separators_and_the_null_literal_are_used_as_given(
    broker: BrokerProcess, known: str
) -> None:
    result = consume(
        broker, "--topic", known, "--partition", "1", "--offset", "earliest", "--max-messages",
        "2", "--property", "print.key=true", "--property", "print.headers=true",
        "--property", "key.separator= | ", "--property", "line.separator=;\n",
        "--property", "null.literal=NIL", "--property", "print.value=false",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout == "NO_HEADERS | k3;\nn:NIL | k4;\n"


def test_json_formatter_prints_one_object_per_record(broker: BrokerProcess, known: str) -> None:
    result = consume(
        broker, "--topic", known, "--partition", "0", "--offset", "earliest",
        "--max-messages", "3", "--formatter", "json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    first, second, third = (json.loads(line) for line in result.stdout.splitlines())
    assert first == {
        "topic": known,
        "partition": 0,
        "offset": 0,
        "timestamp": T0,
        "timestampType": "CreateTime",
        "headers": [{"key": "trace", "value": "abc"}, {"key": "kind", "value": "x"}],
        "key": "k0",
        "value": "v0",
    }
    assert (second["key"], second["value"], third["key"], third["value"]) == (
        None,
        "v1",
        "k2",
        None,
    )


def test_kafkas_formatter_class_names_are_accepted(broker: BrokerProcess, known: str) -> None:
    for name in ("kafka.tools.DefaultMessageFormatter", "DefaultMessageFormatter"):
        result = consume(
            broker, "--topic", known, "--partition", "1", "--offset", "earliest",
            "--max-messages", "1", "--formatter", name,
        )  # fmt: skip
        assert ok(result) == "v3\n"


# -- where reading starts and stops ----------------------------------------------------------


def test_offset_n_of_a_partition_starts_there(broker: BrokerProcess, known: str) -> None:
    result = consume(
        broker, "--topic", known, "--partition", "1", "--offset", "1", "--timeout-ms", "1000",
        "--property", "print.offset=true",
    )  # fmt: skip
    assert ok(result) == "Offset:1\tv4\n"


def test_max_messages_stops_after_that_many(broker: BrokerProcess) -> None:
    topic = unique("many")
    fill(broker, topic, [b"m%d" % i for i in range(20)])
    result = consume(broker, "--topic", topic, "--from-beginning", "--max-messages", "7")
    assert ok(result).splitlines() == [f"m{i}" for i in range(7)]
    assert processed(result) == 7


def test_timeout_ms_exits_when_no_record_arrives(broker: BrokerProcess) -> None:
    topic = unique("quiet")
    create(broker, topic)
    result = consume(broker, "--topic", topic, "--timeout-ms", "500")
    assert ok(result) == ""
    assert processed(result) == 0


def test_without_from_beginning_only_new_records_are_printed(broker: BrokerProcess) -> None:
    topic = unique("latest")
    fill(broker, topic, [b"old"])
    reader = subprocess.Popen(
        [sys.executable, "-m", "samsa", "console-consumer", "--bootstrap-server",
         broker.bootstrap, "--topic", topic, "--max-messages", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        # The reader starts at the log end once it has looked; write until it has read one.
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        while reader.poll() is None:
            assert time.monotonic() < deadline, "the reader printed nothing new"
            produce(broker, topic, [(0, None, b"new", T0, [])])
            time.sleep(0.2)
        out, err = reader.communicate()
    finally:
        reader.kill()
    assert reader.returncode == 0, err
    assert out == "new\n"


def test_include_reads_every_topic_whose_whole_name_matches(broker: BrokerProcess) -> None:
    prefix = unique("inc")
    for suffix in ("a", "b"):
        fill(broker, f"{prefix}-{suffix}", [f"{suffix}1".encode(), f"{suffix}2".encode()])
    fill(broker, f"x{prefix}-c", [b"c1"])  # matches only as a substring
    for flag in ("--include", "--whitelist"):
        result = consume(broker, flag, f"{prefix}-.*", "--from-beginning", "--timeout-ms", "2000")
        assert sorted(ok(result).splitlines()) == ["a1", "a2", "b1", "b2"]


def test_without_a_group_a_topic_created_later_is_read_from_its_beginning(
    broker: BrokerProcess,
) -> None:
    prefix = unique("later")
    reader = subprocess.Popen(
        [sys.executable, "-m", "samsa", "console-consumer", "--bootstrap-server",
         broker.bootstrap, "--include", f"{prefix}-.*", "--max-messages", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert reader.stderr is not None
        waiting = reader.stderr.readline()  # it has looked once: the topic is new to it
        assert "waiting for a topic matching --include to exist" in waiting
        fill(broker, f"{prefix}-new", [b"first", b"second"])
        out, err = reader.communicate(timeout=COMMAND_TIMEOUT_S)
    finally:
        reader.kill()
    assert reader.returncode == 0, err
    assert out == "first\nsecond\n"


def test_include_with_a_group_subscribes_to_the_pattern(broker: BrokerProcess) -> None:
    prefix, group = unique("incg"), unique("pattern-group")
    fill(broker, f"{prefix}-a", [b"a1"])
    fill(broker, f"{prefix}-b", [b"b1"])
    result = consume(
        broker, "--include", f"{prefix}-.*", "--group", group, "--from-beginning",
        "--max-messages", "2",
    )  # fmt: skip
    assert sorted(ok(result).splitlines()) == ["a1", "b1"]
    assert describe_group(broker, group) == [
        (f"{prefix}-a", "0", "1", "1"),
        (f"{prefix}-b", "0", "1", "1"),
    ]


# -- groups --------------------------------------------------------------------------------


def test_a_group_commits_what_it_printed_and_the_next_run_goes_on_from_there(
    broker: BrokerProcess,
) -> None:
    topic, group = unique("grouped"), unique("console-group")
    fill(broker, topic, [b"g%d" % i for i in range(10)])
    first = consume(broker, "--topic", topic, "--group", group, "--from-beginning",
                    "--max-messages", "4")  # fmt: skip
    assert ok(first).splitlines() == ["g0", "g1", "g2", "g3"]
    assert describe_group(broker, group) == [(topic, "0", "4", "10")]
    second = consume(broker, "--topic", topic, "--group", group, "--timeout-ms", "1500")
    assert ok(second).splitlines() == [f"g{i}" for i in range(4, 10)]
    assert describe_group(broker, group) == [(topic, "0", "10", "10")]


def test_ctrl_c_stops_cleanly_and_commits_the_group(broker: BrokerProcess) -> None:
    topic, group = unique("interrupted"), unique("ctrl-c")
    fill(broker, topic, [b"c%d" % i for i in range(5)])
    reader = subprocess.Popen(
        [sys.executable, "-m", "samsa", "console-consumer", "--bootstrap-server",
         broker.bootstrap, "--topic", topic, "--group", group, "--from-beginning"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert reader.stdout is not None
        lines = [reader.stdout.readline() for _ in range(5)]
        reader.send_signal(signal.SIGINT)
        out, err = reader.communicate(timeout=COMMAND_TIMEOUT_S)
    finally:
        reader.kill()
    assert lines == [f"c{i}\n" for i in range(5)]
    assert out == ""
    assert reader.returncode == 130
    assert "Processed a total of 5 messages" in err
    assert "Traceback" not in err
    assert describe_group(broker, group) == [(topic, "0", "5", "5")]


def test_consumer_properties_come_from_the_file_then_the_flags(
    broker: BrokerProcess, known: str, tmp_path: Path
) -> None:
    config = tmp_path / "consumer.properties"
    # A Java client's file: its deserializer classes are ignored (the tool reads bytes).
    config.write_text(
        "auto.offset.reset=latest\n"
        "key.deserializer=org.apache.kafka.common.serialization.StringDeserializer\n"
    )
    from_file = consume(broker, "--topic", known, "--consumer.config", str(config),
                        "--timeout-ms", "1000")  # fmt: skip
    assert ok(from_file) == ""
    overridden = consume(
        broker, "--topic", known, "--consumer.config", str(config), "--consumer-property",
        "auto.offset.reset=earliest", "--timeout-ms", "2000",
    )  # fmt: skip
    assert processed(overridden) == 5


# -- transactions and errors -----------------------------------------------------------------


def test_read_committed_leaves_out_aborted_records(broker: BrokerProcess) -> None:
    topic = unique("txn")
    create(broker, topic)
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": unique("txn-id"), **QUIET}
    )
    producer.init_transactions(10)
    for value, commit in ((b"committed-1", True), (b"aborted", False), (b"committed-2", True)):
        producer.begin_transaction()
        producer.produce(topic, value)
        producer.flush(10)  # abort_transaction() would drop a record not sent yet
        if commit:
            producer.commit_transaction(10)
        else:
            producer.abort_transaction(10)
    base = ["--topic", topic, "--from-beginning", "--timeout-ms", "1500"]
    committed = consume(broker, *base, "--isolation-level", "read_committed")
    assert ok(committed).splitlines() == ["committed-1", "committed-2"]
    everything = consume(broker, *base, "--isolation-level", "read_uncommitted")
    assert ok(everything).splitlines() == ["committed-1", "aborted", "committed-2"]


def test_a_record_the_formatter_cannot_print_stops_the_tool_unless_skipped(
    broker: BrokerProcess,
) -> None:
    topic = unique("longs")
    fill(broker, topic, [struct.pack(">q", 42), b"not a long", struct.pack(">q", -1)])
    long_class = "org.apache.kafka.common.serialization.LongDeserializer"
    flags = ["--topic", topic, "--from-beginning", "--timeout-ms", "1500",
             "--value-deserializer", long_class]  # fmt: skip
    stopped = consume(broker, *flags)
    assert stopped.returncode == 1
    assert stopped.stdout == "42\n"
    assert (
        f"cannot print the record at {topic}-0 offset 1: size of data received by "
        "LongDeserializer is not 8; add --skip-message-on-error" in stopped.stderr
    )
    skipped = consume(broker, *flags, "--skip-message-on-error")
    assert ok(skipped) == "42\n-1\n"
    assert f"skipped the record at {topic}-0 offset 1" in skipped.stderr
    assert processed(skipped) == 3


def test_a_missing_partition_fails_saying_which_there_are(
    broker: BrokerProcess, known: str
) -> None:
    result = consume(broker, "--topic", known, "--partition", "5")
    assert result.returncode == 1
    assert f"topic '{known}' has no partition 5 (it has 0 to 1)" in result.stderr


def test_an_unreachable_broker_fails_at_once_saying_how_to_start_one() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{sock.getsockname()[1]}"
    result = samsa("console-consumer", "--bootstrap-server", address, "--topic", "t")
    assert result.returncode == 1
    assert f"cannot reach {address}" in result.stderr
    assert "start one with `make run` or `samsa serve`" in result.stderr


def test_an_unknown_consumer_property_fails_naming_it(broker: BrokerProcess) -> None:
    result = consume(broker, "--topic", "t", "--consumer-property", "no.such.thing=1")
    assert result.returncode == 1
    assert "no.such.thing" in result.stderr


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        pytest.param([], "exactly one of --topic TOPIC or --include REGEX", id="nothing to read"),
        pytest.param(["--topic", "t", "--include", "t.*"], "exactly one of", id="topic+include"),
        pytest.param(["--topic", "t", "--offset", "3"], "--offset works only with --partition",
                     id="offset without partition"),
        pytest.param(["--include", "t", "--partition", "0"], "--partition needs --topic",
                     id="partition without topic"),
        pytest.param(["--topic", "t", "--partition", "0", "--group", "g"],
                     "--partition cannot be used with a group", id="partition with group"),
        pytest.param(["--topic", "t", "--partition", "0", "--offset", "soon"],
                     "is not earliest, latest or a non-negative number", id="bad offset"),
        pytest.param(["--topic", "t", "--partition", "0", "--offset", "1", "--from-beginning"],
                     "cannot be used together", id="offset and from-beginning"),
        pytest.param(["--topic", "t", "--group", "a", "--consumer-property", "group.id=b"],
                     "disagree ('a', 'b')", id="two group ids"),
        pytest.param(["--topic", "t", "--from-beginning", "--consumer-property",
                      "auto.offset.reset=latest"], "contradicts auto.offset.reset=latest",
                     id="from-beginning and latest"),
        pytest.param(["--include", "t("], "is not a regular expression", id="bad regex"),
        pytest.param(["--topic", "t", "--property", "print.everything=true"],
                     "does not take --property 'print.everything'", id="unknown property"),
        pytest.param(["--topic", "t", "--formatter", "com.example.Fancy"],
                     "unknown --formatter", id="unknown formatter"),
        pytest.param(["--topic", "t", "--value-deserializer", "AvroDeserializer"],
                     "use one of Kafka's deserializers", id="unknown deserializer"),
        pytest.param(["--topic", "t", "--isolation-level", "serializable"], "invalid choice",
                     id="bad isolation level"),
        pytest.param(["--topic", "t", "--no-such-flag"], "unrecognized arguments",
                     id="unknown flag"),
    ],
)  # fmt: skip
def test_a_bad_console_consumer_command_line_exits_2_saying_why(
    broker: BrokerProcess, flags: list[str], message: str
) -> None:
    result = consume(broker, *flags)
    assert_usage_error(result, "console-consumer", message)
    assert "Processed a total" not in result.stderr


# -- samsa consumer-perf-test --------------------------------------------------------------

SUMMARY_HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)
TIME = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"
FIGURE = r"(?:\d+\.\d{4}|Infinity|NaN)"
SUMMARY_LINE = re.compile(
    rf"^({TIME}), ({TIME}), (\d+\.\d{{4}}), {FIGURE}, (\d+), {FIGURE}, (\d+), (-?\d+), "
    rf"{FIGURE}, {FIGURE}$"
)
PERF_RECORDS = 2000
PERF_RECORD_SIZE = 100


@pytest.fixture(scope="module")
def perf_topic(broker: BrokerProcess) -> str:
    topic = unique("perf")
    create(broker, topic, 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, **QUIET})
    for i in range(PERF_RECORDS):
        producer.produce(topic, b"x" * PERF_RECORD_SIZE, partition=i % 2)
    assert producer.flush(10) == 0
    return topic


def perf(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return samsa("consumer-perf-test", "--bootstrap-server", broker.bootstrap, *args)


def test_consumer_perf_test_reads_the_records_and_prints_kafkas_summary(
    broker: BrokerProcess, perf_topic: str
) -> None:
    group = unique("perf-group")
    result = perf(broker, "--topic", perf_topic, "--messages", str(PERF_RECORDS), "--group", group)
    header, line = ok(result).splitlines()
    assert header == SUMMARY_HEADER
    match = SUMMARY_LINE.match(line)
    assert match, line
    start, end, megabytes, count, _rebalance_ms, _fetch_ms = match.groups()
    assert start <= end
    assert count == str(PERF_RECORDS)
    assert megabytes == f"{PERF_RECORDS * PERF_RECORD_SIZE / 1024 / 1024:.4f}"
    assert describe_group(broker, group) == [
        (perf_topic, "0", "1000", "1000"),
        (perf_topic, "1", "1000", "1000"),
    ]


def test_consumer_perf_test_warns_when_the_timeout_passes_before_all_arrive(
    broker: BrokerProcess, perf_topic: str
) -> None:
    result = perf(
        broker, "--topic", perf_topic, "--messages", str(PERF_RECORDS + 1), "--timeout", "500",
        "--hide-header",
    )  # fmt: skip
    warning, line = ok(result).splitlines()
    assert warning == (
        "WARNING: Exiting before consuming the expected number of messages: timeout (500 ms) "
        "exceeded. You can use the --timeout option to increase the timeout."
    )
    match = SUMMARY_LINE.match(line)
    assert match, line
    assert match.group(4) == str(PERF_RECORDS)


def test_consumer_perf_test_detailed_stats_and_metrics(
    broker: BrokerProcess, perf_topic: str
) -> None:
    result = perf(
        broker, "--topic", perf_topic, "--messages", "500", "--show-detailed-stats",
        "--reporting-interval", "1", "--print-metrics", "--fetch-size", "4096",
    )  # fmt: skip
    out = ok(result)
    lines = out.splitlines()
    assert lines[0] == (
        "time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    )
    detailed = [line for line in lines[1:] if re.match(TIME, line)]
    assert detailed
    assert all(line.split(", ")[1] == "0" for line in detailed)
    metrics = {row["METRIC"]: row["VALUE"] for row in table(out[out.index("METRIC") :])}
    assert metrics["records-consumed-total"] == "500"
    assert metrics["bytes-consumed-total"] == str(500 * PERF_RECORD_SIZE)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        pytest.param(["--topic", "t"], "--messages", id="no messages"),
        pytest.param(["--messages", "1"], "exactly one of --topic", id="nothing to read"),
        pytest.param(["--messages", "1", "--topic", "t", "--reporting-interval", "0"],
                     "--reporting-interval must be above 0", id="zero interval"),
    ],
)  # fmt: skip
def test_a_bad_consumer_perf_test_command_line_exits_2(
    broker: BrokerProcess, flags: list[str], message: str
) -> None:
    assert_usage_error(perf(broker, *flags), "consumer-perf-test", message)
