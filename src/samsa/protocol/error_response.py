"""The error answer to a request a broker failed to serve (no I/O).

Kafka answers a request whose handling failed unexpectedly with the request's
own error response, every error code set to UNKNOWN_SERVER_ERROR. Each of
Kafka's request classes writes that response by hand, mirroring the topics and
partitions asked for. Here only responses with a top-level ``error_code`` can
be answered generically; for the others :func:`error_response` returns None,
and the broker closes the connection instead (which clients treat as a broken
connection and retry).
"""

from __future__ import annotations

import functools
from dataclasses import fields
from typing import Any

from kio.index import load_response_schema

from samsa.protocol.build import build
from samsa.protocol.legacy import legacy_version

__all__ = ["error_response"]


@functools.cache
def _top_level_fields(api_key: int, api_version: int) -> frozenset[str]:
    return frozenset(f.name for f in fields(load_response_schema(api_key, api_version)))


def error_response(api_key: int, api_version: int, error_code: int, message: str) -> Any | None:
    """A kio response carrying ``error_code`` (and ``message`` where the version has one),
    or None when the response has no top-level error code to carry it (no version older
    than kio's has one)."""
    if legacy_version(api_key, api_version) is not None:
        return None
    names = _top_level_fields(api_key, api_version)
    if "error_code" not in names:
        return None
    values: dict[str, Any] = {"error_code": error_code}
    if "error_message" in names:
        values["error_message"] = message
    return build(load_response_schema(api_key, api_version), values)
