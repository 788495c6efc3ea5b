"""The broker process: start-up, the listening sockets, shutdown.

One asyncio loop (uvloop when installed). :class:`Broker` builds the parts both
modes share — logs, coordinators, handlers, listeners — and takes the rest from one
of two factories (:mod:`samsa.broker.modes`): :func:`~samsa.broker.modes.single_node`,
or, with ``zookeeper.connect`` set, :func:`~samsa.broker.modes.zookeeper_cluster`
(its link to the cluster is :mod:`samsa.broker.metadata.zk_cluster`). Each accepted
socket becomes a :class:`~samsa.broker.network.connection.Connection`.

``max.connections`` and ``max.connections.per.ip`` are applied where
connections are accepted (:mod:`samsa.broker.network.acceptor`), which also logs
running out of descriptors.

The broker counts what it serves as it goes (:mod:`samsa.broker.metrics`); with
``metrics.listeners`` set it also serves them to Prometheus at ``GET /metrics``
(``prometheus_client`` is imported only then). With ``schema.registry.listeners``
set it serves the schema registry (:mod:`samsa.registry`, imported only then).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from samsa.broker.api import request_listener
from samsa.broker.config import BrokerConfig, Listener
from samsa.broker.dynamic_config import DynamicBrokerConfig, reconfigure_logs
from samsa.broker.handlers import Services, register_all
from samsa.broker.metrics.stats import ConnectionStats, RequestStats, StorageStats
from samsa.broker.modes import SharedParts, single_node, zookeeper_cluster
from samsa.broker.network.acceptor import (
    Acceptor,
    ConnectionQuotas,
    SpareDescriptor,
    is_out_of_descriptors,
    raise_open_files_limit,
)
from samsa.broker.network.connection import Connection
from samsa.broker.network.frame_buffers import FrameBufferPool
from samsa.broker.network.loop_monitor import LoopStallMonitor
from samsa.broker.network.memory_pool import RequestMemoryPool
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.quota.manager import ClientQuotas
from samsa.broker.rate_limited_log import RateLimitedLog
from samsa.broker.replication.partition import Partition
from samsa.broker.security.authorizer import Authorizer, parse_super_users
from samsa.cluster.acl_store import LocalAclStore, ZkAclStore
from samsa.cluster.local import LocalMetadataStore, new_cluster_id
from samsa.coordinator.group.consumer_group_manager import ConsumerGroupConfig
from samsa.coordinator.group.coordinator import OFFSETS_TOPIC, GroupConfig, GroupCoordinator
from samsa.coordinator.transaction.coordinator import (
    TRANSACTION_STATE_TOPIC,
    TransactionConfig,
    TransactionCoordinator,
)
from samsa.errors import ConfigError, SamsaError
from samsa.protocol.codec import load_schemas
from samsa.storage import Log, LogManager
from samsa.storage.cleaner import CleanResult
from samsa.storage.validator import AppendOrigin
from samsa.types import TopicPartition

if TYPE_CHECKING:
    from samsa.broker.metrics.exporter import MetricsExporter
    from samsa.registry.server import SchemaRegistry

log = logging.getLogger(__name__)


_TLS_HANDSHAKE_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class BoundAddress:
    host: str
    port: int
    listener: str = "PLAINTEXT"


class Broker:
    """Everything a request handler may need, and the broker's lifecycle."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        """The effective configuration (static, then dynamic layers: see ``dynamic_config``)."""
        self.dynamic_config = DynamicBrokerConfig(config)
        self.node_id = config.node_id
        self.metadata_store = LocalMetadataStore(
            config.log_dirs, config.node_id, config["cluster.id"]
        )
        self.log_manager = LogManager(
            config.log_dirs,
            config.log_defaults,
            retention_check_interval_ms=config["log.retention.check.interval.ms"],
            flush_scheduler_interval_ms=config["log.flush.scheduler.interval.ms"],
            checkpoint_interval_ms=config["log.flush.offset.checkpoint.interval.ms"] or 60_000,
            cleaner_enabled=config["log.cleaner.enable"],
            cleaner_backoff_ms=config["log.cleaner.backoff.ms"],
            cleaner_dedupe_buffer_size=config["log.cleaner.dedupe.buffer.size"],
            recovery_threads_per_data_dir=config["num.recovery.threads.per.data.dir"],
        )
        self.storage_stats = StorageStats()
        self.log_manager.on_flushed = self.storage_stats.flushed
        self.log_manager.on_cleaned = self._cleaned
        self.client_quotas = ClientQuotas(
            config["quota.window.num"], config["quota.window.size.seconds"]
        )
        build_mode = zookeeper_cluster if config["zookeeper.connect"] else single_node
        mode = build_mode(
            SharedParts(
                config=config,
                current_config=lambda: self.config,
                metadata_store=self.metadata_store,
                log_manager=self.log_manager,
                dynamic_config=self.dynamic_config,
                client_quotas=self.client_quotas,
                advertised_listeners=self.advertised_listeners,
                advertised_for_request=self._advertised_for_request,
                on_partitions_deleted=self._partitions_deleted,
            )
        )
        self.cluster = mode.cluster
        """This broker's link to a ZooKeeper cluster (None: a single node)."""
        self.metadata = mode.metadata
        self.replica_manager = mode.replica_manager
        self.topics = mode.topics
        self.scram_credentials = mode.scram_credentials
        self._local_credentials = mode.local_credentials
        self.marker_channel = mode.marker_channel
        self.local_quotas = mode.local_quotas
        self.zk_quotas = mode.zk_quotas
        self.config_changes = mode.config_changes
        """``/config/changes``, followed for client quotas and SCRAM credentials (a cluster)."""
        self.group_coordinator = GroupCoordinator(
            config["offsets.topic.num.partitions"],
            self._append_internal,
            self.log_manager.clock,
            GroupConfig(
                min_session_timeout_ms=config["group.min.session.timeout.ms"],
                max_session_timeout_ms=config["group.max.session.timeout.ms"],
                initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
                max_size=config["group.max.size"],
                offsets_retention_ms=config["offsets.retention.minutes"] * 60_000,
                retention_check_interval_ms=config["offsets.retention.check.interval.ms"],
            ),
            consumer_config=ConsumerGroupConfig(
                session_timeout_ms=config["group.consumer.session.timeout.ms"],
                heartbeat_interval_ms=config["group.consumer.heartbeat.interval.ms"],
                assignors=tuple(config["group.consumer.assignors"]),
                max_size=config["group.consumer.max.size"],
            ),
        )
        self.txn_coordinator = TransactionCoordinator(
            config["transaction.state.log.num.partitions"],
            self._append_internal,
            self.log_manager.clock,
            mode.write_marker,
            mode.allocate_producer_id,
            config=TransactionConfig(
                max_timeout_ms=config["transaction.max.timeout.ms"],
                abort_timed_out_interval_ms=config[
                    "transaction.abort.timed.out.transaction.cleanup.interval.ms"
                ],
                remove_expired_interval_ms=config[
                    "transaction.remove.expired.transaction.cleanup.interval.ms"
                ],
                transactional_id_expiration_ms=config["transactional.id.expiration.ms"],
                offsets_topic_partitions=config["offsets.topic.num.partitions"],
            ),
        )
        if mode.coordinators_serve_led_partitions_only:
            self.group_coordinator.own_led_partitions_only()
            self.txn_coordinator.own_led_partitions_only()
        # Markers written to __consumer_offsets publish or drop transactional offset commits.
        self.replica_manager.on_txn_marker = self.group_coordinator.on_txn_marker
        self.replica_manager.on_leadership_change = self._on_leadership_change
        self.dynamic_config.on_change = self.reconfigure
        self.authorizer: Authorizer | None = None
        """Decides what each request may do (None: ``authorizer.class.name`` is empty)."""
        self.acl_store: LocalAclStore | ZkAclStore | None = None
        if config["authorizer.class.name"].strip():
            self.acl_store = mode.new_acl_store()
            self.authorizer = Authorizer(
                parse_super_users(config["super.users"]),
                config["allow.everyone.if.no.acl.found"],
                self.acl_store,
            )
        self.registry = ApiRegistry()
        register_all(
            self.registry,
            Services(
                node_id=self.node_id,
                config=lambda: self.config,
                advertised=lambda: self.advertised,
                metadata=self.metadata,
                topics=self.topics,
                allocate_producer_id=mode.allocate_producer_id,
                replica_manager=self.replica_manager,
                group_coordinator=self.group_coordinator,
                txn_coordinator=self.txn_coordinator,
                dynamic_config=self.dynamic_config,
                elect_leaders=mode.elect_leaders,
                reassign=mode.reassign,
                list_reassignments=mode.list_reassignments,
                scram_credentials=self.scram_credentials,
                client_quotas=self.client_quotas,
                quota_store=mode.quota_store,
            ),
        )
        self.bound: list[BoundAddress] = []
        self._servers: list[Acceptor] = []
        self._connections: set[Connection] = set()
        self.request_stats = RequestStats()
        self.connection_stats = ConnectionStats()
        self.metrics: MetricsExporter | None = None
        """The ``metrics.listeners`` endpoint (None when none is configured)."""
        self.schema_registry: SchemaRegistry | None = None
        """The ``schema.registry.listeners`` registry (None when none is configured)."""
        # What any peer can provoke at will is logged a few times a minute at most.
        self.bad_request_log = RateLimitedLog(log, interval_s=60.0, burst=10)
        self.handler_traceback_log = RateLimitedLog(log, interval_s=600.0, burst=1)
        self.connection_log = RateLimitedLog(log, interval_s=60.0, burst=10)
        self.quotas = ConnectionQuotas(config["max.connections"], config["max.connections.per.ip"])
        self.memory_pool = RequestMemoryPool(config["queued.max.request.bytes"])
        self.frame_buffers = FrameBufferPool()
        idle_ms = config["connections.max.idle.ms"]
        self.connections_max_idle_s: float | None = idle_ms / 1000 if idle_ms >= 0 else None
        self._accepting: set[asyncio.Task[Any]] = set()
        self._spare_descriptor = SpareDescriptor()
        self._schemas_loaded: set[tuple[int, int]] = set()
        self._stopped = asyncio.Event()
        self.loop_monitor = LoopStallMonitor(config["event.loop.stall.threshold.ms"] / 1000)
        self._ready = False
        self.stopped_cleanly = False

    @property
    def advertised(self) -> Listener:
        """The address clients are told to use (first advertised listener; real port if 0)."""
        return self.advertised_listeners()[0]

    def _advertised_for_request(self) -> Listener:
        """The advertised listener named as the one the current request came in on (the
        first when it has none of that name)."""
        name = request_listener.get()
        listeners = self.advertised_listeners()
        return next((lr for lr in listeners if lr.name == name), listeners[0])

    def advertised_listeners(self) -> tuple[Listener, ...]:
        """Every advertised listener, with the port it was bound to where it says 0."""
        found = []
        for listener in self.config.advertised_listeners:
            bound = next((b for b in self.bound if b.listener == listener.name), None)
            if listener.port == 0 and bound is not None:
                listener = Listener(listener.name, listener.host, bound.port, listener.protocol)
            found.append(listener)
        return tuple(found)

    async def start(self) -> None:
        started = time.monotonic()
        self._raise_open_files_limit()
        # Listen before anything is created on disk: a port in use stops start-up first.
        await self._bind()
        if self.config.metrics_listeners:
            from samsa.broker.metrics.exporter import MetricsExporter

            self.metrics = MetricsExporter(self)
            await self.metrics.listen(list(self.config.metrics_listeners))
        if self.config.schema_registry_listeners:
            from samsa.registry.server import SchemaRegistry

            self.schema_registry = SchemaRegistry(
                list(self.config.schema_registry_listeners),
                topic=self.config["schema.registry.topic"],
                replication_factor=self.config["schema.registry.topic.replication.factor"],
                max_request_bytes=self.config["schema.registry.max.request.bytes"],
            )
            await self.schema_registry.listen()
        if self.cluster is not None:
            proposed = await asyncio.to_thread(self.metadata_store.stored_cluster_id)
            self.metadata_store.cluster_id = await self.cluster.connect(
                proposed or self.config["cluster.id"] or new_cluster_id()
            )
            await asyncio.to_thread(self.metadata_store.load_meta)
        else:
            await asyncio.to_thread(self.metadata_store.load)
        await asyncio.to_thread(self.dynamic_config.load)
        if self._local_credentials is not None:
            await asyncio.to_thread(self._local_credentials.load)
        if self.acl_store is not None and self.authorizer is not None:
            await self.acl_store.start(self.authorizer)
        self.reconfigure(self.dynamic_config.current)
        if self.local_quotas is not None:
            self.local_quotas.load()
        if self.config_changes is not None:
            await self.config_changes.start()
        await asyncio.to_thread(self.log_manager.startup, self.replica_manager.topic_config)
        if self.cluster is not None:
            # Leadership comes from ZooKeeper: leaders load their coordinators' state.
            self.cluster.new_data_dirs = list(self.metadata_store.new_dirs)
            await self.cluster.start()
            for tp in self.cluster.unknown_logs():
                # Deleted or moved away while this broker was down: kept aside, not deleted.
                self.log_manager.move_aside_stray(tp)
        else:
            self.replica_manager.load()
            self.group_coordinator.load(self._logs_of(OFFSETS_TOPIC))
            self.txn_coordinator.load(self._logs_of(TRANSACTION_STATE_TOPIC))
        self.group_coordinator.start()
        self.txn_coordinator.start()
        self.log_manager.start_background_tasks()
        self._ready = True
        self.loop_monitor.start()
        if self.metrics is not None:
            await self.metrics.start_serving()
        for server in self._servers:
            server.resume()
        if self.schema_registry is not None:
            await self._start_schema_registry(self.schema_registry)
        addresses = ", ".join(f"{b.host}:{b.port}" for b in self.bound)
        log.info(
            "samsa broker %d ready on %s (cluster %s, data in %s) in %.0f ms",
            self.node_id,
            addresses,
            self.metadata.cluster_id,
            ", ".join(str(d) for d in self.config.log_dirs),
            (time.monotonic() - started) * 1000,
        )

    async def _start_schema_registry(self, registry: SchemaRegistry) -> None:
        """The registry reads its topic as a client of this broker, so it starts once the
        broker accepts connections."""
        from samsa.registry.server import plaintext_bootstrap

        protocols = {lr.name: lr.protocol for lr in self.config.listeners}
        bootstrap = plaintext_bootstrap(
            [(b.host, b.port, b.listener) for b in self.bound], protocols
        )
        await registry.start({"bootstrap.servers": bootstrap})

    async def _partitions_deleted(self, partitions: list[TopicPartition]) -> None:
        await self.group_coordinator.on_partitions_deleted(partitions)

    def _logs_of(self, topic: str) -> list[Log]:
        return [lg for tp, lg in self.log_manager.all_logs().items() if tp.topic == topic]

    def _on_leadership_change(self, partition: Partition, leads: bool) -> None:
        """An internal topic's partition is led here now (or no longer): its coordinator
        takes (or drops) the state that partition holds."""
        topic, index = partition.tp.topic, partition.tp.partition
        if topic == OFFSETS_TOPIC:
            if leads:
                self.group_coordinator.load_partition(index, partition.log)
            else:
                self.group_coordinator.unload_partition(index)
        elif topic == TRANSACTION_STATE_TOPIC:
            if leads:
                self.txn_coordinator.load_partition(index, partition.log)
            else:
                self.txn_coordinator.unload_partition(index)

    def reconfigure(self, config: BrokerConfig) -> None:
        """Take an effective configuration: requests read it from now on, every live log
        takes its log defaults, new connections its connection limits."""
        self.config = config
        reconfigure_logs(config, self.replica_manager, self.log_manager)
        self.quotas.max_connections = config["max.connections"]
        self.quotas.max_connections_per_ip = config["max.connections.per.ip"]

    async def _bind(self) -> None:
        """Bind every listener's socket; connections are accepted only once start-up is done."""
        for listener in self.config.listeners:
            try:
                acceptors = await Acceptor.listen(
                    listener.host,
                    listener.port,
                    functools.partial(self._accept, listener.name),
                    self.connection_log,
                    start=False,
                )
            except OSError as exc:
                raise ConfigError(
                    f"cannot listen on {listener.host}:{listener.port} (listener "
                    f"{listener.name}): {exc.strerror or exc}; stop what uses that address "
                    "or change listeners"
                ) from exc
            for acceptor in acceptors:
                self._servers.append(acceptor)
                for sock in acceptor.sockets:
                    host, port = sock.getsockname()[:2]
                    self.bound.append(BoundAddress(host, port, listener.name))

    def _raise_open_files_limit(self) -> None:
        before, after = raise_open_files_limit()
        if after != before:
            log.info("raised the open file limit (RLIMIT_NOFILE) from %d to %d", before, after)
        else:
            log.info("open file limit (RLIMIT_NOFILE): %d", after)

    def _accept(self, listener: str, sock: socket.socket, ip: str) -> None:
        """A new connection: refused when its address is at ``max.connections.per.ip``; at
        ``max.connections`` the acceptors stop until a connection closes, as Kafka's do."""
        if not self.quotas.try_add(ip):
            self.connection_log.log(
                logging.INFO,
                "refused a connection from %s: it has max.connections.per.ip (%d) open",
                ip, self.quotas.max_connections_per_ip,
            )  # fmt: skip
            sock.close()
            return
        if self.quotas.at_broker_limit():
            self.connection_log.log(
                logging.INFO,
                "max.connections (%d) reached: new connections wait until one closes",
                self.quotas.max_connections,
            )
            for server in self._servers:
                server.pause()
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        loop = asyncio.get_running_loop()
        security = self.config.security[listener]
        tls = security.ssl_context
        task = loop.create_task(
            loop.connect_accepted_socket(
                lambda: Connection(self, ip, listener, security),
                sock,
                ssl=tls,
                ssl_handshake_timeout=_TLS_HANDSHAKE_TIMEOUT_S if tls is not None else None,
            )
        )
        self._accepting.add(task)
        task.add_done_callback(functools.partial(self._accepted, sock, ip, listener))

    def _accepted(
        self, sock: socket.socket, ip: str, listener: str, task: asyncio.Task[Any]
    ) -> None:
        self._accepting.discard(task)
        if task.cancelled() or task.exception() is not None:
            if not task.cancelled():
                # A TLS handshake that failed: a plaintext client on a TLS port, an
                # untrusted certificate, no common protocol.
                self.connection_log.log(
                    logging.INFO,
                    "closing connection from %s on listener %s: %s",
                    ip, listener, task.exception() or "handshake failed",
                )  # fmt: skip
            sock.close()
            self._release_quota(ip)

    def load_schemas(self, api_key: int, api_version: int) -> None:
        """Import the protocol classes of an API version before its first request is decoded;
        with no descriptor left (RLIMIT_NOFILE reached) the spare one is lent for it, so a
        request is never refused for lack of the file of its schema."""
        pair = (api_key, api_version)
        if pair in self._schemas_loaded:
            return
        try:
            load_schemas(api_key, api_version)
        except OSError as exc:
            if not is_out_of_descriptors(exc):
                raise
            with self._spare_descriptor.lend():
                load_schemas(api_key, api_version)
        self._schemas_loaded.add(pair)

    def connection_opened(self, connection: Connection) -> None:
        self._connections.add(connection)
        self.connection_stats.opened += 1

    def connection_closed(self, connection: Connection) -> None:
        self._connections.discard(connection)
        self.connection_stats.closed += 1
        self._release_quota(connection.ip)

    def open_connections(self) -> int:
        return len(self._connections)

    def controller_status(self) -> tuple[bool, int]:
        """Whether this broker is the active controller (a single node is its own), and the
        partitions without a live leader it knows of (0 unless it is the controller)."""
        if self.cluster is None:
            return True, 0
        context = self.cluster.controller.context
        if context is None:
            return False, 0
        serving = context.live_brokers.keys() | context.shutting_down
        offline = sum(1 for state in context.states.values() if state.leader not in serving)
        return True, offline

    def _cleaned(self, seconds: float, result: CleanResult) -> None:
        self.storage_stats.cleaned(
            seconds, result.bytes_read, result.bytes_written, result.records_removed
        )

    def _release_quota(self, ip: str) -> None:
        was_at_limit = self.quotas.at_broker_limit()
        self.quotas.remove(ip)
        if was_at_limit and self._ready and not self.quotas.at_broker_limit():
            for server in self._servers:
                server.resume()

    async def _append_internal(self, tp: TopicPartition, records: bytes) -> Any:
        return await self.replica_manager.append_replicated(
            tp,
            bytearray(records),
            origin=AppendOrigin.COORDINATOR,
            timeout_ms=self.config["offsets.commit.timeout.ms"],
        )

    async def stop(self) -> None:
        """Stop accepting, finish or fail in-flight requests, flush, checkpoint, mark clean.

        A failure (a checkpoint that cannot be written…) is logged and leaves
        ``stopped_cleanly`` False; the data directories are then not marked
        clean, so the next start recovers their logs.
        """
        self.loop_monitor.stop()
        try:
            if self.cluster is not None and self._ready:
                # Leadership moves first, while this broker still serves: clients and
                # followers move to the new leaders before it stops answering.
                await self.cluster.controlled_shutdown()
            if self.schema_registry is not None:
                await self.schema_registry.close()
            for server in self._servers:
                server.close()
            if self.metrics is not None:
                await self.metrics.close()
            await self.group_coordinator.shutdown()
            await self.txn_coordinator.shutdown()
            if isinstance(self.acl_store, ZkAclStore):
                await self.acl_store.stop()
            if self.config_changes is not None:
                await self.config_changes.stop()
            if self.cluster is not None:
                # The session ends at once, and with it the registration: the controller
                # moves what leadership is left without waiting for the session timeout.
                await self.cluster.stop()
            if self.marker_channel is not None:
                await self.marker_channel.close()
            self.replica_manager.shutdown()
            for connection in list(self._connections):
                connection.close()
            for server in self._servers:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(server.wait_closed(), 5)
            await self.log_manager.shutdown()
        except (SamsaError, OSError) as exc:
            log.error("samsa broker %d did not stop cleanly: %s", self.node_id, exc)
        except Exception:
            log.exception("samsa broker %d did not stop cleanly", self.node_id)
        else:
            self.stopped_cleanly = True
            log.info("samsa broker %d stopped %s", self.node_id,
                     "cleanly" if self._ready else "before it was ready")  # fmt: skip
        finally:
            self._stopped.set()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()
