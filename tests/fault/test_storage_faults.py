"""A real broker short of file descriptors, or on a full disk: errors, never lost acks.

Both tests drive a ``samsa serve`` process over one persistent raw connection
(Produce v9 with acks=1, one request at a time, Fetch v12), so every record is
either acknowledged or refused — nothing is in flight — and what the broker
serves must be exactly the acknowledged records, at their acknowledged offsets.

- Descriptors: the broker's ``RLIMIT_NOFILE`` is lowered with ``prlimit`` and
  idle connections take all but two of its descriptors, so the next segment
  roll cannot open its files. The append must be refused with
  KAFKA_STORAGE_ERROR (not acknowledged, not a dropped connection); once
  descriptors are freed, appends go on; after ``kill -9`` and a restart every
  acknowledged record is there and nothing else.
- Disk full: the data directory is a 2 MiB tmpfs filled to the last page.
  An append whose index entry needs a new page of the mapped ``.index`` must be
  refused (the broker used to die of SIGBUS), logged once at ERROR with the
  partition and directory, reads go on, and appends work once space is freed.
"""

from __future__ import annotations

import errno
import io
import os
import resource
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from tests.conftest import read_log

from samsa.protocol.build import build
from samsa.records import RecordBatchBuilder, iter_batches, iter_records
from samsa.storage import LogConfig, load_log
from samsa.testing import BrokerProcess, start_broker
from samsa.testing.waiting import wait_until

TOPIC = "faults"
KAFKA_STORAGE_ERROR = 56


class RawConnection:
    """One connection to the broker, one request at a time (no new descriptors per request)."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.correlation_id = 0

    def request(self, api_key: int, version: int, values: dict[str, Any]) -> Any:
        self.correlation_id += 1
        request_cls = load_request_schema(api_key, version)
        body = io.BytesIO()
        header_cls = request_cls.__header_schema__
        entity_writer(header_cls)(
            body,
            build(header_cls, {"request_api_key": api_key, "request_api_version": version,
                               "correlation_id": self.correlation_id, "client_id": "faults"}),
        )  # fmt: skip
        entity_writer(request_cls)(body, build(request_cls, values))
        payload = body.getvalue()
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", self._recv(4))[0]
        frame = self._recv(size)
        response_cls = load_response_schema(api_key, version)
        _header, header_size = entity_reader(response_cls.__header_schema__)(frame, 0)
        response, _ = entity_reader(response_cls)(frame, header_size)
        return response

    def _recv(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return bytes(data)

    def create_topic(self, configs: dict[str, str]) -> None:
        response = self.request(19, 5, {
            "topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": 1,
                        "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
            "timeout": 10_000, "validate_only": False,
        })  # fmt: skip
        assert response.topics[0].error_code.value == 0, response

    def produce(self, value: bytes) -> tuple[int, int]:
        """``(error code, base offset)`` of a one-record batch sent with acks=1."""
        builder = RecordBatchBuilder()
        builder.append(value, timestamp=int(time.time() * 1000))
        response = self.request(0, 9, {
            "transactional_id": None, "acks": 1, "timeout": 10_000,
            "topic_data": [{"name": TOPIC, "partition_data": [
                {"index": 0, "records": builder.build()}]}],
        })  # fmt: skip
        partition = response.responses[0].partition_responses[0]
        return int(partition.error_code.value), int(partition.base_offset)

    def read_all(self) -> dict[int, bytes]:
        """Every record of the partition, offset → value, fetched to the high watermark."""
        found: dict[int, bytes] = {}
        offset = 0
        while True:
            response = self.request(1, 12, {
                "max_wait": 0, "min_bytes": 1, "isolation_level": 0,
                "topics": [{"topic": TOPIC, "partitions": [
                    {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}],
            })  # fmt: skip
            partition = response.responses[0].partitions[0]
            assert partition.error_code.value == 0, partition
            before = offset
            for batch in iter_batches(partition.records or b""):
                batch.validate()
                for record in iter_records(batch):
                    if record.offset >= offset:
                        found[record.offset] = record.value or b""
                offset = max(offset, batch.next_offset)
            if offset >= int(partition.high_watermark) or offset == before:
                assert offset == int(partition.high_watermark), "a fetch returned no batch"
                return found

    def close(self) -> None:
        self.sock.close()


def _kill(broker: BrokerProcess) -> None:
    """kill -9 unless it is already gone (a broker that died of SIGBUS has nothing to kill)."""
    if broker.process is not None and broker.process.poll() is not None:
        broker.process = None
    broker.kill()


def _descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


class IdleConnections:
    """Connections that do nothing but hold one of the broker's descriptors each."""

    def __init__(self, broker: BrokerProcess) -> None:
        assert broker.process is not None
        self.pid = broker.process.pid
        self.address = (broker.host, broker.port)
        self.held: list[socket.socket] = []

    def leave_free(self, free: int, limit: int) -> None:
        """Connect one at a time, each accepted before the next, until ``free`` slots remain."""
        while _descriptors(self.pid) < limit - free:
            before = _descriptors(self.pid)
            self.held.append(socket.create_connection(self.address, timeout=10))
            wait_until(
                lambda: _descriptors(self.pid) > before,  # noqa: B023
                "the broker to accept",
                timeout=20,
                interval=0.005,
            )
        assert _descriptors(self.pid) == limit - free

    def release(self, count: int) -> None:
        before = _descriptors(self.pid)
        for sock in self.held[-count:]:
            sock.close()
        del self.held[-count:]
        wait_until(
            lambda: _descriptors(self.pid) <= before - count,
            "the broker to close",
            timeout=20,
            interval=0.005,
        )

    def close(self) -> None:
        for sock in self.held:
            sock.close()
        self.held.clear()


@pytest.mark.timeout(120)
def test_a_broker_short_of_descriptors_refuses_rolls_and_loses_no_acknowledged_record(
    tmp_path: Path,
) -> None:
    broker = start_broker(tmp_path / "data")
    idle = IdleConnections(broker)
    try:
        setup = RawConnection(broker.bootstrap)
        setup.create_topic({"segment.bytes": "2048", "index.interval.bytes": "1"})
        setup.close()
        client = RawConnection(broker.bootstrap)
        acked: dict[int, bytes] = {}
        number = 0

        def produce() -> int:
            nonlocal number
            number += 1
            value = f"record-{number}".encode() * 4
            code, offset = client.produce(value)
            if code == 0:
                acked[offset] = value
            return code

        assert produce() == 0
        assert broker.process is not None
        pid = broker.process.pid
        in_use = max(int(fd) for fd in os.listdir(f"/proc/{pid}/fd"))
        limit = in_use + 1 + 64
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, limit))
        idle.leave_free(2, limit)

        # Appends succeed until the segment is full; then the roll cannot open its files.
        refused = 0
        while refused < 3:
            code = produce()
            assert code in (0, KAFKA_STORAGE_ERROR)
            refused += code == KAFKA_STORAGE_ERROR
            assert number < 200, "no append was refused: the roll never ran short"
        assert client.read_all() == acked

        idle.release(48)
        for _ in range(100):
            assert produce() == 0
        assert client.read_all() == acked
        assert sorted(acked) == list(range(len(acked)))
        client.close()
        idle.close()

        broker.kill()
        broker.start()
        reader = RawConnection(broker.bootstrap)
        assert reader.read_all() == acked
        reader.close()
    finally:
        idle.close()
        _kill(broker)


def _mount_tmpfs(directory: Path, size: str) -> None:
    directory.mkdir(parents=True)
    command = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)]
    try:
        result = subprocess.run(command, check=False, capture_output=True, text=True)
    except OSError as exc:
        pytest.skip(f"cannot run mount to get a small filesystem to fill: {exc}")
    if result.returncode != 0:
        pytest.skip(f"cannot mount a {size} tmpfs to fill (needs root): {result.stderr.strip()}")


def _fill(directory: Path) -> Path:
    """Write a file until the filesystem has not one free page; return it."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for chunk in (1 << 16, 4096):
            while True:
                try:
                    os.write(fd, bytes(chunk))
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break
    finally:
        os.close(fd)
    return filler


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    _mount_tmpfs(disk, "2m")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.mark.timeout(60)
def test_a_full_disk_refuses_appends_keeps_serving_reads_and_recovers(small_disk: Path) -> None:
    broker = start_broker(small_disk)  # its log file goes next to the mount, not on it
    try:
        client = RawConnection(broker.bootstrap)
        client.create_topic({"index.interval.bytes": "1"})
        acked: dict[int, bytes] = {}
        code, offset = client.produce(b"first")  # no index entry yet: the next batch makes one
        assert (code, offset) == (0, 0)
        acked[0] = b"first"

        filler = _fill(small_disk)
        # This batch fits in the .log's last page, but its index entry needs a page.
        assert broker.process is not None
        for attempt in range(5):
            try:
                code, _ = client.produce(f"refused-{attempt}".encode())
            except ConnectionError:
                pytest.fail(f"the broker went away (exit status {broker.process.wait(10)})")
            assert code == KAFKA_STORAGE_ERROR
        assert client.read_all() == acked

        log_text = broker.log_path.read_text()
        reports = [line for line in log_text.splitlines() if f"append to {TOPIC}-0 in" in line]
        assert len(reports) == 1, reports
        assert "ERROR" in reports[0]
        assert str(small_disk / f"{TOPIC}-0") in reports[0]
        assert "No space left on device" in reports[0]

        filler.unlink()
        code, offset = client.produce(b"after")
        assert (code, offset) == (0, 1)
        acked[1] = b"after"
        assert client.read_all() == acked
        client.close()
    finally:
        _kill(broker)


INDEX_WRITER = r"""
import sys
from pathlib import Path
from samsa.storage.index import OffsetIndex

index = OffsetIndex(Path(sys.argv[1]), 0, 1 << 20, writable=True)
filler = open(sys.argv[2], "wb")
try:
    while True:
        filler.write(bytes(4096))
        filler.flush()
except OSError:
    pass
try:
    index.append(1, 100)  # the first entry: the index's first page is still a hole
except OSError as exc:
    print("refused", exc.errno)
else:
    print("stored")
"""


def test_an_index_entry_on_a_full_filesystem_is_refused_not_a_sigbus(small_disk: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", INDEX_WRITER, str(small_disk / "0.index"), str(small_disk / "fill")],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, f"exit status {result.returncode}: {result.stderr}"
    assert result.stdout.split() == ["refused", str(errno.ENOSPC)]


CLOSER = r"""
import os
import sys
from pathlib import Path
from samsa.records import RecordBatchBuilder
from samsa.storage import LogConfig, load_log

directory, filler = Path(sys.argv[1]), sys.argv[2]
config = LogConfig.from_props({"index.interval.bytes": 100})
log = load_log(directory, config, clean_shutdown=True)
timestamp = 1_700_000_000_000
# Fill the time index's first page, then leave the last batch's timestamp unindexed:
# closing must add it as the final entry, on the index's second page.
while True:
    timestamp += 1
    builder = RecordBatchBuilder()
    builder.append(b"x" * 20, timestamp=timestamp)
    log.append_as_leader(bytearray(builder.build()))
    segment = log.active_segment
    unindexed = segment.max_timestamp > segment.time_index.last_entry[0]
    if segment.time_index.entries * 12 > 4096 - 12 and unindexed:
        break
end = log.log_end_offset
fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
try:
    while True:
        os.write(fd, bytes(4096))
except OSError:
    pass
log.close()
print("closed", end)
"""


def test_a_log_closes_on_a_full_filesystem_and_loses_nothing(small_disk: Path) -> None:
    directory = small_disk / "t-0"
    filler = small_disk / "fill"
    result = subprocess.run(
        [sys.executable, "-c", CLOSER, str(directory), str(filler)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, f"exit status {result.returncode}: {result.stderr}"
    word, end = result.stdout.split()
    assert word == "closed"
    assert "without its final time index entry" in result.stderr
    filler.unlink()
    log = load_log(directory, LogConfig.from_props({}), clean_shutdown=True)
    assert log.log_end_offset == int(end)
    assert [r.offset for r in read_log(log)] == list(range(int(end)))
    log.close()
