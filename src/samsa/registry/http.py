"""The registry's HTTP/1.1 server: asyncio streams on the broker's loop, no framework.

One task per connection reads requests one after another (keep-alive, as the
Schema Registry clients' connection pools expect) and answers each before reading
the next. A request is a request line, headers (up to 16 KiB in all, within
``READ_TIMEOUT_S``) and a body of ``Content-Length`` bytes, refused with 413 before
any of it is read when it is larger than the server's cap; ``Transfer-Encoding``
bodies are refused with 411 (the registry's clients always send a length).

What is not HTTP gets a 400 and the connection is closed. The handler is one
coroutine, ``(Request) -> Response``; an exception escaping it is a defect: it is
logged and answered with a 500 whose body carries no traceback.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qsl

from samsa.tcp_listeners import TcpListeners

log = logging.getLogger(__name__)

MAX_HEADER_BYTES = 16384
READ_TIMEOUT_S = 30.0
IDLE_TIMEOUT_S = 60.0

_REASONS = {
    200: "OK",
    204: "No Content",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    409: "Conflict",
    411: "Length Required",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    422: "Unprocessable Entity",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


@dataclass(slots=True)
class Request:
    method: str
    path: str
    """The path without its query, still percent-encoded (split it before decoding)."""
    query: dict[str, str]
    """Query parameters (the last value of a repeated one; ``query_pairs`` has them all)."""
    headers: dict[str, str]
    """Header names in lower case."""
    body: bytes = b""
    query_pairs: list[tuple[str, str]] = field(default_factory=list)


@dataclass(slots=True)
class Response:
    status: int
    body: bytes = b""
    content_type: str = "application/vnd.schemaregistry.v1+json"
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Request], Awaitable[Response]]
ErrorBody = Callable[[int, str], bytes]
"""Makes the body of an error the server answers itself (status, message)."""


class HttpError(Exception):
    """A request the server refuses before the handler sees it."""

    def __init__(self, status: int, message: str, *, close: bool = True) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.close = close


class HttpServer:
    """Listens on ``(host, port)`` addresses and hands each request to ``handler``."""

    def __init__(
        self, handler: Handler, error_body: ErrorBody, *, max_body_bytes: int, name: str
    ) -> None:
        self._handler = handler
        self._error_body = error_body
        self.max_body_bytes = max_body_bytes
        self._name = name
        self._listeners = TcpListeners(self._connection, limit=MAX_HEADER_BYTES)
        self.bound = self._listeners.bound

    async def listen(self, addresses: list[tuple[str, int]], config_key: str) -> None:
        """Bind every address (not serving yet: see :meth:`start_serving`)."""
        await self._listeners.listen(addresses, config_key)

    async def start_serving(self) -> None:
        await self._listeners.start_serving()

    async def close(self) -> None:
        await self._listeners.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    request = await self._read_request(reader, writer)
                except HttpError as exc:
                    await _send(
                        writer, Response(exc.status, self._error_body(exc.status, exc.message))
                    )
                    if exc.close:
                        return
                    continue
                if request is None:
                    return
                try:
                    response = await self._handler(request)
                except Exception:
                    # A defect in a handler: the client gets no traceback, the log does.
                    log.exception("%s: %s %s failed", self._name, request.method, request.path)
                    response = Response(500, self._error_body(500, "Internal Server Error"))
                keep_alive = _keep_alive(request)
                await _send(writer, response, head_only=request.method == "HEAD",
                            keep_alive=keep_alive)  # fmt: skip
                if not keep_alive:
                    return
        except (ConnectionError, OSError) as exc:
            log.debug("%s client went away: %s", self._name, exc)
        finally:
            writer.close()

    async def _read_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> Request | None:
        """The next request on the connection (None: the client closed it between requests)."""
        try:
            first = await asyncio.wait_for(reader.readuntil(b"\r\n"), IDLE_TIMEOUT_S)
        except asyncio.IncompleteReadError as exc:
            if exc.partial.strip():
                raise HttpError(400, "incomplete request line") from None
            return None
        except TimeoutError:
            return None
        except asyncio.LimitOverrunError:
            raise HttpError(431, "request line too long") from None
        if first == b"\r\n":
            raise HttpError(400, "empty request line")
        parts = first.decode("latin-1").rstrip("\r\n").split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise HttpError(400, "not an HTTP/1.x request")
        method, target, version = parts
        try:
            async with asyncio.timeout(READ_TIMEOUT_S):
                headers = await _read_headers(reader, len(first))
        except TimeoutError:
            raise HttpError(408, "request headers not received in time") from None
        if "transfer-encoding" in headers:
            raise HttpError(411, "send the body with a Content-Length")
        length_text = headers.get("content-length", "0")
        if not length_text.isdigit():
            raise HttpError(400, f"Content-Length {length_text[:40]!r} is not a number")
        length = int(length_text)
        if length > self.max_body_bytes:
            raise HttpError(
                413, f"the request body ({length} bytes) is larger than {self.max_body_bytes} bytes"
            )
        if length and headers.get("expect", "").lower() == "100-continue":
            # curl asks before sending a body over 1 KiB, and waits a second for this.
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        try:
            body = await asyncio.wait_for(reader.readexactly(length), READ_TIMEOUT_S)
        except asyncio.IncompleteReadError:
            raise HttpError(400, "the body is shorter than its Content-Length") from None
        except TimeoutError:
            raise HttpError(408, "request body not received in time") from None
        path, _, query_text = target.partition("?")
        try:
            pairs = parse_qsl(query_text, keep_blank_values=True, strict_parsing=False)
        except ValueError:
            raise HttpError(400, "malformed query string", close=False) from None
        if version == "HTTP/1.0":
            headers["x-http-1.0"] = "1"
        return Request(method.upper(), path, dict(pairs), headers, body, pairs)


def _keep_alive(request: Request) -> bool:
    """HTTP/1.1 keeps the connection unless the client says close; 1.0 closes it unless
    the client says keep-alive."""
    connection = request.headers.get("connection", "").lower()
    if "x-http-1.0" in request.headers:
        return connection == "keep-alive"
    return connection != "close"


async def _read_headers(reader: asyncio.StreamReader, size: int) -> dict[str, str]:
    """Header lines up to the empty one, names in lower case (``size``: bytes read so far)."""
    headers: dict[str, str] = {}
    while True:
        try:
            line = await reader.readuntil(b"\r\n")
        except asyncio.LimitOverrunError:
            raise HttpError(431, "request headers too large") from None
        except asyncio.IncompleteReadError:
            raise HttpError(400, "incomplete request headers") from None
        size += len(line)
        if size > MAX_HEADER_BYTES:
            raise HttpError(431, "request headers too large")
        if line == b"\r\n":
            return headers
        name, colon, value = line.decode("latin-1").rstrip("\r\n").partition(":")
        if not colon or not name.strip():
            raise HttpError(400, f"malformed header line {line[:80]!r}")
        headers[name.strip().lower()] = value.strip()


async def _send(
    writer: asyncio.StreamWriter,
    response: Response,
    *,
    head_only: bool = False,
    keep_alive: bool = False,
) -> None:
    lines = [f"HTTP/1.1 {response.status} {_REASONS.get(response.status, 'Unknown')}"]
    if response.status != 204:
        lines.append(f"Content-Type: {response.content_type}")
        lines.append(f"Content-Length: {len(response.body)}")
    lines.append("Connection: " + ("keep-alive" if keep_alive else "close"))
    lines.extend(f"{name}: {value}" for name, value in response.headers.items())
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    if not head_only and response.status != 204:
        writer.write(response.body)
    await writer.drain()
