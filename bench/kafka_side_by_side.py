"""samsa beside Apache Kafka 4.3.1 in one run: the same C load generator against each.

Not a test. Starts one Apache Kafka node (KRaft, broker and controller in one JVM,
``samsa.testing.kafka``: the jars of ``make jvm``, or ``SAMSA_KAFKA_CLASSPATH``) with the
JVM settings of Kafka's own start scripts (1 GiB heap, G1, the JIT's defaults) and one
``samsa serve`` (``samsa.testing.start_broker``), both on loopback in a temporary
directory on the same disk, and measures each with ``bench/loadgen/loadgen`` (C on
librdkafka: the generator of ``bench/loadgen.py``). A warm-up, not counted, first runs
each broker through a produce of 600,000 records, a consume and 25 s of the latency
phase (while the JIT compiles, Kafka's CPU per GB produced falls from ~14 to ~2.5 CPU-s
over its first GB or so, its CPU per one-record request about fivefold over ~20 s: a cold
JVM's first rounds measure its compiler); then each round runs
these phases, alternating brokers phase by phase (round 1 samsa first, round 2 Kafka
first, ...):

1. produce N records of 1 KiB to a new 1-partition topic, ``acks=1``, ``linger.ms=5``;
2. consume them from offset 0 (one consumer, ``assign``, no group);
3. the same produce with ``acks=all`` (replication factor 1 on both: the leader alone);
4. latency: 1 KiB records at a fixed rate (default 2,000/s for 10 s), ``acks=all``,
   ``linger.ms=0`` (one record per Produce request), time from ``produce()`` to the
   delivery report.

For every phase the generator reads the broker process's CPU time (``/proc/<pid>/stat``,
user + system, all its threads: the JVM's for Kafka) at the start and the end of its
measured window, so each phase gives broker CPU-seconds per GB and per record besides
the wall rates. Before each phase it waits (up to ``--quiet-wait`` s) for the rest of
the machine to go quiet. Also: time to ready (Kafka's includes formatting its storage
with one more JVM), idle CPU and RSS after start, RSS at the end. The table gives the
median of ``--repeat`` rounds (default 3) per figure and broker, and samsa/Kafka.

    SAMSA_KAFKA_CLASSPATH=... .venv/bin/python bench/kafka_side_by_side.py   # ~5 minutes
    .venv/bin/python bench/kafka_side_by_side.py --records 100000 --repeat 1 --warmup 50000
    make bench-kafka

Results: bench/RESULTS.md, section "samsa beside Kafka 4.3.1 (same run)".
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from e2e import machine_busy_s  # bench/e2e.py, a neighbour
from loadgen import Run, build, create_topic, delete_topic  # bench/loadgen.py
from samsa.testing import start_broker
from samsa.testing.kafka import KafkaCluster

# What Kafka's bin/kafka-server-start.sh and kafka-run-class.sh give the JVM.
KAFKA_HEAP = "1g"
KAFKA_JVM_OPTIONS = (
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
)
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@dataclass
class Target:
    """One broker under test: its name, address and the pid whose CPU is counted."""

    name: str
    bootstrap: str
    pid: int
    ready_s: float
    idle_cpu: float = float("nan")  # share of a core, idle after start
    rss_idle_mb: float = float("nan")
    rss_end_mb: float = float("nan")
    runs: dict[str, list[Run]] = field(default_factory=dict)


def wait_quiet(targets: list[Target], max_wait_s: float) -> None:
    """Wait until the processes other than the brokers and this one use < 5 % of a CPU
    for 1 s, at most ``max_wait_s`` (the machine is shared)."""
    deadline = time.monotonic() + max_wait_s
    while True:
        busy0, own0 = machine_busy_s(), time.process_time()
        brokers0 = sum(cpu_s(t.pid) for t in targets)
        time.sleep(1.0)
        others = machine_busy_s() - busy0 - (sum(cpu_s(t.pid) for t in targets) - brokers0)
        others -= time.process_time() - own0
        if others < 0.05 or time.monotonic() >= deadline:
            return


def wait_leader(bootstrap: str, topic: str, timeout: float = 30.0) -> None:
    """Wait until the topic's partition has a leader in the broker's metadata."""
    client = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = client.list_topics(topic, timeout=10).topics.get(topic)
        if (
            found is not None
            and found.error is None
            and found.partitions
            and all(p.leader >= 0 for p in found.partitions.values())
        ):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{topic}: no leader on {bootstrap} after {timeout} s")


def generate(binary: Path, target: Target, case: str, args: list[str], *, keep: bool = True) -> Run:
    load = os.getloadavg()[0]
    command = [str(binary), *args, "-b", target.bootstrap, "--broker-pid", str(target.pid)]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(
            f"{target.name} {case}: loadgen exited {done.returncode}\n"
            f"{done.stdout}\n{done.stderr[-2000:]}"
        )
    result = Run(case, json.loads(done.stdout), load)
    if result.data.get("broker_cpu") is None:
        raise RuntimeError(f"{target.name} {case}: the generator could not read pid {target.pid}")
    print(f"{target.name:<6} {result.line()}{'' if keep else '  (warm-up)'}", flush=True)
    if keep:
        target.runs.setdefault(case, []).append(result)
    return result


def uptime() -> str:
    done = subprocess.run(["uptime"], check=False, capture_output=True, text=True)
    return done.stdout.strip()


def new_topic(t: Target, name: str, made: dict[str, list[str]]) -> str:
    """Create a 1-partition topic on ``t`` and wait for its leader; ``made`` lists it."""
    create_topic(t.bootstrap, name, 1)
    wait_leader(t.bootstrap, name)
    made[t.name].append(name)
    return name


def measure_idle(targets: list[Target], seconds: float) -> None:
    before = {t.name: cpu_s(t.pid) for t in targets}
    started = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - started
    for t in targets:
        t.idle_cpu = (cpu_s(t.pid) - before[t.name]) / elapsed
        t.rss_idle_mb = rss_mb(t.pid)


# -- the table ------------------------------------------------------------------------------
def med(runs: list[Run], value: Callable[[Run], float]) -> float:
    return statistics.median(value(r) for r in runs)


def rows(target: Target, latency_case: str) -> dict[str, float]:
    """Every figure of the table for one broker: medians over its rounds."""
    out: dict[str, float] = {
        "time to ready, s": target.ready_s,
        "idle CPU after start, % of a core": 100 * target.idle_cpu,
        "RSS idle after start, MB": target.rss_idle_mb,
        "RSS at the end, MB": target.rss_end_mb,
    }
    for case in ("produce acks=1", "consume", "produce acks=all"):
        runs = target.runs.get(case, [])
        if not runs:
            continue
        out[f"{case}: records/s"] = med(runs, lambda r: float(r.data["records_per_s"]))
        out[f"{case}: MB/s"] = med(runs, lambda r: float(r.data["mb_per_s"]))
        out[f"{case}: broker CPU-s per GB"] = med(runs, lambda r: r.broker_cpu_s / r.gb)
        out[f"{case}: broker CPU µs per record"] = med(
            runs, lambda r: 1e6 * r.broker_cpu_s / float(r.data["records"])
        )
        out[f"{case}: broker CPU, % of a core"] = med(
            runs, lambda r: 100 * r.broker_cpu_s / r.seconds
        )
    runs = target.runs.get(latency_case, [])
    if runs:
        for q in ("p50", "p99", "p999", "max"):
            out[f"latency {q}, ms"] = med(runs, lambda r, q=q: float(r.data["latency_ms"][q]))
        out["latency: broker CPU µs per request"] = med(
            runs, lambda r: 1e6 * r.broker_cpu_s / float(r.data["records"])
        )
    return out


def print_table(samsa: Target, kafka: Target, latency_case: str, repeat: int) -> None:
    ours, theirs = rows(samsa, latency_case), rows(kafka, latency_case)
    width = max(len(k) for k in ours) + 2
    title = f"figure (median of {repeat})"
    header = f"{title:<{width}} {'samsa':>12} {'Kafka':>12} {'samsa/Kafka':>12}"
    print(header)
    print("-" * len(header))
    for key, value in ours.items():
        other = theirs.get(key, float("nan"))
        ratio = value / other if other else float("nan")
        print(f"{key:<{width}} {value:>12,.2f} {other:>12,.2f} {ratio:>12.2f}")


# -- main -----------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=300_000,
                        help="1 KiB records per produce phase (default 300,000)")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--linger-ms", default="5", help="produce phases (default 5)")
    parser.add_argument("--latency-rate", type=float, default=2000.0,
                        help="records/s of the latency phase (0: skip it)")  # fmt: skip
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=int, default=600_000,
                        help="records produced and consumed on each broker before the "
                        "measured rounds (default 600,000; 0: no warm-up)")  # fmt: skip
    parser.add_argument("--warmup-seconds", type=float, default=25.0,
                        help="then the latency phase for this long (default 25 s: Kafka's "
                        "JIT takes about 20 s of one-record requests to settle)")  # fmt: skip
    parser.add_argument("--heap", default=KAFKA_HEAP, help="Kafka's heap (default 1g)")
    parser.add_argument("--quiet-wait", type=float, default=3.0,
                        help="before each phase, wait up to this long for other processes "
                        "to go quiet (default 3 s)")  # fmt: skip
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--json", type=Path, help="write every run's JSON here")
    args = parser.parse_args(argv)

    binary = build()
    work = Path(tempfile.mkdtemp(prefix="samsa-vs-kafka-", dir=args.dir))
    uptime0 = uptime()
    load0 = os.getloadavg()
    print(f"start: {uptime0}", flush=True)
    kafka_cluster = KafkaCluster(work / "kafka", 1, heap=args.heap, jvm_options=KAFKA_JVM_OPTIONS)
    broker = None
    latency_case = f"latency acks=all {args.latency_rate:,.0f}/s"
    try:
        started = time.monotonic()
        broker = start_broker(work / "samsa" / "data")
        assert broker.process is not None
        samsa = Target("samsa", broker.bootstrap, broker.process.pid, time.monotonic() - started)
        started = time.monotonic()
        kafka_cluster.start()
        node = kafka_cluster.nodes[0]
        assert node.process is not None
        kafka = Target("Kafka", node.bootstrap, node.process.pid, time.monotonic() - started)
        targets = [samsa, kafka]
        print(f"samsa pid {samsa.pid} on {samsa.bootstrap} (ready in {samsa.ready_s:.1f} s); "
              f"Kafka pid {kafka.pid} on {kafka.bootstrap} (ready in {kafka.ready_s:.1f} s); "
              f"generator {binary}", flush=True)  # fmt: skip
        measure_idle(targets, 5.0)

        size = ["-s", "1024"]
        if args.warmup:  # not counted: the JVM compiles its hot paths in the first minute
            warm: dict[str, list[str]] = {t.name: [] for t in targets}
            for t in targets:
                topic = new_topic(t, "sbs-warmup", warm)
                produce = ["produce", "-t", topic, *size, "-l", args.linger_ms]
                generate(binary, t, "warm-up", [*produce, "-n", str(args.warmup)], keep=False)
                generate(binary, t, "warm-up", ["consume", "-t", topic], keep=False)
                generate(binary, t, "warm-up", [*produce, "-a", "all", "-l", "0",
                         "-r", str(args.latency_rate or 2000), "-d", str(args.warmup_seconds)],
                         keep=False)  # fmt: skip
                delete_topic(t.bootstrap, topic)
        for r in range(args.repeat):
            order = targets if r % 2 == 0 else targets[::-1]
            topics: dict[str, list[str]] = {t.name: [] for t in targets}

            for acks in ("1", "all"):
                produced: dict[str, str] = {}
                for t in order:
                    topic = new_topic(t, f"sbs-acks{acks}-{r}", topics)
                    produced[t.name] = topic
                    wait_quiet(targets, args.quiet_wait)
                    generate(binary, t, f"produce acks={acks}", [
                        "produce", "-t", topic, *size, "-a", acks, "-l", args.linger_ms,
                        "-n", str(args.records),
                    ])  # fmt: skip
                if acks == "1":
                    for t in order:
                        wait_quiet(targets, args.quiet_wait)
                        generate(binary, t, "consume", ["consume", "-t", produced[t.name]])
            if args.latency_rate > 0:
                for t in order:
                    topic = new_topic(t, f"sbs-latency-{r}", topics)
                    wait_quiet(targets, args.quiet_wait)
                    generate(binary, t, latency_case, [
                        "produce", "-t", topic, *size, "-a", "all", "-l", "0",
                        "-r", str(args.latency_rate), "-d", str(args.latency_seconds),
                    ])  # fmt: skip
            for t in targets:
                for topic in topics[t.name]:
                    delete_topic(t.bootstrap, topic)
        for t in targets:
            t.rss_end_mb = rss_mb(t.pid)
        load1 = os.getloadavg()
        uptime1 = uptime()
        broker.stop()
        kafka_cluster.stop()
    finally:
        if broker is not None:
            broker.kill()
        for n in kafka_cluster.nodes:
            n.kill()
        shutil.rmtree(work, ignore_errors=True)

    print()
    print(f"start: {uptime0}")
    print(f"end:   {uptime1}")
    print(f"records of 1 KiB, 1 partition, replication factor 1, linger.ms={args.linger_ms} "
          f"(latency: 0), {args.records:,} records a produce phase; Kafka heap {args.heap}, "
          f"{' '.join(KAFKA_JVM_OPTIONS)}")  # fmt: skip
    print_table(samsa, kafka, latency_case, args.repeat)
    if args.json:
        record: dict[str, Any] = {
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "load_average": {"start": load0, "end": load1},
            "uptime": {"start": uptime0, "end": uptime1},
            "brokers": {
                t.name: {
                    "ready_s": t.ready_s,
                    "idle_cpu": t.idle_cpu,
                    "rss_idle_mb": t.rss_idle_mb,
                    "rss_end_mb": t.rss_end_mb,
                    "runs": [
                        {"case": c, "load": one.load, **one.data}
                        for c, group in t.runs.items()
                        for one in group
                    ],
                }
                for t in (samsa, kafka)
            },
        }
        args.json.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
