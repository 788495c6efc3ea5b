"""What the broker counts as it serves: requests, bytes and messages, waits, flushes.

Kafka keeps these as Yammer meters and histograms updated on its request
threads; here they are plain Python numbers that the broker's event loop alone
updates (one owner: no locks), once per request, per appended batch or per
partition of a fetch — never per record. Updating one costs about a tenth of a
microsecond; a request pays for a handful (five histogram observations and a
counter). Scrapes read them on the same loop (:mod:`~samsa.broker.metrics.collector`).

Counters only grow while the broker runs (Prometheus counters: a restart is a
reset, which ``rate()`` handles). Nothing here imports ``prometheus_client``.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from contextvars import ContextVar

LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
"""Upper bounds (seconds) of the request-time histograms: 100 µs to 30 s (+Inf above)."""

DISK_BUCKETS_S: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    30.0, 60.0, 300.0,
)  # fmt: skip
"""Upper bounds (seconds) of the flush and cleaner histograms: 0.5 ms to 5 minutes."""


class Histogram:
    """Observations counted into buckets by upper bound (Prometheus's ``le``), with their sum.

    ``counts[i]`` holds the observations in ``(bounds[i-1], bounds[i]]``; the
    last slot those above every bound (+Inf). Cumulative counts are made at scrape.
    """

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0

    @property
    def count(self) -> int:
        return sum(self.counts)

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value


class RequestTiming:
    """One request's times (``time.monotonic()`` seconds) as the connection serves it.

    ``arrived``: its last byte was read; ``started``: its handling began;
    ``ready``: its response was complete. ``remote`` is the part of the handling
    spent waiting in purgatory (a Fetch's long poll, an ``acks=all`` Produce's wait
    for the ISR), which Kafka reports as remote time rather than local time.
    """

    __slots__ = (
        "api_key",
        "api_version",
        "arrived",
        "errors",
        "ready",
        "remote",
        "request_name",
        "started",
    )

    def __init__(self, arrived: float, started: float) -> None:
        self.arrived = arrived
        self.started = started
        self.ready = started
        self.remote = 0.0
        self.api_key = -1
        self.request_name: str | None = None
        """Kafka's name for a kind of request its API key does not tell apart
        (``FetchConsumer``, ``FetchFollower``); None: the API's name."""
        self.api_version = -1
        self.errors: list[int] | None = None

    def note_error(self, code: int) -> None:
        if self.errors is None:
            self.errors = [code]
        else:
            self.errors.append(code)


request_timing: ContextVar[RequestTiming | None] = ContextVar("request_timing", default=None)
"""The timing of the request being served on this connection (None outside a request)."""


def note_error(code: int) -> None:
    """Count an error code answered in the current request's response (a partition's, say)."""
    timing = request_timing.get()
    if timing is not None and code:
        timing.note_error(code)


def name_request(name: str) -> None:
    """Record the current request under ``name`` rather than its API's name (Kafka's
    ``FetchConsumer`` and ``FetchFollower``)."""
    timing = request_timing.get()
    if timing is not None:
        timing.request_name = name


def add_remote_time(seconds: float) -> None:
    """Count ``seconds`` of the current request's handling as time waiting in purgatory."""
    timing = request_timing.get()
    if timing is not None:
        timing.remote += seconds


class ApiStats:
    """Counts and time histograms of one API (Kafka's ``RequestMetrics`` of one request type)."""

    __slots__ = ("errors", "local", "queue", "remote", "requests", "send", "total")

    def __init__(self) -> None:
        self.requests: dict[int, int] = {}
        """Requests served, by API version."""
        self.errors: dict[int, int] = {}
        """Error codes answered (top-level and per partition), by code."""
        self.queue = Histogram(LATENCY_BUCKETS_S)
        self.local = Histogram(LATENCY_BUCKETS_S)
        self.remote = Histogram(LATENCY_BUCKETS_S)
        self.send = Histogram(LATENCY_BUCKETS_S)
        self.total = Histogram(LATENCY_BUCKETS_S)


class RequestStats:
    """Every API's :class:`ApiStats`, recorded once per request when its response is written."""

    def __init__(self) -> None:
        self.apis: dict[tuple[int, str | None], ApiStats] = {}
        """By API key and request name (None but for Fetch: see :func:`name_request`)."""

    def record(self, timing: RequestTiming, written: float) -> None:
        """The request of ``timing`` was answered: its response left at ``written``."""
        key = (timing.api_key, timing.request_name)
        api = self.apis.get(key)
        if api is None:
            api = self.apis[key] = ApiStats()
        requests = api.requests
        requests[timing.api_version] = requests.get(timing.api_version, 0) + 1
        # Five observations written out: this runs once per request of every client.
        at = bisect.bisect_left
        bounds = LATENCY_BUCKETS_S
        value = timing.started - timing.arrived
        h = api.queue
        h.counts[at(bounds, value)] += 1
        h.sum += value
        value = max(timing.ready - timing.started - timing.remote, 0.0)
        h = api.local
        h.counts[at(bounds, value)] += 1
        h.sum += value
        value = timing.remote
        h = api.remote
        h.counts[at(bounds, value)] += 1
        h.sum += value
        value = written - timing.ready
        h = api.send
        h.counts[at(bounds, value)] += 1
        h.sum += value
        value = written - timing.arrived
        h = api.total
        h.counts[at(bounds, value)] += 1
        h.sum += value
        if timing.errors:
            errors = api.errors
            for code in timing.errors:
                errors[code] = errors.get(code, 0) + 1


class TopicStats:
    """Kafka's ``BrokerTopicMetrics`` of one topic: what it took in and gave out here."""

    __slots__ = (
        "bytes_in",
        "bytes_out",
        "messages_in",
        "replication_bytes_in",
        "replication_bytes_out",
    )

    def __init__(self) -> None:
        self.messages_in = 0
        """Records appended as leader (clients' and the coordinators' batches)."""
        self.bytes_in = 0
        """Bytes of the batches appended as leader."""
        self.bytes_out = 0
        """Record bytes sent to consumers (fetches of followers excluded, as in Kafka)."""
        self.replication_bytes_in = 0
        """Record bytes a follower here appended from its leader."""
        self.replication_bytes_out = 0
        """Record bytes sent to followers fetching from this leader."""


class BrokerTopicStats:
    """:class:`TopicStats` by topic name, made on first use and removed with the topic (Kafka's
    ``BrokerTopicStats.removeMetrics``), so a deleted topic's series leave ``/metrics``; a
    topic made again under its name counts from zero, a counter reset to Prometheus."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicStats] = {}

    def topic(self, name: str) -> TopicStats:
        stats = self.topics.get(name)
        if stats is None:
            stats = self.topics[name] = TopicStats()
        return stats

    def remove(self, name: str) -> None:
        self.topics.pop(name, None)


class StorageStats:
    """Flushes and cleaner passes of the log manager (Kafka's ``LogFlushStats`` and
    ``LogCleaner`` metrics)."""

    def __init__(self) -> None:
        self.flush = Histogram(DISK_BUCKETS_S)
        """Seconds each flush of a log took (fsync of its segments, on a worker thread)."""
        self.cleaning = Histogram(DISK_BUCKETS_S)
        """Seconds each cleaner pass took."""
        self.cleaner_bytes_read = 0
        self.cleaner_bytes_written = 0
        self.cleaner_records_removed = 0
        self.last_clean_seconds = 0.0
        self.last_recopy_ratio = 0.0
        """Bytes written over bytes read by the last pass (Kafka's ``cleaner-recopy-percent``)."""

    def flushed(self, seconds: float) -> None:
        self.flush.observe(seconds)

    def cleaned(self, seconds: float, bytes_read: int, bytes_written: int, removed: int) -> None:
        self.cleaning.observe(seconds)
        self.cleaner_bytes_read += bytes_read
        self.cleaner_bytes_written += bytes_written
        self.cleaner_records_removed += removed
        self.last_clean_seconds = seconds
        self.last_recopy_ratio = bytes_written / bytes_read if bytes_read else 0.0


class ConnectionStats:
    """Connections opened and closed since start (the open ones are counted at scrape)."""

    __slots__ = ("closed", "opened")

    def __init__(self) -> None:
        self.opened = 0
        self.closed = 0
