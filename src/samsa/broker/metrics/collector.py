"""A scrape: the broker's counters and state, as Prometheus metric families.

A scrape runs in two steps so the broker's event loop is never held long:

1. :func:`take_snapshot`, on the loop (the owner of every counter and log):
   copies the counters and reads each partition's log size, segment count and
   offsets, each group's committed offsets and the purgatories, ISRs and
   connections into plain values — a row per partition, no formatting; it lets
   other work run every :data:`PARTITIONS_PER_SLICE` partitions (a few
   microseconds each), so a broker with many partitions answers requests while
   it is scraped;
2. :class:`SnapshotCollector`, on a worker thread (``generate_latest``): turns the
   snapshot into ``prometheus_client`` metric families and text, next to the
   process collector (RSS, open descriptors, CPU time read from ``/proc``).

Names follow Kafka's MBeans, lower-cased and joined with ``_`` as a JMX exporter
shows them (``kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=t``
→ ``kafka_server_brokertopicmetrics_messagesin_total{topic="t"}``): counters end
in ``_total`` (Prometheus computes the rates Kafka's meters show), times are
seconds and sizes bytes. Consumer lag takes the names of the common Kafka
exporter (``kafka_consumergroup_lag``). The list, with what each counts, is in
``docs/metrics.md``.

Lag is computed here from the group coordinator's committed offsets and the
high watermark of the partition's log on this broker (led here, or followed:
a follower's high watermark trails the leader's by a fetch); a group's lag is
exported by the broker that coordinates it, for the partitions whose logs it holds.
"""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from kio.schema.index import api_key_map
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from samsa.broker.metrics.stats import (
    ConnectionStats,
    Histogram,
    RequestStats,
    StorageStats,
)
from samsa.errors import ErrorCode

if TYPE_CHECKING:
    from samsa.broker.network.loop_monitor import LoopStallMonitor
    from samsa.broker.replication.replica_manager import ReplicaManager
    from samsa.coordinator.group.coordinator import GroupCoordinator
    from samsa.storage import LogManager

__all__ = ["MetricsSource", "Snapshot", "SnapshotCollector", "take_snapshot"]

PARTITIONS_PER_SLICE = 500
"""Partitions a snapshot reads before it lets the loop run other work."""


class MetricsSource(Protocol):
    """What a scrape reads of a broker (on its loop)."""

    request_stats: RequestStats
    connection_stats: ConnectionStats
    storage_stats: StorageStats
    replica_manager: ReplicaManager
    group_coordinator: GroupCoordinator
    log_manager: LogManager

    loop_monitor: LoopStallMonitor

    def open_connections(self) -> int: ...

    def controller_status(self) -> tuple[bool, int]:
        """Whether this broker is the active controller, and the partitions without a
        leader it knows of (0 when it is not the controller)."""
        ...


@dataclass(frozen=True, slots=True)
class HistogramCopy:
    counts: tuple[int, ...]
    bounds: tuple[float, ...]
    sum: float


def _copy(histogram: Histogram) -> HistogramCopy:
    return HistogramCopy(tuple(histogram.counts), histogram.bounds, histogram.sum)


@dataclass(frozen=True, slots=True)
class ApiCopy:
    name: str
    requests: dict[int, int]
    errors: dict[int, int]
    times: dict[str, HistogramCopy]
    """By metric suffix: requestqueuetime, localtime, remotetime, responsesendtime, totaltime."""


@dataclass(frozen=True, slots=True)
class PartitionRow:
    topic: str
    partition: int
    size: int
    segments: int
    log_start_offset: int
    log_end_offset: int


@dataclass
class Snapshot:
    """Plain values read from the broker at one moment of its loop."""

    apis: list[ApiCopy] = field(default_factory=list)
    topics: dict[str, tuple[int, int, int, int, int]] = field(default_factory=dict)
    """topic → (messages in, bytes in, bytes out, replication bytes in, replication bytes out)."""
    partitions: list[PartitionRow] = field(default_factory=list)
    lag: list[tuple[str, str, int, int, int]] = field(default_factory=list)
    """(group, topic, partition, committed offset, lag)."""
    partition_count: int = 0
    leader_count: int = 0
    under_replicated: int = 0
    under_min_isr: int = 0
    isr_shrinks: int = 0
    isr_expands: int = 0
    active_controller: bool = False
    offline_partitions: int = 0
    delayed_fetches: int = 0
    fetch_sessions: tuple[int, int, int, int, int] = (0, 0, 0, 0, 0)
    """(sessions, partitions cached, evictions, sessions created, incremental fetches)."""
    delayed_produces: int = 0
    connections: int = 0
    connections_opened: int = 0
    connections_closed: int = 0
    loop_stalls: int = 0
    longest_loop_stall_s: float = 0.0
    gc_collections: tuple[int, ...] = (0, 0, 0)
    gc_seconds: tuple[float, ...] = (0.0, 0.0, 0.0)
    longest_gc_s: float = 0.0
    flush: HistogramCopy | None = None
    cleaning: HistogramCopy | None = None
    cleaner: tuple[int, int, int, float, float, int] = (0, 0, 0, 0.0, 0.0, 0)
    """(bytes read, bytes written, records removed, last pass seconds, last recopy ratio,
    uncleanable logs)."""


def api_name(api_key: int) -> str:
    """Kafka's name of a request type: ``Produce``, ``ListOffsets``…"""
    name = api_key_map.get(api_key)
    if name is None:
        return str(api_key)
    return "".join(word.capitalize() for word in str(name).split("_"))


async def take_snapshot(source: MetricsSource) -> Snapshot:
    """Read everything a scrape exports (on the broker's loop; no formatting).

    Not one instant: other work runs between slices of partitions, so figures of
    different partitions may be a few milliseconds apart (as any scrape's are).
    """
    snap = Snapshot()
    apis = source.request_stats.apis
    for (api_key, request_name), api in sorted(apis.items(), key=lambda item: item[0][0]):
        times = {
            "requestqueuetime": _copy(api.queue),
            "localtime": _copy(api.local),
            "remotetime": _copy(api.remote),
            "responsesendtime": _copy(api.send),
            "totaltime": _copy(api.total),
        }
        name = request_name or api_name(api_key)
        snap.apis.append(ApiCopy(name, dict(api.requests), dict(api.errors), times))
    replicas = source.replica_manager
    for topic, t in replicas.topic_stats.topics.items():
        snap.topics[topic] = (
            t.messages_in,
            t.bytes_in,
            t.bytes_out,
            t.replication_bytes_in,
            t.replication_bytes_out,
        )
    high_watermarks: dict[tuple[str, int], int] = {}
    for i, partition in enumerate(replicas.partitions()):
        if i and not i % PARTITIONS_PER_SLICE:
            await asyncio.sleep(0)
        partition_log = partition.log
        tp = partition.tp
        segments = partition_log.segments
        snap.partitions.append(
            PartitionRow(
                tp.topic,
                tp.partition,
                sum(s.size for s in segments),
                len(segments),
                partition_log.log_start_offset,
                partition_log.log_end_offset,
            )
        )
        high_watermarks[(tp.topic, tp.partition)] = partition_log.high_watermark
        snap.partition_count += 1
        if partition.is_leader:
            snap.leader_count += 1
            if len(partition.isr) < len(partition.replicas):
                snap.under_replicated += 1
            if len(partition.isr) < partition_log.config.min_insync_replicas:
                snap.under_min_isr += 1
    coordinator = source.group_coordinator
    for group in coordinator.offset_metadata_manager.groups_with_offsets():
        for tp, value in coordinator.committed(group).items():
            hw = high_watermarks.get((tp.topic, tp.partition))
            if value is None or hw is None:
                continue
            snap.lag.append(
                (group, tp.topic, tp.partition, value.offset, max(hw - value.offset, 0))
            )
    snap.isr_shrinks, snap.isr_expands = replicas.isr_shrinks, replicas.isr_expands
    snap.active_controller, snap.offline_partitions = source.controller_status()
    cache = replicas.fetch_manager.cache
    snap.fetch_sessions = (
        len(cache),
        cache.partitions_cached,
        cache.evictions,
        cache.sessions_created,
        cache.incremental_fetches,
    )
    snap.delayed_fetches, snap.delayed_produces = (
        replicas.delayed_fetches,
        replicas.delayed_produces,
    )
    snap.connections = source.open_connections()
    snap.connections_opened = source.connection_stats.opened
    snap.connections_closed = source.connection_stats.closed
    snap.loop_stalls = source.loop_monitor.stalls
    snap.longest_loop_stall_s = source.loop_monitor.longest_stall_s
    snap.gc_collections = tuple(source.loop_monitor.gc_collections)
    snap.gc_seconds = tuple(source.loop_monitor.gc_seconds)
    snap.longest_gc_s = source.loop_monitor.longest_gc_s
    storage = source.storage_stats
    snap.flush, snap.cleaning = _copy(storage.flush), _copy(storage.cleaning)
    snap.cleaner = (
        storage.cleaner_bytes_read,
        storage.cleaner_bytes_written,
        storage.cleaner_records_removed,
        storage.last_clean_seconds,
        storage.last_recopy_ratio,
        source.log_manager.uncleanable_count,
    )
    return snap


Row = tuple[Sequence[str], float]
"""A sample: its label values and its value."""


def _histogram(
    name: str, doc: str, labels: Sequence[str], rows: Iterable[tuple[Sequence[str], HistogramCopy]]
) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc, labels=labels)
    for values, h in rows:
        buckets: list[tuple[str, float]] = []
        cumulative = 0
        for bound, count in zip(h.bounds, h.counts, strict=False):
            cumulative += count
            buckets.append((repr(float(bound)), cumulative))
        buckets.append(("+Inf", cumulative + h.counts[-1]))
        family.add_metric(values, buckets, h.sum)
    return family


def _counter(
    name: str, doc: str, labels: Sequence[str] = (), rows: Iterable[Row] = ()
) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc, labels=labels)
    for values, value in rows:
        family.add_metric(values, value)
    return family


def _gauge(
    name: str, doc: str, labels: Sequence[str] = (), rows: Iterable[Row] = ()
) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=labels)
    for values, value in rows:
        family.add_metric(values, value)
    return family


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


_REQUEST_TIMES = {
    "requestqueuetime": "from the request's last byte read to its handling",
    "localtime": "handling the request, waits in purgatory excluded",
    "remotetime": "waiting in purgatory (a Fetch's long poll, an acks=all Produce's ISR)",
    "responsesendtime": "from the response being ready to its last byte handed to the socket",
    "totaltime": "from the request's last byte read to its response's last byte written",
}
_TOPIC_COUNTERS = (
    ("messagesin", "Records appended as leader (clients' and coordinators' batches)."),
    ("bytesin", "Bytes of record batches appended as leader."),
    ("bytesout", "Record bytes sent to consumers (followers' fetches excluded)."),
    ("replicationbytesin", "Record bytes appended here as a follower."),
    ("replicationbytesout", "Record bytes sent to followers fetching from this leader."),
)


def families(snap: Snapshot) -> Iterator[Metric]:
    """Every metric family of a snapshot (see ``docs/metrics.md``)."""
    prefix = "kafka_server_brokertopicmetrics_"
    for i, (name, doc) in enumerate(_TOPIC_COUNTERS):
        yield _counter(
            f"{prefix}{name}_total",
            doc,
            ["topic"],
            [((topic,), values[i]) for topic, values in sorted(snap.topics.items())],
        )
    prefix = "kafka_network_requestmetrics_"
    yield _counter(
        f"{prefix}requests_total",
        "Requests answered, by request type and version.",
        ["request", "version"],
        [((api.name, str(v)), n) for api in snap.apis for v, n in sorted(api.requests.items())],
    )
    yield _counter(
        f"{prefix}errors_total",
        "Error codes answered (top-level and per partition), by request type and error.",
        ["request", "error"],
        [
            ((api.name, _error_name(c)), n)
            for api in snap.apis
            for c, n in sorted(api.errors.items())
        ],
    )
    for suffix, doc in _REQUEST_TIMES.items():
        yield _histogram(
            f"{prefix}{suffix}_seconds",
            f"Seconds {doc}, by request type.",
            ["request"],
            (((api.name,), api.times[suffix]) for api in snap.apis),
        )
    yield _gauge(
        "kafka_server_delayedoperationpurgatory_purgatorysize",
        "Requests waiting in purgatory now, by kind (Fetch, Produce).",
        ["delayedoperation"],
        [(("Fetch",), snap.delayed_fetches), (("Produce",), snap.delayed_produces)],
    )
    prefix = "kafka_server_fetchsessioncache_"
    sessions, cached, evictions, created, incremental = snap.fetch_sessions
    yield _gauge(
        f"{prefix}numincrementalfetchsessions",
        "Incremental fetch sessions cached now.",
        rows=[((), sessions)],
    )
    yield _gauge(
        f"{prefix}numincrementalfetchpartitionscached",
        "Partitions in the cached fetch sessions now.",
        rows=[((), cached)],
    )
    yield _counter(
        f"{prefix}incrementalfetchsessionevictions_total",
        "Fetch sessions evicted to make room for new ones.",
        rows=[((), evictions)],
    )
    yield _counter(
        f"{prefix}incrementalfetchsessionscreated_total",
        "Fetch sessions created.",
        rows=[((), created)],
    )
    yield _counter(
        f"{prefix}incrementalfetches_total",
        "Incremental fetches served from a session.",
        rows=[((), incremental)],
    )
    prefix = "kafka_server_socketservermetrics_"
    yield _gauge(
        f"{prefix}connection_count", "Client connections open now.", rows=[((), snap.connections)]
    )
    yield _counter(
        f"{prefix}connection_creation_total",
        "Client connections accepted.",
        rows=[((), snap.connections_opened)],
    )
    yield _counter(
        f"{prefix}connection_close_total",
        "Client connections closed.",
        rows=[((), snap.connections_closed)],
    )
    yield _counter(
        "samsa_eventloop_stalls_total",
        "Stalls of the event loop over event.loop.stall.threshold.ms (each logged with its stack).",
        rows=[((), snap.loop_stalls)],
    )
    yield _gauge(
        "samsa_eventloop_longest_stall_seconds",
        "The longest event-loop stall seen since start.",
        rows=[((), snap.longest_loop_stall_s)],
    )
    yield _counter(
        "samsa_gc_collections_total",
        "Passes of Python's cyclic garbage collector, by generation (they stop the loop).",
        ["generation"],
        [((str(g),), n) for g, n in enumerate(snap.gc_collections)],
    )
    yield _counter(
        "samsa_gc_pause_seconds_total",
        "Time the cyclic garbage collector held every thread, by generation.",
        ["generation"],
        [((str(g),), s) for g, s in enumerate(snap.gc_seconds)],
    )
    yield _gauge(
        "samsa_gc_longest_pause_seconds",
        "The longest pass of the cyclic garbage collector since start.",
        rows=[((), snap.longest_gc_s)],
    )
    yield from _log_families(snap)
    yield from _replica_families(snap)
    yield _gauge(
        "kafka_consumergroup_current_offset",
        "Committed offset of a group coordinated here, by group and partition.",
        ["consumergroup", "topic", "partition"],
        [((g, t, str(p)), offset) for g, t, p, offset, _ in snap.lag],
    )
    yield _gauge(
        "kafka_consumergroup_lag",
        "High watermark minus committed offset, by group and partition.",
        ["consumergroup", "topic", "partition"],
        [((g, t, str(p)), lag) for g, t, p, _, lag in snap.lag],
    )
    yield from _storage_families(snap)


_LOG_GAUGES = (
    ("size_bytes", "Bytes of the partition's segments.", "size"),
    ("numlogsegments", "Segments of the partition's log.", "segments"),
    ("logstartoffset", "First offset of the partition's log.", "log_start_offset"),
    ("logendoffset", "Offset the partition's next record will take.", "log_end_offset"),
)


def _log_families(snap: Snapshot) -> Iterator[Metric]:
    rows = [((r.topic, str(r.partition)), r) for r in snap.partitions]
    for name, doc, field_name in _LOG_GAUGES:
        value = operator.attrgetter(field_name)
        yield _gauge(
            f"kafka_log_log_{name}", doc, ["topic", "partition"],
            [(labels, value(r)) for labels, r in rows],
        )  # fmt: skip


def _replica_families(snap: Snapshot) -> Iterator[Metric]:
    prefix = "kafka_server_replicamanager_"
    for name, doc, value in (
        ("partitioncount", "Partitions whose logs this broker holds.", snap.partition_count),
        ("leadercount", "Partitions this broker leads.", snap.leader_count),
        (
            "underreplicatedpartitions",
            "Partitions led here whose ISR is smaller than their replica set.",
            snap.under_replicated,
        ),
        (
            "underminisrpartitioncount",
            "Partitions led here with fewer in-sync replicas than min.insync.replicas.",
            snap.under_min_isr,
        ),
    ):
        yield _gauge(f"{prefix}{name}", doc, rows=[((), value)])
    yield _counter(
        f"{prefix}isrshrinks_total",
        "ISR shrinks written by this broker as leader.",
        rows=[((), snap.isr_shrinks)],
    )
    yield _counter(
        f"{prefix}isrexpands_total",
        "ISR expansions written by this broker as leader.",
        rows=[((), snap.isr_expands)],
    )
    prefix = "kafka_controller_kafkacontroller_"
    yield _gauge(
        f"{prefix}activecontrollercount",
        "1 on the active controller (a single node is its own), 0 elsewhere.",
        rows=[((), int(snap.active_controller))],
    )
    yield _gauge(
        f"{prefix}offlinepartitionscount",
        "Partitions without a live leader, as the active controller sees them.",
        rows=[((), snap.offline_partitions)],
    )


def _storage_families(snap: Snapshot) -> Iterator[Metric]:
    if snap.flush is not None:
        yield _histogram(
            "kafka_log_logflushstats_logflush_seconds",
            "Seconds each flush (fsync) of a log took.",
            [],
            [((), snap.flush)],
        )
    if snap.cleaning is not None:
        yield _histogram(
            "kafka_log_logcleaner_clean_seconds",
            "Seconds each log cleaner pass took.",
            [],
            [((), snap.cleaning)],
        )
    read, written, removed, last_s, recopy, uncleanable = snap.cleaner
    prefix = "kafka_log_logcleaner_"
    yield _counter(f"{prefix}read_bytes_total", "Bytes the log cleaner read.", rows=[((), read)])
    yield _counter(
        f"{prefix}written_bytes_total", "Bytes the log cleaner wrote.", rows=[((), written)]
    )
    yield _counter(
        f"{prefix}removed_records_total", "Records the log cleaner removed.", rows=[((), removed)]
    )
    yield _gauge(
        f"{prefix}max_clean_time_seconds",
        "Seconds the last cleaner pass took.",
        rows=[((), last_s)],
    )
    yield _gauge(
        f"{prefix}cleaner_recopy_percent",
        "Bytes written over bytes read by the last cleaner pass, in percent.",
        rows=[((), 100 * recopy)],
    )
    yield _gauge(
        "kafka_log_logcleanermanager_uncleanable_partitions_count",
        "Compacted logs whose cleaning failed (not cleaned until restart).",
        rows=[((), uncleanable)],
    )


class SnapshotCollector:
    """A ``prometheus_client`` collector of the last snapshot taken (read on any thread)."""

    def __init__(self) -> None:
        self.snapshot: Snapshot | None = None

    def collect(self) -> Iterator[Metric]:
        if self.snapshot is not None:
            yield from families(self.snapshot)
