"""Consumer-group benchmark: group formation time and OffsetCommit throughput.

Not a test. The script starts its own ``samsa serve`` (127.0.0.1 port 0, data in
a temporary directory, ``group.initial.rebalance.delay.ms=0``) and measures:

1. **Group formation.** N consumers (default 10) in threads of this process,
   already connected (metadata fetched), subscribe to an N-partition topic at the
   same moment (a barrier), with a fresh group id per run. The time runs from the
   first ``subscribe`` to the last consumer's assignment callback; DescribeGroups
   must then show the group Stable with N members, each with a non-empty
   assignment, and every consumer must still hold its partitions. The generations
   (and their member counts) come from the broker's INFO log. A run where the
   broker has formed the group but a client never runs its callback within 10 s is
   reported as stuck, without a time. Done with confluent-kafka, with kafka-python,
   and (on a second broker) with confluent-kafka and Kafka's default
   ``group.initial.rebalance.delay.ms=3000``.
2. **OffsetCommit throughput.**
   - raw protocol: an asyncio client sends OffsetCommit v8 as a simple consumer
     (generation -1, no member id), 1 or 50 partitions per request, over 1 or 4
     connections, with W requests in flight per connection, for a fixed time;
   - confluent-kafka: ``Consumer.commit(offsets=..., asynchronous=False)`` in a
     loop, and asynchronous commits with at most 1,000 outstanding.

The broker's CPU time (user + system, from /proc/<pid>/stat) is read around every
commit phase and reported per request. Before each phase the script waits (up to
``--quiet-wait`` s) for other processes to go quiet, and reports their CPU share.

    .venv/bin/python bench/group_bench.py            # default run (~2 minutes)
    .venv/bin/python bench/group_bench.py --quick    # 2 runs per case, 1 s phases (~40 s)
    .venv/bin/python bench/group_bench.py --runs 25 --delay-runs 0 --seconds 0
                                                     # formation only, a wider distribution
    .venv/bin/python bench/group_bench.py --py-spy /tmp/pyspy-venv/bin/py-spy --profile-dir /tmp/p
                                                     # also sample the broker during raw commits

Results and analysis: bench/RESULTS.md, section "Consumer groups".
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import functools
import io
import os
import re
import shutil
import statistics
import struct
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import confluent_kafka
import kafka
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from e2e import CLK_TCK, Sampler, fmt, machine_busy_s  # bench/e2e.py, a neighbour
from samsa.protocol.build import build
from samsa.testing.broker import BrokerProcess, start_broker

OFFSET_COMMIT = 8
OFFSET_COMMIT_VERSION = 8
_INT32 = struct.Struct(">i")
FORMATION_TIMEOUT_S = 60.0
STUCK_AFTER_S = 10.0  # broker says formed, a client has not seen its assignment: give up


# -- CPU accounting ---------------------------------------------------------------------------
def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads), from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def wait_quiet(broker_pid: int, max_wait_s: float) -> float:
    """Wait until other processes use < 5% of a CPU for 1 s, at most ``max_wait_s``.

    Other work on the machine (another session's test suite) takes CPU from the client
    and the broker. Returns the CPU share of the others seen last.
    """
    deadline = time.monotonic() + max_wait_s
    while True:
        busy0, broker0, own0 = machine_busy_s(), process_cpu_s(broker_pid), time.process_time()
        time.sleep(1.0)
        others = machine_busy_s() - busy0 - (process_cpu_s(broker_pid) - broker0)
        others -= time.process_time() - own0
        if others < 0.05 or time.monotonic() >= deadline:
            return max(others, 0.0)


@dataclass
class CpuWindow:
    """Broker, client (this process) and other processes' CPU over one measured phase."""

    broker_pid: int
    seconds: float = 0.0
    broker_s: float = 0.0
    client_s: float = 0.0
    others_s: float = 0.0
    _start: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)

    def __enter__(self) -> CpuWindow:
        self._start = (
            time.perf_counter(),
            process_cpu_s(self.broker_pid),
            time.process_time(),
            machine_busy_s(),
        )
        return self

    def __exit__(self, *exc: object) -> None:
        t0, broker0, client0, busy0 = self._start
        self.seconds = time.perf_counter() - t0
        self.broker_s = process_cpu_s(self.broker_pid) - broker0
        self.client_s = time.process_time() - client0
        busy = machine_busy_s() - busy0
        self.others_s = max(busy - self.broker_s - self.client_s, 0.0)

    def note(self) -> str:
        s = self.seconds or 1.0
        return (
            f"CPU broker {self.broker_s / s:.0%}, client {self.client_s / s:.0%}, "
            f"others {self.others_s / s:.0%}"
        )


# -- topics and groups -------------------------------------------------------------------------
def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)


@dataclass(frozen=True)
class GroupView:
    """What DescribeGroups says of a group: the broker's side of "formed"."""

    state: str  # STABLE, PREPARING_REBALANCE, ...
    members: int
    assigned_members: int  # members whose stored assignment names at least one partition

    def formed(self, members: int) -> bool:
        return self.state == "STABLE" and self.members == self.assigned_members == members


def describe_group(admin: AdminClient, group: str) -> GroupView:
    description = admin.describe_consumer_groups([group], request_timeout=10)[group].result(15)
    assigned = sum(1 for m in description.members if m.assignment.topic_partitions)
    return GroupView(description.state.name, len(description.members), assigned)


@dataclass
class Generation:
    """One join phase the broker completed, from its log lines (millisecond timestamps)."""

    number: int
    members: int
    formed_at: datetime.datetime  # JoinGroup answered: "generation N: M members"
    stable_at: datetime.datetime | None = None  # the leader's assignment stored


def generations_from_log(log_path: Path, group: str, size: int) -> list[Generation]:
    """The generations of ``group`` in the first ``size`` bytes of the broker's log."""
    stamp = r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*"
    formed = re.compile(stamp + rf"group {re.escape(group)} generation (\d+): (\d+) members", re.M)
    stable = re.compile(stamp + rf"group {re.escape(group)} generation (\d+) is stable", re.M)
    with open(log_path, "rb") as log_file:
        text = log_file.read(size).decode(errors="replace")

    def when(value: str) -> datetime.datetime:
        return datetime.datetime.strptime(value, "%Y-%m-%d %H:%M:%S,%f")

    generations = {
        int(m.group(2)): Generation(int(m.group(2)), int(m.group(3)), when(m.group(1)))
        for m in formed.finditer(text)
    }
    for m in stable.finditer(text):
        if int(m.group(2)) in generations:
            generations[int(m.group(2))].stable_at = when(m.group(1))
    return sorted(generations.values(), key=lambda g: g.number)


# -- 1. group formation ----------------------------------------------------------------------
class MemberLog:
    """What each consumer's rebalance callbacks saw, written from the consumers' threads."""

    def __init__(self, members: int) -> None:
        self.lock = threading.Lock()
        self.subscribed_at = [float("nan")] * members
        self.holding = [0] * members  # partitions held now (eager: revoke drops them all)
        self.assigned_at = [float("nan")] * members
        self.assign_calls = [0] * members
        self.errors: list[str] = []

    def assigned(self, member: int, partitions: int) -> None:
        with self.lock:
            self.holding[member] = partitions
            self.assigned_at[member] = time.perf_counter()
            self.assign_calls[member] += 1

    def revoked(self, member: int) -> None:
        with self.lock:
            self.holding[member] = 0

    def all_hold(self, partitions: int) -> bool:
        with self.lock:
            return all(self.holding) and sum(self.holding) == partitions


@dataclass
class Formation:
    client: str
    seconds_assigned: float  # first subscribe → last assignment callback
    seconds_confirmed: float  # first subscribe → DescribeGroups answered Stable, N members
    generations: list[Generation]
    assign_calls: int
    subscribe_spread_ms: float  # first to last subscribe call
    stuck: int = 0  # consumers that never ran their assignment callback (the run has no time)

    @property
    def final_generation(self) -> int:
        return self.generations[-1].number if self.generations else 0

    @property
    def members_per_generation(self) -> str:
        return " ".join(str(g.members) for g in self.generations)

    @property
    def final_sync_ms(self) -> float:
        """Broker side of the last generation: JoinGroup answered → assignment stored."""
        last = self.generations[-1] if self.generations else None
        if last is None or last.stable_at is None:
            return float("nan")
        return (last.stable_at - last.formed_at).total_seconds() * 1000


def _confluent_member(
    index: int,
    topic: str,
    members: MemberLog,
    *,
    consumer: Consumer,
    barrier: threading.Barrier,
    stop: threading.Event,
) -> None:
    def on_assign(_consumer: Consumer, partitions: list[TopicPartition]) -> None:
        members.assigned(index, len(partitions))

    def on_revoke(_consumer: Consumer, _partitions: list[TopicPartition]) -> None:
        members.revoked(index)

    try:
        consumer.list_topics(topic, timeout=10)  # connected before the clock starts
        barrier.wait()
        members.subscribed_at[index] = time.perf_counter()
        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        while not stop.is_set():
            # poll serves the rebalance callbacks; the topic is empty, so no message comes
            message = consumer.poll(0.05)
            if message is not None and message.error() is not None:
                members.errors.append(str(message.error()))
    finally:
        consumer.close()


def _kafka_python_member(
    index: int,
    topic: str,
    members: MemberLog,
    *,
    bootstrap: str,
    group: str,
    barrier: threading.Barrier,
    stop: threading.Event,
) -> None:
    from kafka import KafkaConsumer
    from kafka.consumer.subscription_state import ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            members.revoked(index)

        def on_partitions_assigned(self, assigned: Any) -> None:
            members.assigned(index, len(assigned))

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=f"bench-kp-{index}",
        enable_auto_commit=False,
    )
    try:
        consumer.topics()  # connected before the clock starts
        barrier.wait()
        members.subscribed_at[index] = time.perf_counter()
        consumer.subscribe([topic], listener=Listener())
        while not stop.is_set():
            consumer.poll(timeout_ms=50)
    finally:
        consumer.close()


def form_group(
    client: str, broker: BrokerProcess, admin: AdminClient, topic: str, *, consumers: int
) -> Formation:
    """Start ``consumers`` members of a fresh group at once and time them to Stable."""
    group = f"form-{client}-{uuid.uuid4().hex[:8]}"
    members = MemberLog(consumers)
    barrier = threading.Barrier(consumers + 1)
    stop = threading.Event()
    threads = []
    for i in range(consumers):
        if client == "confluent-kafka":
            consumer = Consumer({
                "bootstrap.servers": broker.bootstrap,
                "group.id": group,
                "client.id": f"bench-ck-{i}",
                "enable.auto.commit": False,
                "log_level": 4,
            })  # fmt: skip
            kwargs: dict[str, Any] = {"consumer": consumer}
            target: Callable[..., None] = _confluent_member
        else:
            kwargs = {"bootstrap": broker.bootstrap, "group": group}
            target = _kafka_python_member
        kwargs |= {"barrier": barrier, "stop": stop}
        thread = threading.Thread(target=target, args=(i, topic, members), kwargs=kwargs)
        thread.daemon = True
        threads.append(thread)
    for thread in threads:
        thread.start()
    stuck = 0
    try:
        barrier.wait(30)  # every client is created (kafka-python bootstraps here)
        deadline = time.monotonic() + FORMATION_TIMEOUT_S
        next_look, broker_formed_at = time.monotonic() + 0.5, float("inf")
        while True:
            now = time.monotonic()
            if now > deadline:
                raise RuntimeError(
                    f"{group}: not Stable after {FORMATION_TIMEOUT_S:.0f} s; partitions held "
                    f"{members.holding}, {describe_group(admin, group)}; see {broker.log_path}"
                )
            if members.all_hold(consumers):
                view = describe_group(admin, group)
                confirmed = time.perf_counter()
                # Still holding after the answer: no new generation started in between.
                if view.formed(consumers) and members.all_hold(consumers):
                    break
                time.sleep(0.02)
            elif now >= next_look:
                # The broker may have handed out every assignment while a client never ran
                # its callback (seen with kafka-python's leader): give up on that run.
                next_look = now + 0.5
                if not describe_group(admin, group).formed(consumers):
                    broker_formed_at = float("inf")
                elif broker_formed_at == float("inf"):
                    broker_formed_at = now
                elif now - broker_formed_at > STUCK_AFTER_S:
                    stuck = members.holding.count(0)
                    confirmed = float("nan")
                    break
            else:
                time.sleep(0.002)
        log_size = broker.log_path.stat().st_size
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    if members.errors:
        raise RuntimeError(f"{group}: consumer errors {members.errors[:3]}")
    first = min(members.subscribed_at)
    return Formation(
        client,
        max(members.assigned_at) - first if not stuck else float("nan"),
        confirmed - first,
        generations_from_log(broker.log_path, group, log_size),
        sum(members.assign_calls),
        (max(members.subscribed_at) - first) * 1000,
        stuck,
    )


# -- 2a. raw OffsetCommit --------------------------------------------------------------------
def offset_commit_frame(group: str, topic: str, partitions: int, client_id: str) -> bytearray:
    """A whole OffsetCommit v8 request (size prefix included) committing offset 42 each."""
    request_cls = load_request_schema(OFFSET_COMMIT, OFFSET_COMMIT_VERSION)
    header_cls = request_cls.__header_schema__
    body = io.BytesIO()
    entity_writer(header_cls)(body, build(header_cls, {
        "request_api_key": OFFSET_COMMIT, "request_api_version": OFFSET_COMMIT_VERSION,
        "correlation_id": 0, "client_id": client_id,
    }))  # fmt: skip
    entity_writer(request_cls)(body, build(request_cls, {
        "group_id": group,
        "generation_id_or_member_epoch": -1,  # a simple consumer: no membership
        "member_id": "",
        "group_instance_id": None,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": p, "committed_offset": 42, "committed_leader_epoch": -1,
             "committed_metadata": ""} for p in range(partitions)]}],
    }))  # fmt: skip
    payload = body.getvalue()
    return bytearray(_INT32.pack(len(payload)) + payload)


def offset_commit_errors(frame: bytes) -> list[int]:
    """The non-zero partition error codes of an OffsetCommit v8 response (no size prefix)."""
    response_cls = load_response_schema(OFFSET_COMMIT, OFFSET_COMMIT_VERSION)
    _header, at = entity_reader(response_cls.__header_schema__)(frame, 0)
    response, _ = entity_reader(response_cls)(frame, at)
    return [
        int(p.error_code.value)
        for t in response.topics
        for p in t.partitions
        if int(p.error_code.value) != 0
    ]


class CommitPipeline(asyncio.Protocol):
    """One connection keeping ``window`` OffsetCommit requests in flight until the deadline.

    The correlation id sits at bytes 8-11 of the frame (size, api key, api version), so
    one encoded request is reused with a fresh id each time. Responses must come back in
    order; every ``check_every``-th one (and the last) is decoded and its error codes checked.
    """

    def __init__(self, frame: bytearray, window: int, deadline: float, check_every: int) -> None:
        self.frame = frame
        self.window = window
        self.deadline = deadline
        self.check_every = check_every
        self.sent = 0
        self.received = 0
        self.errors: list[int] = []
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._last = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self._send(self.window)

    def _send(self, count: int) -> None:
        assert self.transport is not None
        frames = []
        for _ in range(count):
            self.sent += 1
            _INT32.pack_into(self.frame, 8, self.sent)
            frames.append(bytes(self.frame))
        self.transport.write(b"".join(frames))

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        position, answered = 0, 0
        while len(buffer) - position >= 8:
            size = _INT32.unpack_from(buffer, position)[0]
            if len(buffer) - position - 4 < size:
                break
            correlation_id = _INT32.unpack_from(buffer, position + 4)[0]
            self.received += 1
            if correlation_id != self.received:
                self._fail(f"correlation id {correlation_id}, expected {self.received}")
                return
            self._last = bytes(buffer[position + 4 : position + 4 + size])
            if self.received % self.check_every == 0:
                self.errors += offset_commit_errors(self._last)
            position += 4 + size
            answered += 1
        del buffer[:position]
        if answered and time.perf_counter() < self.deadline:
            self._send(answered)
        elif self.received == self.sent and not self.done.done():
            self.errors += offset_commit_errors(self._last)
            self.done.set_result(None)

    def _fail(self, reason: str) -> None:
        if not self.done.done():
            self.done.set_exception(RuntimeError(reason))

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(f"connection lost after {self.received} responses: {exc}")


@dataclass
class CommitRun:
    name: str
    requests: int
    partitions_per_request: int
    cpu: CpuWindow
    extra: str = ""

    @property
    def requests_per_s(self) -> float:
        return self.requests / self.cpu.seconds

    @property
    def broker_us_per_request(self) -> float:
        return self.cpu.broker_s / self.requests * 1e6


async def _raw_commits(
    bootstrap: str, frames: list[bytearray], window: int, seconds: float, check_every: int
) -> list[CommitPipeline]:
    host, port = bootstrap.rsplit(":", 1)
    loop = asyncio.get_running_loop()
    deadline = time.perf_counter() + seconds
    pipelines = []
    for frame in frames:
        _transport, protocol = await loop.create_connection(
            lambda f=frame: CommitPipeline(f, window, deadline, check_every), host, int(port)
        )
        pipelines.append(protocol)
    await asyncio.gather(*(p.done for p in pipelines))
    for p in pipelines:
        if p.transport is not None:
            p.transport.close()
    return pipelines


def raw_commit_run(
    broker: BrokerProcess, topic: str, *, partitions: int, connections: int, window: int,
    seconds: float,
) -> CommitRun:  # fmt: skip
    # One group per connection, as separate simple consumers would commit.
    frames = [
        offset_commit_frame(f"raw-{partitions}p-{connections}c-{window}w-{i}", topic, partitions,
                            f"bench-raw-{i}")
        for i in range(connections)
    ]  # fmt: skip
    runner = asyncio.run
    try:
        import uvloop

        runner = uvloop.run  # type: ignore[assignment]
    except ImportError:
        pass
    runner(_raw_commits(broker.bootstrap, frames, 1, 0.2, 1))  # warm-up: every group's first write
    with CpuWindow(broker.process.pid if broker.process else 0) as cpu:
        pipelines = runner(_raw_commits(broker.bootstrap, frames, window, seconds, 256))
    errors = [code for p in pipelines for code in p.errors]
    if errors:
        raise RuntimeError(f"raw OffsetCommit: error codes {sorted(set(errors))}")
    requests = sum(p.received for p in pipelines)
    name = f"raw v8, {partitions} partition{'s' if partitions > 1 else ''}"
    name += f", {connections} conn × {window} in flight"
    return CommitRun(name, requests, partitions, cpu)


# -- 2b. confluent-kafka commits ------------------------------------------------------------
def confluent_commit_runs(
    broker: BrokerProcess,
    topic: str,
    partitions: int,
    seconds: float,
    before_phase: Callable[[], object],
) -> list[CommitRun]:
    """Sync commits in a loop, then async commits with at most 1,000 outstanding.

    Every commit names a new offset, so an ``on_commit`` callback says which commit it
    answers: only those of the asynchronous phase are counted as acknowledged.
    """
    async_from = [2**62]  # the first offset committed asynchronously
    acknowledged = [0]
    callback_errors: list[str] = []

    def on_commit(err: Any, committed: list[TopicPartition]) -> None:
        if err is not None:
            callback_errors.append(str(err))
        callback_errors.extend(str(p.error) for p in committed if p.error is not None)
        if committed and committed[0].offset >= async_from[0]:
            acknowledged[0] += 1

    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap,
        "group.id": f"ck-commit-{partitions}p-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "on_commit": on_commit,
        "log_level": 4,
    })  # fmt: skip
    pid = broker.process.pid if broker.process else 0
    runs = []
    try:
        offsets = [TopicPartition(topic, p, 1) for p in range(partitions)]
        consumer.commit(offsets=offsets, asynchronous=False)  # finds the coordinator

        offset, count = 1, 0
        before_phase()
        with CpuWindow(pid) as cpu:
            deadline = time.perf_counter() + seconds
            while time.perf_counter() < deadline:
                offset += 1
                offsets = [TopicPartition(topic, p, offset) for p in range(partitions)]
                for tp in consumer.commit(offsets=offsets, asynchronous=False) or ():
                    if tp.error is not None:
                        raise RuntimeError(f"sync commit: {tp.error}")
                count += 1
        runs.append(CommitRun(f"confluent sync commit(), {partitions} p", count, partitions, cpu))

        count = 0
        async_from[0] = offset + 1
        before_phase()
        with CpuWindow(pid) as cpu:
            deadline = time.perf_counter() + seconds
            while time.perf_counter() < deadline:
                if count - acknowledged[0] >= 1000:
                    consumer.poll(0.001)
                    continue
                offset += 1
                offsets = [TopicPartition(topic, p, offset) for p in range(partitions)]
                consumer.commit(offsets=offsets, asynchronous=True)
                count += 1
            drain_deadline = time.monotonic() + 30
            while acknowledged[0] < count and time.monotonic() < drain_deadline:
                consumer.poll(0.01)
        if acknowledged[0] != count:
            raise RuntimeError(f"async commit: {acknowledged[0]} callbacks for {count} commits")
        runs.append(CommitRun(f"confluent async commit(), {partitions} p", count, partitions,
                              cpu, "≤ 1,000 outstanding"))  # fmt: skip
        if callback_errors:
            raise RuntimeError(f"commit callbacks reported errors: {callback_errors[:3]}")
        committed = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        if committed[0].offset != offset:
            raise RuntimeError(f"committed offset {committed[0].offset}, expected {offset}")
    finally:
        consumer.close()
    return runs


# -- report ----------------------------------------------------------------------------------
def print_table(header: Sequence[str], rows: list[tuple[str, ...]], right: set[int]) -> None:
    widths = [max(len(r[i]) for r in [tuple(header), *rows]) for i in range(len(header))]
    for row in [tuple(header), tuple("-" * w for w in widths), *rows]:
        cells = [c.rjust(w) if i in right else c.ljust(w)
                 for i, (c, w) in enumerate(zip(row, widths, strict=True))]  # fmt: skip
        print("  ".join(cells).rstrip())


def formation_rows(label: str, runs: list[Formation]) -> list[tuple[str, ...]]:
    """One row: statistics over the runs that completed (stuck runs are only counted)."""
    timed = [r for r in runs if not r.stuck]
    assigned = [r.seconds_assigned * 1000 for r in timed] or [float("nan")]
    confirmed = [r.seconds_confirmed * 1000 for r in timed] or [float("nan")]
    generations = [r.final_generation for r in timed] or [0]
    per_run = "; ".join(
        f"{r.seconds_assigned * 1000:,.0f} ms [{r.members_per_generation}]"
        if not r.stuck
        else f"stuck [{r.members_per_generation}]: {r.stuck} consumer without its callback"
        for r in runs
    )
    return [(
        label,
        f"{len(timed)}" + (f" (+{len(runs) - len(timed)} stuck)" if len(timed) < len(runs) else ""),
        fmt(statistics.median(assigned)),
        fmt(min(assigned)),
        fmt(max(assigned)),
        fmt(statistics.median(confirmed)),
        f"{statistics.median(generations):g} ({min(generations)}-{max(generations)})",
        fmt(statistics.median(r.final_sync_ms for r in runs)),
        f"{statistics.median(r.assign_calls for r in timed or runs):g}",
        per_run,
    )]  # fmt: skip


def run_formations(
    label: str, client: str, broker: BrokerProcess, topic: str, *, consumers: int, runs: int,
    quiet_wait: float,
) -> tuple[str, list[Formation]]:  # fmt: skip
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 2})
    results = []
    for r in range(runs):
        if broker.process is not None:
            wait_quiet(broker.process.pid, quiet_wait)
        f = form_group(client, broker, admin, topic, consumers=consumers)
        results.append(f)
        if f.stuck:
            print(f"  {label:<28} run {r}: the broker had the group Stable with every member "
                  f"assigned, but {f.stuck} consumer(s) ran no assignment callback in "
                  f"{STUCK_AFTER_S:.0f} s; members per generation [{f.members_per_generation}]",
                  flush=True)  # fmt: skip
            continue
        print(
            f"  {label:<28} run {r}: {f.seconds_assigned * 1000:6,.0f} ms to the last "
            f"assignment, {f.seconds_confirmed * 1000:6,.0f} ms confirmed Stable; members per "
            f"generation [{f.members_per_generation}], last sync {f.final_sync_ms:.0f} ms, "
            f"{f.assign_calls} assignment callbacks, subscribes within "
            f"{f.subscribe_spread_ms:.1f} ms",
            flush=True,
        )
    return label, results


def commit_row(run: CommitRun) -> tuple[str, ...]:
    return (
        run.name,
        fmt(run.requests_per_s),
        fmt(run.requests_per_s * run.partitions_per_request),
        fmt(run.broker_us_per_request),
        fmt(run.cpu.broker_s / run.requests / run.partitions_per_request * 1e6, 1),
        f"{run.requests:,} in {run.cpu.seconds:.1f} s; {run.cpu.note()}"
        + (f"; {run.extra}" if run.extra else ""),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 runs per case, 1 s phases")
    parser.add_argument("--runs", type=int, help="formation runs per client (default 5; 0: skip)")
    parser.add_argument("--delay-runs", type=int, help="runs with "
                        "group.initial.rebalance.delay.ms=3000 (default 3; 0: skip)")  # fmt: skip
    parser.add_argument("--consumers", type=int, default=10, help="group size and partitions")
    parser.add_argument("--no-kafka-python", action="store_true", help="skip kafka-python")
    parser.add_argument("--seconds", type=float,
                        help="seconds per commit phase (default 3; 0: skip commits)")  # fmt: skip
    parser.add_argument("--window", type=int, default=16, help="raw OffsetCommit "
                        "requests in flight per connection (default 16)")  # fmt: skip
    parser.add_argument("--quiet-wait", type=float, default=3.0, help="before each phase, "
                        "wait up to this many seconds for other processes to go quiet "
                        "(default 3; 0: do not wait)")  # fmt: skip
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--keep", action="store_true", help="keep the data dirs and broker logs")
    parser.add_argument("--py-spy", help="path of a py-spy binary: sample the broker per raw case")
    parser.add_argument("--profile-dir", type=Path, help="where py-spy writes (with --py-spy)")
    args = parser.parse_args(argv)
    runs: int = args.runs if args.runs is not None else (2 if args.quick else 5)
    delay_runs: int = args.delay_runs if args.delay_runs is not None else (1 if args.quick else 3)
    seconds: float = args.seconds if args.seconds is not None else (1.0 if args.quick else 3.0)
    consumers: int = args.consumers
    work = Path(tempfile.mkdtemp(prefix="samsa-groups-", dir=args.dir))
    brokers: list[BrokerProcess] = []
    started = time.perf_counter()
    try:
        broker = start_broker(work / "data", ["group.initial.rebalance.delay.ms=0"])
        brokers.append(broker)
        assert broker.process is not None
        pid = broker.process.pid
        print(f"broker pid {pid} on {broker.bootstrap}, data in {broker.data_dir}")
        print(f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, confluent-kafka "
              f"{confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]}), "
              f"kafka-python {kafka.__version__}")  # fmt: skip
        group_topic, commit_topic = "group-bench", "commit-bench"
        create_topic(broker.bootstrap, group_topic, consumers)
        create_topic(broker.bootstrap, commit_topic, 50)

        # 1. formation
        formations: list[tuple[str, list[Formation]]] = []
        clients = ["confluent-kafka"] + ([] if args.no_kafka_python else ["kafka-python"])
        for client in clients if runs else []:
            formations.append(run_formations(
                f"{client}, delay 0", client, broker, group_topic,
                consumers=consumers, runs=runs, quiet_wait=args.quiet_wait,
            ))  # fmt: skip
        if delay_runs:
            delayed = start_broker(work / "data-delay", ["group.initial.rebalance.delay.ms=3000"])
            brokers.append(delayed)
            create_topic(delayed.bootstrap, group_topic, consumers)
            formations.append(run_formations(
                "confluent-kafka, delay 3000", "confluent-kafka", delayed, group_topic,
                consumers=consumers, runs=delay_runs, quiet_wait=args.quiet_wait,
            ))  # fmt: skip
            delayed.stop()
            brokers.remove(delayed)

        # 2. commits
        commit_runs: list[CommitRun] = []
        raw_cases = [(1, 1, 1), (1, 1, args.window), (1, 4, args.window),
                     (50, 1, args.window), (50, 4, args.window)]  # fmt: skip
        for partitions, connections, window in raw_cases if seconds > 0 else []:
            wait_quiet(pid, args.quiet_wait)
            name = f"raw-{partitions}p-{connections}c-{window}w"
            sampler = Sampler(args.py_spy, args.profile_dir, pid, name)
            run = raw_commit_run(
                broker, commit_topic, partitions=partitions, connections=connections,
                window=window, seconds=seconds,
            )  # fmt: skip
            sampler.stop()
            commit_runs.append(run)
            print(f"  {run.name}: {fmt(run.requests_per_s)} requests/s; {run.cpu.note()}",
                  flush=True)  # fmt: skip
        for partitions in (1, 50) if seconds > 0 else ():
            quiet = functools.partial(wait_quiet, pid, args.quiet_wait)
            for run in confluent_commit_runs(broker, commit_topic, partitions, seconds, quiet):
                commit_runs.append(run)
                print(f"  {run.name}: {fmt(run.requests_per_s)} commits/s; {run.cpu.note()}",
                      flush=True)  # fmt: skip

        # 3. tables
        print()
        print(f"Group formation: {consumers} consumers, {consumers}-partition topic, "
              "fresh group per run (times from the first subscribe)")  # fmt: skip
        rows: list[tuple[str, ...]] = []
        for label, results in formations:
            rows += formation_rows(label, results)
        print_table(
            ("client, initial delay ms", "runs", "median ms", "min ms", "max ms", "confirmed ms",
             "generations", "last sync ms", "assign cbs", "per run: ms [members per generation]"),
            rows, {1, 2, 3, 4, 5, 7, 8},
        )  # fmt: skip
        print()
        print("OffsetCommit (simple consumer: generation -1, empty member id)")
        print_table(
            ("case", "requests/s", "partitions/s", "broker µs/req", "µs/partition", "note"),
            [commit_row(run) for run in commit_runs],
            {1, 2, 3, 4},
        )
        print(f"\ntotal {time.perf_counter() - started:.0f} s")
        return 0
    finally:
        for b in brokers:
            b.stop()
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
