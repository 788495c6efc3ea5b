"""Thousands of partitions and connections on one ``samsa serve``.

Three runs, each against its own real broker process (``samsa.testing``'s
``BrokerProcess``):

``requests``
    The broker's CPU time for *the same* request with ``--topics`` topics of
    ten partitions on the broker (10 topics: 100 partitions; 1,000 topics:
    10,000). A raw client sends each request ``--requests`` times, one at a
    time: Produce of one 100 B record to one partition (v9 by name, v13 by
    topic id), a sessionless Fetch of the ten partitions of one topic (v12 by
    name, v16 by id, ``max_wait`` 0), ListOffsets, Metadata of one topic,
    OffsetCommit and OffsetFetch of one topic's ten partitions. CPU is the
    broker's user+system time from ``/proc/<pid>/stat`` over the run.

``clients``
    One topic of ``--partitions`` partitions; ``--producers`` confluent-kafka
    producers and ``--consumers`` consumers spread over ``--processes`` client
    processes of each kind. Producers send ``--rate`` records/s in total (100 B,
    acks=1, keys spread over every partition); each consumer is assigned its
    slice of the partitions (``assign``, no group). Reported: records produced
    and consumed per second, produce latency (send to delivery report, p50/p99),
    the broker's CPU (cores used), RSS and descriptors, the load average.

``connections``
    ``--connections`` idle connections (each sends one ApiVersions v0 and then
    nothing), opened one after another as fast as the kernel takes them; the
    accept rate is the count over the time until every one was answered; then
    one active client doing Produce (acks=1) + Fetch round trips. Reported:
    accepts per second, RSS per connection, the broker's CPU while everything
    is idle, and the active client's round-trip latency with and without the
    idle connections.

Usage::

    PYTHONPATH=src:. .venv/bin/python bench/scale_bench.py requests --topics 10
    PYTHONPATH=src:. .venv/bin/python bench/scale_bench.py requests --topics 1000
    PYTHONPATH=src:. .venv/bin/python bench/scale_bench.py clients
    PYTHONPATH=src:. .venv/bin/python bench/scale_bench.py connections

Prints one line per figure. Nothing is asserted: see ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import queue
import resource
import socket
import struct
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tests.rawclient import read_response, recv_exactly, request_frame

from samsa.records.builder import build_batch
from samsa.testing.broker import BrokerProcess

QUIET = {"log_level": 3}
HOT = "hot"
"""The topic every request of the ``requests`` run names (ten partitions)."""
GROUP = "scale-group"


# -- the broker process ---------------------------------------------------------------------
def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def pid_of(broker: BrokerProcess) -> int:
    assert broker.process is not None
    return broker.process.pid


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def raise_descriptor_limit() -> int:
    """Soft ``RLIMIT_NOFILE`` up to the hard limit (the broker inherits it)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def start_broker(data: Path) -> BrokerProcess:
    return BrokerProcess(data).start(120)


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    names = list(topics)
    for start in range(0, len(names), 200):  # a few CreateTopics, not one huge one
        chunk = names[start : start + 200]
        futures = admin.create_topics(
            [NewTopic(n, topics[n], 1) for n in chunk], request_timeout=300
        )
        for future in futures.values():
            future.result(300)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- requests: the cost of one request against the broker's partition count -------------------
class RawConnection:
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=60)
        self.correlation_id = 0

    def call(self, api_key: int, version: int, values: dict[str, Any]) -> Any:
        self.correlation_id += 1
        frame = request_frame(api_key, version, values, correlation_id=self.correlation_id)
        self.sock.sendall(frame)
        return read_response(self.sock, api_key, version)

    def send_raw(self, frame: bytes) -> None:
        """Send a prepared frame and skip its response (timed loops: no decoding)."""
        self.sock.sendall(frame)
        size = struct.unpack(">i", recv_exactly(self.sock, 4))[0]
        recv_exactly(self.sock, size)

    def close(self) -> None:
        self.sock.close()


def hot_topic_id(conn: RawConnection) -> uuid.UUID:
    response = conn.call(3, 12, {"topics": [{"name": HOT, "topic_id": None}],
                                 "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": False})  # fmt: skip
    return response.topics[0].topic_id  # type: ignore[no-any-return]


def request_kinds(topic_id: uuid.UUID) -> dict[str, tuple[int, int, dict[str, Any]]]:
    """The requests timed: name -> (api key, version, values)."""
    batch = build_batch([b"x" * 100])
    ten = range(10)
    fetch_partitions = [
        {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
         "current_leader_epoch": -1, "log_start_offset": -1, "last_fetched_epoch": -1}
        for p in ten
    ]  # fmt: skip
    fetch = {
        "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 50 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "forgotten_topics_data": [], "rack_id": "",
    }  # fmt: skip
    produce = {"transactional_id": None, "acks": 1, "timeout": 30_000}
    return {
        "Produce v9 (1 partition)": (0, 9, {**produce, "topic_data": [
            {"name": HOT, "partition_data": [{"index": 0, "records": batch}]}]}),
        "Produce v13 (by id)": (0, 13, {**produce, "topic_data": [
            {"topic_id": topic_id, "partition_data": [{"index": 0, "records": batch}]}]}),
        "Fetch v12 (10 partitions)": (1, 12, {**fetch, "topics": [
            {"topic": HOT, "partitions": fetch_partitions}]}),
        "Fetch v16 (by id)": (1, 16, {**fetch, "replica_state": {"replica_id": -1,
            "replica_epoch": -1}, "cluster_id": None, "topics": [
            {"topic_id": topic_id, "partitions": fetch_partitions}]}),
        "ListOffsets v7 (10)": (2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": HOT, "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                          "timestamp": -1} for p in ten]}]}),
        "Metadata v12 (1 topic)": (3, 12, {"topics": [{"name": HOT, "topic_id": None}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False}),
        "OffsetCommit v8 (10)": (8, 8, {"group_id": GROUP, "generation_id_or_member_epoch": -1,
            "member_id": "", "group_instance_id": None, "topics": [{"name": HOT, "partitions": [
                {"partition_index": p, "committed_offset": 1, "committed_leader_epoch": -1,
                 "committed_metadata": ""} for p in ten]}]}),
        "OffsetFetch v7 (10)": (9, 7, {"group_id": GROUP, "require_stable": False,
            "topics": [{"name": HOT, "partition_indexes": list(ten)}]}),
    }  # fmt: skip


def run_requests(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        broker = start_broker(Path(tmp) / "data")
        pid = pid_of(broker)
        try:
            # The named topic last: a scan of the topic table finds it last.
            topics = {f"t{i:05d}": 10 for i in range(args.topics - 1)} | {HOT: 10}
            started = time.monotonic()
            create_topics(broker.bootstrap, topics)
            partitions = sum(topics.values())
            took = time.monotonic() - started
            print(f"{partitions} partitions in {len(topics)} topics created in {took:.1f} s; "
                  f"RSS {rss_mb(pid):.0f} MB", flush=True)  # fmt: skip
            conn = RawConnection(broker.bootstrap)
            kinds = request_kinds(hot_topic_id(conn))
            for name, (api_key, version, values) in kinds.items():
                response = conn.call(api_key, version, values)  # checked once, then timed
                check_response(name, response)
            time.sleep(2)  # let creation's background work settle
            idle_start = cpu_seconds(pid)
            time.sleep(5)
            idle = (cpu_seconds(pid) - idle_start) / 5
            print(f"{partitions} partitions: idle broker CPU {idle * 100:.1f} % of a core",
                  flush=True)  # fmt: skip
            for name, (api_key, version, values) in kinds.items():
                frames = [
                    request_frame(api_key, version, values, correlation_id=i + 1)
                    for i in range(args.requests)
                ]
                start_cpu, start = cpu_seconds(pid), time.monotonic()
                for frame in frames:
                    conn.send_raw(frame)
                used = cpu_seconds(pid) - start_cpu
                wall = time.monotonic() - start
                print(f"{partitions:6d} partitions, {name:26s}: broker CPU "
                      f"{used / args.requests * 1e6:7.0f} µs/request "
                      f"({args.requests / wall:6.0f} requests/s; load {load_average()})",
                      flush=True)  # fmt: skip
            conn.close()
        finally:
            broker.stop(300)


def check_response(name: str, response: Any) -> None:
    """Every timed request must succeed: a bench of errors measures nothing."""
    codes: list[int] = [int(getattr(response, "error_code", 0) or 0)]
    for topic in getattr(response, "responses", None) or getattr(response, "topics", ()):
        for p in getattr(topic, "partitions", None) or getattr(topic, "partition_responses", ()):
            codes.append(int(p.error_code))
        codes.append(int(getattr(topic, "error_code", 0) or 0))
    if any(codes):
        raise SystemExit(f"{name} failed: {response}")


# -- clients: many producers and consumers on many partitions -------------------------------
def producer_process(  # noqa: PLR0917 (a process target takes positional arguments)
    bootstrap: str, topic: str, count: int, rate: float, seconds: float, sync: Any
) -> None:
    """``count`` producers; once ``sync.go`` is set they send ``rate`` records/s between
    them for ``seconds``."""
    producers = [
        Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1, **QUIET})
        for _ in range(count)
    ]
    latencies: list[float] = []
    errors = 0

    def report(sent: float) -> Callable[[Any, Any], None]:
        def done(err: Any, _msg: Any) -> None:
            nonlocal errors
            if err is not None:
                errors += 1
            else:
                latencies.append(time.monotonic() - sent)

        return done

    for producer in producers:  # metadata first: the timed run starts warm
        producer.list_topics(topic, timeout=600)
    sync.ready.put(count)
    sync.go.wait()
    value = b"x" * 100
    interval = 1 / rate
    start = time.monotonic()
    sent = 0
    while True:
        now = time.monotonic()
        if now - start >= seconds:
            break
        due = int((now - start) / interval)
        while sent < due:
            producer = producers[sent % count]
            producer.produce(topic, value, key=str(sent).encode(), on_delivery=report(now))
            sent += 1
        for producer in producers:
            producer.poll(0)
        time.sleep(0.01)  # a tick: polling 25 clients more often costs the machine's CPU
    for producer in producers:
        producer.flush(60)
    sync.out.put(("produced", sent, errors, latencies))


def consumer_process(bootstrap: str, topic: str, slices: list[list[int]], sync: Any) -> None:
    """One assigned consumer per slice of partitions, reading from the end until
    ``sync.stop`` is set."""
    consumers = []
    for n, partitions in enumerate(slices):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"scale-{n}",
                             "enable.auto.commit": False, "fetch.wait.max.ms": 500,
                             **QUIET})  # fmt: skip
        consumer.assign([KafkaTopicPartition(topic, p, -1) for p in partitions])  # -1: end
        consumers.append(consumer)
    for consumer in consumers:  # assigned and fetching before anything is produced
        consumer.consume(1, timeout=0.1)
    sync.ready.put(len(consumers))
    received = 0
    while not sync.stop.is_set():
        for consumer in consumers:
            for message in consumer.consume(500, timeout=0):
                if message.error() is None:
                    received += 1
        time.sleep(0.05)
    for consumer in consumers:
        consumer.close()
    sync.out.put(("consumed", received, 0, []))


class Sync:
    """What the client processes and the benchmark share."""

    def __init__(self, ctx: Any) -> None:
        self.ready, self.out = ctx.Queue(), ctx.Queue()
        self.go, self.stop = ctx.Event(), ctx.Event()


def wait_ready(sync: Sync, processes: int, pid: int, what: str) -> None:
    """Wait for ``processes`` to say they are ready; print what their start-up cost."""
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    clients = sum(sync.ready.get(timeout=900) for _ in range(processes))
    took = time.monotonic() - t0
    print(f"{clients} {what} started in {took:.1f} s, broker CPU "
          f"{(cpu_seconds(pid) - cpu0) / took * 100:.0f} % of a core meanwhile "
          f"(load {load_average()})", flush=True)  # fmt: skip


def metadata_cost(bootstrap: str, topic: str, pid: int, count: int = 20) -> None:
    """The broker's CPU for one Metadata v12 request of ``topic``."""
    conn = RawConnection(bootstrap)
    frame = request_frame(3, 12, {"topics": [{"name": topic, "topic_id": None}],
                                  "allow_auto_topic_creation": False,
                                  "include_topic_authorized_operations": False})  # fmt: skip
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    for _ in range(count):
        conn.send_raw(frame)
    used, took = cpu_seconds(pid) - cpu0, time.monotonic() - t0
    conn.close()
    print(f"Metadata v12 of {topic!r}: broker CPU {used / count * 1000:.1f} ms/request, "
          f"{took / count * 1000:.1f} ms round trip", flush=True)  # fmt: skip


def run_clients(args: argparse.Namespace) -> None:
    raise_descriptor_limit()
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        broker = start_broker(Path(tmp) / "data")
        pid = pid_of(broker)
        try:
            started = time.monotonic()
            create_topics(broker.bootstrap, {"scale": args.partitions})
            print(f"{args.partitions} partitions created in {time.monotonic() - started:.1f} s; "
                  f"RSS {rss_mb(pid):.0f} MB, {fd_count(pid)} descriptors", flush=True)  # fmt: skip
            metadata_cost(broker.bootstrap, "scale", pid)
            sync = Sync(ctx)
            per = args.partitions // args.consumers
            slices = [list(range(i * per, (i + 1) * per)) for i in range(args.consumers)]
            consumers = [
                ctx.Process(target=consumer_process, args=(
                    broker.bootstrap, "scale", slices[n :: args.processes], sync))
                for n in range(args.processes)
            ]  # fmt: skip
            for w in consumers:
                w.start()
            wait_ready(sync, len(consumers), pid, "consumers")
            count = args.producers // args.processes
            producers = [
                ctx.Process(target=producer_process, args=(
                    broker.bootstrap, "scale", count, args.rate / args.processes,
                    args.seconds, sync))
                for _ in range(args.processes)
            ]  # fmt: skip
            for p in producers:
                p.start()
            wait_ready(sync, len(producers), pid, "producers")
            time.sleep(5)
            rss_before, fds_before = rss_mb(pid), fd_count(pid)
            client_pids = [w.pid for w in consumers + producers if w.pid is not None]
            clients0 = sum(cpu_seconds(p) for p in client_pids)
            cpu0, t0 = cpu_seconds(pid), time.monotonic()
            sync.go.set()
            if args.profile:  # where the broker's time goes (py-spy, 20 s, collapsed stacks)
                import subprocess

                subprocess.Popen(["py-spy", "record", "-p", str(pid), "-d", "20", "-r", "50",
                                  "--format", "raw", "-o", args.profile])  # fmt: skip
            peak_rss = 0.0
            results: list[tuple[str, int, int, list[float]]] = []
            deadline = time.monotonic() + args.seconds + 600
            # Results are read as they come: a process exits only once its queue is drained.
            while len(results) < len(producers):
                peak_rss = max(peak_rss, rss_mb(pid))
                try:
                    results.append(sync.out.get(timeout=1))
                except queue.Empty:
                    if time.monotonic() > deadline:
                        raise
            took = time.monotonic() - t0
            cpu = (cpu_seconds(pid) - cpu0) / took
            clients_cpu = (sum(cpu_seconds(p) for p in client_pids) - clients0) / took
            print(f"load average at the end of the produce: {load_average()}; the client "
                  f"processes used {clients_cpu * 100:.0f} % of a core", flush=True)  # fmt: skip
            time.sleep(5)  # the consumers catch up
            cpu1 = cpu_seconds(pid)
            time.sleep(10)
            idle = (cpu_seconds(pid) - cpu1) / 10
            sync.stop.set()
            results += [sync.out.get(timeout=300) for _ in consumers]
            for w in consumers + producers:
                w.join(60)
            produced = sum(r[1] for r in results if r[0] == "produced")
            failed = sum(r[2] for r in results if r[0] == "produced")
            consumed = sum(r[1] for r in results if r[0] == "consumed")
            latencies = [x for r in results if r[0] == "produced" for x in r[3]]
            print(
                f"{args.partitions} partitions, {args.producers} producers, {args.consumers} "
                f"consumers, {args.rate:.0f} records/s asked: produced {produced} "
                f"({produced / args.seconds:.0f}/s, {failed} failed), consumed {consumed}; "
                f"produce latency p50 {percentile(latencies, 0.5) * 1000:.1f} ms, "
                f"p99 {percentile(latencies, 0.99) * 1000:.1f} ms, "
                f"max {max(latencies, default=0) * 1000:.0f} ms; broker CPU "
                f"{cpu * 100:.0f} % of a core while producing, {idle * 100:.0f} % with "
                f"every client idle; RSS {rss_before:.0f} MB with the clients, peak "
                f"{peak_rss:.0f} MB; descriptors {fds_before} -> {fd_count(pid)}",
                flush=True,
            )
        finally:
            broker.stop(300)


# -- connections: thousands of idle clients and one active one -------------------------------
API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 1, 4) + b"idle"


def active_round_trips(bootstrap: str, count: int) -> list[float]:
    """``count`` Produce (acks=1, one record) + Fetch round trips on one connection."""
    conn = RawConnection(bootstrap)
    batch = build_batch([b"x" * 100])
    produce = request_frame(0, 9, {"transactional_id": None, "acks": 1, "timeout": 30_000,
        "topic_data": [{"name": HOT, "partition_data": [{"index": 0, "records": batch}]}],
    })  # fmt: skip
    fetch = request_frame(1, 12, {"replica_id": -1, "max_wait": 0, "min_bytes": 0,
        "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": HOT, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                  "partition_max_bytes": 4096}]}],
        "forgotten_topics_data": []})  # fmt: skip
    times = []
    for _ in range(count):
        start = time.monotonic()
        conn.send_raw(produce)
        conn.send_raw(fetch)
        times.append(time.monotonic() - start)
    conn.close()
    return times


def run_connections(args: argparse.Namespace) -> None:
    limit = raise_descriptor_limit()
    print(f"RLIMIT_NOFILE {limit}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        broker = start_broker(Path(tmp) / "data")
        pid = pid_of(broker)
        host, port = broker.bootstrap.rsplit(":", 1)
        sockets: list[socket.socket] = []
        try:
            create_topics(broker.bootstrap, {HOT: 10})
            active_round_trips(broker.bootstrap, 200)  # warm
            alone = active_round_trips(broker.bootstrap, args.round_trips)
            time.sleep(2)
            rss0, cpu0 = rss_mb(pid), cpu_seconds(pid)
            time.sleep(10)
            idle0 = (cpu_seconds(pid) - cpu0) / 10
            hello = struct.pack(">i", len(API_VERSIONS_V0)) + API_VERSIONS_V0
            start = time.monotonic()
            for _ in range(args.connections):  # a Kafka client that says hello, then is quiet
                sock = socket.create_connection((host, int(port)), timeout=60)
                sock.sendall(hello)
                sockets.append(sock)
            opened = time.monotonic() - start
            for sock in sockets:
                size = struct.unpack(">i", recv_exactly(sock, 4))[0]
                recv_exactly(sock, size)
            answered = time.monotonic() - start
            time.sleep(2)
            rss1, fds = rss_mb(pid), fd_count(pid)
            cpu1 = cpu_seconds(pid)
            time.sleep(10)
            idle1 = (cpu_seconds(pid) - cpu1) / 10
            busy = active_round_trips(broker.bootstrap, args.round_trips)
            print(
                f"{args.connections} connections opened in {opened:.2f} s, all answered "
                f"ApiVersions after {answered:.2f} s ({args.connections / answered:.0f} "
                f"connections accepted and served per second); "
                f"broker RSS {rss0:.0f} -> {rss1:.0f} MB "
                f"({(rss1 - rss0) * 1024 / args.connections:.1f} KB per connection), "
                f"{fds} descriptors; idle broker CPU {idle0 * 100:.1f} % -> "
                f"{idle1 * 100:.1f} % of a core",
                flush=True,
            )
            for label, times in (("alone", alone), (f"with {args.connections} idle", busy)):
                print(f"active client {label}: produce+fetch round trip p50 "
                      f"{percentile(times, 0.5) * 1000:.2f} ms, p99 "
                      f"{percentile(times, 0.99) * 1000:.2f} ms (load {load_average()})",
                      flush=True)  # fmt: skip
        finally:
            for sock in sockets:
                sock.close()
            broker.stop(300)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    runs = parser.add_subparsers(dest="run", required=True)
    requests = runs.add_parser("requests")
    requests.add_argument("--topics", type=int, default=1000)
    requests.add_argument("--requests", type=int, default=2000)
    clients = runs.add_parser("clients")
    clients.add_argument("--partitions", type=int, default=10_000)
    clients.add_argument("--producers", type=int, default=100)
    clients.add_argument("--consumers", type=int, default=100)
    clients.add_argument("--processes", type=int, default=4)
    clients.add_argument("--rate", type=float, default=2000.0)
    clients.add_argument("--seconds", type=float, default=60.0)
    clients.add_argument("--profile", help="py-spy the broker for 20 s into this file")
    connections = runs.add_parser("connections")
    connections.add_argument("--connections", type=int, default=5000)
    connections.add_argument("--round-trips", type=int, default=2000)
    args = parser.parse_args()
    {"requests": run_requests, "clients": run_clients, "connections": run_connections}[args.run](
        args
    )


if __name__ == "__main__":
    main()
