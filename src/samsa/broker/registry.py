"""The one registry of served APIs: handlers add themselves, ApiVersions reads it."""

from __future__ import annotations

from dataclasses import dataclass

from samsa.broker.api import Handler


@dataclass(frozen=True, slots=True)
class ApiEntry:
    api_key: int
    min_version: int
    max_version: int
    handler: Handler
    advertised_min: int


class ApiRegistry:
    def __init__(self) -> None:
        self._entries: dict[int, ApiEntry] = {}

    def add(
        self,
        api_key: int,
        min_version: int,
        max_version: int,
        handler: Handler,
        *,
        advertised_min: int | None = None,
    ) -> None:
        """Serve ``api_key`` at ``min_version..max_version``.

        ``advertised_min`` lets ApiVersions announce a lower minimum than is served
        (Produce and JoinGroup from 0, as Kafka 4.1 does for old librdkafka).
        """
        if api_key in self._entries:
            raise ValueError(f"API key {api_key} is registered twice")
        low = min_version if advertised_min is None else advertised_min
        self._entries[api_key] = ApiEntry(api_key, min_version, max_version, handler, low)

    def handler_for(self, api_key: int, version: int) -> Handler | None:
        entry = self._entries.get(api_key)
        if entry is None or not entry.min_version <= version <= entry.max_version:
            return None
        return entry.handler

    def supports(self, api_key: int, version: int) -> bool:
        return self.handler_for(api_key, version) is not None

    def advertised(self) -> list[tuple[int, int, int]]:
        """``(api_key, min, max)`` for ApiVersions, sorted by key."""
        return [
            (e.api_key, e.advertised_min, e.max_version) for _, e in sorted(self._entries.items())
        ]
