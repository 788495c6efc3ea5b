"""The console's one piece of state (its clients, settings and throughput sampler) and
what every page shares: rendering a template, redirecting with a notice, reading a
number from a query string.

:class:`Console` is created by the app's lifespan on the server's event loop and lives
in ``app.state.console``; the clients are asyncio clients on that same loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
from collections import OrderedDict
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
from samsa.console.guard import ANONYMOUS, HostPattern, password_digest
from samsa.console.render import format_bytes, format_duration_ms, format_timestamp
from samsa.console.throughput import ThroughputSampler
from samsa.errors import ErrorCode, KafkaError

__all__ = [
    "PAGE_SIZE",
    "Clients",
    "Console",
    "ConsoleSettings",
    "audit",
    "clients_of",
    "console_of",
    "int_param",
    "principal_of",
    "redirect",
    "render",
]

log = logging.getLogger("samsa.console")

PACKAGE = Path(__file__).parent
PAGE_SIZE = 50
"""Topics or groups a list page shows."""
MAX_USERS = 32
"""Users whose clients the console keeps open (the least recently seen closes first)."""
_LOGIN_REFUSED = frozenset(
    {
        ErrorCode.SASL_AUTHENTICATION_FAILED,
        ErrorCode.ILLEGAL_SASL_STATE,
        ErrorCode.UNSUPPORTED_SASL_MECHANISM,
    }
)

templates = Jinja2Templates(directory=PACKAGE / "templates")
templates.env.filters["timestamp"] = format_timestamp
templates.env.filters["size"] = format_bytes
templates.env.filters["duration"] = format_duration_ms


@dataclass(frozen=True, slots=True)
class ConsoleSettings:
    """How the console reaches the cluster (client properties: ``bootstrap.servers``…)
    and what it allows: changes unless ``read_only``; requests naming one of
    ``allowed_hosts`` (``name`` on any port, or ``name:port``); and who may use it —
    anyone given ``auth_token`` as password when it is set, else, when the client
    properties use SASL, the users the cluster accepts (HTTP basic), else anyone."""

    client_properties: Mapping[str, Any]
    read_only: bool = False
    sample_interval_s: float = 5.0
    page_size: int = PAGE_SIZE
    allowed_hosts: tuple[str, ...] = ("127.0.0.1", "localhost", "::1")
    auth_token: str | None = None


class Clients:
    """The clients a page acts with, for one identity (the console's own, or a user's
    who logged in): one admin client for everything, a producer made on the first
    "produce a message", and the properties the message browser reads with."""

    def __init__(self, client_properties: Mapping[str, Any]) -> None:
        self.client_properties = dict(client_properties)
        self.admin = AsyncAdmin(self.reader_properties)
        self._producer: AsyncProducer | None = None
        self._producer_lock = asyncio.Lock()

    @property
    def reader_properties(self) -> dict[str, Any]:
        """The admin client's and the message browser's properties: a page should say the
        cluster is down within seconds, not after the clients' default minute."""
        return {"default.api.timeout.ms": "15000", **self.client_properties}

    @property
    def producer_properties(self) -> dict[str, Any]:
        """The producer's properties: "produce a message" gives up as soon, unless the
        user's properties say otherwise."""
        return {
            "max.block.ms": "15000",
            "request.timeout.ms": "15000",
            "delivery.timeout.ms": "30000",
            "client.id": "samsa-console",
            **self.client_properties,
        }

    async def producer(self) -> AsyncProducer:
        """The producer, started on first use."""
        async with self._producer_lock:
            if self._producer is None:
                producer = AsyncProducer(self.producer_properties)
                await producer.start()
                self._producer = producer
            return self._producer

    async def close(self) -> None:
        if self._producer is not None:
            await self._producer.close()
        await self.admin.close()


class Console:
    """The console's clients (its own, and those of each user who logged in), its
    throughput sampler, and what its guard checks against."""

    def __init__(self, settings: ConsoleSettings) -> None:
        self.settings = settings
        self.own = Clients(settings.client_properties)
        self.sampler = ThroughputSampler(self.own.admin, settings.sample_interval_s)
        self.allowed_hosts = [HostPattern.parse(h) for h in settings.allowed_hosts]
        protocol = str(settings.client_properties.get("security.protocol", "PLAINTEXT"))
        self.auth = (
            "token"
            if settings.auth_token
            else "broker"
            if protocol.upper().startswith("SASL_")
            else "none"
        )
        """How users log in: ``token``, ``broker`` (as a user of the cluster) or ``none``."""
        self.token = settings.auth_token or ""
        self._secret = secrets.token_bytes(32)
        self._users: OrderedDict[str, tuple[bytes, Clients]] = OrderedDict()
        self._login_lock = asyncio.Lock()

    @property
    def read_only(self) -> bool:
        return self.settings.read_only

    def csrf_token(self, session: str) -> str:
        """The token the forms of session ``session`` carry."""
        return hmac.new(self._secret, b"csrf:" + session.encode(), hashlib.sha256).hexdigest()

    async def clients_for(self, user: str, password: str) -> Clients | None:
        """The clients of ``user``, logged in to the cluster with ``password`` with the
        console's SASL mechanism; None when the cluster refuses them. A password that
        worked is recognised by its HMAC afterwards, without a new login."""
        digest = password_digest(self._secret, password)
        async with self._login_lock:
            known = self._users.get(user)
            if known is not None and hmac.compare_digest(known[0], digest):
                self._users.move_to_end(user)
                return known[1]
            properties = {
                key: value
                for key, value in self.settings.client_properties.items()
                if key != "sasl.jaas.config"
            }
            properties.update({"sasl.username": user, "sasl.password": password})
            clients = Clients(properties)
            try:
                await clients.admin.list_topics()
            except KafkaError as exc:
                await clients.close()
                if exc.code in _LOGIN_REFUSED:
                    return None
                raise
            except BaseException:
                await clients.close()
                raise
            if known is not None:
                await known[1].close()
            self._users[user] = (digest, clients)
            while len(self._users) > MAX_USERS:
                await self._users.popitem(last=False)[1][1].close()
            return clients

    async def start(self) -> None:
        self.sampler.start()

    async def close(self) -> None:
        await self.sampler.stop()
        for _digest, clients in self._users.values():
            await clients.close()
        self._users.clear()
        await self.own.close()


def console_of(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


def clients_of(request: Request) -> Clients:
    """The clients the request's user acts with (the console's own without a login to
    the cluster)."""
    clients: Clients = getattr(request.state, "clients", None) or console_of(request).own
    return clients


def principal_of(request: Request) -> str:
    """Who sent the request, for the log: ``User:NAME``, ``NAME (token)`` or
    ``anonymous``."""
    return str(getattr(request.state, "principal", ANONYMOUS))


def audit(request: Request, message: str, *args: object) -> None:
    """Log, at INFO, a change the console made (or tried to) and who asked for it."""
    log.info("%s " + message, principal_of(request), *args)


def render(request: Request, name: str, status_code: int = 200, **context: Any) -> Response:
    """Template ``name`` with ``context``, the notice of a redirect and the console's
    read-only flag."""
    context.setdefault("notice", request.query_params.get("notice", ""))
    context.setdefault("error", request.query_params.get("error", ""))
    context["read_only"] = console_of(request).read_only
    context["csrf_token"] = getattr(request.state, "csrf_token", "")
    context["principal"] = principal_of(request)
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
