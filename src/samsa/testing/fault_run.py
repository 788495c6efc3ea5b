"""A fault-injection run: workloads on a :class:`FaultyCluster` while a nemesis breaks it.

``python -m samsa.testing.fault_run --seconds 600 --every 10`` runs three brokers and
ZooKeeper under a fault every 10 s for 10 minutes and prints the checker's table
(:func:`samsa.testing.history.check`); it exits with 1 if any count is not 0.

A run: create the topics (``writes``: written by :class:`Writer` threads and read by a
consumer group; ``copies``: the transactional copy of ``writes``, read by another
group), start the workloads, let the nemesis inject faults for the given time, heal
everything (restart killed brokers, resume paused ones, lift every cut), stop the
writers, wait until every replica is back in its ISR and the consumers have caught
up, read every partition back and every replica's segment files, and check.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from samsa.testing.history import Final, History, Report, check
from samsa.testing.nemesis import FAULTS, FaultyCluster, Nemesis
from samsa.testing.workloads import (
    QUIET,
    CopyLoop,
    GroupReader,
    OffsetsWatch,
    Workload,
    Writer,
    read_all,
)

log = logging.getLogger(__name__)

WRITES = "writes"
COPIES = "copies"
PARTITIONS = 3
BROKER_SETTINGS = (
    "group.initial.rebalance.delay.ms=0",
    "group.min.session.timeout.ms=1000",
    # A follower cut off its leader leaves the ISR within a fault's hold.
    "replica.lag.time.max.ms=4000",
    "min.insync.replicas=2",
    "default.replication.factor=3",
)


@dataclass
class RunSettings:
    seconds: float = 60.0
    every: float = 10.0
    hold: float = 5.0
    kinds: Sequence[str] = FAULTS
    sequence: Sequence[str] = ()
    """Faults to inject first, in this order (then random ones of ``kinds``)."""
    seed: int | None = None
    writers: int = 2
    rate: int = 200
    """Records per second of each writer."""
    stuck_after: float = 30.0
    settle_timeout: float = 180.0
    extra: dict[str, object] = field(default_factory=dict)


@dataclass
class Outcome:
    report: Report
    history: History
    refused: int
    """Connections the proxies refused during cuts."""
    workload_errors: list[str]
    client_hangs: int = 0
    """Copy-loop producers given up in a hung librdkafka call (workloads.SEND_OFFSETS_HANG_S)."""


def run(
    faulty: FaultyCluster, settings: RunSettings, say: Callable[[str], None] = print
) -> Outcome:
    """One run on a started ``faulty`` cluster; see the module docstring."""
    cluster = faulty.cluster
    bootstrap = cluster.bootstrap
    _create_topics(bootstrap)
    history = History()
    writers = [
        Writer(bootstrap, WRITES, history, f"writer{i}", settings.rate)
        for i in range(settings.writers)
    ]
    readers = [GroupReader(bootstrap, WRITES, "readers", history, f"reader{i}") for i in range(2)]
    copier = CopyLoop(bootstrap, WRITES, COPIES, "copiers", history, seed=settings.seed or 0)
    audit = GroupReader(bootstrap, COPIES, "auditors", history, "auditor")
    watch = OffsetsWatch(bootstrap, history, {WRITES: PARTITIONS, COPIES: PARTITIONS})
    workloads: list[Workload] = [*writers, *readers, copier, audit, watch]
    for workload in workloads:
        workload.start()
    movable = [(t, p) for t in (WRITES, COPIES) for p in range(PARTITIONS)]
    nemesis = Nemesis(faulty, history, every=settings.every, hold=settings.hold,
                      kinds=settings.kinds, seed=settings.seed, say=say,
                      partitions=movable)  # fmt: skip
    nemesis.start(settings.sequence)
    try:
        try:
            _wait(settings.seconds, workloads)
            while not nemesis.sequence_done.is_set():  # every fault asked for is injected
                _wait(0.5, workloads)
        finally:
            nemesis.stop()
        history.end()
        say(f"{history.now():7.1f} s  faults over: healing and settling")
        _heal(faulty)
        for writer in writers:
            writer.finish(settings.settle_timeout)
        say(f"{history.now():7.1f} s  writers done")
        _settle(faulty, settings.settle_timeout, history, say)
        for workload in workloads:
            workload.finish(settings.settle_timeout)
    finally:
        for workload in workloads:  # (after a failure: no client outlives the run)
            workload.stopping.set()
        for workload in workloads:
            workload.join(settings.settle_timeout)
    say(f"{history.now():7.1f} s  workloads stopped")
    logs = read_all(bootstrap, [WRITES, COPIES], settings.settle_timeout)
    say(f"{history.now():7.1f} s  read back")
    final = Final(logs, _replicas(faulty), _committed(history))
    report = check(history, final, settings.stuck_after)
    errors = [f"{w.name}: {w.error!r}" for w in workloads if w.error is not None]
    return Outcome(report, history, faulty.refused(), errors, copier.client_hangs)


def _create_topics(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    topics = [NewTopic(t, PARTITIONS, 3, config={"min.insync.replicas": "2"})
              for t in (WRITES, COPIES)]  # fmt: skip
    for future in admin.create_topics(topics).values():
        future.result(60)


def _wait(seconds: float, workloads: Sequence[Workload]) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.5)
        dead = [w for w in workloads if w.error is not None]
        if dead:
            raise RuntimeError(f"workload {dead[0].name} failed: {dead[0].error!r}")


def _heal(faulty: FaultyCluster) -> None:
    faulty.heal_network()
    cluster = faulty.cluster
    for broker_id in cluster.brokers:
        if broker_id in cluster.paused:
            cluster.resume(broker_id)
        if broker_id not in cluster.alive():
            cluster.start_broker(broker_id)


def _settle(
    faulty: FaultyCluster, timeout: float, history: History, say: Callable[[str], None]
) -> None:
    """Every replica back in its ISR, every group caught up with its topic's end."""
    cluster = faulty.cluster
    every = [(t, p) for t in (WRITES, COPIES) for p in range(PARTITIONS)]
    cluster.wait_until(
        lambda: all(len(cluster.isr_of(t, p)) == 3 for t, p in every),
        "every replica back in every ISR", timeout,
    )  # fmt: skip
    say(f"{history.now():7.1f} s  every replica in its ISR")
    # The copy loop and the readers of ``writes`` first (the copy's end moves meanwhile),
    # then the readers of ``copies``.
    for topic in (WRITES, COPIES):
        ends = {p: _last_offset(faulty, topic, p) + 1 for p in range(PARTITIONS)}
        groups = [g for g, t in history.groups.items() if t == topic]

        def caught_up(topic: str = topic, ends: dict[int, int] = ends,
                      groups: list[str] = groups) -> bool:  # fmt: skip
            committed = _committed(history)
            return all(
                committed.get(group, {}).get((topic, p), 0) >= end
                for group in groups
                for p, end in ends.items()
            )

        cluster.wait_until(caught_up, f"the groups reading {topic} caught up", timeout)
        say(f"{history.now():7.1f} s  the groups reading {topic} caught up")
    cluster.wait_until(lambda: _replicas_alike(faulty), "every replica's files alike", timeout)


def _last_offset(faulty: FaultyCluster, topic: str, partition: int) -> int:
    """The offset of the last data record of the partition's leader (-1: none). A group
    done with a transactional topic has committed at least one past it."""
    cluster = faulty.cluster
    leader = cluster.leader_of(topic, partition)
    records = cluster.replica_records(leader, topic, partition)
    return records[-1][0] if records else -1


def _committed(history: History) -> dict[str, dict[tuple[str, int], int]]:
    """Each group's committed offsets, as last read back by the offsets watch."""
    latest: dict[str, dict[tuple[str, int], int]] = {}
    for commit in sorted(history.commits, key=lambda c: c.t):
        latest.setdefault(commit.group, {})[(commit.topic, commit.partition)] = commit.offset
    return latest


def _replicas(faulty: FaultyCluster) -> dict[tuple[str, int], dict[int, list[tuple[int, bytes | None]]]]:  # fmt: skip  # noqa: E501
    cluster = faulty.cluster
    return {
        (topic, partition): {
            broker: cluster.replica_records(broker, topic, partition)
            for broker in cluster.replicas_of(topic, partition)
        }
        for topic in (WRITES, COPIES)
        for partition in range(PARTITIONS)
    }


def _replicas_alike(faulty: FaultyCluster) -> bool:
    for replicas in _replicas(faulty).values():
        if len({len(records) for records in replicas.values()}) > 1:
            return False
    return True


def print_outcome(outcome: Outcome, say: Callable[[str], None] = print) -> None:
    say(outcome.report.table())
    counts = ", ".join(f"{n} {what}" for what, n in outcome.report.counts.items())
    say(f"({counts}; {outcome.refused} connections refused by cut links; "
        f"{outcome.client_hangs} copy-loop producers given up in a hung client call)")  # fmt: skip
    for error in outcome.workload_errors:
        say(f"workload error: {error}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m samsa.testing.fault_run",
        description="Three brokers and ZooKeeper under a nemesis; prints the checker's table.",
    )
    parser.add_argument("--seconds", type=float, default=600.0, help="how long faults go on")
    parser.add_argument("--every", type=float, default=10.0, help="seconds between faults")
    parser.add_argument("--hold", type=float, default=5.0, help="seconds a fault holds")
    parser.add_argument("--faults", default=",".join(FAULTS), help="kinds of fault to pick from")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--rate", type=int, default=200, help="records/s of each writer")
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--data", type=Path, default=None, help="(default: a temporary dir)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    settings = RunSettings(
        seconds=args.seconds, every=args.every, hold=args.hold,
        kinds=[k for k in args.faults.split(",") if k], seed=args.seed, rate=args.rate,
    )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="samsa-faults-") as scratch:
        path = args.data or Path(scratch)
        print(f"data and logs in {path}", flush=True)
        with FaultyCluster(path, 3, BROKER_SETTINGS, args.session_timeout_ms) as faulty:
            faulty.start()
            outcome = run(faulty, settings, lambda line: print(line, flush=True))
        print_outcome(outcome)
    return 1 if outcome.report.anomalies or outcome.workload_errors else 0


if __name__ == "__main__":
    sys.exit(main())
