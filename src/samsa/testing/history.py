"""What clients did during a fault-injection run, and the checks over it.

Workloads (:mod:`samsa.testing.workloads`) record into a :class:`History` every
acknowledged and every failed send, every record a consumer group polled, every
committed offset read back from the cluster and every transaction's outcome with
the records it wrote. Once the run is over and the cluster healed, the final
contents of every partition (read back through a client) and of every replica
(read from its segment files) are put beside it in a :class:`Final`, and
:func:`check` counts what must never happen:

- **lost writes**: an acknowledged record that is not in its partition, and an input
  record a copy loop committed having consumed whose copy is not in the output;
- **duplicates**: a record (by its value, unique per send) at two offsets, and an input
  record copied by two committed transactions;
- **offsets with two values**: an offset that an acknowledgement, a poll or the final
  read saw holding different records;
- **replicas that differ**: two replicas of a partition holding different records at
  the same offset;
- **aborted records seen**: a record of an aborted transaction polled by a
  read_committed consumer or present in the final read_committed read;
- **committed offsets backwards**: a group's committed offset of a partition that is
  lower than one read earlier;
- **stuck consumers**: a time longer than ``stuck_after`` seconds in which a group
  polled nothing although a record of its topic had been acknowledged (or, for a
  copy's output, a transaction committed) at least ``stuck_after`` seconds before
  its end.

Availability is the fraction of the run's seconds in which at least one write was
acknowledged.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class Ack:
    t: float
    topic: str
    partition: int
    offset: int
    value: str


@dataclass(frozen=True)
class Failed:
    t: float
    topic: str
    value: str
    error: str


@dataclass(frozen=True)
class Poll:
    t: float
    group: str
    member: str
    topic: str
    partition: int
    offset: int
    value: str


@dataclass(frozen=True)
class Committed:
    """A group's committed offset of a partition as read back from the cluster."""

    t: float
    group: str
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class TxnEnd:
    t: float
    producer: str
    committed: bool | None
    """None when the outcome is not known (the commit's answer was lost)."""
    values: tuple[str, ...]


@dataclass(frozen=True)
class Fault:
    t: float
    what: str
    healed_at: float | None = None


class History:
    """Thread-safe, append-only record of a run (times in seconds since its start)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.started = time.monotonic()
        self.ended: float | None = None
        self.acks: list[Ack] = []
        self.failures: list[Failed] = []
        self.polls: list[Poll] = []
        self.commits: list[Committed] = []
        self.transactions: list[TxnEnd] = []
        self.faults: list[Fault] = []
        self.groups: dict[str, str] = {}
        """Each consumer group's topic."""
        self.copies: dict[str, tuple[str, str]] = {}
        """Each copy loop's output topic → its input topic and consumer group."""

    def now(self) -> float:
        return time.monotonic() - self.started

    def end(self) -> None:
        """The fault phase is over (availability counts the seconds up to here)."""
        self.ended = self.now()

    def ack(self, topic: str, partition: int, offset: int, value: str) -> None:
        with self._lock:
            self.acks.append(Ack(self.now(), topic, partition, offset, value))

    def failed(self, topic: str, value: str, error: str) -> None:
        with self._lock:
            self.failures.append(Failed(self.now(), topic, value, error))

    def polled(
        self, group: str, member: str, topic: str, partition: int, *, offset: int, value: str
    ) -> None:
        with self._lock:
            self.polls.append(Poll(self.now(), group, member, topic, partition, offset, value))

    def committed(self, group: str, topic: str, partition: int, offset: int) -> None:
        with self._lock:
            self.commits.append(Committed(self.now(), group, topic, partition, offset))

    def transaction(self, producer: str, committed: bool | None, values: Iterable[str]) -> None:
        with self._lock:
            self.transactions.append(TxnEnd(self.now(), producer, committed, tuple(values)))

    def fault(self, what: str) -> int:
        """Record a fault injected now; its index for :meth:`healed`."""
        with self._lock:
            self.faults.append(Fault(self.now(), what))
            return len(self.faults) - 1

    def healed(self, index: int) -> None:
        with self._lock:
            fault = self.faults[index]
            self.faults[index] = Fault(fault.t, fault.what, self.now())


COPY_SEPARATOR = "|"
"""A copied record's value is ``<input value>|<transaction attempt>``."""


def copied_from(value: str) -> str:
    """The input value a copy loop's output value was copied from."""
    return value.rsplit(COPY_SEPARATOR, 1)[0]


@dataclass
class Final:
    """The cluster's contents once the run is over and every fault healed."""

    logs: dict[TopicPartition, list[tuple[int, str]]]
    """Every partition read from its start with read_committed: ``(offset, value)``."""
    replicas: dict[TopicPartition, dict[int, list[tuple[int, bytes | None]]]] = field(
        default_factory=dict
    )
    """Every replica's records from its segment files, by broker id."""
    committed: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    """Each group's committed offsets after the run."""


@dataclass
class Report:
    lost: int = 0
    duplicates: int = 0
    two_values: int = 0
    replicas_differ: int = 0
    aborted_seen: int = 0
    offsets_backwards: int = 0
    stuck: int = 0
    availability: float = 0.0
    stuck_after: float = 0.0
    examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def anomalies(self) -> int:
        return (
            self.lost + self.duplicates + self.two_values + self.replicas_differ
            + self.aborted_seen + self.offsets_backwards + self.stuck
        )  # fmt: skip

    def note(self, check: str, example: str) -> None:
        if len(self.examples[check]) < 5:
            self.examples[check].append(example)

    def table(self) -> str:
        """The counts (each must be 0) and the availability, one line each."""
        rows = [
            ("lost acknowledged writes", str(self.lost)),
            ("duplicated records", str(self.duplicates)),
            ("offsets holding two values", str(self.two_values)),
            ("replicas that differ", str(self.replicas_differ)),
            ("aborted records seen (read_committed)", str(self.aborted_seen)),
            ("committed offsets gone backwards", str(self.offsets_backwards)),
            (f"consumers stuck > {self.stuck_after:g} s", str(self.stuck)),
            ("availability (seconds with an acknowledged write)",
             f"{self.availability * 100:.1f} %"),
        ]  # fmt: skip
        width = max(len(name) for name, _ in rows)
        lines = [f"{name:<{width}}  {value:>8}" for name, value in rows]
        for check, examples in self.examples.items():
            lines += [f"  {check}: {example}" for example in examples]
        return "\n".join(lines)


def check(history: History, final: Final, stuck_after: float = 30.0) -> Report:
    """Count every anomaly of ``history`` against ``final``; see the module docstring."""
    report = Report(stuck_after=stuck_after)
    aborted = {v for txn in history.transactions if txn.committed is False for v in txn.values}
    _lost_and_duplicated(history, final, report)
    _copies(history, final, report, aborted)
    _two_values(history, final, report)
    _replicas(final, report)
    for poll in history.polls:
        if poll.value in aborted:
            report.aborted_seen += 1
            report.note("aborted", f"{poll.group} polled {poll.value!r} at {poll.t:.1f} s")
    for (topic, partition), records in final.logs.items():
        for offset, value in records:
            if value in aborted:
                report.aborted_seen += 1
                report.note("aborted", f"{topic}-{partition}@{offset} holds {value!r}")
    _backwards(history.commits, report)
    _stuck(history, report, stuck_after)
    report.availability = _availability(history)
    report.counts = {
        "acknowledged": len(history.acks),
        "acknowledged without offset": sum(1 for a in history.acks if a.offset < 0),
        "failed sends": len(history.failures),
        "polled": len(history.polls),
        "transactions committed": sum(1 for t in history.transactions if t.committed),
        "transactions aborted": sum(1 for t in history.transactions if t.committed is False),
        "faults": len(history.faults),
    }
    return report


def _lost_and_duplicated(history: History, final: Final, report: Report) -> None:
    where: dict[str, dict[str, list[TopicPartition]]] = defaultdict(lambda: defaultdict(list))
    for (topic, partition), records in final.logs.items():
        seen: dict[str, int] = {}
        for offset, value in records:
            where[topic][value].append((topic, partition))
            if value in seen:
                report.duplicates += 1
                report.note(
                    "duplicates", f"{value!r} at {topic}-{partition}@{seen[value]} and @{offset}"
                )
            seen[value] = offset
    for ack in history.acks:
        if not where[ack.topic].get(ack.value):
            report.lost += 1
            report.note("lost", f"{ack.value!r} acknowledged at {ack.topic}-{ack.partition}"
                                f"@{ack.offset} ({ack.t:.1f} s)")  # fmt: skip


def _copies(history: History, final: Final, report: Report, aborted: set[str]) -> None:
    for output, (source, group) in history.copies.items():
        copied: dict[str, int] = defaultdict(int)
        for (topic, _), records in final.logs.items():
            if topic == output:
                for _, value in records:
                    if value not in aborted:  # an aborted one in a read_committed read is
                        copied[copied_from(value)] += 1  # counted as seen instead
        for original, times in copied.items():
            if times > 1:
                report.duplicates += times - 1
                report.note("duplicates", f"{original!r} copied {times} times to {output}")
        offsets = final.committed.get(group, {})
        for (topic, partition), records in final.logs.items():
            if topic != source:
                continue
            done = offsets.get((topic, partition), 0)
            for offset, value in records:
                if offset < done and value not in copied:
                    report.lost += 1
                    where = f"{topic}-{partition}@{offset}"
                    report.note("lost", f"{value!r} ({where}, {group} committed {done}) "
                                        f"is not in {output}")  # fmt: skip


def _two_values(history: History, final: Final, report: Report) -> None:
    at: dict[tuple[str, int, int], str] = {}
    for (topic, partition), records in final.logs.items():
        for offset, value in records:
            at[(topic, partition, offset)] = value
    seen: list[tuple[str, int, int, str, str]] = [
        (a.topic, a.partition, a.offset, a.value, f"acknowledged at {a.t:.1f} s")
        for a in history.acks
        if a.offset >= 0  # (-1: acknowledged without its offset)
    ] + [
        (p.topic, p.partition, p.offset, p.value, f"polled by {p.group}/{p.member} at {p.t:.1f} s")
        for p in history.polls
    ]
    reported: set[tuple[str, int, int]] = set()
    for topic, partition, offset, value, how in seen:
        key = (topic, partition, offset)
        held = at.setdefault(key, value)
        if held != value and key not in reported:
            reported.add(key)
            report.two_values += 1
            report.note("two values", f"{topic}-{partition}@{offset}: {held!r} and {value!r} "
                                      f"({how})")  # fmt: skip


def _replicas(final: Final, report: Report) -> None:
    for (topic, partition), replicas in final.replicas.items():
        by_offset: dict[int, set[bytes | None]] = defaultdict(set)
        for records in replicas.values():
            for offset, value in records:
                by_offset[offset].add(value)
        for offset, values in sorted(by_offset.items()):
            if len(values) > 1:
                report.replicas_differ += 1
                report.note("replicas", f"{topic}-{partition}@{offset} holds {len(values)} values")
        lengths = {broker: len(records) for broker, records in replicas.items()}
        if len(set(lengths.values())) > 1:
            report.replicas_differ += 1
            report.note("replicas", f"{topic}-{partition} record counts by broker: {lengths}")


def _backwards(commits: Sequence[Committed], report: Report) -> None:
    highest: dict[tuple[str, str, int], int] = {}
    for commit in sorted(commits, key=lambda c: c.t):
        key = (commit.group, commit.topic, commit.partition)
        if commit.offset < highest.get(key, -1):
            report.offsets_backwards += 1
            what = f"{commit.group} {commit.topic}-{commit.partition}"
            report.note("backwards", f"{what}: {highest[key]} then {commit.offset} "
                                     f"at {commit.t:.1f} s")  # fmt: skip
        highest[key] = max(highest.get(key, -1), commit.offset)


def _stuck(history: History, report: Report, bound: float) -> None:
    end = history.ended if history.ended is not None else history.now()
    acks_by_topic: dict[str, list[float]] = defaultdict(list)
    for ack in history.acks:
        acks_by_topic[ack.topic].append(ack.t)
    for output in history.copies:  # a copy's records are there once committed
        acks_by_topic[output] += [t.t for t in history.transactions if t.committed]
    polls_by_group: dict[str, list[float]] = defaultdict(list)
    for poll in history.polls:
        polls_by_group[poll.group].append(poll.t)
    for group, topic in history.groups.items():
        acked = sorted(acks_by_topic.get(topic, []))
        times = [0.0, *sorted(polls_by_group.get(group, [])), end]
        for start, stop in itertools.pairwise(times):
            if stop - start <= bound:
                continue
            waiting = [t for t in acked if start <= t <= stop - bound]
            if waiting:
                report.stuck += 1
                since = f"a record acknowledged at {waiting[0]:.1f} s"
                report.note("stuck", f"{group} polled nothing from {start:.1f} s to "
                                     f"{stop:.1f} s ({since})")  # fmt: skip


def _availability(history: History) -> float:
    end = history.ended if history.ended is not None else history.now()
    attempts = [a.t for a in history.acks] + [f.t for f in history.failures]
    if not attempts or end <= 0:
        return 0.0
    first = int(min(attempts))
    seconds = range(first, max(int(end), first + 1))
    acked = {int(a.t) for a in history.acks}
    return sum(1 for s in seconds if s in acked) / len(seconds)


def offsets_map(records: Mapping[TopicPartition, list[tuple[int, str]]]) -> dict[str, int]:
    """How many records each topic holds in ``records`` (for a run's summary)."""
    totals: dict[str, int] = defaultdict(int)
    for (topic, _), rows in records.items():
        totals[topic] += len(rows)
    return dict(totals)
