"""A broker's ZooKeeper session, as awaitables on the broker's event loop.

``kazoo`` runs the session on its own threads and completes requests there;
this module turns each request into an ``asyncio`` future of the broker's loop
and delivers watch events and session-state changes to callbacks *on that
loop* (``call_soon_threadsafe``), so the state they change keeps its one owner.
Nothing here blocks the loop. A watch also fires once the connection is back
after it dropped (kazoo does not set watches again on a new connection), so
whoever set it reads again and sees what changed meanwhile.

``zookeeper.connect`` is Kafka's: ``host:port[,host:port…][/chroot]``. The
chroot is created when missing (as Kafka does) and every path given to this
client is under it. Errors are kazoo's (``NodeExistsError``, ``NoNodeError``,
``BadVersionError``, ``ConnectionLoss``, ``SessionExpiredError``), re-exported
here so callers need not import kazoo.

Not thread-safe: call every method from the loop that created the client.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    SessionExpiredError,
)
from kazoo.protocol.states import EventType, KazooState, WatchedEvent

from samsa.errors import is_expected_error

__all__ = [
    "CONNECTION_ERRORS",
    "BadVersionError",
    "ConnectionLoss",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "SessionExpiredError",
    "ZkCheck",
    "ZkClient",
    "ZkCreate",
    "ZkDelete",
    "ZkSet",
    "is_expected_zk_error",
    "split_connect",
]

log = logging.getLogger(__name__)
_kazoo_log = logging.getLogger("kazoo.client")


class _RefusedWhileStarting(logging.Filter):
    """Drops kazoo's warnings that a connection to ZooKeeper was refused."""

    def filter(self, record: logging.LogRecord) -> bool:
        refused = record.exc_info is not None and isinstance(
            record.exc_info[1], ConnectionRefusedError
        )
        return not (refused or "Connection refused" in record.getMessage())


CONNECTION_ERRORS: tuple[type[Exception], ...] = (ConnectionLoss, SessionExpiredError)
"""A request cut off by the session (the connection dropped, or the session expired):
conditions a handler recovers from by running again once a session is back."""

T = TypeVar("T")


def is_expected_zk_error(exc: BaseException) -> bool:
    """Whether ``exc`` is what talking to ZooKeeper may raise (kazoo's errors: a lost
    connection or session, a lost race) or another expected condition
    (:func:`samsa.errors.is_expected_error`), rather than a programming error."""
    return isinstance(exc, KazooException) or is_expected_error(exc)


def split_connect(connect: str) -> tuple[str, str]:
    """``"h1:2181,h2:2181/kafka"`` → ``("h1:2181,h2:2181", "/kafka")`` (chroot ``""`` if none)."""
    hosts, slash, chroot = connect.partition("/")
    chroot = (slash + chroot).rstrip("/")
    return hosts, chroot


@dataclass(frozen=True, slots=True)
class ZkCheck:
    """Part of a :meth:`ZkClient.multi`: the znode must be at ``version``."""

    path: str
    version: int


@dataclass(frozen=True, slots=True)
class ZkCreate:
    path: str
    data: bytes = b""
    ephemeral: bool = False


@dataclass(frozen=True, slots=True)
class ZkSet:
    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True, slots=True)
class ZkDelete:
    path: str
    version: int = -1


ZkOp = ZkCheck | ZkCreate | ZkSet | ZkDelete


class ZkClient:
    """One ZooKeeper session; every request an awaitable on the creating loop."""

    def __init__(self, connect: str, session_timeout_ms: int = 18_000) -> None:
        self.hosts, self.chroot = split_connect(connect)
        self.session_timeout_ms = session_timeout_ms
        self._loop = asyncio.get_running_loop()
        self._kazoo = KazooClient(hosts=self.hosts, timeout=session_timeout_ms / 1000)
        self._state_listeners: list[Callable[[str], None]] = []
        self._lost_watches: list[Callable[[], None]] = []
        """Watches the last dropped connection took, fired once connected again."""
        self._reconnected = asyncio.Event()
        """Set whenever the session is connected (again); cleared when a read waits on it."""
        self._kazoo.add_listener(self._on_state)
        self.closing = False
        """True once :meth:`close` began: the session's end is this process's own doing."""

    # -- session ----------------------------------------------------------------------

    async def start(self, timeout: float = 30.0) -> None:
        """Open the session (and create the chroot when it is missing). Until it is open,
        kazoo's reports of refused connections (ZooKeeper still starting) are not printed:
        not reaching it within ``timeout`` is the error reported."""
        quiet = _RefusedWhileStarting()
        _kazoo_log.addFilter(quiet)
        try:
            started = self._kazoo.start_async()
            await asyncio.wait_for(self._await_event(started), timeout)
        finally:
            _kazoo_log.removeFilter(quiet)
        if not self._kazoo.connected:
            raise ConnectionLoss(f"no ZooKeeper session with {self.hosts} after {timeout} s")
        if self.chroot:
            await self._wrap(self._kazoo.ensure_path_async(self.chroot))

    async def close(self) -> None:
        """End the session: ephemeral znodes go at once, not after the session timeout."""
        self.closing = True
        await asyncio.to_thread(self._stop)

    def _stop(self) -> None:
        self._kazoo.stop()
        self._kazoo.close()

    @property
    def connected(self) -> bool:
        return bool(self._kazoo.connected)

    @property
    def session_id(self) -> int | None:
        session = self._kazoo.client_id
        return None if session is None else int(session[0])

    def add_state_listener(self, listener: Callable[[str], None]) -> None:
        """``listener(state)`` on the loop for "CONNECTED", "SUSPENDED" and "LOST".

        SUSPENDED: the connection dropped, the session may still live; LOST: the
        session expired — its ephemeral znodes and watches are gone and must be
        made again on the new session kazoo opens.
        """
        self._state_listeners.append(listener)

    def _on_state(self, state: str) -> None:  # a kazoo thread
        name = {
            KazooState.CONNECTED: "CONNECTED",
            KazooState.SUSPENDED: "SUSPENDED",
            KazooState.LOST: "LOST",
        }.get(state, str(state))
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._notify_state, name)

    def _notify_state(self, name: str) -> None:
        if name == "CONNECTED":
            self._reconnected.set()
            lost, self._lost_watches = self._lost_watches, []
            for watch in lost:
                watch()
        for listener in list(self._state_listeners):
            listener(name)

    def _watch_lost(self, watch: Callable[[], None]) -> None:
        if self.connected:
            watch()  # connected again before this reached the loop
        else:
            self._lost_watches.append(watch)

    # -- requests ---------------------------------------------------------------------

    def _path(self, path: str) -> str:
        return self.chroot + path

    async def get(self, path: str, watch: Callable[[], None] | None = None) -> tuple[bytes, int]:
        """The znode's data and version (NoNodeError if absent); ``watch()`` once it changes
        (or once connected again after a dropped connection: read it again)."""
        data, stat = await self._read(
            lambda: self._kazoo.get_async(self._path(path), watch=self._watcher(watch))
        )
        return bytes(data or b""), int(stat.version)

    async def get_or_none(self, path: str) -> tuple[bytes, int] | None:
        try:
            return await self.get(path)
        except NoNodeError:
            return None

    async def exists(self, path: str, watch: Callable[[], None] | None = None) -> bool:
        """Whether the znode exists; ``watch()`` once it is created, changed or deleted."""
        stat = await self._read(
            lambda: self._kazoo.exists_async(self._path(path), watch=self._watcher(watch))
        )
        return stat is not None

    async def created_ms(self, path: str) -> int | None:
        """When the znode was created, in ZooKeeper's wall-clock milliseconds (None: absent)."""
        stat = await self._read(lambda: self._kazoo.exists_async(self._path(path)))
        return None if stat is None else int(stat.ctime)

    async def get_children(self, path: str, watch: Callable[[], None] | None = None) -> list[str]:
        """The znode's children, sorted (NoNodeError if absent); ``watch()`` once they change."""
        children = await self._read(
            lambda: self._kazoo.get_children_async(self._path(path), watch=self._watcher(watch))
        )
        return sorted(children)

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
    ) -> str:
        """Create the znode (NodeExistsError if it is there); returns its path."""
        created = await self._wrap(
            self._kazoo.create_async(
                self._path(path), data, ephemeral=ephemeral, sequence=sequence, makepath=makepath
            )
        )
        return str(created).removeprefix(self.chroot)

    async def set(self, path: str, data: bytes, version: int = -1) -> int:
        """Write the znode if it is at ``version`` (-1: any); returns the new version."""
        stat = await self._wrap(self._kazoo.set_async(self._path(path), data, version))
        return int(stat.version)

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        """Delete the znode if it is at ``version`` (NoNodeError if absent)."""
        if recursive:
            await asyncio.to_thread(self._kazoo.delete, self._path(path), version, True)
        else:
            await self._wrap(self._kazoo.delete_async(self._path(path), version))

    async def ensure_path(self, path: str) -> None:
        """Create the znode and its parents where missing (empty data)."""
        await self._wrap(self._kazoo.ensure_path_async(self._path(path)))

    async def multi(self, ops: Sequence[ZkOp]) -> None:
        """Apply every op or none (a ZooKeeper multi); raises the first op's error.

        A :class:`ZkCheck` makes the whole write conditional, as Kafka's
        controller checks ``/controller_epoch``'s version on each of its writes,
        so a controller that lost its place cannot write any more.
        """
        transaction = self._kazoo.transaction()
        for op in ops:
            if isinstance(op, ZkCheck):
                transaction.check(self._path(op.path), op.version)
            elif isinstance(op, ZkCreate):
                transaction.create(self._path(op.path), op.data, ephemeral=op.ephemeral)
            elif isinstance(op, ZkSet):
                transaction.set_data(self._path(op.path), op.data, op.version)
            else:
                transaction.delete(self._path(op.path), op.version)
        results = await self._wrap(transaction.commit_async())
        failures = [r for r in results if isinstance(r, Exception)]
        # The op that failed carries its error; the others only say they were rolled back.
        for failure in failures:
            if not isinstance(failure, RolledBackError):
                raise failure
        if failures:
            raise failures[0]

    # -- plumbing ---------------------------------------------------------------------

    def _watcher(self, watch: Callable[[], None] | None) -> Callable[[WatchedEvent], None] | None:
        if watch is None:
            return None

        def fired(event: WatchedEvent) -> None:  # a kazoo thread
            if self._loop.is_closed():
                return
            if event.type == EventType.NONE:
                # The connection dropped. kazoo forgets every watch then and does not
                # set them again on the next connection (no SetWatches), so a change
                # made meanwhile or later would go unseen: the watch fires once
                # connected again, and its owner reads the znode again, watching it.
                self._loop.call_soon_threadsafe(self._watch_lost, watch)
            else:
                self._loop.call_soon_threadsafe(watch)

        return fired

    async def _read(self, start: Callable[[], Any]) -> Any:
        """A read, asked again when the connection drops under it (a stalled ZooKeeper, a
        lost heartbeat) once the session is connected again, for up to the session timeout:
        a read changes nothing, so asking twice is safe. Writes are not retried (a lost
        answer does not say whether the write happened); their callers decide."""
        deadline = self._loop.time() + self.session_timeout_ms / 1000
        while True:
            try:
                return await self._wrap(start())
            except ConnectionLoss:
                left = deadline - self._loop.time()
                if left <= 0:
                    raise
                log.info("ZooKeeper connection lost during a read; asking again once connected")
                if not self.connected:
                    self._reconnected.clear()
                    try:
                        await asyncio.wait_for(self._reconnected.wait(), left)
                    except TimeoutError:
                        raise ConnectionLoss(
                            f"no ZooKeeper connection for {self.session_timeout_ms} ms"
                        ) from None

    def _wrap(self, result: Any) -> asyncio.Future[Any]:
        """An asyncio future of the loop settled when kazoo's async result is."""
        future: asyncio.Future[Any] = self._loop.create_future()

        def settle() -> None:
            if future.done():
                return
            try:
                future.set_result(result.get_nowait())
            except Exception as exc:  # kazoo's own error for the request
                future.set_exception(exc)

        def done(_: Any) -> None:  # a kazoo thread
            if not self._loop.is_closed():
                self._loop.call_soon_threadsafe(settle)

        result.rawlink(done)
        return future

    async def _await_event(self, event: Any) -> None:
        await asyncio.to_thread(event.wait)
