"""End-to-end latency benchmark: produce → broker → consume, per record, over time.

Not a test. The script starts a real ``samsa serve`` (or, with ``--rf 3``, ZooKeeper
and three brokers, ``samsa.testing.cluster``), creates a topic of one partition, then
runs two child processes of this same script:

- a **consumer** (confluent-kafka, ``assign()`` at the log end, no group commits) that
  stamps every record it gets with ``time.monotonic_ns()`` — CLOCK_MONOTONIC, one
  clock for every process of the machine — and writes ``(sent, received, acked)``
  rows to a file;
- a **producer** (confluent-kafka, ``acks=all``, ``linger.ms`` small) sending
  ``--rate`` records of 1 KiB per second for ``--seconds``, each record's first 8
  bytes its send time (``time.monotonic_ns()`` just before ``produce()``); it also
  records the time of each delivery report (produce → acknowledgement).

The parent reports, for end-to-end latency (received − sent) and for the
acknowledgement latency (acked − sent): p50/p90/p99/p99.9/max overall and per
second, writes a PNG of the per-second percentiles (``--plot``), and records what
separates broker stalls from machine noise:

- the broker's event-loop watchdog (``event.loop.stall.threshold.ms``, set low
  here, default 5 ms): ``samsa_eventloop_stalls_total`` and
  ``samsa_eventloop_longest_stall_seconds`` from its ``metrics.listeners``, and the
  stacks it logged;
- a **noise probe** in the parent: a thread sleeping 1 ms at a time, whose
  oversleep per second says how late the machine ran a ready thread;
- the load average before and after, and the CPU-seconds of broker(s) and clients.

    .venv/bin/python bench/latency_bench.py                       # single node, 30 s
    .venv/bin/python bench/latency_bench.py --rf 3                # three brokers
    .venv/bin/python bench/latency_bench.py --plot bench/latency.png

Results and analysis: bench/RESULTS.md, section "Latency".
"""

from __future__ import annotations

import argparse
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

CLK_TCK = os.sysconf("SC_CLK_TCK")
SIZE = 1024
TOPIC = "latency"
QUIET = {"log_level": 3}
STAMP = struct.Struct(">q")

PRODUCER_SETTINGS: dict[str, Any] = {
    "acks": "all",
    "linger.ms": 0,
    "compression.type": "none",
    "enable.idempotence": False,
    "socket.nagle.disable": True,
}
CONSUMER_SETTINGS: dict[str, Any] = {
    "group.id": "samsa-latency-bench",  # required by the Python client; nothing is committed
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": False,
    "fetch.min.bytes": 1,
    "fetch.wait.max.ms": 500,
    "fetch.error.backoff.ms": 0,
    "socket.nagle.disable": True,
    "check.crcs": False,
}


# -- the child processes ----------------------------------------------------------------------
def run_producer(bootstrap: str, rate: int, seconds: float, out: Path, linger_ms: float) -> int:
    from confluent_kafka import KafkaError, Message, Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, **PRODUCER_SETTINGS, "linger.ms": linger_ms, **QUIET}
    )
    acked: list[tuple[int, int]] = []
    errors: list[str] = []

    def report(error: KafkaError | None, message: Message) -> None:
        now = time.monotonic_ns()
        if error is not None:
            errors.append(str(error))
            return
        value = message.value()
        assert value is not None
        acked.append((STAMP.unpack_from(value)[0], now))

    filler = b"p" * (SIZE - STAMP.size)
    producer.produce(TOPIC, b"warm")  # warm: the connection and metadata
    producer.flush(30)
    print("ready", flush=True)
    sys.stdin.readline()  # the go: the consumer is in place
    start = time.monotonic_ns()
    total = int(rate * seconds)
    step = 1_000_000_000 / rate
    for i in range(total):
        due = start + int(i * step)
        while (now := time.monotonic_ns()) < due:
            producer.poll(min((due - now) / 1e9, 0.0005))
        producer.produce(TOPIC, STAMP.pack(time.monotonic_ns()) + filler, on_delivery=report)
        producer.poll(0)
    producer.flush(60)
    with open(out, "w") as f:
        json.dump({"acked": acked, "errors": errors[:10], "error_count": len(errors)}, f)
    return 0


def run_consumer(bootstrap: str, count: int, out: Path, wait_max_ms: int) -> int:
    from confluent_kafka import OFFSET_END, Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, **CONSUMER_SETTINGS,
         "fetch.wait.max.ms": wait_max_ms, **QUIET}
    )  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_END)])
    while not consumer.assignment():
        time.sleep(0.01)
    # Wait until the first fetch has gone out (the position is resolved), then say ready.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        consumer.poll(0.05)
        position = consumer.position([TopicPartition(TOPIC, 0)])[0].offset
        if position >= 0:
            break
    print("ready", flush=True)
    got: list[tuple[int, int]] = []
    idle_until = time.monotonic() + 120
    while len(got) < count and time.monotonic() < idle_until:
        message = consumer.poll(0.1)
        if message is None or message.error() is not None:
            continue
        now = time.monotonic_ns()
        value = message.value()
        if value is not None and len(value) == SIZE:
            got.append((STAMP.unpack_from(value)[0], now))
            idle_until = time.monotonic() + 10
    consumer.close()
    with open(out, "w") as f:
        json.dump({"received": got}, f)
    return 0


# -- the parent -------------------------------------------------------------------------------
def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def scrape(url: str) -> dict[str, float]:
    if not url.endswith("/metrics"):
        url = f"{url.rstrip('/')}/metrics"
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    found = {}
    for name in ("samsa_eventloop_stalls_total", "samsa_eventloop_longest_stall_seconds",
                 "samsa_gc_longest_pause_seconds"):  # fmt: skip
        match = re.search(rf"^{name} (\S+)$", text, re.M)
        found[name] = float(match.group(1)) if match else float("nan")
    for name in ("samsa_gc_collections_total", "samsa_gc_pause_seconds_total"):
        for generation, value in re.findall(rf'^{name}{{generation="(\d)"}} (\S+)$', text, re.M):
            found[f"{name}{generation}"] = float(value)
    return found


class NoiseProbe:
    """Sleeps 1 ms at a time and records how late each wake-up was (ms); with a
    ``write_to`` path, also times a 1 KiB ``pwrite`` appended to that file every 2 ms
    (the broker's append into the page cache, on the same file system)."""

    def __init__(self, write_to: Path | None = None) -> None:
        self.late: list[tuple[int, float]] = []
        self.writes: list[tuple[int, float]] = []
        self._write_to = write_to
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True)]
        if write_to is not None:
            self._threads.append(threading.Thread(target=self._write, daemon=True))

    def start(self) -> NoiseProbe:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            before = time.monotonic_ns()
            time.sleep(0.001)
            after = time.monotonic_ns()
            self.late.append((after, (after - before) / 1e6 - 1.0))

    def _write(self) -> None:
        assert self._write_to is not None
        fd = os.open(self._write_to, os.O_CREAT | os.O_WRONLY, 0o644)
        block, position = b"w" * SIZE, 0
        try:
            while not self._stop.wait(0.002):
                before = time.monotonic_ns()
                os.pwrite(fd, block, position)
                after = time.monotonic_ns()
                position += SIZE
                self.writes.append((after, (after - before) / 1e6))
        finally:
            os.close(fd)


def pct(ordered: list[float], q: float) -> float:
    if not ordered:
        return float("nan")
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999))


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    row = {name: pct(ordered, q) for name, q in QUANTILES}
    row["max"] = ordered[-1] if ordered else float("nan")
    return row


def fmt(row: dict[str, float]) -> str:
    return "  ".join(f"{k} {v:6.2f}" for k, v in row.items())


def start_brokers(args: argparse.Namespace, tmp: Path) -> tuple[Any, list[Any]]:
    overrides = [
        "metrics.listeners=http://127.0.0.1:0",
        f"event.loop.stall.threshold.ms={args.stall_ms}",
        *args.override,
    ]
    if args.rf == 1:
        from samsa.testing.broker import BrokerProcess

        broker = BrokerProcess(tmp / "broker", overrides).start(60)
        return broker, [broker]
    from samsa.testing.cluster import LocalCluster

    cluster = LocalCluster(tmp / "cluster", args.rf, overrides).start()
    return cluster, list(cluster.brokers.values())


def create_topic(bootstrap: str, rf: int) -> int:
    """Create the topic; the id of its leader once every replica is in sync."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    config = {"min.insync.replicas": "2"} if rf > 1 else {}
    admin.create_topics([NewTopic(TOPIC, 1, rf, config=config)])[TOPIC].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        meta = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
        parts = meta.partitions
        if meta.error is None and parts and parts[0].leader >= 0 and len(parts[0].isrs) == rf:
            return int(parts[0].leader)
        time.sleep(0.1)
    raise RuntimeError(f"{TOPIC} has no leader with a full ISR after 30 s")


def child(role: str, bootstrap: str, args: argparse.Namespace, out: Path) -> subprocess.Popen[str]:
    command = [sys.executable, __file__, "--role", role, "--bootstrap", bootstrap,
               "--rate", str(args.rate), "--seconds", str(args.seconds + args.warmup),
               "--out", str(out), "--linger-ms", str(args.linger_ms),
               "--fetch-wait-max-ms", str(args.fetch_wait_max_ms)]  # fmt: skip
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    if line.strip() != "ready":
        raise RuntimeError(f"{role} did not start: {line!r}")
    return process


def broker_line(before: dict[str, float], after: dict[str, float], stall_ms: int) -> str:
    """Event-loop stalls and garbage collections between two scrapes."""

    def delta(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    longest = after["samsa_eventloop_longest_stall_seconds"] * 1000
    collections = ", ".join(
        f"gen {g}: {delta(f'samsa_gc_collections_total{g}'):.0f} "
        f"({delta(f'samsa_gc_pause_seconds_total{g}') * 1000:.0f} ms)"
        for g in range(3)
    )
    longest_gc = after.get("samsa_gc_longest_pause_seconds", float("nan")) * 1000
    return (
        f"event-loop stalls > {stall_ms} ms: {delta('samsa_eventloop_stalls_total'):.0f}, "
        f"longest since start {longest:.1f} ms; garbage collections {collections}, "
        f"longest since start {longest_gc:.1f} ms"
    )


def log_sizes(brokers: list[Any]) -> list[int]:
    return [broker.log_path.stat().st_size for broker in brokers]


def stall_stacks(brokers: list[Any], since: list[int], limit: int = 5) -> list[str]:
    """The stacks the watchdog logged after ``since`` (innermost frames), per broker."""
    found = []
    for broker, offset in zip(brokers, since, strict=True):
        with open(broker.log_path, "rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
        for block in re.findall(
            r"the event loop has not run for (\d+) ms.*?it is in:\n(.*?)(?=\n\S|\Z)", text, re.S
        )[-limit:]:
            frames = [
                frame for frame in re.findall(r'File "([^"]+)", line (\d+), in (\S+)', block[1])
                if not frame[0].startswith("<frozen")
            ]  # fmt: skip
            tail = " <- ".join(f"{Path(f).name}:{n} {fn}" for f, n, fn in reversed(frames[-4:]))
            found.append(f"{broker.data_dir.name}: {block[0]} ms in {tail}")
    return found


def plot(
    path: Path, per_second: list[dict[str, float]], title: str, targets: dict[str, float]
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 3.6), dpi=80)
    seconds = list(range(len(per_second)))
    for name in ("p50", "p90", "p99", "p99.9", "max"):
        axis.plot(seconds, [row[name] for row in per_second], label=name, linewidth=1.2)
    for name, value in targets.items():
        axis.axhline(value, color="grey", linestyle="--", linewidth=0.8)
        axis.annotate(f"target {name} {value:g} ms", (0, value), fontsize=7, color="grey",
                      xytext=(2, 2), textcoords="offset points")  # fmt: skip
    axis.set_yscale("log")
    axis.set_xlabel("second of the run")
    axis.set_ylabel("end-to-end latency (ms)")
    axis.set_title(title, fontsize=10)
    axis.grid(True, which="both", alpha=0.3)
    axis.legend(fontsize=8, ncol=5, loc="upper right")
    figure.tight_layout()
    figure.savefig(path)


def parent(args: argparse.Namespace) -> int:
    import logging

    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory(prefix="samsa-latency-") as tmp_name:
        tmp = Path(tmp_name)
        owner, brokers = start_brokers(args, tmp)
        children: list[subprocess.Popen[str]] = []
        try:
            bootstrap = owner.bootstrap
            leader = create_topic(bootstrap, args.rf)
            for broker in brokers:  # an experiment: does the tail go with more CPU priority?
                if args.broker_nice:
                    os.setpriority(os.PRIO_PROCESS, broker.process.pid, args.broker_nice)
            for broker in brokers:  # the first scrape imports and builds what metrics need
                scrape(broker.metrics_url)
            total = int(args.rate * (args.seconds + args.warmup))
            consumer = child("consumer", bootstrap, args, tmp / "consumer.json")
            children.append(consumer)
            producer = child("producer", bootstrap, args, tmp / "producer.json")
            children.append(producer)
            assert producer.stdin is not None
            producer.stdin.write("go\n")
            producer.stdin.flush()
            time.sleep(args.warmup)  # start-up effects (first batches, lazy imports) left out
            metrics_before = [scrape(b.metrics_url) for b in brokers]
            logs_before = log_sizes(brokers)
            pids = [b.process.pid for b in brokers]
            cpu_before = [cpu_s(p) for p in pids]
            client_cpu_before = [cpu_s(consumer.pid), cpu_s(producer.pid)]
            load_before = loadavg()
            probe = NoiseProbe(tmp / "write-probe").start()
            started = time.monotonic_ns()
            if args.py_spy:
                spy = subprocess.Popen(
                    [args.py_spy, "record", "--nonblocking", "-r", "250",
                     "-d", str(int(args.seconds)), "-p", str(pids[max(leader - 1, 0)]), "-f", "raw",
                     "-o", args.py_spy_out],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )  # fmt: skip
            time.sleep(args.seconds)
            metrics_after = [scrape(b.metrics_url) for b in brokers]
            cpu = [cpu_s(p) - b for p, b in zip(pids, cpu_before, strict=True)]
            client_cpu = [cpu_s(consumer.pid) - client_cpu_before[0]]
            load_after = loadavg()
            probe.stop()
            if args.py_spy:
                spy.wait(60)
            producer.wait(args.warmup + 120)
            consumer.wait(180)
            stacks = stall_stacks(brokers, logs_before)
        finally:
            for process in children:
                if process.poll() is None:
                    process.kill()
            owner.close() if args.rf > 1 else owner.stop()
        produced = json.loads((tmp / "producer.json").read_text())
        received = json.loads((tmp / "consumer.json").read_text())["received"]
    acked = produced["acked"]
    end = started + int(args.seconds * 1e9)
    e2e = [(sent, (got - sent) / 1e6) for sent, got in received if started <= sent < end]
    ack = [(sent, (done - sent) / 1e6) for sent, done in acked if started <= sent < end]
    seconds = int(args.seconds)

    def by_second(rows: list[tuple[int, float]]) -> list[list[float]]:
        buckets: list[list[float]] = [[] for _ in range(seconds + 1)]
        for sent, value in rows:
            index = (sent - started) // 1_000_000_000
            if 0 <= index <= seconds:
                buckets[index].append(value)
        return buckets[:seconds]

    e2e_seconds = [summary(b) for b in by_second(e2e)]
    ack_seconds = [summary(b) for b in by_second(ack)]
    noise_seconds = by_second([(t, late) for t, late in probe.late])
    print(f"latency, {args.rate}/s x {SIZE} B for {args.seconds:.0f} s, acks=all, "
          f"replication factor {args.rf}, linger.ms={args.linger_ms}, "
          f"fetch.wait.max.ms={args.fetch_wait_max_ms}, fetch.min.bytes=1, "
          f"stall threshold {args.stall_ms} ms, broker nice {args.broker_nice} "
          f"{' '.join(args.override)}")  # fmt: skip
    print(f"  records: {total} sent ({len(e2e)} in the measured {args.seconds:.0f} s), "
          f"{len(acked)} acknowledged ({produced['error_count']} "
          f"errors {produced['errors'][:2]}), {len(received)} consumed")  # fmt: skip
    print(f"  end to end (ms):      {fmt(summary([v for _, v in e2e]))}")
    print(f"  produce→ack (ms):     {fmt(summary([v for _, v in ack]))}")
    all_noise = sorted(late for _, late in probe.late)
    print(f"  noise probe, 1 ms sleeps late by (ms): p50 {pct(all_noise, 0.5):.2f}  "
          f"p99 {pct(all_noise, 0.99):.2f}  p99.9 {pct(all_noise, 0.999):.2f}  "
          f"max {all_noise[-1] if all_noise else float('nan'):.2f}")  # fmt: skip
    writes = sorted(took for _, took in probe.writes)
    print(f"  write probe, 1 KiB pwrite every 2 ms next to the log (ms): p50 "
          f"{pct(writes, 0.5):.3f}  p99 {pct(writes, 0.99):.2f}  p99.9 {pct(writes, 0.999):.2f}  "
          f"max {writes[-1] if writes else float('nan'):.2f}")  # fmt: skip
    print(f"  load average before {load_before}, after {load_after}")
    per_record = sum(cpu) / max(args.rate * args.seconds, 1) * 1e6
    print(f"  broker CPU-s {', '.join(f'{c:.1f}' for c in cpu)} ({per_record:.0f} µs per record, "
          f"all brokers); consumer CPU-s {client_cpu[0]:.1f}")  # fmt: skip
    for index, (before, after) in enumerate(zip(metrics_before, metrics_after, strict=True)):
        print(f"  broker {index + 1}: {broker_line(before, after, args.stall_ms)}")
    for line in stacks:
        print(f"    stall: {line}")
    print("  per second: e2e p50 / p99 / p99.9 / max (ms) | ack p99 | probe max late (ms)")
    for index, (row, arow, noise) in enumerate(
        zip(e2e_seconds, ack_seconds, noise_seconds, strict=True)
    ):
        print(f"    {index:3d}  {row['p50']:6.2f} {row['p99']:7.2f} {row['p99.9']:7.2f} "
              f"{row['max']:7.2f} | {arow['p99']:7.2f} | {max(noise, default=0):6.2f}")  # fmt: skip
    if args.plot:
        plot(
            Path(args.plot),
            e2e_seconds,
            f"samsa end-to-end latency, {args.rate}/s x 1 KiB, acks=all, RF {args.rf} "
            f"(load {load_before})",
            {"p99": 2.0, "p99.9": 5.0} if args.rf == 1 else {"p99": 5.0},
        )
        print(f"  plot: {args.plot}")
    if args.json:
        Path(args.json).write_text(json.dumps({"e2e": e2e, "ack": ack, "started": started}))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rf", type=int, default=1, choices=(1, 3))
    parser.add_argument("--rate", type=int, default=5000)
    parser.add_argument("--seconds", type=float, default=30.0, help="measured seconds")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds sent, not measured")
    parser.add_argument("--py-spy", help="py-spy binary: sample the leader over the measured time")
    parser.add_argument("--py-spy-out", default="/tmp/latency-broker.txt")
    parser.add_argument("--linger-ms", type=float, default=0)
    parser.add_argument("--fetch-wait-max-ms", type=int, default=500)
    parser.add_argument("--stall-ms", type=int, default=5)
    parser.add_argument("--override", action="append", default=[], help="broker setting k=v")
    parser.add_argument("--broker-nice", type=int, default=0,
                        help="set the brokers' nice value (negative: ahead of the machine's "
                             "other work; needs root)")  # fmt: skip
    parser.add_argument("--plot", help="write a PNG of the per-second percentiles here")
    parser.add_argument("--json", help="write the raw latencies here")
    parser.add_argument("--role", choices=("producer", "consumer"), help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role == "producer":
        return run_producer(args.bootstrap, args.rate, args.seconds, Path(args.out),
                            args.linger_ms)  # fmt: skip
    if args.role == "consumer":
        return run_consumer(args.bootstrap, int(args.rate * args.seconds), Path(args.out),
                            args.fetch_wait_max_ms)  # fmt: skip
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
