"""End-to-end benchmark: confluent-kafka producer and consumer against ``samsa serve``.

Not a test. The script starts its own broker process (``samsa serve`` on
127.0.0.1 port 0, data in a temporary directory), then for each record size
(100 B, 1 KiB) and each ``acks`` setting (1, all):

- creates a topic with one partition;
- produces N records with one confluent-kafka ``Producer`` and waits for every
  delivery report (``flush``), then checks the high watermark is N;
- consumes the N records from offset 0 with a ``Consumer`` using ``assign()``
  (no group commits).

It also measures the broker's start-to-ready time (from ``Popen`` to the ready
line, and the broker's own "in N ms" figure), its idle RSS after start and
after the run, and the CPU time of the broker and of the client per phase.

Figures are payload figures: MB/s counts record values only (1 MB = 10^6 B).

    .venv/bin/python bench/e2e.py                 # default run (~1 minute)
    .venv/bin/python bench/e2e.py --quick         # smaller run (~20 s)
    .venv/bin/python bench/e2e.py --py-spy /tmp/pyspy-venv/bin/py-spy --profile-dir /tmp/prof
                                                  # also sample the broker with py-spy per phase

Results and analysis: bench/RESULTS.md, section "End to end".
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

READY = re.compile(r"ready on (\S+):(\d+) .* in (\d+) ms")
CLK_TCK = os.sysconf("SC_CLK_TCK")
_STARTED: list[BrokerProcess] = []  # killed on the way out if still running

# Targets (2-core machine, client and broker sharing it).
TARGET_PRODUCE_SMALL_MSGS = 500_000  # msg/s at 100 B
TARGET_PRODUCE_LARGE_MBS = 200.0  # MB/s at 1 KiB
TARGET_CONSUME_SMALL_MSGS = 1_000_000  # msg/s at 100 B
TARGET_READY_S = 0.5
TARGET_IDLE_RSS_MB = 80.0

PRODUCER_SETTINGS: dict[str, Any] = {
    "linger.ms": 10,
    "batch.size": 1_000_000,  # librdkafka's default; message.max.bytes (1,000,000) caps it too
    "batch.num.messages": 100_000,  # so batch.size, not the count, closes a batch
    "compression.type": "none",
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 1_048_576,  # 1 GiB: the producer never blocks on its queue
    "enable.idempotence": False,
    "max.in.flight.requests.per.connection": 1_000_000,  # librdkafka's default
}

CONSUMER_SETTINGS: dict[str, Any] = {
    "group.id": "samsa-e2e-bench",  # required by the Python client; nothing is committed
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": False,
    "fetch.min.bytes": 1,  # the data is already there; >1 only adds a wait at the tail
    "fetch.wait.max.ms": 100,
    "fetch.max.bytes": 52_428_800,
    "max.partition.fetch.bytes": 4_194_304,  # 1-4 MiB did best here; 8-32 MiB were slower
    "queued.min.messages": 1_000_000,
    "queued.max.messages.kbytes": 262_144,
    "check.crcs": False,
}


# -- the broker process ---------------------------------------------------------------------
class BrokerProcess:
    """``samsa serve`` in a child process; a thread reads its stderr and times the ready line."""

    def __init__(
        self,
        data_dir: Path,
        log_path: Path,
        overrides: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.log_path = log_path
        self.overrides = list(overrides)
        self.env = dict(env or {})
        self.process: subprocess.Popen[bytes] | None = None
        self.bootstrap = ""
        self.ready_s = float("nan")  # Popen → ready line read by this process
        self.ready_reported_ms = -1  # the broker's own "in N ms" (inside Broker.start)
        self._ready = threading.Event()
        self._reader: threading.Thread | None = None

    def command(self) -> list[str]:
        script = Path(sys.executable).with_name("samsa")
        head = [str(script)] if script.exists() else [sys.executable, "-m", "samsa"]
        args = [
            *head,
            "serve",
            "--override", "listeners=PLAINTEXT://127.0.0.1:0",
            "--override", f"log.dirs={self.data_dir}",
        ]  # fmt: skip
        for item in self.overrides:
            args += ["--override", item]
        return args

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        self._ready.clear()
        _STARTED.append(self)
        started = time.perf_counter()
        self.process = subprocess.Popen(
            self.command(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, env={**os.environ, **self.env},
        )  # fmt: skip
        self._reader = threading.Thread(target=self._read, args=(self.process, started))
        self._reader.daemon = True
        self._reader.start()
        if not self._ready.wait(timeout):
            self.kill()
            raise RuntimeError(f"broker not ready after {timeout} s; see {self.log_path}")
        if not self.bootstrap:
            raise RuntimeError(f"broker exited before it was ready; see {self.log_path}")
        return self

    def _read(self, process: subprocess.Popen[bytes], started: float) -> None:
        assert process.stderr is not None
        with open(self.log_path, "ab") as log_file:
            for raw in process.stderr:
                now = time.perf_counter()
                log_file.write(raw)
                log_file.flush()
                if not self._ready.is_set():
                    match = READY.search(raw.decode(errors="replace"))
                    if match:
                        self.ready_s = now - started
                        self.bootstrap = f"{match.group(1)}:{match.group(2)}"
                        self.ready_reported_ms = int(match.group(3))
                        self._ready.set()
        self._ready.set()  # exited: let start() see it

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def status(self) -> dict[str, int]:
        """VmRSS, VmHWM, … from /proc/<pid>/status, in KiB."""
        values = {}
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key.startswith("Vm") or key.startswith("Rss"):
                values[key] = int(rest.split()[0])
        return values

    def cpu_s(self) -> tuple[float, float]:
        """User and system CPU seconds of the broker process (all its threads)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK

    def stop(self, timeout: float = 30.0) -> int:
        if self.process is None:
            return 0
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout)
        if self._reader is not None:
            self._reader.join(5)
        self.process = None
        return code

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


def machine_busy_s() -> float:
    """CPU seconds spent by every process on every CPU since boot (all but idle and iowait)."""
    ticks = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / CLK_TCK


def wait_quiet(broker: BrokerProcess | None, max_wait_s: float) -> float:
    """Wait until other processes use < 5% of a CPU for 1 s, at most ``max_wait_s``.

    Other work on the machine (a test suite, a build) takes CPU from the client and the
    broker and makes the figures meaningless. Returns the CPU share of the others seen last.
    """

    def broker_cpu() -> float:
        return sum(broker.cpu_s()) if broker is not None else 0.0

    deadline = time.monotonic() + max_wait_s
    while True:
        busy0, broker0, own0 = machine_busy_s(), broker_cpu(), time.process_time()
        time.sleep(1.0)
        others = machine_busy_s() - busy0 - (broker_cpu() - broker0)
        others -= time.process_time() - own0
        if others < 0.05 or time.monotonic() >= deadline:
            return max(others, 0.0)


# -- py-spy (optional) ---------------------------------------------------------------------
class Sampler:
    """``py-spy record`` on the broker for the duration of one phase (SIGINT writes the file)."""

    def __init__(self, py_spy: str | None, out_dir: Path | None, pid: int, name: str) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        if py_spy is None or out_dir is None:
            return
        out_dir.mkdir(parents=True, exist_ok=True)
        self.raw = out_dir / f"{name}.txt"  # collapsed stacks, one "frame;frame count" a line
        self.process = subprocess.Popen(
            [py_spy, "record", "--pid", str(pid), "--rate", "1000", "--nonblocking",
             "--format", "raw", "--output", str(self.raw)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        time.sleep(0.5)  # let it attach before the load starts

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# -- phases ----------------------------------------------------------------------------------
@dataclass
class Phase:
    name: str
    records: int
    size: int
    seconds: float
    broker_user_s: float
    broker_sys_s: float
    client_cpu_s: float
    client_main_s: float
    machine_busy_s: float  # all CPUs, every process (/proc/stat)

    @property
    def others_cpu_s(self) -> float:
        """CPU used by other processes and kernel threads (writeback...); should be ~0."""
        return max(self.machine_busy_s - self.broker_cpu_s - self.client_cpu_s, 0.0)

    @property
    def broker_cpu_s(self) -> float:
        return self.broker_user_s + self.broker_sys_s

    def cpu_note(self) -> str:
        return (
            f"CPU broker {self.broker_cpu_s / self.seconds:.0%} "
            f"(sys {self.broker_sys_s / self.seconds:.0%}), "
            f"client {self.client_cpu_s / self.seconds:.0%} "
            f"(Python thread {self.client_main_s / self.seconds:.0%}), "
            f"others {self.others_cpu_s / self.seconds:.0%}"
        )

    @property
    def msgs(self) -> float:
        return self.records / self.seconds

    @property
    def mbs(self) -> float:
        return self.records * self.size / self.seconds / 1e6


def median_phase(phases: list[Phase]) -> Phase:
    """The run with the median rate (the lower middle one for an even count)."""
    return sorted(phases, key=lambda ph: ph.msgs)[(len(phases) - 1) // 2]


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)


def delete_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    for future in admin.delete_topics([topic]).values():
        future.result(30)


def produce(
    broker: BrokerProcess, topic: str, n: int, size: int, acks: str, *, all_reports: bool
) -> Phase:
    delivered = [0]
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered[0] += 1

    conf = {
        "bootstrap.servers": broker.bootstrap,
        "acks": acks,
        **PRODUCER_SETTINGS,
        "delivery.report.only.error": not all_reports,
        "on_delivery": on_delivery,
    }
    producer = Producer(conf)
    producer.list_topics(topic, timeout=10)  # connect and learn the leader outside the timing
    payload = os.urandom(size)
    send = producer.produce
    poll = producer.poll
    chunk = 10_000
    cpu0, main0, bcpu0, busy0 = (
        time.process_time(),
        time.thread_time(),
        broker.cpu_s(),
        machine_busy_s(),
    )
    t0 = time.perf_counter()
    sent = 0
    while sent < n:
        for _ in range(min(chunk, n - sent)):
            try:
                send(topic, payload, partition=0)
            except BufferError:  # the local queue is full: serve reports, then retry
                while True:
                    poll(0.005)
                    try:
                        send(topic, payload, partition=0)
                        break
                    except BufferError:
                        continue
        sent += min(chunk, n - sent)
        poll(0)
    left = producer.flush(120)
    seconds = time.perf_counter() - t0
    phase = Phase(
        f"produce {size} B acks={acks}",
        n,
        size,
        seconds,
        broker.cpu_s()[0] - bcpu0[0],
        broker.cpu_s()[1] - bcpu0[1],
        time.process_time() - cpu0,
        time.thread_time() - main0,
        machine_busy_s() - busy0,
    )
    if left or errors:
        raise RuntimeError(f"{left} records not delivered, {len(errors)} errors: {errors[:3]}")
    if all_reports and delivered[0] != n:
        raise RuntimeError(f"{delivered[0]} delivery reports for {n} records")
    return phase


def consume(broker: BrokerProcess, topic: str, n: int, size: int) -> Phase:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, **CONSUMER_SETTINGS})
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    if (low, high) != (0, n):
        raise RuntimeError(f"{topic}: watermarks {low}..{high}, expected 0..{n}")
    count = 0
    last_offset = -1
    cpu0, main0, bcpu0, busy0 = (
        time.process_time(),
        time.thread_time(),
        broker.cpu_s(),
        machine_busy_s(),
    )
    t0 = time.perf_counter()
    consumer.assign([TopicPartition(topic, 0, 0)])
    deadline = time.monotonic() + 120
    while count < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic}: consumed {count} of {n} records in 120 s")
        # consume() waits for all it asks for (or the timeout): never ask past the end
        batch = consumer.consume(min(10_000, n - count), 1.0)
        for message in batch:
            if message.error() is not None:
                raise RuntimeError(f"{topic}: consumer error {message.error()}")
        if batch:
            count += len(batch)
            last_offset = batch[-1].offset() or -1
    seconds = time.perf_counter() - t0
    phase = Phase(
        f"consume {size} B",
        n,
        size,
        seconds,
        broker.cpu_s()[0] - bcpu0[0],
        broker.cpu_s()[1] - bcpu0[1],
        time.process_time() - cpu0,
        time.thread_time() - main0,
        machine_busy_s() - busy0,
    )
    consumer.close()
    if count != n or last_offset != n - 1:
        raise RuntimeError(f"{topic}: {count} records, last offset {last_offset}, expected {n}")
    return phase


# -- report ----------------------------------------------------------------------------------
def fmt(value: float, digits: int = 0) -> str:
    return f"{value:,.{digits}f}"


def print_table(rows: list[tuple[str, str, str, str, str, str]]) -> None:
    header = ("metric", "value", "unit", "target", "met", "note")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(6)]
    align: list[Callable[[str, int], str]] = [
        str.ljust, str.rjust, str.ljust, str.ljust, str.ljust, str.ljust
    ]  # fmt: skip
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print("  ".join(align[i](cell, widths[i]) for i, cell in enumerate(row)).rstrip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100k / 30k records, 1 extra start")
    parser.add_argument("--small", type=int, help="records of 100 B (default 1,000,000)")
    parser.add_argument("--large", type=int, help="records of 1 KiB (default 300,000)")
    parser.add_argument("--acks", action="append", choices=["1", "all"], help="default: both")
    parser.add_argument("--starts", type=int, help="extra fresh-dir starts timed (default 3)")
    parser.add_argument("--all-reports", action="store_true",
                        help="a Python delivery callback per record, not only errors")  # fmt: skip
    parser.add_argument("--repeat", type=int, help="rounds over all cases (default 3, quick 1)")
    parser.add_argument("--quiet-wait", type=float, default=15.0,
                        help="before each phase, wait up to this many seconds for other "
                        "processes to go quiet (default 15; 0: do not wait)")  # fmt: skip
    parser.add_argument("--override", action="append", metavar="KEY=VALUE",
                        help="a broker property for samsa serve (repeatable)")  # fmt: skip
    parser.add_argument("--broker-env", action="append", metavar="NAME=VALUE",
                        help="an environment variable of the broker (repeatable)")  # fmt: skip
    parser.add_argument("--keep-topics", action="store_true",
                        help="keep every topic (default: only the last one)")  # fmt: skip
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--keep", action="store_true", help="keep the data dir and broker log")
    parser.add_argument("--py-spy", help="path of a py-spy binary: sample the broker per phase")
    parser.add_argument("--profile-dir", type=Path, help="where py-spy writes (with --py-spy)")
    args = parser.parse_args(argv)
    small: int = args.small or (100_000 if args.quick else 1_000_000)
    large: int = args.large or (30_000 if args.quick else 300_000)
    starts: int = args.starts if args.starts is not None else (1 if args.quick else 3)
    acks_list = args.acks or ["1", "all"]
    args.repeat = args.repeat or (1 if args.quick else 3)
    work = Path(tempfile.mkdtemp(prefix="samsa-e2e-", dir=args.dir))
    log_path = work / "broker.log"
    rows: list[tuple[str, str, str, str, str, str]] = []
    broker_env = dict(item.split("=", 1) for item in args.broker_env or ())

    def new_broker(data_dir: Path) -> BrokerProcess:
        return BrokerProcess(data_dir, log_path, args.override or (), broker_env)

    verdicts: list[str] = []
    try:
        # 1. start-to-ready on fresh data dirs (the broker used for the run is one of them)
        ready: list[tuple[float, int]] = []
        for i in range(starts):
            wait_quiet(None, args.quiet_wait)
            extra = new_broker(work / f"start-{i}").start()
            ready.append((extra.ready_s, extra.ready_reported_ms))
            extra.stop()
        wait_quiet(None, args.quiet_wait)
        broker = new_broker(work / "data").start()
        ready.append((broker.ready_s, broker.ready_reported_ms))
        time.sleep(1.0)
        rss_start = broker.status()
        print(f"broker pid {broker.pid} on {broker.bootstrap}, data in {broker.data_dir}")
        env_text = " ".join(f"{k}={v}" for k, v in broker_env.items())
        print(f"command: {env_text + ' ' if env_text else ''}{' '.join(broker.command())}")

        # 2. produce then consume, per size and acks; rounds take turns over the cases
        cases = [(size, n, acks) for size, n in ((100, small), (1024, large)) for acks in acks_list]
        results: dict[tuple[int, str], list[tuple[Phase, Phase]]] = {}
        for r in range(args.repeat):
            last_round = r == args.repeat - 1
            for size, n, acks in cases:
                name = f"{size}b-acks{acks}-{r}"
                topic = f"e2e-{name}"
                create_topic(broker.bootstrap, topic)
                wait_quiet(broker, args.quiet_wait)
                sampler = Sampler(args.py_spy, args.profile_dir, broker.pid, f"produce-{name}")
                p = produce(broker, topic, n, size, acks, all_reports=args.all_reports)
                sampler.stop()
                wait_quiet(broker, args.quiet_wait)
                sampler = Sampler(args.py_spy, args.profile_dir, broker.pid, f"consume-{name}")
                c = consume(broker, topic, n, size)
                sampler.stop()
                results.setdefault((size, acks), []).append((p, c))
                # Deleting frees the page cache (see RESULTS.md); the very last topic is
                # kept so that the restart below loads a real log.
                if not (args.keep_topics or (last_round and (size, n, acks) == cases[-1])):
                    delete_topic(broker.bootstrap, topic)
                    time.sleep(0.5)
                for ph in (p, c):
                    print(
                        f"  round {r}  {ph.name:<24} {n:>9,} records  {ph.seconds:6.2f} s  "
                        f"{fmt(ph.msgs):>9} msg/s  {fmt(ph.mbs, 1):>6} MB/s  "
                        f"{ph.cpu_note()}",
                        flush=True,
                    )
        time.sleep(2.0)
        rss_end = broker.status()
        log_bytes = sum(f.stat().st_size for f in broker.data_dir.rglob("*.log"))
        broker.stop()

        # 3. a restart on the data just written (clean shutdown)
        wait_quiet(None, args.quiet_wait)
        again = new_broker(work / "data").start()
        time.sleep(1.0)
        rss_again = again.status()
        again.stop()

        # 4. the table: medians over the rounds (by rate), with the range
        medians: dict[tuple[int, str], tuple[Phase, Phase]] = {}
        for (size, acks), runs in results.items():
            p = median_phase([run[0] for run in runs])
            c = median_phase([run[1] for run in runs])
            medians[(size, acks)] = (p, c)
            ok_p = ok_c = ""
            target_p = target_c = ""
            if size == 100:
                target_p = f">= {TARGET_PRODUCE_SMALL_MSGS:,} msg/s"
                ok_p = "yes" if p.msgs >= TARGET_PRODUCE_SMALL_MSGS else "no"
                target_c = f">= {TARGET_CONSUME_SMALL_MSGS:,} msg/s"
                ok_c = "yes" if c.msgs >= TARGET_CONSUME_SMALL_MSGS else "no"
            else:
                target_p = f">= {TARGET_PRODUCE_LARGE_MBS:.0f} MB/s"
                ok_p = "yes" if p.mbs >= TARGET_PRODUCE_LARGE_MBS else "no"
            for i, (ph, target, ok) in enumerate(((p, target_p, ok_p), (c, target_c, ok_c))):
                rates = sorted(run[i].msgs if size == 100 else run[i].mbs for run in runs)
                digits = 0 if size == 100 else 1
                value, unit = (fmt(ph.msgs), "msg/s") if size == 100 else (fmt(ph.mbs, 1), "MB/s")
                other = f"{fmt(ph.mbs, 1)} MB/s" if size == 100 else f"{fmt(ph.msgs)} msg/s"
                spread = (
                    f"{fmt(rates[0], digits)}-{fmt(rates[-1], digits)}; " if len(runs) > 1 else ""
                )
                note = f"{spread}{other}, {ph.seconds:.2f} s; {ph.cpu_note()}"
                rows.append((ph.name, value, unit, target, ok, note))
        worst = max(r[0] for r in ready)
        rows.append(
            (
                "start to ready (Popen → line)",
                fmt(statistics.median(r[0] for r in ready) * 1000),
                "ms",
                f"<= {TARGET_READY_S * 1000:.0f} ms",
                "yes" if worst <= TARGET_READY_S else "no",
                f"median of {len(ready)} fresh-dir starts: "
                + ", ".join(f"{r[0] * 1000:.0f}" for r in ready)
                + " ms",
            )
        )
        rows.append(
            (
                "  in-process 'in N ms'",
                fmt(statistics.median(r[1] for r in ready)),
                "ms",
                "",
                "",
                "Broker.start() only: " + ", ".join(str(r[1]) for r in ready) + " ms",
            )
        )
        rows.append(
            (
                "start to ready, with the data",
                fmt(again.ready_s * 1000),
                "ms",
                "",
                "",
                f"restart after clean shutdown, {log_bytes / 1e6:,.0f} MB of log; "
                f"in-process {again.ready_reported_ms} ms",
            )
        )
        for label, status, note in (
            ("idle RSS after start", rss_start, "1 s after the ready line"),
            ("idle RSS after the run", rss_end, f"2 s after the last phase; VmHWM "
             f"{rss_end['VmHWM'] / 1024:.1f} MiB"),
            ("idle RSS after restart", rss_again, "restart on the run's data"),
        ):  # fmt: skip
            mib = status["VmRSS"] / 1024
            target = f"<= {TARGET_IDLE_RSS_MB:.0f} MB"
            ok = "yes" if status["VmRSS"] * 1024 <= TARGET_IDLE_RSS_MB * 1e6 else "no"
            rows.append((label, f"{mib:.1f}", "MiB", target, ok, note))
        print()
        print_table(rows)

        # 5. verdicts
        def verdict(what: str, ok: bool, detail: str) -> None:
            verdicts.append(f"{'MET   ' if ok else 'MISSED'} {what}: {detail}")

        small_p = [medians[(100, a)][0] for a in acks_list]
        small_c = [medians[(100, a)][1] for a in acks_list]
        large_p = [medians[(1024, a)][0] for a in acks_list]
        verdict(
            f"produce 100 B >= {TARGET_PRODUCE_SMALL_MSGS:,} msg/s",
            all(p.msgs >= TARGET_PRODUCE_SMALL_MSGS for p in small_p),
            ", ".join(f"{p.name.split()[-1]} {fmt(p.msgs)}" for p in small_p),
        )
        verdict(
            f"produce 1 KiB >= {TARGET_PRODUCE_LARGE_MBS:.0f} MB/s",
            all(p.mbs >= TARGET_PRODUCE_LARGE_MBS for p in large_p),
            ", ".join(f"{p.name.split()[-1]} {fmt(p.mbs, 1)} MB/s" for p in large_p),
        )
        verdict(
            f"consume 100 B >= {TARGET_CONSUME_SMALL_MSGS:,} msg/s",
            all(c.msgs >= TARGET_CONSUME_SMALL_MSGS for c in small_c),
            ", ".join(f"{fmt(c.msgs)} msg/s" for c in small_c),
        )
        verdict(
            f"start to ready <= {TARGET_READY_S} s",
            worst <= TARGET_READY_S,
            f"worst {worst * 1000:.0f} ms over {len(ready)} starts "
            f"(broker's own figure {max(r[1] for r in ready)} ms)",
        )
        rss_worst = max(rss_start["VmRSS"], rss_end["VmRSS"]) * 1024 / 1e6
        verdict(
            f"idle RSS <= {TARGET_IDLE_RSS_MB:.0f} MB",
            rss_worst <= TARGET_IDLE_RSS_MB,
            f"{rss_start['VmRSS'] / 1024:.1f} MiB after start, "
            f"{rss_end['VmRSS'] / 1024:.1f} MiB after the run",
        )
        print()
        for line in verdicts:
            print(line)
        busy = [ph for runs in results.values() for run in runs for ph in run]
        noisy = [ph for ph in busy if ph.others_cpu_s > 0.1 * ph.seconds]
        if noisy:
            worst_ph = max(noisy, key=lambda ph: ph.others_cpu_s / ph.seconds)
            print(
                f"note: in {len(noisy)} of {len(busy)} phases other processes (or kernel "
                f"threads, e.g. writeback) used > 10% of a CPU, up to "
                f"{worst_ph.others_cpu_s / worst_ph.seconds:.0%}; see 'others' per round"
            )
        return 0 if all(v.startswith("MET") for v in verdicts) else 1
    finally:
        for process in _STARTED:
            process.kill()
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
