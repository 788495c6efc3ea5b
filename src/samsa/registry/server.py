"""The schema registry inside a broker process: ``schema.registry.listeners``.

:class:`SchemaRegistry` binds its HTTP listeners while the broker binds its own
(a port in use stops start-up early), reads the ``_schemas`` topic through the
broker's first PLAINTEXT listener once the broker serves, and only then answers
HTTP requests. There is one writer: on a ZooKeeper cluster, run the registry on
one broker only (its topic is replicated like any other); electing one broker's
registry as the primary, the others answering reads and forwarding writes, is not
done yet.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from samsa.errors import ConfigError
from samsa.registry.api import RegistryApi
from samsa.registry.errors import error_body
from samsa.registry.http import HttpServer
from samsa.registry.service import RegistryService
from samsa.registry.state import RegistryState
from samsa.registry.store import SchemaTopic

log = logging.getLogger(__name__)


class SchemaRegistry:
    def __init__(
        self,
        addresses: list[tuple[str, int]],
        *,
        topic: str = "_schemas",
        replication_factor: int = 3,
        max_request_bytes: int = 16 * 1024 * 1024,
    ) -> None:
        self.addresses = addresses
        self.state = RegistryState()
        self.topic_name = topic
        self.replication_factor = replication_factor
        self._topic: SchemaTopic | None = None
        self.service: RegistryService | None = None
        self._api: RegistryApi | None = None
        self.http = HttpServer(
            self._handle,
            error_body,
            max_body_bytes=max_request_bytes,
            name="schema registry",
        )

    async def listen(self) -> None:
        # The formats' parsers import slowly: once here rather than in a first request.
        try:
            await asyncio.to_thread(_import_formats)
        except ImportError as exc:
            raise ConfigError(
                f"schema.registry.listeners needs the registry extra ({exc.name} is missing): "
                "pip install 'samsa[registry]'"
            ) from None
        await self.http.listen(self.addresses, "schema.registry.listeners")

    async def start(self, client_config: dict[str, Any]) -> None:
        """Read the topic to its end (creating it at first start), then serve."""
        self._topic = SchemaTopic(
            client_config,
            self.topic_name,
            self.state.apply,
            replication_factor=self.replication_factor,
        )
        await self._topic.start()
        self.service = RegistryService(self.state, self._topic)
        self._api = RegistryApi(self.service)
        await self.http.start_serving()
        for host, port in self.http.bound:
            url_host = f"[{host}]" if ":" in host else host
            log.info("serving the schema registry on http://%s:%d", url_host, port)

    async def _handle(self, request: Any) -> Any:
        assert self._api is not None
        return await self._api.handle(request)

    async def close(self) -> None:
        await self.http.close()
        if self._topic is not None:
            await self._topic.close()


def plaintext_bootstrap(bound: list[tuple[str, int, str]], protocols: dict[str, str]) -> str:
    """The first bound PLAINTEXT listener as ``host:port`` (the registry's own client)."""
    for host, port, listener in bound:
        if protocols.get(listener) == "PLAINTEXT":
            connect_host = "127.0.0.1" if host in ("0.0.0.0", "") else host
            connect_host = "::1" if connect_host == "::" else connect_host
            return f"[{connect_host}]:{port}" if ":" in connect_host else f"{connect_host}:{port}"
    raise ConfigError(
        "schema.registry.listeners needs a PLAINTEXT listener in listeners for the registry "
        "to reach the _schemas topic"
    )


def _import_formats() -> None:
    import samsa.registry.formats.avro
    import samsa.registry.formats.json_schema  # noqa: F401
