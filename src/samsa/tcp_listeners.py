"""The sockets of a small asyncio server: bound first, served later, closed with their
connections. The broker's metrics endpoint and the schema registry's HTTP API each hold
one and give it the coroutine that serves a connection."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

from samsa.errors import ConfigError

ServeConnection = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Coroutine[Any, Any, None]]


class TcpListeners:
    """Listening sockets and the tasks serving their connections (owned by one loop)."""

    def __init__(self, serve: ServeConnection, *, limit: int) -> None:
        self._serve = serve
        self._limit = limit
        """The stream reader's buffer limit: a line (an HTTP header block) longer fails."""
        self._servers: list[asyncio.Server] = []
        self._connections: set[asyncio.Task[None]] = set()
        self.bound: list[tuple[str, int]] = []
        """Each bound (host, port), a port 0 resolved to the one the kernel chose."""

    async def listen(self, addresses: list[tuple[str, int]], config_key: str) -> None:
        """Bind every address (not serving yet: see :meth:`start_serving`); an address that
        cannot be bound is a :class:`ConfigError` naming ``config_key``."""
        for host, port in addresses:
            try:
                server = await asyncio.start_server(
                    self._accepted,
                    host,
                    port,
                    start_serving=False,
                    reuse_address=True,
                    limit=self._limit,
                )
            except OSError as exc:
                raise ConfigError(
                    f"cannot listen on {host}:{port} ({config_key}): "
                    f"{exc.strerror or exc}; stop what uses that address or change {config_key}"
                ) from exc
            self._servers.append(server)
            for sock in server.sockets:
                bound_host, bound_port = sock.getsockname()[:2]
                self.bound.append((bound_host, bound_port))

    async def start_serving(self) -> None:
        for server in self._servers:
            await server.start_serving()

    async def close(self) -> None:
        """Stop accepting, cancel the connections being served, and wait (5 s at most per
        socket) for the sockets to close."""
        for server in self._servers:
            server.close()
        for task in list(self._connections):
            task.cancel()
        for server in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 5)

    def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.get_running_loop().create_task(self._serve(reader, writer))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)
