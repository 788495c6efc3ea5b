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

import functools
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from kio.index import load_response_schema

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


def error_fields(exc: BaseException) -> dict[str, Any]:
    """``error_code`` and ``error_message`` for an exception raised while serving a request."""
    if isinstance(exc, KafkaError):
        return {"error_code": exc.code, "error_message": str(exc)}
    return {
        "error_code": ErrorCode.UNKNOWN_SERVER_ERROR,
        "error_message": f"{type(exc).__name__}: {exc}",
    }
