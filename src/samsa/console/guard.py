"""What stands between a browser and the console's actions: the Host allow-list, the
login, and the checks every change (any method but GET/HEAD/OPTIONS) must pass.

- **Host**: every request must name an allowed host (the loopback names and the
  address the console listens on, with its port, and the ``--allowed-host`` names), or
  it is refused with 400 — a page of another site whose name resolves to this machine
  (DNS rebinding) names its own host.
- **Login** (HTTP basic): with a static token (``--auth-token-file``) any user name and
  the token; with client properties that use SASL, a user and password the cluster
  accepts — the console logs in to the broker as that user with the console's SASL
  mechanism and then acts as that user, so the cluster's ACLs apply to what they do.
- **Changes**: refused with 403 in read-only mode, without an ``Origin`` of this
  console (a missing or ``null`` one included), and without the session's CSRF token:
  a random session id in a ``SameSite=Strict`` cookie, and a form field (or
  ``X-CSRF-Token`` header) carrying the HMAC of that id under a secret of this process,
  compared in constant time. A page of another site can neither read the token nor
  compute it from a cookie it planted.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from samsa.errors import SamsaError

__all__ = [
    "ANONYMOUS",
    "CSRF_COOKIE",
    "CSRF_FIELD",
    "CSRF_HEADER",
    "Guard",
    "HostPattern",
    "default_hosts",
    "parse_host",
    "password_digest",
]

log = logging.getLogger("samsa.console")

ANONYMOUS = "anonymous"
"""Who acts when the console has no login."""
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
CSRF_COOKIE = "samsa_console_session"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
REALM = 'Basic realm="samsa console", charset="UTF-8"'
_SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{43}$")  # secrets.token_urlsafe(32)


def parse_host(text: str) -> tuple[str, int | None]:
    """A Host header (or an allowed-host entry) as (lower-case name, port or None):
    ``name``, ``name:port``, ``[v6]``, ``[v6]:port`` or a bare IPv6 address. Raises
    ValueError when it is none of these."""
    text = text.strip().lower()
    if text.startswith("["):
        name, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError(f"{text!r} is not a host")
        port_text = rest[1:] if rest else None
    elif text.count(":") > 1:  # a bare IPv6 address has no port
        name, port_text = text, None
    else:
        name, colon, port_text_or_empty = text.partition(":")
        port_text = port_text_or_empty if colon else None
    if not name or any(c in name for c in "/@?# \\"):
        raise ValueError(f"{text!r} is not a host")
    if port_text is None:
        return name, None
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"{text!r} has no valid port")
    return name, int(port_text)


@dataclass(frozen=True, slots=True)
class HostPattern:
    """An allowed host: a name on one port, or on any port when ``port`` is None."""

    name: str
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> HostPattern:
        return cls(*parse_host(text))

    def matches(self, name: str, port: int | None) -> bool:
        return name == self.name and (self.port is None or port == self.port)


def default_hosts(bound: str, port: int) -> tuple[str, ...]:
    """The loopback names and the address the console listens on (unless it is a
    wildcard), each with ``port``."""
    names = ["127.0.0.1", "localhost", "::1"]
    if bound not in ("", "0.0.0.0", "::"):
        names.append(parse_host(bound)[0])
    return tuple(f"[{n}]:{port}" if ":" in n else f"{n}:{port}" for n in dict.fromkeys(names))


class Guarded(Protocol):
    """What the guard checks against: the console (:class:`samsa.console.state.Console`),
    named here by what the guard reads so that the guard does not import the console."""

    @property
    def allowed_hosts(self) -> Iterable[HostPattern]: ...
    @property
    def auth(self) -> str: ...
    @property
    def token(self) -> str: ...
    @property
    def own(self) -> object: ...
    @property
    def read_only(self) -> bool: ...
    def csrf_token(self, session: str) -> str: ...
    async def clients_for(self, user: str, password: str) -> object | None: ...


class Guard(BaseHTTPMiddleware):
    """The console's checks, in order: Host, login, then for a change read-only mode,
    Origin and the CSRF token. Refusals are logged at WARNING with who was refused."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        console: Guarded = request.app.state.console
        if not self._host_allowed(console.allowed_hosts, request.headers.get("host", "")):
            log.warning("refused %s %s: Host %r is not allowed (--allowed-host)",
                        request.method, request.url.path, request.headers.get("host"))  # fmt: skip
            return PlainTextResponse(
                "this console does not answer to that host name: add it with --allowed-host",
                400,
            )
        try:
            refusal = await self._log_in(console, request)
        except SamsaError as exc:
            return PlainTextResponse(f"cannot check the login with the cluster: {exc}", 503)
        if refusal is not None:
            return refusal
        session = request.cookies.get(CSRF_COOKIE, "")
        new_session = not _SESSION_ID.match(session)
        if new_session:
            session = secrets.token_urlsafe(32)
        request.state.csrf_token = console.csrf_token(session)
        if request.method not in SAFE_METHODS:
            refusal = await self._check_change(console, request, new_session)
            if refusal is not None:
                log.warning("refused %s %s by %s: %s", request.method, request.url.path,
                            request.state.principal, bytes(refusal.body).decode())  # fmt: skip
                return refusal
        response = await call_next(request)
        if new_session:
            response.set_cookie(CSRF_COOKIE, session, httponly=True, samesite="strict")
        return response

    @staticmethod
    def _host_allowed(allowed: Iterable[HostPattern], host: str) -> bool:
        try:
            name, port = parse_host(host)
        except ValueError:
            return False
        return any(pattern.matches(name, port) for pattern in allowed)

    @staticmethod
    async def _log_in(console: Guarded, request: Request) -> Response | None:
        """None when the request may go on (``request.state`` then names the principal
        and the clients to act with); otherwise the 401 to answer."""
        request.state.principal = ANONYMOUS
        request.state.clients = console.own
        if console.auth == "none":
            return None
        credentials = _basic_credentials(request.headers.get("authorization", ""))
        if credentials is not None and all(credentials) and credentials[0].isprintable():
            user, password = credentials
            if console.auth == "token":
                if hmac.compare_digest(password.encode(), console.token.encode()):
                    request.state.principal = f"{user} (token)"
                    return None
            else:
                clients = await console.clients_for(user, password)
                if clients is not None:
                    request.state.principal = f"User:{user}"
                    request.state.clients = clients
                    return None
            log.warning("refused %s %s: wrong password for %r",
                        request.method, request.url.path, user)  # fmt: skip
        return PlainTextResponse("log in to the console", 401, headers={"WWW-Authenticate": REALM})

    @staticmethod
    async def _check_change(
        console: Guarded, request: Request, new_session: bool
    ) -> Response | None:
        if console.read_only:
            return PlainTextResponse("the console is read-only (--read-only)", 403)
        origin = request.headers.get("origin")
        if not origin or origin == "null":
            return PlainTextResponse(
                "a change must come from the console's own pages (its Origin is missing or null)",
                403,
            )
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or parts.netloc.lower() != (
            request.headers.get("host", "").lower()
        ):
            return PlainTextResponse(
                f"a change must come from the console's own pages, not {origin}", 403
            )
        sent = request.headers.get(CSRF_HEADER)
        if sent is None:
            await request.body()  # kept for the page, which reads the form again
            sent = str((await request.form()).get(CSRF_FIELD, ""))
        if new_session or not hmac.compare_digest(
            sent.encode(), str(request.state.csrf_token).encode()
        ):
            return PlainTextResponse(
                "the form's session token is missing or stale: reload the page and try again",
                403,
            )
        return None


def _basic_credentials(header: str) -> tuple[str, str] | None:
    """(user, password) of an ``Authorization: Basic`` header, None when it is not one."""
    scheme, _, encoded = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, colon, password = decoded.partition(":")
    return (user, password) if colon else None


def password_digest(key: bytes, password: str) -> bytes:
    """What the console keeps of a password the cluster accepted: its HMAC under a
    secret of this process, to recognise it on the next request without a new login."""
    return hmac.new(key, password.encode(), hashlib.sha256).digest()
