"""The coordinators' seam to time: what time it is, and what to run after a delay.

Coordinators read the wall clock (record timestamps, retention, transaction
timeouts) and arm timeouts (sessions, rebalances, periodic expiry). Both go through
a :class:`Timer`, so a test drives them with a manual timer that moves only when
told to, and checks behaviour without sleeping — as Kafka's coordinators take a
``Time`` and a ``Timer`` (``MockTime`` and ``MockTimer`` in its tests).

:class:`LoopTimer` is the real one: the broker's clock for the time, the running
event loop's ``call_later`` for delays. Not thread-safe: call it on the loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol


class TimerHandle(Protocol):
    """A scheduled callback; cancelling one that already ran does nothing."""

    def cancel(self) -> None: ...


class Timer(Protocol):
    """Wall-clock time in milliseconds, and callbacks after a delay."""

    def now_ms(self) -> int: ...

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` once, ``delay_ms`` milliseconds from now (on the event loop)."""
        ...


class LoopTimer:
    """A :class:`Timer` on the running event loop, with ``clock`` for the time."""

    __slots__ = ("_clock",)

    def __init__(self, clock: Callable[[], int]) -> None:
        self._clock = clock

    def now_ms(self) -> int:
        return self._clock()

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, callback)


async def sleep_ms(timer: Timer, delay_ms: int) -> None:
    """Wait ``delay_ms`` milliseconds of ``timer``'s time (a cancelled wait cancels its timeout)."""
    woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake() -> None:
        if not woken.done():
            woken.set_result(None)

    handle = timer.call_later(delay_ms, wake)
    try:
        await woken
    finally:
        handle.cancel()
