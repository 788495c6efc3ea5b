"""What a request handler is, and the helpers every handler answers with.

A handler takes the request header and the kio body and returns a kio
response, the encoded response frame as ``bytes`` (Produce v3+, which the connection
writes as it is), a :class:`RawResponse` (already-encoded bytes and file regions), a
:class:`Deferred` (a response that will be ready later: the connection goes on
with the next request meanwhile), or None for no response; it may raise
:class:`CloseConnectionRequest` to have the client's connection closed.
Handler modules import from here and from the services they are given — never
from the server, which imports them.
"""

from __future__ import annotations

import datetime
import functools
import logging
import re
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.static.primitive import i32Timedelta

from samsa.broker.rate_limited_log import RateLimitedLog
from samsa.errors import ErrorCode, KafkaError, SamsaError
from samsa.protocol.build import build
from samsa.protocol.codec import RequestHeader
from samsa.protocol.legacy import kio_version

Handler = Callable[[RequestHeader, Any], Awaitable[Any]]
"""Takes the request header and kio body; returns a kio response, an encoded frame
(``bytes``), a :class:`RawResponse`, a :class:`Deferred`, or None for no response."""

client_host: ContextVar[str] = ContextVar("client_host", default="")
"""The peer of the connection whose request is being served ("/127.0.0.1", as Kafka shows it)."""

ANONYMOUS = "User:ANONYMOUS"
request_principal: ContextVar[str] = ContextVar("request_principal", default=ANONYMOUS)
"""The authenticated principal of the connection whose request is being served
(``User:<name>``; Kafka's ``User:ANONYMOUS`` on a connection that did not authenticate)."""

request_listener: ContextVar[str] = ContextVar("request_listener", default="")
"""The name of the listener the request being served came in on ("" outside a connection)."""


@dataclass(frozen=True, slots=True)
class RawResponse:
    """An already-encoded response frame: byte chunks and file regions to ``sendfile``."""

    chunks: list[Any]
    size: int


@dataclass(frozen=True, slots=True)
class Deferred:
    """A response that waits on something other requests need not wait for (an acks=all
    Produce waiting for its replicas): the connection handles the requests that follow
    meanwhile and still writes every response in request order."""

    response: Awaitable[Any]
    """Gives the kio response (or an encoded frame, a RawResponse, or None)."""


class CloseConnectionRequest(SamsaError):
    """Raised by a handler to close the client's connection (e.g. an acks=0 produce error)."""


@functools.cache
def response_class(api_key: int, version: int) -> Any:
    """The kio response class a request of ``api_key`` and ``version`` is answered with."""
    return load_response_schema(api_key, kio_version(api_key, version))


def respond(header: RequestHeader, values: dict[str, Any]) -> Any:
    """The kio response of the request's key and version, built from ``values`` (for a
    version older than kio's, the response of the version it is served as)."""
    return build(response_class(header.api_key, header.api_version), values)


log = logging.getLogger(__name__)
_withheld_paths_log = RateLimitedLog(log, interval_s=60.0, burst=10)

_ABSOLUTE_PATH = re.compile(r"""(?<![\w./~:-])/[^\s/'",;]+/[^\s'",;]*""")
"""A path of two components or more from the root, as a storage failure's message names a
file under ``log.dirs`` (bare, or quoted by ``OSError``); not a URL's ``//host``."""


def broker_message(exc: BaseException) -> str:
    """``exc`` as the broker's log says it: a Kafka error's message, else its class and text."""
    return str(exc) if isinstance(exc, KafkaError) else f"{type(exc).__name__}: {exc}"


def client_message(exc: BaseException) -> str:
    """``exc`` as a client is told it: :func:`broker_message` with each absolute path cut to
    its last component (``…/00000000000000000000.log``). Where the broker keeps its data is
    the operator's business; the broker's log has the whole message."""
    return _ABSOLUTE_PATH.sub(_last_component, broker_message(exc))


def _last_component(match: re.Match[str]) -> str:
    return "…/" + match.group().rstrip("/").rsplit("/", 1)[-1]


def error_fields(exc: BaseException) -> dict[str, Any]:
    """``error_code`` and ``error_message`` for an exception raised while serving a request
    (a message naming broker paths is logged whole, and sent without them)."""
    code = exc.code if isinstance(exc, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
    message = client_message(exc)
    if message != (whole := broker_message(exc)):
        _withheld_paths_log.log(logging.WARNING, "answering %s: %s", code.name, whole)
    return {"error_code": code, "error_message": message}


NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))
"""A response's ``throttle_time`` when the request was not throttled (request quotas
rewrite it after the handler: see the connection)."""


def kio_error(code: int) -> KioErrorCode:
    """A Kafka error code as kio's responses carry it."""
    return KioErrorCode(int(code))
