"""Request handlers, one module per API family; each registers the versions it serves."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from kio.index import load_response_schema

from samsa.errors import ErrorCode, KafkaError
from samsa.protocol.build import build
from samsa.protocol.codec import RequestHeader

if TYPE_CHECKING:
    from samsa.broker.server import Broker


@functools.cache
def _response_class(api_key: int, version: int) -> Any:
    return load_response_schema(api_key, version)


def respond(header: RequestHeader, values: dict[str, Any]) -> Any:
    """The kio response of the request's key and version, built from ``values``."""
    return build(_response_class(header.api_key, header.api_version), values)


def error_fields(exc: BaseException) -> dict[str, Any]:
    """``error_code`` and ``error_message`` for an exception raised while serving a request."""
    if isinstance(exc, KafkaError):
        return {"error_code": exc.code, "error_message": str(exc)}
    return {
        "error_code": ErrorCode.UNKNOWN_SERVER_ERROR,
        "error_message": f"{type(exc).__name__}: {exc}",
    }


def register_all(broker: Broker) -> None:
    from samsa.broker.handlers import (
        api_versions,
        cluster,
        configs,
        fetch,
        groups,
        list_offsets,
        metadata,
        partitions,
        produce,
        producer_id,
        producers,
        topics,
        transactions,
        txn_markers,
    )

    for module in (
        api_versions,
        metadata,
        topics,
        produce,
        fetch,
        list_offsets,
        producer_id,
        partitions,
        cluster,
        configs,
        groups,
        transactions,
        txn_markers,
        producers,
    ):
        module.register(broker)
