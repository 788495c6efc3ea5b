"""``metrics.listeners``: an HTTP endpoint answering ``GET /metrics`` for Prometheus.

A small HTTP/1.1 server on the broker's own event loop (no thread of its own,
no web framework): it reads one request per connection (headers up to 8 KiB,
within 10 s), answers ``GET /metrics`` (or ``HEAD``) with Prometheus's text
format, 404 for any other path, 405 for other methods, 400 for what is not
HTTP, and closes the connection (``Connection: close``; Prometheus reconnects
per scrape without complaint).

Each broker has a registry of its own (never ``prometheus_client``'s global
one), so several brokers in one process — tests, a local cluster — do not mix
their figures. A scrape reads the broker's counters and state on the loop
(:func:`~samsa.broker.metrics.collector.take_snapshot`, quick: plain values) and
formats them on a worker thread, one scrape at a time, in the format the
``Accept`` header asks for (``prometheus_client``'s negotiation: OpenMetrics for
Prometheus, the classic text format 0.0.4 for ``curl``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.exposition import choose_encoder

from samsa.broker.metrics.collector import MetricsSource, SnapshotCollector, take_snapshot
from samsa.tcp_listeners import TcpListeners

log = logging.getLogger(__name__)

MAX_HEADER_BYTES = 8192
READ_TIMEOUT_S = 10.0
METRICS_PATH = "/metrics"


class MetricsExporter:
    """The broker's Prometheus registry and the HTTP servers of ``metrics.listeners``."""

    def __init__(self, source: MetricsSource) -> None:
        self._source = source
        self.registry = CollectorRegistry()
        self._collector = SnapshotCollector()
        self.registry.register(self._collector)
        ProcessCollector(registry=self.registry)
        self._scraping = asyncio.Lock()
        self._listeners = TcpListeners(self._answer, limit=MAX_HEADER_BYTES)
        self.bound = self._listeners.bound

    async def scrape(self, accept: str = "") -> tuple[bytes, str]:
        """Every metric now, in the format an ``Accept`` header asks for (Prometheus's
        text format 0.0.4 unless it names OpenMetrics or text 1.0.0): the body and its
        content type."""
        encode, content_type = choose_encoder(accept)
        async with self._scraping:
            self._collector.snapshot = await take_snapshot(self._source)
            try:
                return await asyncio.to_thread(encode, self.registry), content_type
            finally:
                self._collector.snapshot = None

    async def listen(self, addresses: list[tuple[str, int]]) -> None:
        """Bind every address (not serving yet: see :meth:`start_serving`)."""
        await self._listeners.listen(addresses, "metrics.listeners")

    async def start_serving(self) -> None:
        await self._listeners.start_serving()
        for host, port in self.bound:
            log.info("serving metrics on http://%s:%d%s", _url_host(host), port, METRICS_PATH)

    async def close(self) -> None:
        await self._listeners.close()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            except asyncio.LimitOverrunError:
                await _respond(writer, 431, b"request headers too large\n")
                return
            except (asyncio.IncompleteReadError, TimeoutError):
                await _respond(writer, 400, b"a request line and headers were expected\n")
                return
            method, path, accept = _request_line(head)
            if method is None:
                await _respond(writer, 400, b"not an HTTP request\n")
            elif path.split("?", 1)[0] != METRICS_PATH:
                await _respond(writer, 404, b"metrics are at /metrics\n")
            elif method not in ("GET", "HEAD"):
                await _respond(writer, 405, b"GET /metrics\n", allow="GET, HEAD")
            else:
                body, content_type = await self.scrape(accept)
                await _respond(writer, 200, body, content_type, head_only=method == "HEAD")
        except (ConnectionError, OSError) as exc:
            log.debug("metrics client went away: %s", exc)
        except Exception:
            # A scrape that fails (a defect) must not end the server: the next one may work.
            log.exception("metrics scrape failed")
            with contextlib.suppress(Exception):
                await _respond(writer, 500, b"the scrape failed; see the broker's log\n")
        finally:
            writer.close()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _request_line(head: bytes) -> tuple[str | None, str, str]:
    """The method, path and ``Accept`` header of a request (method None: not HTTP/1.x)."""
    line, *headers = head.decode("latin-1").split("\r\n")
    parts = line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return None, "", ""
    accept = ""
    for header in headers:
        name, _, value = header.partition(":")
        if name.strip().lower() == "accept":
            accept = value.strip()
    return parts[0], parts[1], accept


_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
}


async def _respond(
    writer: asyncio.StreamWriter,
    status: int,
    body: bytes,
    content_type: str = "text/plain; charset=utf-8",
    *,
    head_only: bool = False,
    allow: str | None = None,
) -> None:
    headers = [
        f"HTTP/1.1 {status} {_REASONS[status]}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
        "Connection: close",
    ]
    if allow is not None:
        headers.append(f"Allow: {allow}")
    writer.write(("\r\n".join(headers) + "\r\n\r\n").encode("latin-1"))
    if not head_only:
        writer.write(body)
    await writer.drain()
