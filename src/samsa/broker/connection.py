"""One client connection: frames in, handled one at a time, responses out in order.

A connection splits its byte stream into frames (checked against
``socket.request.max.bytes`` before any allocation), handles them one at a
time, and writes responses in request order. A malformed frame, an unknown API
key or version, or a body that does not parse closes that connection and
nothing else. A handler that raises gets its request answered with an error
(see :meth:`Connection._handler_failed`). Record data of a Fetch goes from the
segment files to the socket with ``os.sendfile``.

Each request's times (queue, local, remote, response send, total) and the error
codes it answers are recorded once, when its response is written
(:class:`~samsa.broker.metrics.stats.RequestStats`).

``connections.max.idle.ms`` closes a connection that has sent nothing for that
long (a half-sent frame included); ``queued.max.request.bytes`` bounds the
bytes of requests held (:mod:`samsa.broker.memory_pool`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import deque
from typing import Any, Protocol, cast

from samsa.broker.api import CloseConnectionRequest, Deferred, RawResponse, client_host
from samsa.broker.config import BrokerConfig
from samsa.broker.handlers.api_versions import unsupported_version_response
from samsa.broker.memory_pool import RequestMemoryPool, release_freed_memory
from samsa.broker.metrics.stats import RequestStats, RequestTiming, request_timing
from samsa.broker.rate_limited_log import RateLimitedLog
from samsa.broker.registry import ApiRegistry
from samsa.errors import ErrorCode, KafkaError
from samsa.protocol.codec import (
    RequestDecodeError,
    decode_request,
    encode_response,
    peek_header,
)
from samsa.protocol.error_response import error_response
from samsa.protocol.framing import FrameDecoder, FrameError

log = logging.getLogger(__name__)

API_VERSIONS_KEY = 18
_MAX_QUEUED_FRAMES = 64
_MAX_LATER_RESPONSES = 64
# A connection lost with this much of a frame received has its freed memory given back.
_TRIM_AFTER_ABANDONED_BYTES = 1 << 20


class ConnectionHost(Protocol):
    """What a connection needs of its broker."""

    config: BrokerConfig
    registry: ApiRegistry
    memory_pool: RequestMemoryPool
    bad_request_log: RateLimitedLog
    handler_traceback_log: RateLimitedLog
    connection_log: RateLimitedLog
    connections_max_idle_s: float | None
    request_stats: RequestStats

    def connection_opened(self, connection: Connection) -> None: ...

    def load_schemas(self, api_key: int, api_version: int) -> None:
        """Have the classes of this API version imported (once, before its first request)."""
        ...

    def connection_closed(self, connection: Connection) -> None: ...


class Connection(asyncio.Protocol):
    """One client connection: frames in, responses out, in order."""

    def __init__(self, broker: ConnectionHost, ip: str) -> None:
        self.broker = broker
        self.ip = ip
        self.decoder = FrameDecoder(broker.config["socket.request.max.bytes"])
        self.queue: asyncio.Queue[tuple[bytes, float]] = asyncio.Queue()
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

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        # high=0: pause_writing marks any unsent data, resume_writing a fully drained
        # buffer — the moment file regions may go straight to the socket.
        self.transport.set_write_buffer_limits(high=0, low=0)
        sock = transport.get_extra_info("socket")
        self._socket_fd = sock.fileno() if sock is not None else -1
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.broker.connection_opened(self)
        loop = asyncio.get_running_loop()
        self.worker = loop.create_task(self._serve())
        idle_s = self.broker.connections_max_idle_s
        if idle_s is not None:
            self._idle_timer = loop.call_later(idle_s, self._check_idle)

    def data_received(self, data: bytes) -> None:
        try:
            frames = self.decoder.feed(data)
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

    def _account(self, frames: list[bytes]) -> None:
        """Reserve memory for what ``data_received`` just took in (``queued.max.request.bytes``):
        the frames completed by it, and the declared size of the frame it started."""
        pool = self.broker.memory_pool
        for frame in frames:
            if self._in_progress_reserved:
                self._in_progress_reserved = False  # reserved when its prefix came
            else:
                pool.add(len(frame))
                self._reserved += len(frame)
        if (
            self.decoder.frame_size >= 0
            and not self._in_progress_reserved
            and not self._reserve_in_progress()
        ):
            self._memory_paused = True
            self._update_reading()
            pool.wait(self._retry_reservation)

    def _reserve_in_progress(self) -> bool:
        size = self.decoder.frame_size
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
            self.decoder.frame_size >= 0
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
        # A large frame cut off midway leaves its pieces spread through the heap.
        abandoned = self.decoder.buffered
        self.decoder.clear()
        self._lost = True  # from here on, releases by the cancelled worker are no-ops
        if self.broker.memory_pool.bounded:
            self.broker.memory_pool.forget(self._retry_reservation)
            reserved, self._reserved = self._reserved, 0
            self.broker.memory_pool.release(reserved)
        if abandoned >= _TRIM_AFTER_ABANDONED_BYTES:
            release_freed_memory()

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    async def _serve(self) -> None:
        client_host.set("/" + self.peer.rpartition(":")[0])
        try:
            while True:
                await self._writable.wait()
                self._busy = bool(self._later)
                frame, arrived = await self.queue.get()
                self._busy = True
                if self._paused and self.queue.qsize() < _MAX_QUEUED_FRAMES // 2:
                    self._paused = False
                    self._update_reading()
                timing = RequestTiming(arrived, time.monotonic())
                request_timing.set(timing)
                response = await self._handle(frame, timing)
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
                    continue
                if self.transport is None or self.transport.is_closing():
                    return
                await self._write(response)
                self.broker.request_stats.record(timing, time.monotonic())
        except asyncio.CancelledError:
            pass
        except Exception as exc:
            self._ended_by(exc)

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

    async def _write(self, response: bytes | RawResponse) -> None:
        assert self.transport is not None
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
        self, frame: bytes, timing: RequestTiming
    ) -> bytes | RawResponse | asyncio.Future[bytes | RawResponse | None] | None:
        try:
            api_key, api_version, correlation_id = peek_header(frame)
        except RequestDecodeError as exc:
            raise _CloseConnection(str(exc)) from exc
        timing.api_key, timing.api_version = api_key, api_version
        registry = self.broker.registry
        if not registry.supports(api_key, api_version):
            if api_key == API_VERSIONS_KEY:
                timing.note_error(ErrorCode.UNSUPPORTED_VERSION)
                return encode_response(correlation_id, unsupported_version_response(registry))
            raise _CloseConnection(f"API key {api_key} version {api_version} is not served")
        self.broker.load_schemas(api_key, api_version)
        try:
            header, body = decode_request(frame)
        except RequestDecodeError as exc:
            raise _CloseConnection(f"unparseable request (key {api_key}): {exc}") from exc
        handler = registry.handler_for(api_key, api_version)
        assert handler is not None
        try:
            response: Any = await handler(header, body)
            if isinstance(response, Deferred):
                timing.ready = time.monotonic()
                return asyncio.ensure_future(
                    self._finish(api_key, api_version, correlation_id, response, timing)
                )
            if response is None or isinstance(response, RawResponse):
                return response
            _note_top_level_error(response, timing)
            return encode_response(correlation_id, response)
        except CloseConnectionRequest as exc:
            raise _CloseConnection(str(exc)) from exc
        except Exception as exc:  # a handler bug: answered below, never raised per frame
            return self._handler_failed(api_key, api_version, correlation_id, exc)

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
            if response is None or isinstance(response, RawResponse):
                return response
            _note_top_level_error(response, timing)
            return encode_response(correlation_id, response)
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
        response = error_response(api_key, api_version, code, summary)
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
_NO_DESCRIPTOR_RETRY_S = 0.005


class _CloseConnection(Exception):
    pass
