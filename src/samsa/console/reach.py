"""A page asked for while no bootstrap server accepts connections says so at once (the
broker at HOST:PORT refused the connection) instead of after the clients' timeout.

Before each page, :class:`Reachability` opens (and closes) a TCP connection to every
bootstrap server at the same time: when each one is refused (or cannot be reached for
another immediate reason: an unknown host, no route), the page is a 503 naming them. A
server that does not answer within :data:`PROBE_S` counts as reachable: the page then
goes on and times out as before, since only a refusal can be told at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import Response

from samsa.client.config import parse_bootstrap
from samsa.console.state import Console, render

__all__ = ["PROBE_S", "Reachability", "refusals"]

log = logging.getLogger("samsa.console")

PROBE_S = 2.0
"""How long a probe waits for a connection before it lets the page try."""


async def _refusal(host: str, port: int) -> str | None:
    """Why ``host:port`` refuses a connection, or None when it accepts or is slow."""
    try:
        async with asyncio.timeout(PROBE_S):
            _reader, writer = await asyncio.open_connection(host, port)
    except TimeoutError:
        return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None


async def refusals(servers: list[str]) -> dict[str, str]:
    """Each of ``servers`` (host:port) with why it refused, when all of them did; {} as
    soon as one accepts (or may)."""
    addresses = parse_bootstrap(servers)
    reasons = await asyncio.gather(*(_refusal(host, port) for host, port in addresses))
    if any(reason is None for reason in reasons):
        return {}
    return {f"{h}:{p}": str(r) for (h, p), r in zip(addresses, reasons, strict=True)}


class Reachability(BaseHTTPMiddleware):
    """Answers a page with "the broker refused the connection" when every bootstrap
    server refuses it (static files are served regardless)."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        if request.url.path.startswith("/static/"):
            return await call_next(request)
        console: Console = request.app.state.console
        refused = await refusals(list(console.own.admin.config["bootstrap.servers"]))
        if not refused:
            return await call_next(request)
        names = ", ".join(refused)
        why = "; ".join(sorted(set(refused.values())))
        log.warning("%s %s: the broker at %s refused the connection (%s)",
                    request.method, request.url.path, names, why)  # fmt: skip
        return render(
            request,
            "error.html",
            status_code=503,
            title=f"The broker at {names} refused the connection",
            error=f"{why}: is the broker running? The page tries again when you reload it.",
        )
