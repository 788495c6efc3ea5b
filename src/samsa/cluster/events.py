"""One owner, one queue: events handled in order by a single task (Kafka's event manager).

ZooKeeper watches and session changes arrive on the broker's loop as
callbacks; the components that react to them (the controller, a broker's
metadata cache) only :meth:`EventQueue.put` an event there, and one task
takes the events one at a time and awaits the component's handler, so the
state that handler changes has a single writer even though each handler
awaits ZooKeeper. An event whose handler fails is logged and put back after a
pause: handlers read what they need afresh, so running one again is safe. A
handler cut off by the ZooKeeper session (the connection lost or the session
expired mid-read) is a condition the retry handles: a WARNING without a
traceback; any other failure is an ERROR with its traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from samsa.cluster.zk_client import CONNECTION_ERRORS, SessionExpiredError

log = logging.getLogger(__name__)

E = TypeVar("E")

RETRY_PAUSE_S = 0.5


class EventQueue(Generic[E]):
    """Events for ``handler``, processed in order, one at a time, by one task."""

    def __init__(self, name: str, handler: Callable[[E], Awaitable[None]]) -> None:
        self.name = name
        self._handler = handler
        self._events: asyncio.Queue[E] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        # Set only by the task when it finds the queue empty, cleared by every put:
        # a set flag means everything put so far has been handled.
        self._idle = asyncio.Event()

    def put(self, event: E) -> None:
        self._idle.clear()
        self._events.put_nowait(event)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def wait_idle(self) -> None:
        """Return once every event put so far has been handled (tests)."""
        await self._idle.wait()

    async def _run(self) -> None:
        while True:
            if self._events.empty():
                self._idle.set()
            event = await self._events.get()
            try:
                await self._handler(event)
            except CONNECTION_ERRORS as exc:
                # The session dropped or expired mid-read: a condition handled, not a fault.
                cause = "expired" if isinstance(exc, SessionExpiredError) else "dropped"
                log.warning("%s: handling %s was cut off (the ZooKeeper session %s); "
                            "trying it again", self.name, event, cause)  # fmt: skip
            except Exception:
                log.exception("%s: handling %s failed; trying it again", self.name, event)
            else:
                continue
            await asyncio.sleep(RETRY_PAUSE_S)
            self.put(event)
