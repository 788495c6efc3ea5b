"""Typed handlers: a handler written against one API's newest kio request and response
classes, registered with the versions it serves (see :mod:`samsa.protocol.versions` for
how older versions reach it and are answered).

A handler module declares its APIs at the top, as kfake's files do::

    HEARTBEAT = TypedApi(ApiKey.HEARTBEAT, (0, 4), HeartbeatRequest, HeartbeatResponse)

and registers them with ``HEARTBEAT.serve(registry, heartbeat, services)``. The handler
is a plain async function of (services, header, request): a test calls it directly.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kio.index import load_request_schema, load_response_schema

from samsa.broker.network.registry import ApiRegistry
from samsa.protocol.codec import RequestHeader
from samsa.protocol.legacy import kio_version
from samsa.protocol.versions import missing_fields, upgrade

Request = TypeVar("Request")
Response = TypeVar("Response")
Services = TypeVar("Services")

TypedHandler = Callable[[Services, RequestHeader, Request], Awaitable[Response]]
"""A handler written against one API's newest request and response classes: it is given
the services it uses (a Protocol of its module: a test passes its own), the request
header (whose version is the one asked) and the request."""


def serve(
    registry: ApiRegistry,
    api_key: int,
    *,
    versions: tuple[int, int],
    request_class: type[Request],
    response_class: type[Response],
    handler: TypedHandler[Services, Request, Response],
    services: Services,
) -> None:
    """Serve ``api_key`` at ``versions`` with a typed ``handler`` of the newest classes kio
    has (``request_class``, ``response_class``), called with ``services``: a request of an
    older version reaches it up-converted, its response is written down to the version
    asked (:mod:`samsa.protocol.versions`).

    Raises ValueError when a served version has a field the newest lacks (the handler could
    neither read nor answer it): such a version needs a conversion of its own.
    """
    newest = request_class.__version__  # type: ignore[attr-defined]
    first, last = versions
    for version in range(max(first, kio_version(api_key, first)), last + 1):
        pairs: tuple[tuple[type, type], ...] = (
            (load_request_schema(api_key, version), request_class),
            (load_response_schema(api_key, version), response_class),
        )
        for old, new in pairs:
            if missing := missing_fields(old, new):
                raise ValueError(
                    f"{old.__name__} v{version} has {', '.join(missing)}, which v{newest} "
                    "lacks: a typed handler cannot serve it"
                )

    async def handle(header: RequestHeader, body: Any) -> Response:
        return await handler(services, header, upgrade(body, request_class))

    registry.add(api_key, first, last, handle)


@dataclass(frozen=True, slots=True)
class TypedApi(Generic[Request, Response]):
    """One API as a typed handler module declares it: its key, the versions it serves and
    the newest request and response classes (those of the last version served)."""

    api_key: int
    versions: tuple[int, int]
    request_class: type[Request]
    response_class: type[Response]

    def serve(
        self,
        registry: ApiRegistry,
        handler: TypedHandler[Services, Request, Response],
        services: Services,
    ) -> None:
        """Register ``handler`` for this API (see :func:`serve`)."""
        serve(registry, self.api_key, versions=self.versions, request_class=self.request_class,
              response_class=self.response_class, handler=handler, services=services)  # fmt: skip
