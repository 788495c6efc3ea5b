"""``samsa dump-log`` run as a user runs it, on the files a real broker wrote.

A broker takes records from confluent-kafka (idempotent and not, each codec, keys,
headers, a transactional producer that commits and aborts) and is stopped
cleanly; the tests then read its partition directories with ``python -m samsa
dump-log`` and compare the lines with what was produced, in kafka-dump-log's
format. Damaged copies of the files check the error path: a message naming the
file and position, exit code 1, no traceback.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import start_broker

QUIET = {"log_level": 3}
CODECS = ["gzip", "snappy", "lz4", "zstd"]
SEGMENT = "00000000000000000000"
BASE_TIMESTAMP = 1_700_000_000_000
BATCHES, RECORDS_PER_BATCH = 3, 4
DUMP_WITHIN_S = 30
BATCH_LINE = re.compile(r"^baseOffset: ")
RECORD_LINE = re.compile(r"^\| ")


@dataclass(frozen=True)
class Segments:
    """Partition directories of the stopped broker, by topic."""

    data_dir: Path

    def partition(self, topic: str) -> Path:
        return self.data_dir / f"{topic}-0"

    def file(self, topic: str, suffix: str) -> Path:
        return self.partition(topic) / f"{SEGMENT}{suffix}"


def _produce_plain(bootstrap: str) -> None:
    """Three batches of four records: keys (one null per batch) and two headers each."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, **QUIET})
    for batch in range(BATCHES):
        for i in range(RECORDS_PER_BATCH):
            offset = batch * RECORDS_PER_BATCH + i
            key = None if i == 0 else f"key-{offset}".encode()
            headers = [("trace", f"t{offset}".encode()), ("source", b"test")]
            producer.produce(
                "plain", f"value-{offset}".encode(), key, headers=headers,
                timestamp=BASE_TIMESTAMP + offset,
            )  # fmt: skip
        assert producer.flush(30) == 0  # one batch per flush


def _produce_compressed(bootstrap: str, codec: str) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 100, **QUIET}
    )
    for i in range(10):
        producer.produce(codec, f"{codec}-payload-{i} ".encode() * 8, f"k{i}".encode())
    assert producer.flush(30) == 0


def _produce_transactions(bootstrap: str) -> None:
    """Offsets 0-1 committed (marker 2), offset 3 aborted (marker 4), 5 committed (marker 6)."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "dump-log", **QUIET})
    producer.init_transactions(30)
    for values, commit in (([b"c0", b"c1"], True), ([b"a0"], False), ([b"c2"], True)):
        producer.begin_transaction()
        for value in values:
            producer.produce("txn", value, b"txn-key")
        assert producer.flush(30) == 0
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Segments]:
    data_dir = tmp_path_factory.mktemp("dump_log") / "data"
    broker = start_broker(data_dir)
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
        # An index entry after every batch but the first, so the indexes have some.
        topics = [NewTopic(t, 1, 1, config={"index.interval.bytes": "0"})
                  for t in ["plain", "txn", *CODECS]]  # fmt: skip
        for future in admin.create_topics(topics).values():
            future.result(10)
        _produce_plain(broker.bootstrap)
        for codec in CODECS:
            _produce_compressed(broker.bootstrap, codec)
        _produce_transactions(broker.bootstrap)
    finally:
        assert broker.stop() == 0
    yield Segments(data_dir)


def dump_log(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "samsa", "dump-log", *map(str, args)],
        capture_output=True, text=True, timeout=DUMP_WITHIN_S, check=False,
    )  # fmt: skip


def fields(line: str) -> dict[str, str]:
    """``name: value`` pairs of a dump line (values hold no spaces in these tests)."""
    return dict(re.findall(r"(\w+): (\S+)", line))


def batch_lines(output: str) -> list[dict[str, str]]:
    return [fields(line) for line in output.splitlines() if BATCH_LINE.match(line)]


def record_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if RECORD_LINE.match(line)]


# -- segments ------------------------------------------------------------------------------


def test_batches_of_a_segment_show_offsets_counts_sequences_and_positions(
    segments: Segments,
) -> None:
    log = segments.file("plain", ".log")
    result = dump_log(log)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:2] == [f"Dumping {log}", "Log starting offset: 0"]
    batches = batch_lines(result.stdout)
    assert [(b["baseOffset"], b["lastOffset"], b["count"]) for b in batches] == [
        (str(n * RECORDS_PER_BATCH), str(n * RECORDS_PER_BATCH + 3), "4") for n in range(BATCHES)
    ]
    assert [(b["baseSequence"], b["lastSequence"]) for b in batches] == [
        (b["baseOffset"], b["lastOffset"]) for b in batches
    ]
    assert {b["producerId"] for b in batches} != {"-1"}
    assert len({b["producerId"] for b in batches}) == 1
    positions = [int(b["position"]) for b in batches]
    sizes = [int(b["size"]) for b in batches]
    assert positions == [sum(sizes[:n]) for n in range(BATCHES)]
    assert sum(sizes) == log.stat().st_size
    for batch in batches:
        assert batch["CreateTime"] == str(BASE_TIMESTAMP + int(batch["lastOffset"]))
        assert (batch["compresscodec"], batch["magic"], batch["isvalid"]) == ("none", "2", "true")
        assert (batch["isTransactional"], batch["isControl"]) == ("false", "false")
        assert batch["deleteHorizonMs"] == "OptionalLong.empty"
    assert record_lines(result.stdout) == []


def test_print_data_log_shows_each_record_with_its_key_payload_and_header_keys(
    segments: Segments,
) -> None:
    result = dump_log("--print-data-log", segments.file("plain", ".log"))
    assert result.returncode == 0, result.stderr
    records = record_lines(result.stdout)
    assert len(records) == BATCHES * RECORDS_PER_BATCH
    for offset, line in enumerate(records):
        value = f"value-{offset}"
        key = None if offset % RECORDS_PER_BATCH == 0 else f"key-{offset}"
        expected = (
            f"| offset: {offset} CreateTime: {BASE_TIMESTAMP + offset} "
            f"keySize: {-1 if key is None else len(key)} valueSize: {len(value)} "
            f"sequence: {offset} headerKeys: [trace,source]"
            + ("" if key is None else f" key: {key}")
            + f" payload: {value}"
        )
        assert line == expected


def test_deep_iteration_shows_record_metadata_without_keys_or_payloads(segments: Segments) -> None:
    result = dump_log("--deep-iteration", segments.file("plain", ".log"))
    records = record_lines(result.stdout)
    assert len(records) == BATCHES * RECORDS_PER_BATCH
    assert not any("payload:" in line or "key:" in line for line in records)
    assert records[1].startswith("| offset: 1 CreateTime: ")


@pytest.mark.parametrize("codec", CODECS)
def test_compressed_batches_name_their_codec_and_their_records_inflate(
    segments: Segments, codec: str
) -> None:
    result = dump_log("--print-data-log", segments.file(codec, ".log"))
    assert result.returncode == 0, result.stderr
    batches = batch_lines(result.stdout)
    assert batches
    assert {b["compresscodec"] for b in batches} == {codec}
    assert sum(int(b["count"]) for b in batches) == 10
    payloads = [line.split(" payload: ", 1)[1] for line in record_lines(result.stdout)]
    assert payloads == [f"{codec}-payload-{i} " * 8 for i in range(10)]


def test_control_batches_show_the_transaction_markers(segments: Segments) -> None:
    result = dump_log("--print-data-log", segments.file("txn", ".log"))
    assert result.returncode == 0, result.stderr
    batches = batch_lines(result.stdout)
    assert [(b["baseOffset"], b["isControl"]) for b in batches] == [
        ("0", "false"), ("2", "true"), ("3", "false"), ("4", "true"), ("5", "false"),
        ("6", "true"),
    ]  # fmt: skip
    assert {b["isTransactional"] for b in batches} == {"true"}
    markers = [
        re.search(r"endTxnMarker: (\w+) coordinatorEpoch: \d+$", line)
        for line in record_lines(result.stdout)
    ]
    assert [m.group(1) for m in markers if m] == ["COMMIT", "ABORT", "COMMIT"]
    marker_lines = [line for line in record_lines(result.stdout) if "endTxnMarker" in line]
    assert all("payload:" not in line for line in marker_lines)


# -- indexes and producer state -----------------------------------------------------------------


def test_offset_index_lists_the_last_offset_and_position_of_indexed_batches(
    segments: Segments,
) -> None:
    index = segments.file("plain", ".index")
    result = dump_log(index)
    assert result.returncode == 0, result.stderr
    entries = re.findall(r"^offset: (\d+) position: (\d+)$", result.stdout, re.MULTILINE)
    batches = batch_lines(dump_log(segments.file("plain", ".log")).stdout)
    assert entries == [(b["lastOffset"], b["position"]) for b in batches[1:]]


def test_time_index_lists_the_max_timestamp_and_offset_of_indexed_batches(
    segments: Segments,
) -> None:
    result = dump_log(segments.file("plain", ".timeindex"))
    assert result.returncode == 0, result.stderr
    entries = re.findall(r"^timestamp: (\d+) offset: (\d+)$", result.stdout, re.MULTILINE)
    batches = batch_lines(dump_log(segments.file("plain", ".log")).stdout)
    assert entries
    assert set(entries) <= {(b["CreateTime"], b["lastOffset"]) for b in batches}
    assert entries[-1] == (batches[-1]["CreateTime"], batches[-1]["lastOffset"])


def test_transaction_index_lists_the_aborted_transaction(segments: Segments) -> None:
    result = dump_log(segments.file("txn", ".txnindex"))
    assert result.returncode == 0, result.stderr
    (line,) = result.stdout.splitlines()[1:]
    entry = fields(line)
    assert (entry["version"], entry["firstOffset"], entry["lastOffset"]) == ("0", "3", "4")
    assert int(entry["lastStableOffset"]) == 5


def test_producer_snapshot_lists_each_producer_s_last_batch(segments: Segments) -> None:
    (snapshot,) = segments.partition("plain").glob("*.snapshot")
    result = dump_log(snapshot)
    assert result.returncode == 0, result.stderr
    (line,) = result.stdout.splitlines()[1:]
    entry = fields(line)
    last = BATCHES * RECORDS_PER_BATCH - 1
    assert (entry["producerEpoch"], entry["lastSequence"], entry["lastOffset"]) == (
        "0", str(last), str(last),
    )  # fmt: skip
    assert entry["firstSequence"] == str(last - RECORDS_PER_BATCH + 1)
    assert entry["currentTxnFirstOffset"] == "OptionalLong.empty"


def test_files_flag_takes_a_comma_separated_list_as_kafka_s_tool_does(segments: Segments) -> None:
    log, index = segments.file("plain", ".log"), segments.file("plain", ".index")
    result = dump_log("--files", f"{log},{index}")
    assert result.returncode == 0, result.stderr
    dumping = [line for line in result.stdout.splitlines() if line.startswith("Dumping ")]
    assert dumping == [f"Dumping {log}", f"Dumping {index}"]


def test_max_bytes_stops_before_the_first_batch_it_would_cut(segments: Segments) -> None:
    log = segments.file("plain", ".log")
    first_size = int(batch_lines(dump_log(log).stdout)[0]["size"])
    result = dump_log("--max-bytes", str(first_size + 10), log)
    assert result.returncode == 0, result.stderr
    assert [b["baseOffset"] for b in batch_lines(result.stdout)] == ["0"]


def test_no_files_is_a_usage_error_that_says_how_to_name_them() -> None:
    result = dump_log()
    assert result.returncode == 2
    assert "--files" in result.stderr


# -- damaged files ------------------------------------------------------------------------------


def damaged_copy(source: Path, tmp_path: Path) -> Path:
    copy = tmp_path / source.name
    shutil.copyfile(source, copy)
    return copy


def assert_failed_cleanly(result: subprocess.CompletedProcess[str], path: Path) -> None:
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert f"samsa dump-log: {path}: " in result.stderr


def test_a_segment_cut_inside_a_batch_fails_naming_the_file_and_position(
    segments: Segments, tmp_path: Path
) -> None:
    log = damaged_copy(segments.file("plain", ".log"), tmp_path)
    batches = batch_lines(dump_log(log).stdout)
    second = int(batches[1]["position"])
    with open(log, "r+b") as file:
        file.truncate(second + 30)
    result = dump_log("--print-data-log", log)
    assert_failed_cleanly(result, log)
    assert f"truncated: the batch at position {second} declares" in result.stderr
    assert len(batch_lines(result.stdout)) == 1  # the whole first batch is still shown
    assert len(record_lines(result.stdout)) == RECORDS_PER_BATCH


def test_a_batch_length_below_the_header_size_fails_as_corrupt(
    segments: Segments, tmp_path: Path
) -> None:
    log = damaged_copy(segments.file("plain", ".log"), tmp_path)
    with open(log, "r+b") as file:
        file.seek(8)  # batchLength
        file.write((5).to_bytes(4, "big"))
    result = dump_log(log)
    assert_failed_cleanly(result, log)
    assert "corrupt batch at position 0" in result.stderr


def test_a_batch_whose_bytes_changed_shows_as_invalid(segments: Segments, tmp_path: Path) -> None:
    log = damaged_copy(segments.file("plain", ".log"), tmp_path)
    data = bytearray(log.read_bytes())
    data[data.index(b"value-0")] = ord("V")
    log.write_bytes(data)
    result = dump_log("--print-data-log", log)
    assert result.returncode == 0, result.stderr
    assert [b["isvalid"] for b in batch_lines(result.stdout)] == ["false", "true", "true"]
    assert "payload: Value-0" in result.stdout


def test_an_index_ending_inside_an_entry_fails_naming_the_position(
    segments: Segments, tmp_path: Path
) -> None:
    index = damaged_copy(segments.file("plain", ".index"), tmp_path)
    size = index.stat().st_size
    with open(index, "ab") as file:
        file.write(b"\x00\x00\x01")
    result = dump_log(index)
    assert_failed_cleanly(result, index)
    assert f"the 3 bytes at position {size} are not a whole 8-byte entry" in result.stderr


def test_a_corrupt_producer_snapshot_fails_with_a_message(
    segments: Segments, tmp_path: Path
) -> None:
    (snapshot,) = segments.partition("plain").glob("*.snapshot")
    copy = damaged_copy(snapshot, tmp_path)
    data = bytearray(copy.read_bytes())
    data[-1] ^= 0xFF
    copy.write_bytes(data)
    result = dump_log(copy)
    assert_failed_cleanly(result, copy)
    assert "CRC" in result.stderr


def test_a_missing_file_fails_and_the_other_files_are_still_dumped(
    segments: Segments, tmp_path: Path
) -> None:
    missing = tmp_path / f"{SEGMENT}.log"
    result = dump_log(missing, segments.file("plain", ".index"))
    assert_failed_cleanly(result, missing)
    assert "cannot read it" in result.stderr
    assert f"Dumping {segments.file('plain', '.index')}" in result.stdout
