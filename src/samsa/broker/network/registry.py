"""The one registry of served APIs: handlers add themselves, ApiVersions reads it.

ApiVersions advertises exactly the versions served. Versions kio lacks (those
Kafka 3.9 served and Kafka 4 dropped) are decoded and answered through
:mod:`samsa.protocol.legacy`, so a handler registers Kafka 3.9's floor.
"""

from __future__ import annotations

from dataclasses import dataclass

from samsa.broker.api import Handler


@dataclass(frozen=True, slots=True)
class ApiEntry:
    api_key: int
    min_version: int
    max_version: int
    handler: Handler


class ApiRegistry:
    def __init__(self) -> None:
        self._entries: dict[int, ApiEntry] = {}

    def add(
        self,
        api_key: int,
        min_version: int,
        max_version: int,
        handler: Handler,
    ) -> None:
        """Serve ``api_key`` at ``min_version..max_version``."""
        if api_key in self._entries:
            raise ValueError(f"API key {api_key} is registered twice")
        self._entries[api_key] = ApiEntry(api_key, min_version, max_version, handler)

    def handler_for(self, api_key: int, version: int) -> Handler | None:
        entry = self._entries.get(api_key)
        if entry is None or not entry.min_version <= version <= entry.max_version:
            return None
        return entry.handler

    def supports(self, api_key: int, version: int) -> bool:
        return self.handler_for(api_key, version) is not None

    def advertised(self) -> list[tuple[int, int, int]]:
        """``(api_key, min, max)`` for ApiVersions, sorted by key."""
        return [(e.api_key, e.min_version, e.max_version) for _, e in sorted(self._entries.items())]
