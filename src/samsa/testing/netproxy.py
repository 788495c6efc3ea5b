"""Loopback TCP proxies that cut and heal network links on command.

A :class:`LinkProxy` listens on a loopback port of its own and carries every
connection's bytes to one target address, unchanged, in both directions. Each
connection is tagged with its *source*: a function given the first bytes the
connecting side sends names it (for Kafka traffic, :func:`kafka_client_id` reads
the client id of the first request's header), or every connection is ``"*"``.

``cut(source)`` closes that source's connections and refuses (accepts and closes
at once) its new ones until ``heal(source)``; ``cut()`` does so for every source.
To the peers a cut looks like a link that keeps resetting: writes fail, reads end,
reconnects are refused, exactly what a broker sees when a network path is lost.

A broker is made to reach another broker (or ZooKeeper) through a proxy by
advertising the proxy's port (``advertised.listeners`` of an inter-broker listener)
or connecting to it (``zookeeper.connect``); see :mod:`samsa.testing.nemesis`.
"""

from __future__ import annotations

import contextlib
import logging
import re
import socket
import struct
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

ALL = "*"
"""The source of connections no identifier names, and ``cut()``'s "every source"."""

Identify = Callable[[bytes], str | None]
"""First bytes of a connection → its source, or None while more bytes are needed."""

_HEADER = struct.Struct(">ihhih")  # size, api key, api version, correlation id, id length
_MAX_PEEK = 4096


def kafka_client_id(first: bytes) -> str | None:
    """The client id of a Kafka request header at the start of ``first`` ("" if null),
    None until the header's bytes are all there."""
    if len(first) < _HEADER.size:
        return None if len(first) < _MAX_PEEK else ""
    length = _HEADER.unpack_from(first)[4]
    if length < 0:
        return ""
    end = _HEADER.size + length
    if len(first) < end:
        return None if len(first) < _MAX_PEEK else ""
    return first[_HEADER.size : end].decode(errors="replace")


def broker_of_client_id(client_id: str) -> str:
    """``samsa-replica-fetcher-3`` → ``"3"``: the broker id a samsa broker's own
    connections end their client id with, or the whole id when there is none."""
    match = re.search(r"-(\d+)$", client_id)
    return match.group(1) if match else client_id


def kafka_source(first: bytes) -> str | None:
    """Identify a Kafka connection by the broker id ending its client id."""
    client_id = kafka_client_id(first)
    return None if client_id is None else broker_of_client_id(client_id)


class LinkProxy:
    """A proxy for ``target`` on ``127.0.0.1:port``; see the module docstring."""

    def __init__(
        self, target: tuple[str, int], identify: Identify | None = None, name: str = ""
    ) -> None:
        self.target = target
        self.identify = identify
        self.name = name or f"proxy to {target[0]}:{target[1]}"
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._cut: set[str] = set()
        self._connections: dict[str, set[socket.socket]] = {}
        self.refused = 0
        """Connections refused while their source was cut (a check that cuts bite)."""
        self._closed = False
        self._thread = threading.Thread(target=self._accept, name=self.name, daemon=True)
        self._thread.start()

    # -- commands -------------------------------------------------------------------------
    def cut(self, source: str = ALL) -> None:
        """Close ``source``'s connections (every source's for ``ALL``) and refuse new ones."""
        with self._lock:
            self._cut.add(source)
            doomed = [
                sock
                for name, socks in self._connections.items()
                if source in (ALL, name)
                for sock in socks
            ]
        for sock in doomed:
            _hang_up(sock)

    def heal(self, source: str = ALL) -> None:
        """Carry ``source``'s connections again (``ALL``: lift every cut)."""
        with self._lock:
            if source == ALL:
                self._cut.clear()
            else:
                self._cut.discard(source)

    def is_cut(self, source: str) -> bool:
        with self._lock:
            return ALL in self._cut or source in self._cut

    def close(self) -> None:
        """Stop accepting and close every connection."""
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            doomed = [sock for socks in self._connections.values() for sock in socks]
        for sock in doomed:
            _hang_up(sock)

    # -- the carrying ---------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            threading.Thread(
                target=self._open, args=(client,), name=f"{self.name} link", daemon=True
            ).start()

    def _open(self, client: socket.socket) -> None:
        first = b""
        source = ALL
        if self.identify is not None:
            client.settimeout(30)
            named: str | None = None
            while named is None:
                try:
                    data = client.recv(_MAX_PEEK)
                except OSError:
                    data = b""
                if not data:
                    client.close()
                    return
                first += data
                named = self.identify(first)
            client.settimeout(None)
            source = named
        if self.is_cut(source):
            self.refused += 1
            _hang_up(client)
            return
        try:
            upstream = socket.create_connection(self.target, timeout=5)
            upstream.settimeout(None)
        except OSError:
            _hang_up(client)  # as the peer would see the target: gone
            return
        with self._lock:
            if ALL in self._cut or source in self._cut:  # cut while connecting
                cut_now = True
            else:
                cut_now = False
                self._connections.setdefault(source, set()).update((client, upstream))
        if cut_now:
            self.refused += 1
            _hang_up(client)
            _hang_up(upstream)
            return
        try:
            if first:
                upstream.sendall(first)
        except OSError:
            self._forget(source, client, upstream)
            return
        threading.Thread(
            target=self._pipe, args=(upstream, client, source), name=f"{self.name} back",
            daemon=True,
        ).start()  # fmt: skip
        self._pipe(client, upstream, source)

    def _pipe(self, reader: socket.socket, writer: socket.socket, source: str) -> None:
        try:
            while data := reader.recv(65536):
                writer.sendall(data)
        except OSError:
            pass
        self._forget(source, reader, writer)

    def _forget(self, source: str, *socks: socket.socket) -> None:
        with self._lock:
            held = self._connections.get(source, set())
            for sock in socks:
                held.discard(sock)
        for sock in socks:
            _hang_up(sock)


def _hang_up(sock: socket.socket) -> None:
    """Reset the connection (RST, not FIN: the peer's next read or write fails)."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
