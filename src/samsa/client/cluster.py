"""What a client knows about the cluster, and its connections to the brokers.

:class:`Cluster` owns the metadata (brokers, topics, partitions, leaders), a
pool of one shared :class:`BrokerConnection` per broker, and the coordinators
found so far. A background task refreshes the metadata when asked
(:meth:`Cluster.request_update`, after NOT_LEADER_OR_FOLLOWER,
UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE or a broken connection) and at
least every ``metadata.max.age.ms``, never sooner than ``retry.backoff.ms``
after the previous attempt. It starts from any of ``bootstrap.servers`` and
goes back to them when no known broker answers (``metadata.recovery.strategy
= rebootstrap``).

Clients needing a connection of their own (a long-poll Fetch must not hold up
the shared one) open it with :meth:`Cluster.open_connection` and close it.

Owned by one event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from samsa.client.config import ClientConfig, parse_bootstrap
from samsa.client.connection import BrokerConnection
from samsa.client.errors import ClientClosedError, ClientTimeoutError, error_for, network_error
from samsa.client.security import ClientSecurity
from samsa.errors import ErrorCode, KafkaError
from samsa.protocol.api_keys import ApiKey
from samsa.types import TopicPartition

__all__ = [
    "COORDINATOR_ERRORS",
    "Backoff",
    "Cluster",
    "CoordinatorType",
    "Node",
    "PartitionMetadata",
    "TopicMetadata",
]

log = logging.getLogger(__name__)

_AUTHENTICATION_ERRORS = frozenset(
    {
        ErrorCode.SASL_AUTHENTICATION_FAILED,
        ErrorCode.UNSUPPORTED_SASL_MECHANISM,
        ErrorCode.ILLEGAL_SASL_STATE,
    }
)

T = TypeVar("T")

COORDINATOR_ERRORS = frozenset(
    {
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
)
"""Find the coordinator again."""


class CoordinatorType:
    """FindCoordinator key types."""

    GROUP = 0
    TRANSACTION = 1


@dataclass(frozen=True, slots=True)
class Node:
    """A broker: its id and the address clients reach it at."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    """A partition as the last Metadata response described it (leader -1: none)."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """A topic and its partitions, sorted by partition number."""

    name: str
    topic_id: uuid.UUID | None
    is_internal: bool
    partitions: tuple[PartitionMetadata, ...]
    error_code: int = 0


class Backoff:
    """Kafka's exponential backoff (KIP-580): initial × 2^attempts, capped, ±20% jitter."""

    def __init__(self, initial_ms: int, max_ms: int) -> None:
        self.initial_ms = initial_ms
        self.max_ms = max(max_ms, initial_ms)

    def delay_ms(self, attempts: int) -> float:
        """The wait before retry number ``attempts`` (1 for the first retry)."""
        if self.initial_ms <= 0:
            return 0.0
        base = min(self.max_ms, self.initial_ms * 2 ** min(max(attempts - 1, 0), 32))
        return float(min(self.max_ms, base * random.uniform(0.8, 1.2)))


class Cluster:
    """Metadata, connections and coordinators of one client (see the module docstring)."""

    def __init__(
        self,
        config: ClientConfig,
        *,
        client_id: str,
        allow_auto_topic_creation: bool = False,
    ) -> None:
        self.config = config
        self.security = ClientSecurity.from_config(config)
        self.client_id = client_id
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.bootstrap = parse_bootstrap(config["bootstrap.servers"])
        self.retry_backoff = Backoff(config["retry.backoff.ms"], config["retry.backoff.max.ms"])
        self._reconnect_backoff = Backoff(
            config["reconnect.backoff.ms"], config["reconnect.backoff.max.ms"]
        )
        self.cluster_id: str | None = None
        self.controller_id = -1
        self.nodes: dict[int, Node] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.topic_errors: dict[str, int] = {}
        """Topics the last answer about them rejected (unknown, invalid name), by error code."""
        self.tracked_topics: set[str] = set()
        """Topics refreshes ask about (with ``track_all_topics`` False)."""
        self.track_all_topics = False
        self.metadata_version = 0
        """Counts successful refreshes; waiters compare it to see a new answer."""
        self.last_refresh = 0.0
        self._last_attempt = 0.0
        self._refresh_task: asyncio.Task[None] | None = None
        self._maintain_task: asyncio.Task[None] | None = None
        self._updated = asyncio.Event()  # set (and replaced) at the end of each attempt
        self._update_requested = asyncio.Event()
        self._connections: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Task[BrokerConnection]] = {}
        self._failures: dict[int, tuple[int, float]] = {}  # node → (attempts, monotonic time)
        self._on_connect: dict[int, set[Callable[[], object]]] = {}  # called after an attempt
        self.on_refresh: list[Callable[[], object]] = []
        """Called after each refresh attempt (a client placing records that awaited it)."""
        self._coordinators: dict[tuple[int, str], int] = {}
        self._closed = False
        self.authentication_error: KafkaError | None = None
        """The last connection's authentication failure (None once one authenticates):
        waiting will not help, so producers and consumers raise it."""

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Fetch the first metadata (from a bootstrap server) and start background refreshes."""
        if self._maintain_task is None:
            self._maintain_task = asyncio.get_running_loop().create_task(
                self._maintain(), name=f"samsa-metadata-{self.client_id}"
            )
        await self.refresh()

    def start_background(self) -> None:
        """Start background refreshes and ask for one, without waiting for it."""
        if self._maintain_task is None:
            self._maintain_task = asyncio.get_running_loop().create_task(
                self._maintain(), name=f"samsa-metadata-{self.client_id}"
            )
        self.request_update()

    async def close(self) -> None:
        """Stop refreshing and close every pooled connection."""
        self._closed = True
        for task in (self._maintain_task, self._refresh_task, *self._connecting.values()):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        connections = list(self._connections.values())
        self._connections.clear()
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError(f"the cluster metadata of {self.client_id} was closed")

    # -- metadata --------------------------------------------------------------------------

    def leader_for(self, tp: TopicPartition) -> int | None:
        """The leader's node id, or None when unknown (no metadata, or no leader)."""
        topic = self.topics.get(tp.topic)
        if topic is None or not 0 <= tp.partition < len(topic.partitions):
            return None
        partition = topic.partitions[tp.partition]
        if partition.partition != tp.partition or partition.leader < 0:
            return None
        return partition.leader

    def partitions_for(self, topic: str) -> tuple[PartitionMetadata, ...] | None:
        """The partitions of ``topic``, or None when the metadata does not know it."""
        metadata = self.topics.get(topic)
        if metadata is None or not metadata.partitions:
            return None
        return metadata.partitions

    def request_update(self) -> None:
        """Ask for a refresh soon (after retry.backoff.ms since the last one)."""
        self._update_requested.set()

    async def refresh(self, topics: Iterable[str] | None = None) -> None:
        """Refresh now and wait for it. ``topics`` adds to the tracked topics first.

        Concurrent callers share one request in flight. Raises the refresh's error
        (NETWORK_EXCEPTION when no broker answered).
        """
        self._check_open()
        if topics is not None:
            self.tracked_topics.update(topics)
        task = self._refresh_task
        if task is None or task.done():
            task = self._refresh_task = asyncio.get_running_loop().create_task(self._refresh_once())
        await asyncio.shield(task)

    async def wait_for_update(self, timeout_s: float) -> bool:
        """Wait until the next refresh attempt ends (or ``timeout_s``); True if it did."""
        self.request_update()
        updated = self._updated
        try:
            async with asyncio.timeout(max(timeout_s, 0)):
                await updated.wait()
        except TimeoutError:
            return False
        return True

    async def _maintain(self) -> None:
        max_age_s = self.config["metadata.max.age.ms"] / 1000
        failures = 0
        while True:
            age = time.monotonic() - self.last_refresh
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(max_age_s - age, 0)):
                    await self._update_requested.wait()
            # Never sooner than the backoff after the previous attempt.
            wait_ms = (
                self.retry_backoff.delay_ms(failures)
                if failures
                else (self.retry_backoff.initial_ms)
            )
            since_ms = (time.monotonic() - self._last_attempt) * 1000
            if since_ms < wait_ms:
                await asyncio.sleep((wait_ms - since_ms) / 1000)
            self._update_requested.clear()
            try:
                await self.refresh()
                failures = 0
            except KafkaError as exc:
                failures += 1
                self._update_requested.set()
                log.info("%s: metadata refresh failed (will retry): %s", self.client_id, exc)

    async def _refresh_once(self) -> None:
        self._last_attempt = time.monotonic()
        try:
            connection = await self.any_connection()
            all_topics = self.track_all_topics
            topics = None if all_topics else [{"name": t} for t in sorted(self.tracked_topics)]
            version = connection.version(ApiKey.METADATA)
            if version == 0 and topics == []:
                topics, all_topics = None, True  # v0 cannot ask for no topics; ask for all
            response = await connection.request(
                ApiKey.METADATA,
                {
                    "topics": topics if version else (topics or []),
                    "allow_auto_topic_creation": self.allow_auto_topic_creation,
                },
            )
            self._apply(response, all_topics)
        finally:
            updated, self._updated = self._updated, asyncio.Event()
            updated.set()
            for callback in self.on_refresh:
                callback()

    def _apply(self, response: Any, all_topics: bool) -> None:
        self.nodes = {
            int(b.node_id): Node(int(b.node_id), b.host, int(b.port), b.rack)
            for b in response.brokers
        }
        self.cluster_id = getattr(response, "cluster_id", None)
        self.controller_id = int(getattr(response, "controller_id", -1))
        topics = {} if all_topics else dict(self.topics)
        for topic in response.topics or ():
            name = topic.name
            code = int(topic.error_code)
            if code and code != ErrorCode.LEADER_NOT_AVAILABLE:
                topics.pop(name, None)
                self.topic_errors[name] = code
                continue
            self.topic_errors.pop(name, None)
            partitions = sorted(
                (
                    PartitionMetadata(
                        name,
                        int(p.partition_index),
                        int(p.leader_id),
                        int(getattr(p, "leader_epoch", -1)),
                        tuple(int(r) for r in p.replica_nodes),
                        tuple(int(r) for r in p.isr_nodes),
                        tuple(int(r) for r in getattr(p, "offline_replicas", ())),
                        int(p.error_code),
                    )
                    for p in topic.partitions or ()
                ),
                key=lambda p: p.partition,
            )
            topics[name] = TopicMetadata(
                name,
                getattr(topic, "topic_id", None),
                bool(getattr(topic, "is_internal", False)),
                tuple(partitions),
                code,
            )
        self.topics = topics
        self.metadata_version += 1
        self.last_refresh = time.monotonic()

    # -- connections -----------------------------------------------------------------------

    def _address(self, node_id: int) -> tuple[str, int]:
        node = self.nodes.get(node_id)
        if node is not None:
            return node.host, node.port
        if node_id < 0 and -node_id <= len(self.bootstrap):
            return self.bootstrap[-node_id - 1]
        raise network_error(f"node {node_id} is not in the cluster metadata")

    async def connection(self, node_id: int) -> BrokerConnection:
        """The shared connection to ``node_id`` (opened, or reopened, as needed).

        Negative ids are bootstrap addresses (-1 for the first). A node that failed
        recently is retried only after ``reconnect.backoff.ms`` (exponential).
        """
        self._check_open()
        connection = self._connections.get(node_id)
        if connection is not None:
            idle_ms = self.config["connections.max.idle.ms"]
            idle = idle_ms >= 0 and (time.monotonic() - connection.last_used) * 1000 > idle_ms
            if connection.usable and not (idle and connection.in_flight == 0):
                return connection
            del self._connections[node_id]
            await connection.close()
        task = self._connecting.get(node_id)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._connect(node_id))
            self._connecting[node_id] = task
            task.add_done_callback(lambda _t: self._connecting.pop(node_id, None))
        return await asyncio.shield(task)

    def ready_connection(
        self, node_id: int, on_ready: Callable[[], object] | None = None
    ) -> BrokerConnection | None:
        """The shared connection to ``node_id`` if it is open now; else start opening it
        (``on_ready`` is called when that attempt ends) and return None."""
        if self._closed:
            return None
        connection = self._connections.get(node_id)
        if connection is not None and connection.usable:
            return connection
        if on_ready is not None:
            self._on_connect.setdefault(node_id, set()).add(on_ready)
        if node_id not in self._connecting:
            task = asyncio.get_running_loop().create_task(self.connection(node_id))
            task.add_done_callback(_retrieve)
        return None

    async def _connect(self, node_id: int) -> BrokerConnection:
        attempts, failed_at = self._failures.get(node_id, (0, 0.0))
        if attempts:
            delay_ms = self._reconnect_backoff.delay_ms(attempts)
            remaining = failed_at + delay_ms / 1000 - time.monotonic()
            if remaining > 0:
                await asyncio.sleep(remaining)
        connection = self.new_connection(node_id)
        try:
            await connection.open()
        except KafkaError as exc:
            if exc.code in _AUTHENTICATION_ERRORS:
                if self.authentication_error is None:
                    log.info("%s: %s", self.client_id, exc)
                self.authentication_error = exc
            self._failures[node_id] = (attempts + 1, time.monotonic())
            if node_id >= 0:
                self.request_update()  # the broker may have moved or gone
            raise
        else:
            self.authentication_error = None
            self._failures.pop(node_id, None)
            self._connections[node_id] = connection
            return connection
        finally:
            for callback in self._on_connect.pop(node_id, ()):
                callback()

    def new_connection(self, node_id: int) -> BrokerConnection:
        """An unopened connection to ``node_id`` with this client's settings."""
        host, port = self._address(node_id)
        config = self.config
        return BrokerConnection(
            host,
            port,
            node_id=node_id,
            client_id=self.client_id,
            request_timeout_ms=config["request.timeout.ms"],
            setup_timeout_ms=config["socket.connection.setup.timeout.ms"],
            send_buffer_bytes=config["send.buffer.bytes"],
            receive_buffer_bytes=config["receive.buffer.bytes"],
            security=self.security,
        )

    async def open_connection(self, node_id: int) -> BrokerConnection:
        """A new connection to ``node_id`` for the caller alone (it must close it)."""
        self._check_open()
        return await self.new_connection(node_id).open()

    async def any_connection(self) -> BrokerConnection:
        """A connection to some broker: the least busy open one, else the first that opens."""
        self._check_open()
        open_ones = [c for c in self._connections.values() if c.usable]
        known = [c for c in open_ones if c.node_id in self.nodes]
        if known or open_ones:
            return min(known or open_ones, key=lambda c: c.in_flight)
        candidates = list(self.nodes)
        random.shuffle(candidates)
        if not candidates or self.config["metadata.recovery.strategy"] == "rebootstrap":
            candidates += [-(i + 1) for i in range(len(self.bootstrap))]
        errors = []
        for node_id in candidates:
            try:
                return await self.connection(node_id)
            except KafkaError as exc:
                errors.append(f"{exc}")
        raise network_error("no broker could be reached: " + "; ".join(errors))

    async def send(
        self, node_id: int | None, api_key: int, body: Mapping[str, Any] | Any, **options: Any
    ) -> Any:
        """Send one request to ``node_id`` (None: any broker) and return the response."""
        if node_id is None:
            connection = await self.any_connection()
        else:
            connection = await self.connection(node_id)
        return await connection.request(api_key, body, **options)

    # -- coordinators ----------------------------------------------------------------------

    async def coordinator(self, key: str, key_type: int = CoordinatorType.GROUP) -> int:
        """The node id of the coordinator for a group (key type 0) or transactional id (1)."""
        cached = self._coordinators.get((key_type, key))
        if cached is not None and cached in self.nodes:
            return cached
        connection = await self.any_connection()
        response = await connection.request(
            ApiKey.FIND_COORDINATOR, {"key": key, "key_type": key_type, "coordinator_keys": [key]}
        )
        answer = response.coordinators[0] if hasattr(response, "coordinators") else response
        code = int(answer.error_code)
        if code:
            raise error_for(code, f"FindCoordinator for {key!r}: {answer.error_message or ''}")
        node_id = int(answer.node_id)
        if node_id not in self.nodes:
            self.nodes[node_id] = Node(node_id, answer.host, int(answer.port))
        self._coordinators[key_type, key] = node_id
        return node_id

    def invalidate_coordinator(self, key: str, key_type: int = CoordinatorType.GROUP) -> None:
        """Forget the coordinator (after NOT_COORDINATOR or a broken connection)."""
        self._coordinators.pop((key_type, key), None)

    async def send_to_coordinator(
        self,
        key: str,
        key_type: int,
        api_key: int,
        body: Mapping[str, Any] | Any,
        **options: Any,
    ) -> Any:
        """Send a request to the coordinator of ``key``; a connection failure forgets it."""
        node_id = await self.coordinator(key, key_type)
        try:
            return await self.send(node_id, api_key, body, **options)
        except KafkaError as exc:
            if exc.code == ErrorCode.NETWORK_EXCEPTION:
                self.invalidate_coordinator(key, key_type)
            raise

    # -- retries ---------------------------------------------------------------------------

    async def retrying(
        self,
        operation: Callable[[], Awaitable[T]],
        *,
        timeout_ms: int,
        what: str,
        retries: int | None = None,
    ) -> T:
        """Run ``operation`` until it succeeds, retrying retriable KafkaErrors with backoff.

        Errors flagged ``invalid_metadata`` ask for a metadata refresh first. When
        ``timeout_ms`` passes, raises :class:`ClientTimeoutError` chained to the last error.
        """
        deadline = time.monotonic() + timeout_ms / 1000
        attempts = 0
        last: KafkaError | None = None
        while True:
            try:
                async with asyncio.timeout_at(_loop_time(deadline)):
                    return await operation()
            except TimeoutError as exc:
                detail = f"; last error: {last}" if last is not None else ""
                raise ClientTimeoutError(
                    f"{what} did not complete within {timeout_ms} ms{detail}"
                ) from (last or exc)
            except KafkaError as exc:
                last = exc
                attempts += 1
                if not exc.retriable or (retries is not None and attempts > retries):
                    raise
                if self.authentication_error is not None:
                    raise self.authentication_error from exc
                if exc.invalid_metadata:
                    self.request_update()
                delay_s = self.retry_backoff.delay_ms(attempts) / 1000
                if time.monotonic() + delay_s >= deadline:
                    raise ClientTimeoutError(
                        f"{what} did not complete within {timeout_ms} ms; last error: {exc}"
                    ) from exc
                log.debug("%s: retrying %s after %s", self.client_id, what, exc)
                await asyncio.sleep(delay_s)


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Fetch a background task's exception, so asyncio does not log it as never retrieved
    (a failed connection attempt is already logged and counted for backoff)."""
    if not task.cancelled():
        task.exception()


def _loop_time(monotonic_deadline: float) -> float:
    loop = asyncio.get_running_loop()
    return loop.time() + (monotonic_deadline - time.monotonic())


def topic_partitions(tps: Collection[TopicPartition]) -> dict[str, list[int]]:
    """Partitions grouped by topic, sorted (the shape of most Kafka requests)."""
    grouped: dict[str, list[int]] = {}
    for tp in sorted(tps):
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return grouped
