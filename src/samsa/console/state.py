"""The console's one piece of state (its clients, settings and throughput sampler) and
what every page shares: rendering a template, redirecting with a notice, reading a
number from a query string.

:class:`Console` is created by the app's lifespan on the server's event loop and lives
in ``app.state.console``; the clients are asyncio clients on that same loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.templating import Jinja2Templates

from samsa.client.admin import AsyncAdmin
from samsa.client.producer import AsyncProducer
from samsa.console.render import format_bytes, format_duration_ms, format_timestamp
from samsa.console.throughput import ThroughputSampler

__all__ = [
    "PAGE_SIZE",
    "Console",
    "ConsoleSettings",
    "console_of",
    "int_param",
    "redirect",
    "render",
]

PACKAGE = Path(__file__).parent
PAGE_SIZE = 50
"""Topics or groups a list page shows."""

templates = Jinja2Templates(directory=PACKAGE / "templates")
templates.env.filters["timestamp"] = format_timestamp
templates.env.filters["size"] = format_bytes
templates.env.filters["duration"] = format_duration_ms


@dataclass(frozen=True, slots=True)
class ConsoleSettings:
    """How the console reaches the cluster (client properties: ``bootstrap.servers``…)
    and what it allows."""

    client_properties: Mapping[str, Any]
    read_only: bool = False
    sample_interval_s: float = 5.0
    page_size: int = PAGE_SIZE


class Console:
    """The clients a console's pages use: one admin client for everything, a producer
    made on the first "produce a message", and the throughput sampler."""

    def __init__(self, settings: ConsoleSettings) -> None:
        self.settings = settings
        self.admin = AsyncAdmin(self.reader_properties)
        self.sampler = ThroughputSampler(self.admin, settings.sample_interval_s)
        self._producer: AsyncProducer | None = None
        self._producer_lock = asyncio.Lock()

    @property
    def read_only(self) -> bool:
        return self.settings.read_only

    @property
    def reader_properties(self) -> dict[str, Any]:
        """The admin client's and the message browser's properties: a page should say the
        cluster is down within seconds, not after the clients' default minute."""
        return {"default.api.timeout.ms": "15000", **self.settings.client_properties}

    @property
    def producer_properties(self) -> dict[str, Any]:
        """The producer's properties: "produce a message" gives up as soon, unless the
        user's properties say otherwise."""
        return {
            "max.block.ms": "15000",
            "request.timeout.ms": "15000",
            "delivery.timeout.ms": "30000",
            "client.id": "samsa-console",
            **self.settings.client_properties,
        }

    async def start(self) -> None:
        self.sampler.start()

    async def close(self) -> None:
        await self.sampler.stop()
        if self._producer is not None:
            await self._producer.close()
        await self.admin.close()

    async def producer(self) -> AsyncProducer:
        """The console's producer, started on first use."""
        async with self._producer_lock:
            if self._producer is None:
                producer = AsyncProducer(self.producer_properties)
                await producer.start()
                self._producer = producer
            return self._producer


def console_of(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


def render(request: Request, name: str, status_code: int = 200, **context: Any) -> Response:
    """Template ``name`` with ``context``, the notice of a redirect and the console's
    read-only flag."""
    context.setdefault("notice", request.query_params.get("notice", ""))
    context.setdefault("error", request.query_params.get("error", ""))
    context["read_only"] = console_of(request).read_only
    context["bootstrap"] = console_of(request).settings.client_properties.get(
        "bootstrap.servers", ""
    )
    return templates.TemplateResponse(request, name, context, status_code=status_code)


def redirect(url: str, notice: str = "", **params: str) -> RedirectResponse:
    """A 303 to ``url`` (after a POST), with a notice the next page shows."""
    if notice:
        params["notice"] = notice
    query = f"?{urlencode(params)}" if params else ""
    return RedirectResponse(url + query, status_code=303)


def int_param(text: str | None, default: int, low: int, high: int) -> int:
    """A number from a query string or form, ``default`` when absent or not a number,
    clamped to [low, high]."""
    try:
        value = int(text) if text not in (None, "") else default
    except ValueError:
        value = default
    return min(max(value, low), high)
