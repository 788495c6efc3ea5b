"""Broker CPU per byte and per record of Produce: prebuilt requests pipelined on one connection.

The client sends the same Produce v9 request (one partition, one uncompressed
batch of ``--record-size`` records filling ``--batch-bytes``) over one socket,
keeping ``--inflight`` requests outstanding, and reads the responses; it does
no per-record work, so on a loaded 2-core machine the figure that holds is the
broker's CPU (``/proc/<pid>/stat``, user + system) per GB and per million
records, not the wall-clock rate. ``--strace`` attaches ``strace -c -f`` to the
broker for the timed phase and prints the system calls per request (``mmap``,
``munmap``, ``brk`` show whether buffers are allocated per request);
``--py-spy PATH`` samples the broker's threads for the timed phase and prints
the lines where its samples are (self), the largest first.

    PYTHONPATH=src:. .venv/bin/python bench/produce_ingest.py --record-size 1024 --requests 800
    PYTHONPATH=src:. .venv/bin/python bench/produce_ingest.py --record-size 100 --strace
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic
from tests.rawclient import recv_exactly, request_frame

from samsa.records import RecordBatchBuilder
from samsa.testing import start_broker

PRODUCE_VERSION = 9
TOPIC = "ingest"


def produce_frame(batch: bytes, acks: int, correlation_id: int) -> bytes:
    body = {"acks": acks, "timeout": 30_000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]}  # fmt: skip
    return request_frame(0, PRODUCE_VERSION, body, correlation_id, "ingest")


def one_batch(record_size: int, batch_bytes: int) -> tuple[bytes, int]:
    builder = RecordBatchBuilder()
    value = os.urandom(record_size)
    count = 0
    while builder.estimated_size + record_size + 16 < batch_bytes:
        builder.append(value)
        count += 1
    return bytes(builder.build()), count


def cpu_seconds(pid: int) -> tuple[float, float]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def run(sock: socket.socket, frame: bytes, requests: int, inflight: int) -> None:
    sent = received = 0
    while received < requests:
        while sent < requests and sent - received < inflight:
            sock.sendall(frame)
            sent += 1
        size = struct.unpack(">i", recv_exactly(sock, 4))[0]
        recv_exactly(sock, size)
        received += 1


def strace_summary(path: Path) -> dict[str, int]:
    calls: dict[str, int] = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0][0].isdigit() and not parts[-1].startswith("-"):
            try:
                calls[parts[-1]] = int(parts[3])
            except ValueError:
                continue
    return calls


def print_profile(path: Path, top: int = 25) -> None:
    self_samples: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        leaf = stack.rsplit(";", 1)[-1]
        self_samples[leaf] = self_samples.get(leaf, 0) + int(count)
        total += int(count)
    print(f"py-spy: {total} samples of the broker's threads (event loop, flush workers)")
    print("self, the largest first:")
    for leaf, count in sorted(self_samples.items(), key=lambda item: -item[1])[:top]:
        print(f"  {100 * count / total:5.1f}%  {leaf}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--batch-bytes", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--inflight", type=int, default=5)
    parser.add_argument("--acks", type=int, default=1, choices=(1, -1))
    parser.add_argument("--strace", action="store_true")
    parser.add_argument("--py-spy", metavar="PATH", help="a py-spy binary")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()

    batch, records_per_batch = one_batch(args.record_size, args.batch_bytes)
    frame = produce_frame(batch, args.acks, 1)
    workdir = Path(tempfile.mkdtemp(prefix="samsa-ingest-"))
    broker = start_broker(workdir / "data", overrides=args.override)
    try:
        assert broker.process is not None
        pid = broker.process.pid
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 3})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        with socket.create_connection((broker.host, broker.port)) as sock:
            run(sock, frame, 30, args.inflight)  # warm-up: schemas, buffers, page cache
            tracer: Any = None
            trace_path = workdir / "strace.txt"
            if args.strace:
                tracer = subprocess.Popen(
                    ["strace", "-c", "-f", "-p", str(pid), "-o", str(trace_path)],
                    stderr=subprocess.DEVNULL,
                )
                time.sleep(1.0)  # attached
            profile_path = workdir / "profile.txt"
            if args.py_spy:
                tracer = subprocess.Popen(
                    [args.py_spy, "record", "--rate", "1000", "--nonblocking", "--format", "raw",
                     "-o", str(profile_path), "-p", str(pid)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )  # fmt: skip
                time.sleep(1.0)
            load_before = os.getloadavg()
            user0, sys0 = cpu_seconds(pid)
            start = time.perf_counter()
            run(sock, frame, args.requests, args.inflight)
            wall = time.perf_counter() - start
            user1, sys1 = cpu_seconds(pid)
            if tracer is not None:
                tracer.send_signal(signal.SIGINT)
                tracer.wait(30)
        cpu = (user1 - user0) + (sys1 - sys0)
        total_bytes = len(batch) * args.requests
        total_records = records_per_batch * args.requests
        print(f"record {args.record_size} B, batch {len(batch):,} B "
              f"({records_per_batch:,} records), {args.requests} requests, "
              f"{args.inflight} in flight, acks={args.acks}")  # fmt: skip
        print(f"wall {wall:.2f} s: {total_bytes / wall / 1e6:,.0f} MB/s, "
              f"{total_records / wall:,.0f} records/s")  # fmt: skip
        print(f"broker CPU {cpu:.2f} s (user {user1 - user0:.2f}, sys {sys1 - sys0:.2f}): "
              f"{cpu / (total_bytes / 1e9):.3f} CPU-s/GB, "
              f"{cpu / total_records * 1e6:.3f} CPU-µs/record, "
              f"{cpu / args.requests * 1e3:.3f} CPU-ms/request")  # fmt: skip
        print(f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}")
        if tracer is not None:
            calls = strace_summary(trace_path) if args.strace else {}
            shown = ("read", "recvfrom", "write", "writev", "pwrite64", "mmap", "munmap", "brk",
                     "mremap", "epoll_wait")  # fmt: skip
            if args.py_spy:
                print_profile(profile_path)
                return
            print("syscalls per request (strace -c, timed phase): " + ", ".join(
                f"{name} {calls.get(name, 0) / args.requests:.2f}" for name in shown))  # fmt: skip
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
