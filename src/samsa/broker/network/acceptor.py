"""Accepting connections on a listening socket, and the limits on them (Kafka's Acceptor and
ConnectionQuotas).

samsa accepts on its own rather than through ``loop.create_server`` for two
reasons. When the process is out of file descriptors, uvloop (libuv) accepts
and drops the pending connection without telling anyone, and the stdlib loop
reports it to the loop's exception handler hundreds of times a second; an
:class:`Acceptor` instead logs one rate-limited ERROR naming the limit, and
retries a second later with the connection still waiting in the backlog. And
``max.connections`` is applied as Kafka applies it: the acceptor stops
accepting while the broker is at the limit (new clients wait in the listen
backlog) and resumes when a connection closes. ``max.connections.per.ip`` is
checked on each accepted connection, which is closed at once when its address
is over the limit, as Kafka does.

Owned by the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import resource
import socket
from collections.abc import Callable, Iterator

from samsa.broker.rate_limited_log import RateLimitedLog

__all__ = [
    "Acceptor",
    "ConnectionQuotas",
    "SpareDescriptor",
    "is_out_of_descriptors",
    "raise_open_files_limit",
]

log = logging.getLogger(__name__)

_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_ACCEPT_RETRY_S = 1.0
_ACCEPTS_PER_WAKEUP = 64  # then let other callbacks run


def raise_open_files_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit, as far as the process may.

    Every connection and every open segment file takes a descriptor; the usual soft
    default (1024) is far below what a broker needs. Returns ``(before, after)``.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard in (resource.RLIM_INFINITY, soft):
        return soft, soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:
        log.warning("cannot raise the open file limit from %d to %d: %s", soft, hard, exc)
        return soft, soft
    return soft, hard


class ConnectionQuotas:
    """Counts of open connections, broker-wide and per client address."""

    def __init__(self, max_connections: int, max_connections_per_ip: int) -> None:
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.total = 0
        self._per_ip: dict[str, int] = {}

    def at_broker_limit(self) -> bool:
        return self.total >= self.max_connections

    def try_add(self, ip: str) -> bool:
        """Count a new connection from ``ip``; False (and not counted) when ``ip`` is at its
        limit."""
        count = self._per_ip.get(ip, 0)
        if count >= self.max_connections_per_ip:
            return False
        self._per_ip[ip] = count + 1
        self.total += 1
        return True

    def remove(self, ip: str) -> None:
        count = self._per_ip.get(ip, 0)
        if count <= 1:
            self._per_ip.pop(ip, None)
        else:
            self._per_ip[ip] = count - 1
        self.total -= 1


class Acceptor:
    """Accepts connections on one listening socket and hands each to ``on_accept``.

    ``on_accept`` takes the connected (non-blocking) socket and the peer's address.
    """

    def __init__(
        self,
        sock: socket.socket,
        on_accept: Callable[[socket.socket, str], None],
        error_log: RateLimitedLog,
    ) -> None:
        self._sock = sock
        self._on_accept = on_accept
        self._error_log = error_log
        self._loop = asyncio.get_running_loop()
        self._reading = False
        self._paused = False  # by the broker, for max.connections
        self._retry: asyncio.TimerHandle | None = None
        self._closed = False

    @classmethod
    async def listen(
        cls,
        host: str,
        port: int,
        on_accept: Callable[[socket.socket, str], None],
        error_log: RateLimitedLog,
        *,
        start: bool = True,
    ) -> list[Acceptor]:
        """Bind ``host:port`` (every address it resolves to) and start accepting.

        With ``start=False`` the sockets listen (clients wait in the backlog) but
        nothing is accepted until :meth:`resume`: a broker binds its ports before
        it loads its logs, so a port in use stops it before it touches the disk.
        """
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        acceptors: list[Acceptor] = []
        try:
            for family, kind, proto, _name, address in dict.fromkeys(infos):
                sock = socket.socket(family, kind, proto)
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    if family == socket.AF_INET6:
                        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                    sock.bind(address)
                    sock.listen(socket.SOMAXCONN)
                    sock.setblocking(False)
                except BaseException:
                    sock.close()
                    raise
                acceptor = cls(sock, on_accept, error_log)
                acceptors.append(acceptor)
                if start:
                    acceptor._start_reading()
                else:
                    acceptor._paused = True
        except BaseException:
            for acceptor in acceptors:
                acceptor.close()
            raise
        return acceptors

    @property
    def sockets(self) -> list[socket.socket]:
        return [self._sock]

    def pause(self) -> None:
        """Stop accepting (new clients wait in the listen backlog)."""
        self._paused = True
        self._stop_reading()

    def resume(self) -> None:
        self._paused = False
        if self._retry is None:
            self._start_reading()

    def close(self) -> None:
        self._closed = True
        self._stop_reading()
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        self._sock.close()

    async def wait_closed(self) -> None:
        """Nothing to wait for: connections are the broker's, and closing is immediate."""

    def _start_reading(self) -> None:
        if not self._reading and not self._paused and not self._closed:
            self._loop.add_reader(self._sock.fileno(), self._accept_ready)
            self._reading = True

    def _stop_reading(self) -> None:
        if self._reading:
            self._loop.remove_reader(self._sock.fileno())
            self._reading = False

    def _accept_ready(self) -> None:
        for _ in range(_ACCEPTS_PER_WAKEUP):
            if not self._reading:
                return  # paused by on_accept (max.connections)
            try:
                conn, address = self._sock.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:
                if exc.errno not in _OUT_OF_RESOURCES:
                    raise
                self._out_of_resources(exc)
                return
            conn.setblocking(False)
            host = address[0] if isinstance(address, tuple) else str(address)
            self._on_accept(conn, host)

    def _out_of_resources(self, exc: OSError) -> None:
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        self._error_log.log(
            logging.ERROR,
            "cannot accept connections on %s: %s (open file limit %d); new clients wait "
            "until descriptors are freed (fewer connections or partitions, or a higher "
            "ulimit -n)",
            self._sock.getsockname(), exc.strerror, soft,
        )  # fmt: skip
        # The pending connection stays in the backlog and keeps the socket readable:
        # stop watching it for a while instead of spinning on the same error.
        self._stop_reading()
        self._retry = self._loop.call_later(_ACCEPT_RETRY_S, self._retry_accept)

    def _retry_accept(self) -> None:
        self._retry = None
        self._start_reading()


class SpareDescriptor:
    """One descriptor kept open (on ``/dev/null``) to be given up when the process has no
    other: :meth:`lend` closes it for the length of a ``with`` block, so work that must not
    fail for lack of a descriptor (importing a protocol schema the first time a request of
    its kind arrives) can open its file, and takes it back afterwards."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self._take()

    def _take(self) -> None:
        try:
            self._fd = os.open(os.devnull, os.O_RDONLY)
        except OSError:
            self._fd = None  # none to spare now: taken again after the next lend

    @contextlib.contextmanager
    def lend(self) -> Iterator[None]:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        try:
            yield
        finally:
            self._take()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def is_out_of_descriptors(exc: OSError) -> bool:
    return exc.errno in (errno.EMFILE, errno.ENFILE)
