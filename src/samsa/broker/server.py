"""The broker process: start-up, the listening sockets, connections, shutdown.

One asyncio loop (uvloop when installed). Each connection splits its byte
stream into frames (checked against ``socket.request.max.bytes`` before any
allocation), handles them one at a time, and writes responses in request
order. A malformed frame, an unknown API key or version, or a body that does
not parse closes that connection and nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from dataclasses import dataclass
from typing import Any, cast

from samsa.broker.config import BrokerConfig, Listener
from samsa.broker.dynamic_config import DynamicBrokerConfig, reconfigure
from samsa.broker.handlers import register_all
from samsa.broker.handlers.groups import client_host
from samsa.broker.rate_limited_log import RateLimitedLog
from samsa.broker.registry import ApiRegistry, RawResponse
from samsa.broker.replica_manager import ReplicaManager
from samsa.cluster.local import LocalMetadataStore
from samsa.coordinator.group.coordinator import OFFSETS_TOPIC, GroupConfig, GroupCoordinator
from samsa.coordinator.transaction.coordinator import (
    TRANSACTION_STATE_TOPIC,
    TransactionConfig,
    TransactionCoordinator,
)
from samsa.errors import ConfigError, KafkaError, SamsaError
from samsa.protocol.codec import (
    RequestDecodeError,
    decode_request,
    encode_response,
    peek_header,
)
from samsa.protocol.error_response import UNKNOWN_SERVER_ERROR, error_response
from samsa.protocol.framing import FrameDecoder, FrameError
from samsa.storage import LogManager
from samsa.storage.validator import AppendOrigin
from samsa.types import TopicPartition

log = logging.getLogger(__name__)

API_VERSIONS_KEY = 18
_MAX_QUEUED_FRAMES = 64


@dataclass(frozen=True, slots=True)
class BoundAddress:
    host: str
    port: int


class Broker:
    """Everything a request handler may need, and the broker's lifecycle."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        """The effective configuration (static, then dynamic layers: see ``dynamic_config``)."""
        self.dynamic_config = DynamicBrokerConfig(config)
        self.node_id = config.node_id
        self.metadata = LocalMetadataStore(config.log_dirs, config.node_id, config["cluster.id"])
        self.log_manager = LogManager(
            config.log_dirs,
            config.log_defaults,
            retention_check_interval_ms=config["log.retention.check.interval.ms"],
            flush_scheduler_interval_ms=config["log.flush.scheduler.interval.ms"],
            checkpoint_interval_ms=config["log.flush.offset.checkpoint.interval.ms"] or 60_000,
            cleaner_enabled=config["log.cleaner.enable"],
            cleaner_backoff_ms=config["log.cleaner.backoff.ms"],
            cleaner_dedupe_buffer_size=config["log.cleaner.dedupe.buffer.size"],
        )
        self.replica_manager = ReplicaManager(self.log_manager, self.metadata, config.log_defaults)
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
        )
        self.txn_coordinator = TransactionCoordinator(
            config["transaction.state.log.num.partitions"],
            self._append_internal,
            self.log_manager.clock,
            self.replica_manager.write_txn_marker,
            self.metadata.allocate_producer_id,
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
        # Markers written to __consumer_offsets publish or drop transactional offset commits.
        self.replica_manager.on_txn_marker = self.group_coordinator.on_txn_marker
        self.registry = ApiRegistry()
        register_all(self)
        self.bound: list[BoundAddress] = []
        self._servers: list[asyncio.base_events.Server] = []
        self._connections: set[Connection] = set()
        # What any peer can provoke at will is logged a few times a minute at most.
        self.bad_request_log = RateLimitedLog(log, interval_s=60.0, burst=10)
        self.handler_traceback_log = RateLimitedLog(log, interval_s=600.0, burst=1)
        self._stopped = asyncio.Event()
        self._ready = False
        self.stopped_cleanly = False

    @property
    def advertised(self) -> Listener:
        """The address clients are told to use (first advertised listener; real port if 0)."""
        listener = self.config.advertised_listeners[0]
        if listener.port == 0 and self.bound:
            return Listener(listener.name, listener.host, self.bound[0].port)
        return listener

    async def start(self) -> None:
        started = time.monotonic()
        # Listen before anything is created on disk: a port in use stops start-up first.
        await self._bind()
        await asyncio.to_thread(self.metadata.load)
        await asyncio.to_thread(self.dynamic_config.load)
        reconfigure(self, self.dynamic_config.current)
        await asyncio.to_thread(self.log_manager.startup, self.replica_manager.topic_config)
        self.replica_manager.load()
        offsets_logs = [
            lg for tp, lg in self.log_manager.all_logs().items() if tp.topic == OFFSETS_TOPIC
        ]
        self.group_coordinator.load(offsets_logs)
        self.group_coordinator.start()
        txn_logs = [
            lg
            for tp, lg in self.log_manager.all_logs().items()
            if tp.topic == TRANSACTION_STATE_TOPIC
        ]
        self.txn_coordinator.load(txn_logs)
        self.txn_coordinator.start()
        self.log_manager.start_background_tasks()
        for server in self._servers:
            await server.start_serving()
        self._ready = True
        addresses = ", ".join(f"{b.host}:{b.port}" for b in self.bound)
        log.info(
            "samsa broker %d ready on %s (cluster %s, data in %s) in %.0f ms",
            self.node_id,
            addresses,
            self.metadata.cluster_id,
            ", ".join(str(d) for d in self.config.log_dirs),
            (time.monotonic() - started) * 1000,
        )

    async def _bind(self) -> None:
        """Bind every listener's socket; connections are accepted only once start-up is done."""
        loop = asyncio.get_running_loop()
        for listener in self.config.listeners:
            try:
                server = await loop.create_server(
                    lambda: Connection(self),
                    listener.host,
                    listener.port,
                    reuse_address=True,
                    start_serving=False,
                )
            except OSError as exc:
                raise ConfigError(
                    f"cannot listen on {listener.host}:{listener.port} (listener "
                    f"{listener.name}): {exc.strerror or exc}; stop what uses that address "
                    "or change listeners"
                ) from exc
            self._servers.append(server)
            for sock in server.sockets:
                host, port = sock.getsockname()[:2]
                self.bound.append(BoundAddress(host, port))

    async def _append_internal(self, tp: TopicPartition, records: bytes) -> Any:
        return await self.replica_manager.append(
            tp, bytearray(records), required_acks=-1, origin=AppendOrigin.COORDINATOR
        )

    async def stop(self) -> None:
        """Stop accepting, finish or fail in-flight requests, flush, checkpoint, mark clean.

        A failure (a checkpoint that cannot be written…) is logged and leaves
        ``stopped_cleanly`` False; the data directories are then not marked
        clean, so the next start recovers their logs.
        """
        try:
            for server in self._servers:
                server.close()
            await self.group_coordinator.shutdown()
            await self.txn_coordinator.shutdown()
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


class Connection(asyncio.Protocol):
    """One client connection: frames in, responses out, in order."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.decoder = FrameDecoder(broker.config["socket.request.max.bytes"])
        self.queue: asyncio.Queue[bytes] = asyncio.Queue()
        self.transport: asyncio.Transport | None = None
        self.worker: asyncio.Task[None] | None = None
        self.peer = "?"
        self._paused = False
        self._writable = asyncio.Event()
        self._writable.set()
        self._socket_fd = -1
        self._watch_fd = -1
        self._handler_failures = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        # high=0: pause_writing marks any unsent data, resume_writing a fully drained
        # buffer — the moment file regions may go straight to the socket.
        self.transport.set_write_buffer_limits(high=0, low=0)
        sock = transport.get_extra_info("socket")
        self._socket_fd = sock.fileno() if sock is not None else -1
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.broker._connections.add(self)
        self.worker = asyncio.get_running_loop().create_task(self._serve())

    def data_received(self, data: bytes) -> None:
        try:
            frames = self.decoder.feed(data)
        except FrameError as exc:
            self.broker.bad_request_log.log(
                logging.WARNING, "closing connection from %s: %s", self.peer, exc
            )
            self.close()
            return
        for frame in frames:
            self.queue.put_nowait(frame)
        if self.queue.qsize() > _MAX_QUEUED_FRAMES and self.transport and not self._paused:
            self.transport.pause_reading()
            self._paused = True

    def pause_writing(self) -> None:
        # The peer is not reading: stop taking requests until its responses drain,
        # as Kafka mutes a connection while a response is in flight.
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self._writable.set()
        if self._watch_fd >= 0:
            os.close(self._watch_fd)
            self._watch_fd = -1
        self.broker._connections.discard(self)
        if self.worker is not None:
            self.worker.cancel()

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    async def _serve(self) -> None:
        client_host.set("/" + self.peer.rpartition(":")[0])
        try:
            while True:
                await self._writable.wait()
                frame = await self.queue.get()
                if self._paused and self.queue.qsize() < _MAX_QUEUED_FRAMES // 2:
                    assert self.transport is not None
                    self.transport.resume_reading()
                    self._paused = False
                response = await self._handle(frame)
                if response is None:
                    continue
                if self.transport is None or self.transport.is_closing():
                    return
                if isinstance(response, RawResponse):
                    await self._write_chunks(response.chunks)
                else:
                    self.transport.write(response)
        except asyncio.CancelledError:
            pass
        except _CloseConnection as exc:
            self.broker.bad_request_log.log(
                logging.WARNING, "closing connection from %s: %s", self.peer, exc
            )
            self.close()
        except (OSError, TimeoutError) as exc:
            log.info("closing connection from %s: %s", self.peer, exc)
            self.close()
        except Exception as exc:
            traceback = exc if self.broker.handler_traceback_log.allow() else None
            self.broker.bad_request_log.log(
                logging.ERROR,
                "closing connection from %s after an internal error: %s: %s",
                self.peer, type(exc).__name__, exc, exc_info=traceback,
            )  # fmt: skip
            self.close()

    async def _write_chunks(self, chunks: list[Any]) -> None:
        """Write bytes through the transport and file regions with ``os.sendfile``.

        A region goes out only once the transport's buffer is empty, so the bytes
        stay in order. When the socket is full, the loop waits for it to become
        writable through a duplicate descriptor of the socket (the transport owns
        the original), so nothing blocks and no thread is needed.
        """
        transport = self.transport
        assert transport is not None
        for chunk in chunks:
            if isinstance(chunk, bytes):
                transport.write(chunk)
                continue
            if chunk.length == 0:
                continue
            await self._writable.wait()
            sent = 0
            while sent < chunk.length:
                if transport.is_closing():
                    return
                try:
                    n = os.sendfile(
                        self._socket_fd, chunk.fd, chunk.position + sent, chunk.length - sent
                    )
                except BlockingIOError:
                    await self._socket_writable()
                    continue
                if n == 0:
                    raise _CloseConnection("a segment shrank under a fetch")
                sent += n

    async def _socket_writable(self) -> None:
        loop = asyncio.get_running_loop()
        if self._watch_fd < 0:
            self._watch_fd = os.dup(self._socket_fd)
        ready: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_writer(self._watch_fd, wake)
        try:
            await asyncio.wait_for(ready, _SENDFILE_STALL_S)
        finally:
            loop.remove_writer(self._watch_fd)

    async def _handle(self, frame: bytes) -> bytes | RawResponse | None:
        try:
            api_key, api_version, correlation_id = peek_header(frame)
        except RequestDecodeError as exc:
            raise _CloseConnection(str(exc)) from exc
        registry = self.broker.registry
        if not registry.supports(api_key, api_version):
            if api_key == API_VERSIONS_KEY:
                from samsa.broker.handlers.api_versions import unsupported_version_response

                return encode_response(correlation_id, unsupported_version_response(registry))
            raise _CloseConnection(f"API key {api_key} version {api_version} is not served")
        try:
            header, body = decode_request(frame)
        except RequestDecodeError as exc:
            raise _CloseConnection(f"unparseable request (key {api_key}): {exc}") from exc
        handler = registry.handler_for(api_key, api_version)
        assert handler is not None
        try:
            response: Any = await handler(header, body)
            if response is None or isinstance(response, RawResponse):
                return response
            return encode_response(correlation_id, response)
        except CloseConnectionRequest as exc:
            raise _CloseConnection(str(exc)) from exc
        except Exception as exc:  # a handler bug: answered below, never raised per frame
            return self._handler_failed(api_key, api_version, correlation_id, exc)

    def _handler_failed(
        self, api_key: int, api_version: int, correlation_id: int, exc: Exception
    ) -> bytes:
        """Answer a request whose handler raised, as Kafka does: its error response with the
        exception's code (UNKNOWN_SERVER_ERROR if it has none), or, where the response has no
        top-level error code to carry it, a closed connection.

        The first failure on a connection is logged (rate-limited across the broker, with a
        traceback at most every few minutes); later ones on the same connection are not.
        """
        self._handler_failures += 1
        summary = f"{type(exc).__name__}: {exc}"
        if self._handler_failures == 1:
            traceback = exc if self.broker.handler_traceback_log.allow() else None
            self.broker.bad_request_log.log(
                logging.WARNING,
                "request (api key %d v%d) from %s failed with %s",
                api_key, api_version, self.peer, summary, exc_info=traceback,
            )  # fmt: skip
        code = exc.code if isinstance(exc, KafkaError) else UNKNOWN_SERVER_ERROR
        response = error_response(api_key, api_version, code, summary)
        if response is None:
            raise _CloseConnection(f"request (api key {api_key} v{api_version}) failed")
        return encode_response(correlation_id, response)


_SENDFILE_STALL_S = 30.0


class CloseConnectionRequest(SamsaError):
    """Raised by a handler to close the client's connection (e.g. an acks=0 produce error)."""


class _CloseConnection(Exception):
    pass
