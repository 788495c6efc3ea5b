"""Start-up with damaged or missing metadata: data is never deleted, refusals are one line.

Real ``samsa serve`` processes over loopback; records are written with samsa's
producer and read back with confluent-kafka (librdkafka), an independent client.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from samsa import Admin, Producer
from samsa.client.admin import NewTopic
from samsa.records import iter_batches, iter_records
from samsa.testing import BrokerProcess, start_broker

pytestmark = pytest.mark.timeout(120)

TOPIC = "orders"
PARTITIONS = 4
PER_PARTITION = 50
TOPIC_TABLE = "samsa-topics.json"
EXIT_WITHIN_S = 20


def _write_records(bootstrap: str) -> dict[int, list[bytes]]:
    """Create ``orders`` and write records to every partition; return them by partition."""
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS)])
    sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        futures = []
        for i in range(PARTITIONS * PER_PARTITION):
            value = b"record-%d" % i
            sent[i % PARTITIONS].append(value)
            futures.append(producer.send(TOPIC, value, partition=i % PARTITIONS))
        producer.flush()
        for future in futures:
            future.result()
    return sent


def _read_records(
    bootstrap: str, expected: int, topic: str = TOPIC, partitions: int = PARTITIONS
) -> dict[int, list[bytes]]:
    """Every record of ``topic`` from offset 0, by partition, read by librdkafka."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
         "log_level": 3}
    )  # fmt: skip
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    found: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + 60
    try:
        while sum(map(len, found.values())) < expected and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                if message.error() is not None:
                    raise KafkaException(message.error())
                found[message.partition()].append(message.value())
    finally:
        consumer.close()
    return found


def _serve(*overrides: str) -> subprocess.CompletedProcess[str]:
    """Run ``samsa serve`` expected to refuse to start; its output is stdout + stderr."""
    args = [sys.executable, "-m", "samsa", "serve"]
    for item in ("listeners=PLAINTEXT://127.0.0.1:0", *overrides):
        args += ["--override", item]
    return subprocess.run(
        args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=EXIT_WITHIN_S, check=False,
    )  # fmt: skip


def _files(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.suffix == ".log"
    }


def _partition_dirs(*data_dirs: Path) -> list[Path]:
    return [d for data in data_dirs for d in data.glob(f"{TOPIC}-*") if d.is_dir()]


def test_a_missing_topic_table_stops_start_up_and_keeps_every_partition(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = start_broker(data)
    sent = _write_records(broker.bootstrap)
    assert broker.stop() == 0
    table = data / TOPIC_TABLE
    saved = table.read_bytes()
    table.unlink()
    before = _files(data)

    refused = _serve(f"log.dirs={data}")

    assert refused.returncode != 0
    assert "Traceback" not in refused.stdout
    assert TOPIC_TABLE in refused.stdout and f"{TOPIC}-0" in refused.stdout, refused.stdout
    assert _files(data) == before
    table.write_bytes(saved)
    with BrokerProcess(data).start() as again:
        assert _read_records(again.bootstrap, PARTITIONS * PER_PARTITION) == sent


def test_the_topic_table_is_found_whatever_the_order_of_log_dirs(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    broker = start_broker(first, [f"log.dirs={first},{second}"])
    sent = _write_records(broker.bootstrap)
    assert broker.stop() == 0
    assert _partition_dirs(first) and _partition_dirs(second)  # spread over both

    with BrokerProcess(second, [f"log.dirs={second},{first}"]).start() as swapped:
        assert _read_records(swapped.bootstrap, PARTITIONS * PER_PARTITION) == sent
    assert len(_partition_dirs(first, second)) == PARTITIONS


def test_a_partition_of_no_known_topic_is_moved_aside_not_deleted(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = start_broker(data)
    _write_records(broker.bootstrap)
    assert broker.stop() == 0
    shutil.copytree(data / f"{TOPIC}-0", data / "ghost-0")
    ghost_log = (data / "ghost-0" / f"{0:020d}.log").read_bytes()

    with BrokerProcess(data).start() as again:
        strays = list(data.glob("ghost-0.*-stray"))
        assert len(strays) == 1
        assert (strays[0] / f"{0:020d}.log").read_bytes() == ghost_log
        assert not (data / "ghost-0").exists()
        output = again.log_path.read_text()
        assert "ERROR" in output and "ghost-0" in output and str(strays[0]) in output


def test_meta_properties_that_is_not_utf8_stops_start_up_with_one_message(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "meta.properties").write_bytes(b"version=1\ncluster.id=\xff\xfe\nnode.id=0\n")

    refused = _serve(f"log.dirs={data}")

    assert refused.returncode != 0
    assert "Traceback" not in refused.stdout
    assert "meta.properties is not UTF-8" in refused.stdout, refused.stdout


def test_meta_properties_with_a_node_id_that_is_not_a_number_stops_start_up(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "meta.properties").write_text("version=1\ncluster.id=abc\nnode.id=abc\n")

    refused = _serve(f"log.dirs={data}")

    assert refused.returncode != 0
    assert "Traceback" not in refused.stdout
    assert "node.id=abc, which is not a number" in refused.stdout, refused.stdout


def test_a_port_in_use_stops_start_up_naming_it_before_creating_the_data_dir(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]

        refused = _serve(f"listeners=PLAINTEXT://127.0.0.1:{port}", f"log.dirs={data}")

    assert refused.returncode != 0
    assert "Traceback" not in refused.stdout
    assert f"cannot listen on 127.0.0.1:{port}" in refused.stdout, refused.stdout
    assert not data.exists()


def test_a_damaged_recovery_point_checkpoint_recovers_the_logs_and_serves_them(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    broker = start_broker(data)
    sent = _write_records(broker.bootstrap)
    assert broker.stop() == 0
    (data / "recovery-point-offset-checkpoint").write_bytes(b"0\n1\n\xff\xfe 0 12\n")

    with BrokerProcess(data).start() as again:
        assert _read_records(again.bootstrap, PARTITIONS * PER_PARTITION) == sent
        output = again.log_path.read_text()
        assert "Traceback" not in output
        assert "recovery-point-offset-checkpoint" in output and "treating it as absent" in output


def test_a_checkpoint_that_cannot_be_written_at_shutdown_exits_non_zero_naming_it(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    broker = start_broker(data)
    sent = _write_records(broker.bootstrap)
    # A directory where the checkpoint's temporary file goes: the write fails (even as root).
    (data / "recovery-point-offset-checkpoint.tmp").mkdir()
    offset = broker.log_path.stat().st_size

    code = broker.stop()

    output = broker.log_path.read_bytes()[offset:].decode()
    assert code != 0
    assert "did not stop cleanly" in output and "recovery-point-offset-checkpoint" in output
    assert "stopped cleanly" not in output.replace("did not stop cleanly", "")
    assert not (data / ".kafka_cleanshutdown").exists()
    (data / "recovery-point-offset-checkpoint.tmp").rmdir()
    with BrokerProcess(data).start() as again:
        assert _read_records(again.bootstrap, PARTITIONS * PER_PARTITION) == sent


def test_a_flipped_byte_in_an_early_segment_keeps_the_later_records_on_disk(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    small_segments = ["log.segment.bytes=1000"]
    broker = start_broker(data, small_segments)
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic("damaged", 1)])
    sent: list[bytes] = []
    with Producer({"bootstrap.servers": broker.bootstrap}) as producer:
        for batch in range(30):  # one flush, one batch
            futures = [producer.send("damaged", b"record-%d-%d" % (batch, i)) for i in range(10)]
            producer.flush()
            sent += [b"record-%d-%d" % (batch, i) for i in range(10)]
            assert [f.result().offset for f in futures] == list(range(len(sent) - 10, len(sent)))
    broker.kill()  # a crash: the next start scans the segments
    segments = sorted((data / "damaged-0").glob("*.log"))
    assert len(segments) >= 3
    first = segments[0]
    damaged = bytearray(first.read_bytes())
    last_batch = list(iter_batches(damaged))[-1]
    damaged[-1] ^= 0xFF  # a record byte of the first segment's last batch
    first.write_bytes(damaged)
    cut_at = len(damaged) - last_batch.size

    with BrokerProcess(data, small_segments).start() as again:
        served = _read_records(again.bootstrap, last_batch.base_offset, "damaged", 1)
        output = again.log_path.read_text()
    assert served[0] == sent[: last_batch.base_offset]
    cut_bytes = first.with_name(f"{first.name}.cut-at-{cut_at}.corrupt")
    assert cut_bytes.read_bytes() == bytes(damaged[cut_at:])
    kept_values = [
        record.value
        for segment in segments[1:]
        for batch in iter_batches(segment.with_name(segment.name + ".corrupt").read_bytes())
        for record in iter_records(batch)
    ]
    assert kept_values == sent[last_batch.last_offset + 1 :]
    assert "ERROR" in output and "partition damaged-0" in output and cut_bytes.name in output


def test_a_config_file_that_is_not_utf8_stops_start_up_with_one_message(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_bytes(b"log.dirs=/tmp/data-\xff\n")

    refused = subprocess.run(
        [sys.executable, "-m", "samsa", "serve", "--config", str(config)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=EXIT_WITHIN_S, check=False,
    )  # fmt: skip

    assert refused.returncode != 0
    assert "Traceback" not in refused.stdout
    assert f"{config} is not UTF-8 text" in refused.stdout, refused.stdout
