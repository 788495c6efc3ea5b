"""ApiVersions (key 18), versions 0–4, answered from the handler registry.

A request at a version this broker does not serve gets a v0 response with
UNSUPPORTED_VERSION and the supported ranges, so the client can retry lower.
"""

from __future__ import annotations

from typing import Any

from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0

from samsa.broker.api import respond
from samsa.broker.network.registry import ApiRegistry
from samsa.errors import ErrorCode
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import build
from samsa.protocol.codec import RequestHeader


def _keys(registry: ApiRegistry) -> list[dict[str, int]]:
    return [
        {"api_key": key, "min_version": low, "max_version": high}
        for key, low, high in registry.advertised()
    ]


def unsupported_version_response(registry: ApiRegistry) -> Any:
    return build(
        ApiVersionsResponseV0,
        {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": _keys(registry)},
    )


def register(registry: ApiRegistry) -> None:
    cache: dict[int, Any] = {}

    async def handle(header: RequestHeader, body: Any) -> Any:
        # The answer depends only on the version; kio encodes it slowly, so keep it.
        response = cache.get(header.api_version)
        if response is None:
            response = respond(
                header,
                {
                    "error_code": ErrorCode.NONE,
                    "api_keys": _keys(registry),
                    "throttle_time": 0,
                },
            )
            cache[header.api_version] = response
        return response

    registry.add(ApiKey.API_VERSIONS, 0, 4, handle)
