"""Broker throughput and CPU cost with a C load generator (bench/loadgen/loadgen.c).

Not a test. One Python process producing through confluent-kafka tops out near
1.3 M records/s, so ``bench/e2e.py`` measures the broker against its client. This
script builds ``bench/loadgen/loadgen`` (C on librdkafka, ``make -C bench/loadgen``:
needs gcc and Debian's ``librdkafka-dev``, which ``make bench`` installs), starts a
real ``samsa serve`` (127.0.0.1 port 0, a temporary data dir), and for every case

- creates a topic (1 or 4 partitions);
- produces N records of a fixed size with the generator's worker processes (one per
  partition up to ``--max-processes``), ``acks=1`` or ``acks=all``, and waits for
  every delivery report;
- consumes them from offset 0 with as many consumer processes;
- deletes the topic (this VM's warm-memory limit: see RESULTS.md, storage section);
- produces the same records again to a new topic with ``loadgen --raw``: pre-encoded
  Produce requests (one ~1 MB record batch each) replayed over one connection per
  process, 8 in flight. The broker's work per request is the same as for librdkafka's
  batches, the generator's close to nothing, so these runs show the broker's own
  ceiling on this machine (100 B records cost librdkafka ~4x the broker's CPU).

It reports throughput and, because the machine is shared and the two cores are
contended, the CPU cost: broker CPU-seconds (user + system, ``/proc/<pid>/stat``,
over exactly the generator's measured window) per GB of record values and per
million records, and the generator's own CPU the same way. A latency case sends
1 KiB records at a fixed rate (``linger.ms=0``, ``acks=all``) and reports the time
from ``produce()`` to the delivery report.

    .venv/bin/python bench/loadgen.py                # ~3 minutes: 2 rounds
    .venv/bin/python bench/loadgen.py --quick        # ~40 s: 1 round, smaller
    .venv/bin/python bench/loadgen.py --json out.json
    .venv/bin/python bench/loadgen.py --only-latency --repeat 3   # broker CPU per request

Results and analysis: bench/RESULTS.md, section "Load generator".
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from e2e import BrokerProcess, wait_quiet  # bench/e2e.py, a neighbour

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "loadgen"
BINARY = SOURCE / "loadgen"


def build() -> Path:
    """``make`` the generator (it rebuilds when loadgen.c is newer than the binary)."""
    try:
        subprocess.run(["make", "-s", "-C", str(SOURCE)], check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        sys.exit(
            f"could not build {BINARY} ({exc}): it needs make, gcc and librdkafka-dev "
            "(apt-get install librdkafka-dev; `make bench` installs it)"
        )
    return BINARY


@dataclass
class Run:
    """One generator run, as its JSON says, plus the load average at the start."""

    case: str
    data: dict[str, Any]
    load: float

    @property
    def gb(self) -> float:
        return float(self.data["bytes"]) / 1e9

    @property
    def million(self) -> float:
        return float(self.data["records"]) / 1e6

    @property
    def seconds(self) -> float:
        return float(self.data["seconds"])

    @property
    def broker_cpu_s(self) -> float:
        cpu = self.data["broker_cpu"]
        return float(cpu["user_s"] + cpu["sys_s"])

    @property
    def broker_sys_s(self) -> float:
        return float(self.data["broker_cpu"]["sys_s"])

    @property
    def generator_cpu_s(self) -> float:
        cpu = self.data["generator_cpu"]
        return float(cpu["user_s"] + cpu["sys_s"])

    @property
    def others_cpu_s(self) -> float:
        busy = float(self.data["machine_busy_s"])
        return max(busy - self.broker_cpu_s - self.generator_cpu_s, 0.0)

    def line(self) -> str:
        d = self.data
        s = self.seconds
        text = (
            f"{self.case:<34} {d['records_per_s']:>11,.0f} rec/s {d['mb_per_s']:>7.1f} MB/s  "
            f"broker {self.broker_cpu_s / self.gb:5.2f} CPU-s/GB "
            f"{self.broker_cpu_s / self.million:5.3f} CPU-s/M  "
            f"gen {self.generator_cpu_s / self.gb:5.2f} CPU-s/GB  "
            f"CPU broker {self.broker_cpu_s / s:.0%} (sys {self.broker_sys_s / s:.0%}) "
            f"gen {self.generator_cpu_s / s:.0%} others {self.others_cpu_s / s:.0%}  "
            f"load {self.load:.1f}"
        )
        if "latency_ms" in d and d.get("rate"):
            lat = d["latency_ms"]
            text += f"  latency p50 {lat['p50']:.2f} p99 {lat['p99']:.2f} max {lat['max']:.2f} ms"
        return text


def run(binary: Path, case: str, args: list[str], broker: BrokerProcess) -> Run:
    load = os.getloadavg()[0]
    command = [str(binary), *args, "-b", broker.bootstrap, "--broker-pid", str(broker.pid)]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(
            f"{case}: loadgen exited {done.returncode}\n{done.stdout}\n{done.stderr[-2000:]}"
        )
    result = Run(case, json.loads(done.stdout), load)
    print(result.line(), flush=True)
    return result


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    client = admin(bootstrap)  # kept alive until the futures are done
    for future in client.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)


def delete_topic(bootstrap: str, topic: str) -> None:
    client = admin(bootstrap)
    for future in client.delete_topics([topic]).values():
        future.result(30)


def median(runs: list[Run], key: str) -> float:
    values: list[float] = []
    for r in runs:
        match key:
            case "rate":
                values.append(float(r.data["records_per_s"]))
            case "mbs":
                values.append(float(r.data["mb_per_s"]))
            case "broker_gb":
                values.append(r.broker_cpu_s / r.gb)
            case "broker_m":
                values.append(r.broker_cpu_s / r.million)
            case "gen_gb":
                values.append(r.generator_cpu_s / r.gb)
            case "gen_m":
                values.append(r.generator_cpu_s / r.million)
            case _:
                raise ValueError(key)
    return statistics.median(values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 round, a quarter of the records")
    parser.add_argument("--small", type=int, help="records of 100 B (default 2,000,000)")
    parser.add_argument("--large", type=int, help="records of 1 KiB (default 400,000)")
    parser.add_argument("--partitions", type=int, action="append",
                        help="partition counts (default 1 and 4)")  # fmt: skip
    parser.add_argument("--max-processes", type=int, default=2,
                        help="generator processes: one per partition, at most this many "
                        "(default 2)")  # fmt: skip
    parser.add_argument("--acks", action="append", choices=["1", "all"], help="default: both")
    parser.add_argument("--repeat", type=int, help="rounds over all cases (default 2, quick 1)")
    parser.add_argument("--no-raw", action="store_true",
                        help="skip the produce runs replaying pre-encoded requests")  # fmt: skip
    parser.add_argument("--latency-rate", type=float, default=5000.0,
                        help="records/s of the latency case (0: skip it)")  # fmt: skip
    parser.add_argument("--latency-seconds", type=float, default=5.0)
    parser.add_argument("--only-latency", action="store_true",
                        help="run only the latency case, --repeat times (broker CPU per "
                        "one-record request)")  # fmt: skip
    parser.add_argument("--quiet-wait", type=float, default=3.0,
                        help="before each run, wait up to this long for other processes "
                        "to go quiet (default 3 s)")  # fmt: skip
    parser.add_argument("-X", dest="props", action="append", default=[], metavar="KEY=VALUE",
                        help="a librdkafka property for every generator run")  # fmt: skip
    parser.add_argument("--override", action="append", metavar="KEY=VALUE",
                        help="a broker property for samsa serve (repeatable)")  # fmt: skip
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--json", type=Path, help="write every run's JSON here")
    args = parser.parse_args(argv)
    scale = 4 if args.quick else 1
    small = args.small or 2_000_000 // scale
    large = args.large or 400_000 // scale
    repeat = args.repeat or (1 if args.quick else 2)
    partition_counts = args.partitions or [1, 4]
    acks_list = args.acks or ["1", "all"]
    extra = [item for prop in args.props for item in ("-X", prop)]

    binary = build()
    work = Path(tempfile.mkdtemp(prefix="samsa-loadgen-", dir=args.dir))
    broker = BrokerProcess(work / "data", work / "broker.log", args.override or ())
    runs: list[Run] = []
    try:
        broker.start()
        print(f"broker pid {broker.pid} on {broker.bootstrap}; generator {binary}")
        load0 = os.getloadavg()
        for r in range(0 if args.only_latency else repeat):
            for size, n in ((100, small), (1024, large)):
                for partitions in partition_counts:
                    processes = min(partitions, args.max_processes)
                    for acks in acks_list:
                        topic = f"lg-{size}b-{partitions}p-acks{acks}-{r}"
                        create_topic(broker.bootstrap, topic, partitions)
                        common = ["-t", topic, "-P", str(processes), *extra]
                        wait_quiet(broker, args.quiet_wait)
                        runs.append(run(
                            binary, f"produce {size} B {partitions}p x{processes} acks={acks}",
                            ["produce", *common, "-s", str(size), "-a", acks, "-n", str(n)],
                            broker,
                        ))  # fmt: skip
                        wait_quiet(broker, args.quiet_wait)
                        runs.append(run(
                            binary, f"consume {size} B {partitions}p x{processes}",
                            ["consume", *common], broker,
                        ))  # fmt: skip
                        delete_topic(broker.bootstrap, topic)
                        if args.no_raw:
                            continue
                        topic += "-raw"
                        create_topic(broker.bootstrap, topic, partitions)
                        wait_quiet(broker, args.quiet_wait)
                        runs.append(run(
                            binary, f"produce {size} B {partitions}p x{processes} acks={acks} raw",
                            ["produce", "--raw", "-t", topic, "-P", str(processes),
                             "-s", str(size), "-a", acks, "-n", str(n)],
                            broker,
                        ))  # fmt: skip
                        delete_topic(broker.bootstrap, topic)
        for r in range(repeat if args.only_latency and args.latency_rate > 0 else
                       1 if args.latency_rate > 0 else 0):  # fmt: skip
            topic = f"lg-latency-{r}"
            create_topic(broker.bootstrap, topic, 1)
            wait_quiet(broker, args.quiet_wait)
            runs.append(run(
                binary, f"latency 1024 B 1p acks=all {args.latency_rate:,.0f}/s",
                ["produce", "-t", topic, "-s", "1024", "-a", "all", "-l", "0",
                 "-r", str(args.latency_rate), "-d", str(args.latency_seconds), *extra],
                broker,
            ))  # fmt: skip
            delete_topic(broker.bootstrap, topic)
        load1 = os.getloadavg()
        broker.stop()
    finally:
        broker.kill()
        shutil.rmtree(work, ignore_errors=True)

    print()
    print(f"medians over {repeat} round(s); load average {load0[0]:.1f} at the start, "
          f"{load1[0]:.1f} at the end")  # fmt: skip
    header = (
        f"{'case':<34} {'rec/s':>11} {'MB/s':>7}  {'broker CPU-s/GB':>15} {'CPU-s/M rec':>11}  "
        f"{'gen CPU-s/GB':>12} {'CPU-s/M rec':>11}"
    )
    print(header)
    print("-" * len(header))
    by_case: dict[str, list[Run]] = {}
    for one in runs:
        by_case.setdefault(one.case, []).append(one)
    for case, group in by_case.items():
        print(
            f"{case:<34} {median(group, 'rate'):>11,.0f} {median(group, 'mbs'):>7.1f}  "
            f"{median(group, 'broker_gb'):>15.2f} {median(group, 'broker_m'):>11.3f}  "
            f"{median(group, 'gen_gb'):>12.2f} {median(group, 'gen_m'):>11.3f}"
        )
    if args.json:
        record = {
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "load_average": {"start": load0, "end": load1},
            "runs": [{"case": one.case, "load": one.load, **one.data} for one in runs],
        }
        args.json.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
