"""One client connection: frames in, handled one at a time, responses out in order.

A connection receives its byte stream in place (an ``asyncio.BufferedProtocol``:
the kernel writes into buffers :class:`~samsa.broker.network.frame_receiver.FrameReceiver`
hands out, a large frame straight into a pooled buffer of its own), splits it
into frames (checked against ``socket.request.max.bytes`` before any
allocation), handles them one at a time, and writes responses in request order.
A Produce request's records are handed to the log as views of the received
bytes (:mod:`samsa.protocol.produce_request`); the frame's buffer is reused
once the request has been handled. Responses ready together (pipelined
requests handled without a pause) go out in one write. A malformed frame, an unknown API
key or version, or a body that does not parse closes that connection and
nothing else. A handler that raises gets its request answered with an error
(see :meth:`Connection._handler_failed`). Record data of a Fetch goes from the
segment files to the socket with ``os.sendfile``.

On a TLS listener (SSL, SASL_SSL) the transport encrypts, so file regions are
read and written through it instead of ``sendfile``; a client certificate makes
the principal ``User:<DN>`` (mapped by ``ssl.principal.mapping.rules``). On a
SASL listener the connection is served nothing but ApiVersions and the SASL
exchange until it has authenticated (:mod:`samsa.broker.security.sasl_authenticator`).

A request over its client's quota is answered at once with its
``throttle_time_ms``; the connection then handles nothing more for that long
(KIP-219, :mod:`samsa.broker.quota`): a timer, not a sleep in a handler.

Each request's times (queue, local, remote, response send, total) and the error
codes it answers are recorded once, when its response is written
(:class:`~samsa.broker.metrics.stats.RequestStats`).

``connections.max.idle.ms`` closes a connection that has sent nothing for that
long (a half-sent frame included); ``queued.max.request.bytes`` bounds the
bytes of requests held (:mod:`samsa.broker.network.memory_pool`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import struct
import time
from collections import deque
from datetime import timedelta
from typing import Any, Protocol, cast

from samsa.broker.api import (
    ANONYMOUS,
    CloseConnectionRequest,
    Deferred,
    RawResponse,
    client_host,
    client_message,
    request_listener,
    request_principal,
)
from samsa.broker.config import BrokerConfig
from samsa.broker.handlers.api_versions import unsupported_version_response
from samsa.broker.handlers.sasl import raw_token
from samsa.broker.metrics.stats import RequestStats, RequestTiming, request_timing
from samsa.broker.network.frame_buffers import FrameBufferPool
from samsa.broker.network.frame_receiver import Frame, FrameReceiver
from samsa.broker.network.memory_pool import RequestMemoryPool
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.quota.loop_time import LoopTimed
from samsa.broker.quota.manager import ClientQuotas, RequestThrottle, current_throttle
from samsa.broker.rate_limited_log import RateLimitedLog
from samsa.broker.security.authorizer import Authorizer, current_authorizer
from samsa.broker.security.sasl_authenticator import (
    PRE_AUTHENTICATION_APIS,
    SaslAuthenticator,
    current_authenticator,
)
from samsa.broker.security.scram_credentials import ScramCredentials
from samsa.broker.security.security_config import ListenerSecurity
from samsa.errors import ErrorCode, KafkaError
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import (
    RequestDecodeError,
    decode_request,
    encode_response,
    encode_response_for,
    peek_header,
)
from samsa.protocol.error_response import error_response
from samsa.protocol.fetch_response import with_throttle_time
from samsa.protocol.framing import FrameError
from samsa.protocol.produce_request import decode_produce_request
from samsa.protocol.produce_response import with_throttle_time as with_produce_throttle_time
from samsa.security.tls import TlsConfigError, distinguished_name

log = logging.getLogger(__name__)

_MAX_QUEUED_FRAMES = 64
_MAX_LATER_RESPONSES = 64
_PLAINTEXT = ListenerSecurity("PLAINTEXT")
_TLS_READ_CHUNK = 256 * 1024
_COALESCED_RESPONSE_BYTES = 64 * 1024


class ConnectionHost(Protocol):
    """What a connection needs of its broker."""

    config: BrokerConfig
    registry: ApiRegistry
    memory_pool: RequestMemoryPool
    frame_buffers: FrameBufferPool
    bad_request_log: RateLimitedLog
    handler_traceback_log: RateLimitedLog
    connection_log: RateLimitedLog
    connections_max_idle_s: float | None
    scram_credentials: ScramCredentials
    authorizer: Authorizer | None
    client_quotas: ClientQuotas
    request_stats: RequestStats

    def connection_opened(self, connection: Connection) -> None: ...

    def load_schemas(self, api_key: int, api_version: int) -> None:
        """Have the classes of this API version imported (once, before its first request)."""
        ...

    def connection_closed(self, connection: Connection) -> None: ...


class Connection(asyncio.BufferedProtocol):
    """One client connection: frames in, responses out, in order."""

    def __init__(
        self,
        broker: ConnectionHost,
        ip: str,
        listener: str = "PLAINTEXT",
        security: ListenerSecurity = _PLAINTEXT,
    ) -> None:
        self.broker = broker
        self.ip = ip
        self.listener = listener
        self.security = security
        self.principal = ANONYMOUS
        self.authenticator = (
            SaslAuthenticator(security, broker.scram_credentials) if security.sasl else None
        )
        max_frame = broker.config["socket.request.max.bytes"]
        if self.authenticator is not None:
            max_frame = min(max_frame, security.max_receive_size)
        self.receiver = FrameReceiver(max_frame, broker.frame_buffers)
        self.queue: asyncio.Queue[tuple[Frame, float]] = asyncio.Queue()
        """Frames received and not handled yet, with when each was complete."""
        self.transport: asyncio.Transport | None = None
        self.worker: asyncio.Task[None] | None = None
        self.peer = "?"
        self._paused = False  # reading stopped: too many queued frames
        self._memory_paused = False  # reading stopped: queued.max.request.bytes
        self._reading_paused = False
        self._reserved = 0  # bytes this connection holds in the broker's memory pool
        self._in_progress_reserved = False  # the frame being received has its reservation
        self._lost = False
        self._busy = False  # a request is being handled or its response written
        self._last_active = time.monotonic()
        self._idle_timer: asyncio.TimerHandle | None = None
        self._writable = asyncio.Event()
        self._writable.set()
        self._socket_fd = -1
        self._watch_fd = -1
        self._handler_failures = 0
        self._later: deque[tuple[asyncio.Future[bytes | RawResponse | None], RequestTiming]] = (
            deque()
        )
        """Responses to write, in request order, once each is ready (see :class:`Deferred`)."""
        self._writer: asyncio.Task[None] | None = None
        self._outgoing: list[tuple[bytes, RequestTiming]] = []
        """Responses written on the loop's next turn, together (see :meth:`_send`)."""
        self._outgoing_bytes = 0
        self._close_after_write = False
        self._unmuted_at = 0.0
        """Loop time until which a throttled client's requests wait (0: not throttled)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        tls = self.security.ssl_context is not None
        if not tls:
            # high=0: pause_writing marks any unsent data, resume_writing a fully drained
            # buffer — the moment file regions may go straight to the socket. A TLS
            # transport keeps its default limits: everything goes through it.
            self.transport.set_write_buffer_limits(high=0, low=0)
        sock = transport.get_extra_info("socket")
        # Through TLS the transport must see every byte: no sendfile to the socket.
        self._socket_fd = sock.fileno() if sock is not None and not tls else -1
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        if tls and self.security.principal_mapper is not None:
            certificate = transport.get_extra_info("peercert")
            if certificate:
                try:
                    name = self.security.principal_mapper.name(distinguished_name(certificate))
                except TlsConfigError as exc:
                    self.broker.connection_log.log(
                        logging.WARNING, "closing connection from %s: %s", self.peer, exc
                    )
                    self.transport.close()
                    return
                if self.authenticator is None:
                    self.principal = f"User:{name}"
        self.broker.connection_opened(self)
        loop = asyncio.get_running_loop()
        self.worker = loop.create_task(self._serve())
        idle_s = self.broker.connections_max_idle_s
        if idle_s is not None:
            self._idle_timer = loop.call_later(idle_s, self._check_idle)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.receiver.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self.receiver.received(nbytes)
        except FrameError as exc:
            self.broker.bad_request_log.log(
                logging.WARNING, "closing connection from %s: %s", self.peer, exc
            )
            self.close()
            return
        now = self._last_active = time.monotonic()
        if self.broker.memory_pool.bounded:
            self._account(frames)
        for frame in frames:
            self.queue.put_nowait((frame, now))
        if self.queue.qsize() > _MAX_QUEUED_FRAMES and not self._paused:
            self._paused = True
            self._update_reading()

    def _account(self, frames: list[Frame]) -> None:
        """Reserve memory for what ``buffer_updated`` just took in (``queued.max.request.bytes``):
        the frames completed by it, and the declared size of the frame it started."""
        pool = self.broker.memory_pool
        for frame in frames:
            if self._in_progress_reserved:
                self._in_progress_reserved = False  # reserved when its prefix came
            else:
                pool.add(len(frame))
                self._reserved += len(frame)
        if (
            self.receiver.frame_size >= 0
            and not self._in_progress_reserved
            and not self._reserve_in_progress()
        ):
            self._memory_paused = True
            self._update_reading()
            pool.wait(self._retry_reservation)

    def _reserve_in_progress(self) -> bool:
        size = self.receiver.frame_size
        if not self.broker.memory_pool.try_reserve(size):
            return False
        self._reserved += size
        self._in_progress_reserved = True
        return True

    def _retry_reservation(self) -> bool:
        """Called by the pool when memory is released; True once this connection is served."""
        if self._lost:
            return True
        if (
            self.receiver.frame_size >= 0
            and not self._in_progress_reserved
            and not self._reserve_in_progress()
        ):
            return False
        self._memory_paused = False
        self._update_reading()
        return True

    def _release(self, size: int) -> None:
        if self._lost or not self.broker.memory_pool.bounded:
            return
        self._reserved -= size
        self.broker.memory_pool.release(size)

    def _update_reading(self) -> None:
        paused = self._paused or self._memory_paused
        if self.transport is None or paused == self._reading_paused or self._lost:
            return
        if paused:
            self.transport.pause_reading()
        else:
            self.transport.resume_reading()
        self._reading_paused = paused

    def _check_idle(self) -> None:
        """Close the connection after ``connections.max.idle.ms`` without a request, as Kafka
        does; a connection whose request is being served is not idle."""
        idle_s = self.broker.connections_max_idle_s
        assert idle_s is not None
        waited = time.monotonic() - self._last_active
        if self._busy or not self.queue.empty() or waited < idle_s:
            delay = idle_s if self._busy else idle_s - waited
            self._idle_timer = asyncio.get_running_loop().call_later(delay, self._check_idle)
            return
        self._idle_timer = None
        self.broker.connection_log.log(
            logging.INFO,
            "closing connection from %s: idle for %.0f ms (connections.max.idle.ms)",
            self.peer, waited * 1000,
        )  # fmt: skip
        self.close()

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
        self.broker.connection_closed(self)
        if self.worker is not None:
            self.worker.cancel()
        if self._writer is not None:
            self._writer.cancel()
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        self.receiver.clear()
        self._outgoing.clear()
        while not self.queue.empty():
            self.queue.get_nowait()[0].release()
        self._lost = True  # from here on, releases by the cancelled worker are no-ops
        if self.broker.memory_pool.bounded:
            self.broker.memory_pool.forget(self._retry_reservation)
            reserved, self._reserved = self._reserved, 0
            self.broker.memory_pool.release(reserved)

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self._flush()
            self.transport.close()

    async def _serve(self) -> None:
        client_host.set("/" + self.peer.rpartition(":")[0])
        request_principal.set(self.principal)
        request_listener.set(self.listener)
        current_authenticator.set(self.authenticator)
        current_authorizer.set(self.broker.authorizer)
        try:
            while True:
                if self._unmuted_at:
                    await self._throttled()
                await self._writable.wait()
                self._busy = bool(self._later)
                frame, arrived = await self.queue.get()
                self._busy = True
                if self._paused and self.queue.qsize() < _MAX_QUEUED_FRAMES // 2:
                    self._paused = False
                    self._update_reading()
                if self._outgoing and len(frame) > _COALESCED_RESPONSE_BYTES:
                    self._flush()  # a large request takes a while: earlier answers go first
                throttle = RequestThrottle(len(frame))
                current_throttle.set(throttle)
                timing = RequestTiming(arrived, time.monotonic())
                request_timing.set(timing)
                try:
                    response = await self._handle(frame, timing)
                finally:
                    # Handled: nothing reads the frame's bytes again (the log has written
                    # what it keeps), so its buffer may take the next request.
                    frame.release()
                if throttle.ms > 0:
                    loop = asyncio.get_running_loop()
                    self._unmuted_at = loop.time() + throttle.ms / 1000
                self._release(len(frame))
                self._last_active = time.monotonic()
                if isinstance(response, asyncio.Future):
                    await self._write_later(response, timing)
                    continue
                timing.ready = self._last_active
                if response is None:
                    self.broker.request_stats.record(timing, timing.ready)
                    continue
                if self._later or self._writer is not None:
                    # Earlier responses are still on their way: this one goes after them.
                    await self._write_later(_ready(response), timing)
                    if self._close_after_write:
                        await self._close_when_written()
                        return
                    continue
                if self.transport is None or self.transport.is_closing():
                    return
                if isinstance(response, bytes):
                    self._send(response, timing)
                else:
                    await self._write(response)
                    self.broker.request_stats.record(timing, time.monotonic())
                if self._close_after_write:
                    self.close()
                    return
        except asyncio.CancelledError:
            pass
        except Exception as exc:
            self._ended_by(exc)

    async def _close_when_written(self) -> None:
        writer = self._writer
        if writer is not None:
            await asyncio.wait([writer])
        self.close()

    async def _throttled(self) -> None:
        """Wait out a quota's throttle: this client's next request is not handled before."""
        delay = self._unmuted_at - asyncio.get_running_loop().time()
        self._unmuted_at = 0.0
        if delay > 0:
            await asyncio.sleep(delay)

    def _ended_by(self, exc: Exception) -> None:
        """A serving task stopped on ``exc``: a close the protocol asked for, a broken
        socket, or a defect (logged with its traceback)."""
        if isinstance(exc, _CloseConnection):
            self._closing_for(exc)
        elif isinstance(exc, (OSError, TimeoutError)):
            log.info("closing connection from %s: %s", self.peer, exc)
            self.close()
        else:
            self._failed(exc)

    def _closing_for(self, exc: _CloseConnection) -> None:
        self.broker.bad_request_log.log(
            logging.WARNING, "closing connection from %s: %s", self.peer, exc
        )
        self.close()

    def _failed(self, exc: Exception) -> None:
        self.broker.bad_request_log.log(
            logging.ERROR,
            "closing connection from %s after an internal error: %s: %s",
            self.peer, type(exc).__name__, exc,
            exc_info=exc, traceback_limit=self.broker.handler_traceback_log,
        )  # fmt: skip
        self.close()

    def _send(self, response: bytes, timing: RequestTiming) -> None:
        """Write a response when this task next yields to the loop, together with the
        responses to the requests it handles before that (pipelined requests already
        received): one ``writev`` and one wakeup of the peer instead of one each. Only
        small requests are handled while a response waits (see :meth:`_serve`)."""
        self._outgoing.append((response, timing))
        self._outgoing_bytes += len(response)
        if len(self._outgoing) == 1:
            asyncio.get_running_loop().call_soon(self._flush)
        elif self._outgoing_bytes >= _COALESCED_RESPONSE_BYTES:
            self._flush()

    def _flush(self) -> None:
        """Write the responses :meth:`_send` holds (before anything else is written)."""
        outgoing = self._outgoing
        if not outgoing:
            return
        self._outgoing = []
        self._outgoing_bytes = 0
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if len(outgoing) == 1:
            transport.write(outgoing[0][0])
        else:
            transport.writelines([response for response, _ in outgoing])
        now = time.monotonic()
        record = self.broker.request_stats.record
        for _, timing in outgoing:
            record(timing, now)

    async def _write(self, response: bytes | RawResponse) -> None:
        assert self.transport is not None
        self._flush()
        if isinstance(response, RawResponse):
            await self._write_chunks(response.chunks)
        else:
            self.transport.write(response)

    async def _write_later(
        self, response: asyncio.Future[bytes | RawResponse | None], timing: RequestTiming
    ) -> None:
        """Queue a response to be written once those before it are; with too many queued,
        wait for the oldest before reading the next request (backpressure)."""
        self._later.append((response, timing))
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write_in_order())
        if len(self._later) >= _MAX_LATER_RESPONSES:
            await asyncio.wait([self._later[0][0]])

    async def _write_in_order(self) -> None:
        """Write the queued responses in request order, each once it is ready."""
        try:
            stats = self.broker.request_stats
            while self._later:
                response = await self._later[0][0]
                _, timing = self._later.popleft()
                if response is None:
                    stats.record(timing, timing.ready)
                    continue
                if self.transport is None or self.transport.is_closing():
                    return
                await self._writable.wait()
                await self._write(response)
                stats.record(timing, time.monotonic())
        except asyncio.CancelledError:
            pass
        except Exception as exc:
            self._ended_by(exc)
        finally:
            self._writer = None

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
            if self._socket_fd < 0:
                await self._write_region_through_transport(chunk)
                continue
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

    async def _write_region_through_transport(self, chunk: Any) -> None:
        """A file region read into memory and written through the transport (TLS), a
        piece at a time, each once the one before has drained."""
        transport = self.transport
        assert transport is not None
        sent = 0
        while sent < chunk.length:
            if transport.is_closing():
                return
            size = min(_TLS_READ_CHUNK, chunk.length - sent)
            data = os.pread(chunk.fd, size, chunk.position + sent)
            if not data:
                raise _CloseConnection("a segment shrank under a fetch")
            transport.write(data)
            sent += len(data)
            await self._writable.wait()

    async def _socket_writable(self) -> None:
        loop = asyncio.get_running_loop()
        if self._watch_fd < 0:
            try:
                self._watch_fd = os.dup(self._socket_fd)
            except OSError:
                # No descriptor to spare (RLIMIT_NOFILE reached): look again shortly
                # rather than fail a read of data that is on disk.
                await asyncio.sleep(_NO_DESCRIPTOR_RETRY_S)
                return
        ready: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_writer(self._watch_fd, wake)
        try:
            await asyncio.wait_for(ready, _SENDFILE_STALL_S)
        finally:
            loop.remove_writer(self._watch_fd)

    async def _handle(
        self, frame: Frame, timing: RequestTiming
    ) -> bytes | RawResponse | asyncio.Future[bytes | RawResponse | None] | None:
        data = frame.data
        authenticator = self.authenticator
        if authenticator is not None and authenticator.raw_tokens:
            timing.api_key, timing.api_version = ApiKey.SASL_AUTHENTICATE, 0  # a bare SASL token
            return await self._raw_sasl_token(authenticator, bytes(data))
        try:
            api_key, api_version, correlation_id = peek_header(data)
        except RequestDecodeError as exc:
            raise _CloseConnection(str(exc)) from exc
        timing.api_key, timing.api_version = api_key, api_version
        if authenticator is not None and api_key not in PRE_AUTHENTICATION_APIS:
            if not authenticator.authenticated:
                raise _CloseConnection(
                    f"request (api key {api_key}) before SASL authentication completed"
                )
            if authenticator.expired:
                raise _CloseConnection("SASL session expired (connections.max.reauth.ms)")
        registry = self.broker.registry
        if not registry.supports(api_key, api_version):
            if api_key == ApiKey.API_VERSIONS:
                timing.note_error(ErrorCode.UNSUPPORTED_VERSION)
                return encode_response(correlation_id, unsupported_version_response(registry))
            raise _CloseConnection(f"API key {api_key} version {api_version} is not served")
        self.broker.load_schemas(api_key, api_version)
        # Produce: the records stay in the received buffer, where the log assigns offsets.
        decoded = decode_produce_request(data) if api_key == ApiKey.PRODUCE else None
        if decoded is None:
            raw = data if isinstance(data, bytes) else bytes(data)
            try:
                if len(raw) > _DECODE_INLINE_BYTES:
                    # A huge request (a Metadata naming a million topics) decodes in seconds:
                    # on a worker thread, the loop serves the other clients meanwhile.
                    decoded = await asyncio.to_thread(decode_request, raw)
                else:
                    decoded = decode_request(raw)
            except RequestDecodeError as exc:
                raise _CloseConnection(f"unparseable request (key {api_key}): {exc}") from exc
        header, body = decoded
        handler = registry.handler_for(api_key, api_version)
        assert handler is not None
        quotas = self.broker.client_quotas
        try:
            if quotas.request.enabled and api_key != ApiKey.API_VERSIONS:
                timed: LoopTimed[Any] = LoopTimed(handler(header, body))
                response: Any = await timed
                response = self._request_quota(quotas, header, timed.seconds, response)
            else:
                response = await handler(header, body)
            if authenticator is not None and api_key in PRE_AUTHENTICATION_APIS:
                self._after_sasl_step(authenticator)
                if authenticator.failure is not None:
                    await self._failed_authentication_delay()
            if isinstance(response, Deferred):
                timing.ready = time.monotonic()
                return asyncio.ensure_future(
                    self._finish(api_key, api_version, correlation_id, response, timing)
                )
            if response is None or isinstance(response, RawResponse | bytes):
                return response
            _note_top_level_error(response, timing)
            return encode_response_for(api_key, api_version, correlation_id, response)
        except CloseConnectionRequest as exc:
            raise _CloseConnection(str(exc)) from exc
        except Exception as exc:  # a handler bug: answered below, never raised per frame
            return self._handler_failed(api_key, api_version, correlation_id, exc)

    def _after_sasl_step(self, authenticator: SaslAuthenticator) -> None:
        """Take the outcome of a SASL request: the principal once authenticated, a close
        after the answer when authentication failed."""
        if authenticator.failure is not None:
            self.broker.connection_log.log(
                logging.INFO,
                "failed authentication with %s (listener %s, mechanism %s, user %r): %s",
                self.peer, self.listener, authenticator.mechanism, authenticator.username,
                authenticator.failure,
            )  # fmt: skip
            self._close_after_write = True
            return
        if authenticator.principal is not None and authenticator.principal != self.principal:
            self.principal = authenticator.principal
            request_principal.set(self.principal)
            self.receiver.max_frame_size = self.broker.config["socket.request.max.bytes"]

    async def _failed_authentication_delay(self) -> None:
        """Hold the answer to a failed authentication for
        ``connection.failed.authentication.delay.ms`` (Kafka's brake on guessing: a client
        gets one answer per delay on a connection, and a new connection costs a handshake)."""
        delay_ms = self.broker.config["connection.failed.authentication.delay.ms"]
        if delay_ms > 0:
            await asyncio.sleep(delay_ms / 1000)

    async def _raw_sasl_token(self, authenticator: SaslAuthenticator, frame: bytes) -> bytes:
        """A bare SASL token (after SaslHandshake v0) answered with a bare frame."""
        answer = await raw_token(authenticator, frame)
        self._after_sasl_step(authenticator)
        if answer is None:
            self._close_after_write = False
            await self._failed_authentication_delay()
            raise _CloseConnection("SASL authentication failed")
        return struct.pack(">i", len(answer)) + answer

    @staticmethod
    def _request_quota(quotas: ClientQuotas, header: Any, seconds: float, response: Any) -> Any:
        """Count a request's loop time against ``request_percentage``; a response over the
        quota carries the throttle (the larger, if its handler throttled it already)."""
        throttle = current_throttle.get()
        if throttle.exempt:
            return response
        throttle_ms = quotas.record_request_time(header.client_id, seconds)
        if throttle_ms <= 0:
            return response
        throttle.add(throttle_ms)
        if isinstance(response, bytes):  # Produce answers encoded (v3+)
            assert header.api_key == ApiKey.PRODUCE
            return with_produce_throttle_time(header.api_version, response, throttle.ms)
        if isinstance(response, RawResponse):  # Fetch answers encoded, with file regions
            assert header.api_key == ApiKey.FETCH
            chunks = with_throttle_time(header.api_version, response.chunks, throttle.ms)
            return RawResponse(chunks, response.size)
        if hasattr(response, "throttle_time") and not isinstance(response, type):
            return dataclasses.replace(response, throttle_time=timedelta(milliseconds=throttle.ms))
        return response

    async def _finish(
        self,
        api_key: int,
        api_version: int,
        correlation_id: int,
        deferred: Deferred,
        timing: RequestTiming,
    ) -> bytes | RawResponse | None:
        """The encoded response of a :class:`Deferred`, once it is ready (the wait is the
        request's remote time)."""
        try:
            response: Any = await deferred.response
            now = time.monotonic()
            timing.remote += now - timing.ready
            timing.ready = now
            if response is None or isinstance(response, RawResponse | bytes):
                return response
            _note_top_level_error(response, timing)
            return encode_response_for(api_key, api_version, correlation_id, response)
        except CloseConnectionRequest as exc:
            raise _CloseConnection(str(exc)) from exc
        except Exception as exc:
            now = time.monotonic()
            timing.remote += now - timing.ready
            timing.ready = now
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
            self.broker.bad_request_log.log(
                logging.WARNING,
                "request (api key %d v%d) from %s failed with %s",
                api_key, api_version, self.peer, summary,
                exc_info=exc, traceback_limit=self.broker.handler_traceback_log,
            )  # fmt: skip
        code = exc.code if isinstance(exc, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
        timing = request_timing.get()
        if timing is not None:
            timing.note_error(code)
        response = error_response(api_key, api_version, code, client_message(exc))
        if response is None:
            raise _CloseConnection(f"request (api key {api_key} v{api_version}) failed")
        return encode_response(correlation_id, response)


def _note_top_level_error(response: Any, timing: RequestTiming) -> None:
    """Count a response's top-level error code (per-partition codes are counted by the
    handlers that set them: Produce and Fetch)."""
    code = getattr(response, "error_code", 0)
    if code:
        timing.note_error(int(code))


def _ready(response: bytes | RawResponse) -> asyncio.Future[bytes | RawResponse | None]:
    future: asyncio.Future[bytes | RawResponse | None] = asyncio.get_running_loop().create_future()
    future.set_result(response)
    return future


_SENDFILE_STALL_S = 30.0
_DECODE_INLINE_BYTES = 1 << 20
"""Requests larger than this (Produce aside, which is not decoded whole) are decoded off the
event loop: kio's decoding of a frame of many megabytes takes seconds."""
_NO_DESCRIPTOR_RETRY_S = 0.005


class _CloseConnection(Exception):
    pass
