"""Where the Spark data source's time goes, sampled inside PySpark's Python workers.

    python bench/spark_profile.py [--rows 300000] [--seconds 20] [--out DIR]

Starts its own broker in a temporary directory and a local[2] session, fills a
2-partition topic with ``--rows`` records of 100 B, and then, for each of two
workloads — read (``sum(length(value))`` of the topic) and write (a generated
DataFrame of 100 B rows to a topic with ``df.write.format("samsa")``) — repeats the
query for ``--seconds`` while ``py-spy record --subprocesses`` samples the Python
daemon Spark forks its workers from (raw, 200 samples a second, only threads on a CPU).
Meanwhile it reads the CPU ticks of the JVM, the broker, the daemon and its workers
from ``/proc``. Prints, for each workload, rows/s, CPU seconds per million rows by
process, and the worker samples' shares by category (samsa's consumer/decoder or
encoder/producer, PySpark's own serialization and worker protocol, waiting); the raw
profiles are kept in ``--out``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from samsa import Admin, Producer
from samsa.client.admin import NewTopic
from samsa.testing import start_broker

PY_SPY = str(Path(sys.executable).with_name("py-spy"))
TICK = os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    """Children of every thread of ``pid`` (the JVM forks from threads other than main)."""
    out = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return []
    for task in tasks:
        with contextlib.suppress(OSError):
            out += [int(p) for p in (task / "children").read_text().split()]
    return out


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        for child in _children(todo.pop()):
            out.append(child)
            todo.append(child)
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


class _Cpu:
    """CPU seconds of the JVM, the daemon and its workers (summed over the workers seen)."""

    def __init__(self, java: int, daemon: int, broker: int) -> None:
        self.java, self.daemon, self.broker = java, daemon, broker
        self.workers: dict[int, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self.stop.wait(0.05):
            for pid in _children(self.daemon):
                self.workers[pid] = _cpu_s(pid)

    def snapshot(self) -> dict[str, float]:
        for pid in _children(self.daemon):
            self.workers[pid] = _cpu_s(pid)
        return {
            "jvm": _cpu_s(self.java),
            "broker": _cpu_s(self.broker),
            "python workers": _cpu_s(self.daemon) + sum(self.workers.values()),
        }


CATEGORIES = [
    ("samsa: client I/O thread (event loop, in C below this frame)", "LoopThread._run"),
    # (category, a substring of a frame "function (file)"), first match from the leaf up wins
    ("samsa: client (consumer/producer) in Python", "samsa/client"),
    ("samsa: record decoding to Arrow (columns.py)", "samsa/spark/columns.py"),
    ("samsa: record encoding from Arrow (batches.py)", "samsa/spark/batches.py"),
    ("samsa: records module", "samsa/records"),
    ("samsa: protocol", "samsa/protocol"),
    ("samsa: spark reader/writer", "samsa/spark"),
    ("pyspark: gc.collect() after each task", "(daemon.py:275)"),
    ("pyspark: Arrow serialization / worker protocol", "(serializers.py:"),
    ("pyspark: Arrow serialization / worker protocol", "(conversion.py:"),
    ("pyspark: Arrow serialization / worker protocol", "(worker.py:"),
    ("pyspark: Arrow serialization / worker protocol", "(daemon.py:"),
    ("pyspark: Arrow serialization / worker protocol", "pyspark/"),
    ("pyarrow", "pyarrow"),
    ("numpy", "numpy"),
]


def _category(stack: str) -> str:
    frames = stack.split(";")
    leaf = frames[-1]
    if any(
        w in leaf
        for w in ("select (", "poll (", "epoll", "wait (", "recv_into (", "_wait_for_tstate")
    ) or ("acquire" in leaf or "sleep" in leaf):
        return "waiting (select/recv/lock)"
    for frame in reversed(frames):
        for name, needle in CATEGORIES:
            if needle in frame:
                return name
    return "other: " + leaf[:60]


def summarize(raw: Path, top: int = 12) -> str:
    by_cat: collections.Counter[str] = collections.Counter()
    by_leaf: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        # The stack's first frame is the process/thread: keep only worker main threads' work.
        n = int(count)
        total += n
        by_cat[_category(stack)] += n
        by_leaf[stack.split(";")[-1][:110]] += n
    lines = [f"  {total} samples"]
    for name, n in by_cat.most_common():
        lines.append(f"  {100 * n / total:5.1f}%  {name}")
    lines.append("  top leaf frames:")
    for leaf, n in by_leaf.most_common(top):
        lines.append(f"  {100 * n / total:5.1f}%  {leaf}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--only", choices=("read", "write"), default=None)
    args = parser.parse_args()
    os.environ.update({"PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"})
    from pyspark.sql import SparkSession

    import samsa.spark

    work = Path(tempfile.mkdtemp(prefix="spark-profile-"))
    out = args.out or work
    out.mkdir(parents=True, exist_ok=True)
    broker = start_broker(work / "data")
    bootstrap = broker.bootstrap
    n = args.rows
    try:
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            admin.create_topics([NewTopic("prof", 2), NewTopic("prof-out", 2)])
        with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
            for i in range(n):
                producer.send("prof", b"x" * 100, key=b"%d" % i)
        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.python.worker.reuse", "true")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        samsa.spark.register(spark)
        source = (
            spark.read.format("samsa")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", "prof")
            .load()
        )
        generated = spark.range(n, numPartitions=2).selectExpr(
            "cast(cast(id as string) as binary) as key", "cast(repeat('x', 100) as binary) as value"
        )

        def read() -> None:
            source.selectExpr("sum(length(value))").collect()

        def write() -> None:
            generated.write.mode("append").format("samsa").option(
                "kafka.bootstrap.servers", bootstrap
            ).option("topic", "prof-out").save()

        read()
        write()  # warm: the daemon and its workers exist from here on
        me = os.getpid()
        java = next(p for p in _descendants(me) if "java" in _cmdline(p).split(" ", 1)[0])
        found = [(p, _cmdline(p)) for p in _descendants(java)]
        # One daemon per worker module (lookup, create, plan, commit…): the tasks run
        # in the children of the one for pyspark.worker.
        daemon = next(p for p, c in found if c.rstrip().endswith("pyspark.daemon pyspark.worker"))
        broker_pid = broker.process.pid  # type: ignore[attr-defined]
        for name, work_fn in (("read", read), ("write", write)):
            if args.only and name != args.only:
                continue
            raw = out / f"spark-{name}.raw"
            cpu = _Cpu(java, daemon, broker_pid)
            spy = subprocess.Popen(
                [PY_SPY, "record", "--format", "raw", "-r", "200", "--subprocesses",
                 "--pid", str(daemon), "-d", str(int(args.seconds) + 30), "-o", str(raw)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            time.sleep(2)
            load0 = os.getloadavg()[0]
            before = cpu.snapshot()
            t0 = time.perf_counter()
            runs = 0
            while time.perf_counter() - t0 < args.seconds:
                work_fn()
                runs += 1
            wall = time.perf_counter() - t0
            after = cpu.snapshot()
            load1 = os.getloadavg()[0]
            spy.send_signal(2)
            spy.wait(timeout=60)
            rows = runs * n
            print(f"{name}: {runs} runs of {n} rows in {wall:.1f} s = {rows / wall:,.0f} rows/s"
                  f"  (load average {load0:.1f} → {load1:.1f})")  # fmt: skip
            for proc in after:
                used = after[proc] - before[proc]
                print(
                    f"  cpu {proc:<15} {used:6.1f} s = {used / rows * 1e6:5.2f} s per million rows"
                )
            if raw.exists():
                print(summarize(raw))
            print(f"  raw profile: {raw}")
        spark.stop()
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
