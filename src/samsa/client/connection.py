"""One asyncio connection from a client to one broker.

A :class:`BrokerConnection` frames requests (size prefix, request header v1/v2,
kio-encoded body), gives each a correlation id and lets many be in flight:
Kafka answers a connection's requests in the order it received them, so one
reader task matches each response to the oldest waiting request and checks
the correlation id. On connect it sends ApiVersions and keeps, for every API
both sides know, the highest version both serve; requests use that version
unless the caller asks for another.

Failures are :mod:`samsa.errors` classes: a connection that cannot be opened,
breaks, or receives a response it cannot match raises NETWORK_EXCEPTION
for every request in flight on it and is unusable afterwards; a request with
no answer within its timeout raises REQUEST_TIMED_OUT and closes the
connection, as Kafka's clients do (later responses could not be matched
otherwise). Responses are checked by :func:`samsa.protocol.check_entity` before
kio's native reader sees them, so a hostile peer cannot make kio allocate from
an array count the bytes cannot back.

Owned by one event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer

from samsa._version import __version__
from samsa.client.errors import ClientClosedError, error_for, network_error
from samsa.client.security import ClientSecurity, SaslAuthenticationError, authenticate
from samsa.errors import ErrorCode, SamsaError
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import build
from samsa.protocol.guard import GuardError, check_entity

__all__ = ["CLIENT_MAX_VERSIONS", "BrokerConnection", "client_versions"]

log = logging.getLogger(__name__)


CLIENT_MAX_VERSIONS: dict[int, int] = {
    0: 12,  # Produce v13 names topics by id only; the clients address topics by name
    1: 12,  # Fetch v13+: the same
    8: 9,  # OffsetCommit v10: the same
    9: 9,  # OffsetFetch v10: the same
    24: 3,  # AddPartitionsToTxn 4+ is the broker-to-coordinator form
}
"""Caps on the versions kio knows, where a newer version needs something the clients lack."""

_I32 = struct.Struct(">i")
_HEADER = struct.Struct(">hhih")  # api key, api version, correlation id, client id length


def client_versions() -> dict[int, tuple[int, int]]:
    """The (lowest, highest) version of every API kio has request schemas for, capped."""
    versions: dict[int, tuple[int, int]] = {}
    for api_key, name in api_key_map.items():
        known = sorted(schema_name_map[name])
        high = min(known[-1], CLIENT_MAX_VERSIONS.get(api_key, known[-1]))
        versions[api_key] = (known[0], high)
    return versions


_CLIENT_VERSIONS = client_versions()


class _Codec(NamedTuple):
    api_key: int
    request_class: type
    write_body: Callable[[Any, Any], None]
    flexible_header: bool
    response_class: type
    read_body: Callable[[bytes, int], tuple[Any, int]]
    flexible_response_header: bool


_codecs: dict[tuple[int, int], _Codec] = {}


def _codec(api_key: int, version: int) -> _Codec:
    codec = _codecs.get((api_key, version))
    if codec is None:
        request_class = load_request_schema(api_key, version)
        response_class = load_response_schema(api_key, version)
        codec = _codecs[api_key, version] = _Codec(
            api_key,
            request_class,
            entity_writer(request_class),
            request_class.__header_schema__.__flexible__,
            response_class,
            entity_reader(response_class),
            response_class.__header_schema__.__flexible__,
        )
    return codec


class _Sink:
    """kio writes into a list of chunks, so a produce request's records are not copied twice."""

    __slots__ = ("chunks", "write")

    def __init__(self, first: bytes) -> None:
        self.chunks: list[bytes] = [b"", first]
        self.write: Callable[[bytes], object] = self.chunks.append


def encode_request(
    api_key: int, version: int, correlation_id: int, client_id: str, body: Any
) -> bytes:
    """A request frame as it goes on the wire: size prefix, header, kio-encoded body."""
    codec = _codec(api_key, version)
    client_id_bytes = client_id.encode()
    header = _HEADER.pack(api_key, version, correlation_id, len(client_id_bytes)) + client_id_bytes
    sink = _Sink(header + b"\0" if codec.flexible_header else header)
    codec.write_body(sink, body)
    chunks = sink.chunks
    chunks[0] = _I32.pack(sum(map(len, chunks)))
    return b"".join(chunks)


def _skip_tagged_fields(frame: bytes, position: int) -> int:
    count, position = _read_uvarint(frame, position)
    for _ in range(count):
        _tag, position = _read_uvarint(frame, position)
        size, position = _read_uvarint(frame, position)
        position += size
    if position > len(frame):
        raise GuardError("response header tagged fields run past the frame")
    return position


def _read_uvarint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if position >= len(data) or shift > 28:
            raise GuardError("malformed varint in a response header")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7


def decode_response(codec: _Codec, frame: bytes) -> tuple[int, Any]:
    """(correlation id, kio response) of a response frame; raises GuardError or kio's errors."""
    if len(frame) < 4:
        raise GuardError(f"a {len(frame)}-byte response is shorter than its header")
    (correlation_id,) = _I32.unpack_from(frame, 0)
    position = 4
    if codec.api_key == ApiKey.API_VERSIONS and frame[4:6] == b"\x00\x23":
        # UNSUPPORTED_VERSION: the broker answers with a v0 body whatever version was asked.
        codec = _codec(ApiKey.API_VERSIONS, 0)
    if codec.flexible_response_header:
        position = _skip_tagged_fields(frame, position)
    check_entity(codec.response_class, frame, position)
    body, _size = codec.read_body(frame, position)
    return correlation_id, body


class _Pending(NamedTuple):
    correlation_id: int
    codec: _Codec
    future: asyncio.Future[Any]


_READ_TASKS: set[asyncio.Task[None]] = set()
"""Every connection's read task until it is done (see :meth:`BrokerConnection.open`)."""


class BrokerConnection:
    """A connection to one broker with several requests in flight.

    ``node_id`` is the broker's id, or a negative number for a bootstrap address
    whose id is not known yet. Use :meth:`open` (connect and negotiate versions),
    then :meth:`request` concurrently from any task of the same loop, then
    :meth:`close`.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        node_id: int,
        client_id: str,
        request_timeout_ms: int = 30_000,
        setup_timeout_ms: int = 10_000,
        send_buffer_bytes: int = -1,
        receive_buffer_bytes: int = -1,
        security: ClientSecurity | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.setup_timeout_ms = setup_timeout_ms
        self._buffers = (send_buffer_bytes, receive_buffer_bytes)
        self.security = security or ClientSecurity()
        self.versions: dict[int, int] = {}
        """Highest version both sides serve, by API key (filled by :meth:`open`)."""
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._read_task: asyncio.Task[None] | None = None
        self._pending: deque[_Pending] = deque()
        self._next_correlation_id = 0
        self._failure: SamsaError | None = None
        self.last_used = time.monotonic()

    def __repr__(self) -> str:
        return f"<BrokerConnection node {self.node_id} {self.host}:{self.port}>"

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet answered."""
        return len(self._pending)

    @property
    def usable(self) -> bool:
        """Open, negotiated and neither closed nor broken."""
        return self._writer is not None and self._failure is None

    async def open(self) -> BrokerConnection:
        """Connect within ``setup_timeout_ms`` and negotiate API versions."""
        try:
            tls = self.security.ssl_context
            async with asyncio.timeout(self.setup_timeout_ms / 1000):
                self._reader, self._writer = await asyncio.open_connection(
                    self.host, self.port, ssl=tls, server_hostname=self.host if tls else None
                )
        except (OSError, TimeoutError) as exc:
            self._failure = network_error(f"cannot connect to {self.host}:{self.port}: {exc!r}")
            raise self._failure from exc
        sock = self._writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            send_buffer, receive_buffer = self._buffers
            if send_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
            if receive_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        self._read_task = asyncio.get_running_loop().create_task(
            self._read_loop(), name=f"samsa-read-{self.host}:{self.port}"
        )
        # Held until done: the stream holds its reader only weakly, so a connection dropped
        # without close() would leave its read task to the garbage collector, which logs
        # "Task was destroyed but it is pending"; held, it ends with the socket, or is
        # cancelled with every other task when the loop's run ends.
        _READ_TASKS.add(self._read_task)
        self._read_task.add_done_callback(_READ_TASKS.discard)
        try:
            await self._negotiate()
            if self.security.sasl:
                await self._authenticate()
        except BaseException:
            await self.close()
            raise
        return self

    async def _authenticate(self) -> None:
        async def request(api_key: int, body: Mapping[str, Any], version: int) -> Any:
            return await self.request(api_key, body, version=version)

        try:
            await authenticate(self.security, request)
        except SaslAuthenticationError as exc:
            raise error_for(
                exc.code, f"authentication with {self.host}:{self.port} failed: {exc}"
            ) from None

    async def _negotiate(self) -> None:
        version = _CLIENT_VERSIONS[ApiKey.API_VERSIONS][1]
        values = {"client_software_name": "samsa", "client_software_version": __version__}
        for _attempt in range(3):
            response = await self.request(ApiKey.API_VERSIONS, values, version=version)
            code = int(response.error_code)
            broker = {
                int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys
            }
            if (
                code == ErrorCode.UNSUPPORTED_VERSION
                and ApiKey.API_VERSIONS in broker
                and version > 0
            ):
                version = max(0, min(version - 1, broker[ApiKey.API_VERSIONS][1]))
                continue
            if code:
                raise error_for(code, "ApiVersions failed")
            self.broker_versions = broker
            self.versions = {}
            for api_key, (low, high) in broker.items():
                ours = _CLIENT_VERSIONS.get(api_key)
                if ours is not None and max(low, ours[0]) <= min(high, ours[1]):
                    self.versions[api_key] = min(high, ours[1])
            return
        raise error_for(
            ErrorCode.UNSUPPORTED_VERSION, "no ApiVersions version in common with the broker"
        )

    def version(self, api_key: int) -> int:
        """The version to use for ``api_key``; UNSUPPORTED_VERSION if none is in common."""
        version = self.versions.get(api_key)
        if version is None:
            raise error_for(
                ErrorCode.UNSUPPORTED_VERSION,
                f"broker {self.node_id} ({self.host}:{self.port}) and this client share no "
                f"version of API {api_key}",
            )
        return version

    async def request(
        self,
        api_key: int,
        body: Mapping[str, Any] | Any,
        *,
        version: int | None = None,
        timeout_ms: int | None = None,
        expect_response: bool = True,
    ) -> Any:
        """Send one request and return the decoded kio response.

        ``body`` is a kio request object, or a dict keyed by Kafka field names
        (built for the version used: fields that version lacks are dropped).
        ``expect_response=False`` is for a Produce with acks=0: the broker sends
        nothing back, so this returns None once the bytes are queued.
        ``timeout_ms`` defaults to ``request_timeout_ms``; a long-poll Fetch
        passes its wait plus that.
        """
        future = self.send(api_key, body, version=version, expect_response=expect_response)
        await self.drain()
        if future is None:
            return None
        return await self.wait(future, timeout_ms)

    def send(
        self,
        api_key: int,
        body: Mapping[str, Any] | Any,
        *,
        version: int | None = None,
        expect_response: bool = True,
    ) -> asyncio.Future[Any] | None:
        """Write one request now, without waiting; return the future of its response.

        Requests written by successive calls reach the broker in that order (the
        producer relies on it for its sequence numbers). Await the future with
        :meth:`wait`, which applies the request timeout. None when no response comes.
        """
        if self._failure is not None:
            raise self._failure
        writer = self._writer
        if writer is None:
            raise ClientClosedError(f"{self!r} is not open")
        if version is None:
            version = self.version(api_key)
        codec = _codec(api_key, version)
        if isinstance(body, Mapping):
            body = build(codec.request_class, body)
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        frame = encode_request(api_key, version, correlation_id, self.client_id, body)
        self.last_used = time.monotonic()
        future: asyncio.Future[Any] | None = None
        if expect_response:
            future = asyncio.get_running_loop().create_future()
            self._pending.append(_Pending(correlation_id, codec, future))
        writer.write(frame)
        return future

    async def wait(self, future: asyncio.Future[Any], timeout_ms: int | None = None) -> Any:
        """The response ``future`` (from :meth:`send`) resolves to, within ``timeout_ms``
        (default ``request_timeout_ms``); after that the connection is closed."""
        timeout_s = (self.request_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        try:
            async with asyncio.timeout(timeout_s):
                return await future
        except TimeoutError:
            # Later responses could not be matched past the missing one: close, as Kafka does.
            self._fail(
                network_error(
                    f"connection to node {self.node_id} closed: a request got no response"
                )
            )
            raise error_for(
                ErrorCode.REQUEST_TIMED_OUT,
                f"no response from node {self.node_id} ({self.host}:{self.port}) within "
                f"{timeout_s * 1000:.0f} ms",
            ) from None

    async def drain(self) -> None:
        """Wait until the socket's send buffer is below its high-water mark."""
        writer = self._writer
        if writer is None:
            raise self._failure or ClientClosedError(f"{self!r} is not open")
        try:
            await writer.drain()
        except OSError as exc:
            self._fail(network_error(f"connection to {self.host}:{self.port} broke: {exc!r}"))
        if self._failure is not None:
            raise self._failure

    async def _read_loop(self) -> None:
        reader = self._reader
        assert reader is not None
        try:
            while True:
                head = await reader.readexactly(4)
                (size,) = _I32.unpack(head)
                if size < 0:
                    raise GuardError(f"response size {size} is negative")
                frame = await reader.readexactly(size)
                if not self._pending:
                    raise GuardError("a response arrived with no request waiting for it")
                pending = self._pending[0]
                try:
                    correlation_id, response = decode_response(pending.codec, frame)
                except Exception as exc:  # kio raises many types on bad bytes
                    # Still in _pending: _fail fails its waiter at once, with the others.
                    raise GuardError(
                        f"cannot decode {pending.codec.response_class.__name__}: {exc!r}"
                    ) from exc
                if correlation_id != pending.correlation_id:
                    raise GuardError(
                        f"correlation id {correlation_id} answers a request sent as "
                        f"{pending.correlation_id}"
                    )
                self._pending.popleft()
                if not pending.future.done():
                    pending.future.set_result(response)
        except (asyncio.IncompleteReadError, OSError) as exc:
            self._fail(
                network_error(
                    f"connection to node {self.node_id} ({self.host}:{self.port}) was closed "
                    f"by the broker or the network: {exc!r}"
                )
            )
        except GuardError as exc:
            self._fail(network_error(f"node {self.node_id} ({self.host}:{self.port}) sent {exc}"))

    def _fail(self, failure: SamsaError) -> None:
        """Mark the connection broken, fail every request in flight, close the socket."""
        if self._failure is None:
            self._failure = failure
            if not isinstance(failure, ClientClosedError):
                log.info("%r: %s", self, failure)
        while self._pending:
            pending = self._pending.popleft()
            if not pending.future.done():
                pending.future.set_exception(self._failure)
                pending.future.exception()  # its waiter may be gone: no "never retrieved" log
        if self._writer is not None:
            self._writer.close()
        task = self._read_task
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    async def close(self) -> None:
        """Close the connection; requests still in flight fail with ClientClosedError."""
        writer = self._writer
        self._fail(ClientClosedError(f"{self!r} was closed"))
        if self._read_task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._read_task
        if writer is not None:
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        self._writer = None
