"""The synchronous clients' event loop: one asyncio loop on a private thread.

Each sync client (``Producer``, ``Admin``…) owns a :class:`LoopThread` and an
instance of its async core created on that loop. :func:`blocking` turns an
async core method into a sync method that runs it there and waits, so the sync
classes share every line of logic with the async ones and add no I/O of
their own (anyio's blocking portal, in a few lines).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from samsa.client.errors import ClientClosedError, IllegalStateError

__all__ = ["LoopThread", "blocking"]

P = ParamSpec("P")
R = TypeVar("R")


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A uvloop loop where uvloop is installed (it is optional), else asyncio's own."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class LoopThread:
    """An event loop running forever on a daemon thread until :meth:`stop`."""

    def __init__(self, name: str) -> None:
        self.loop = new_event_loop()
        self._stopped = False
        self._started = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()
        self._started.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._started.set)
        self.loop.run_forever()

    @property
    def stopped(self) -> bool:
        return self._stopped

    @property
    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self.thread

    def submit(self, coroutine: Coroutine[Any, Any, R]) -> concurrent.futures.Future[R]:
        """Schedule ``coroutine`` on the loop; its outcome arrives in the returned future."""
        if self._stopped:
            coroutine.close()
            raise ClientClosedError("the client was closed")
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def call(self, coroutine: Coroutine[Any, Any, R], timeout: float | None = None) -> R:
        """Run ``coroutine`` on the loop and wait for its result (or exception).

        Raises :class:`IllegalStateError` when called from the loop's own thread (from a
        delivery callback, say): waiting there would wait forever.
        """
        if self.in_loop_thread:
            coroutine.close()
            raise IllegalStateError(
                "a blocking client call was made from the client's own event-loop thread "
                "(inside a callback?); it would never return"
            )
        future = self.submit(coroutine)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()  # interrupted (Ctrl-C) or timed out: do not leave it running
            raise

    def call_soon(self, callback: Callable[..., object], *args: Any) -> None:
        """Run ``callback(*args)`` on the loop thread soon (thread-safe, does not wait)."""
        self.loop.call_soon_threadsafe(callback, *args)

    def stop(self) -> None:
        """Stop the loop and join its thread (tasks still pending are cancelled)."""
        if self._stopped:
            return
        self._stopped = True
        if self.in_loop_thread:
            raise IllegalStateError("a client cannot be closed from its own event-loop thread")
        asyncio.run_coroutine_threadsafe(_cancel_all(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


async def _cancel_all() -> None:
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def blocking(
    method: Callable[Concatenate[Any, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[Any, P], R]:
    """A sync method that runs the async core's method of the same name on the loop thread.

    The owning class keeps its :class:`LoopThread` in ``_portal`` and its core in ``_core``.
    """
    name = method.__name__

    def call(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        portal: LoopThread = self._portal
        result: R = portal.call(getattr(self._core, name)(*args, **kwargs))
        return result

    functools.update_wrapper(call, method)
    return call
