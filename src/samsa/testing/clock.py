"""Clocks that move only when a test says so, for code that takes its clock as an argument.

:class:`ManualClock` is a millisecond clock (a ``Callable[[], int]``, as the log,
the coordinators and the quota manager take); :class:`ManualTimer` is a coordinator
``Timer`` (:mod:`samsa.coordinator.timer`) on one, whose callbacks run when the test
advances it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable

__all__ = ["ManualClock", "ManualTimer", "ManualTimerHandle"]


class ManualClock:
    """A millisecond clock that moves only when a test says so."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms

    def seconds(self) -> float:
        """The time in seconds, for code whose clock is ``time.monotonic``-like."""
        return self.now_ms / 1000


class ManualTimerHandle:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualTimer:
    """A coordinator ``Timer`` (:mod:`samsa.coordinator.timer`) on a :class:`ManualClock`.

    Callbacks run inside :meth:`advance`, each at its due time, in due order (ties
    in the order they were scheduled), so a test decides exactly when every session,
    rebalance or expiry timeout fires. A callback due now (a delay of 0) runs on the
    event loop's next turn, as the loop's own ``call_later(0)`` does, without the
    clock moving.
    """

    def __init__(self, clock: ManualClock | None = None) -> None:
        self.clock = clock or ManualClock()
        self._due: list[tuple[int, int, ManualTimerHandle, Callable[[], None]]] = []
        self._sequence = itertools.count()

    def now_ms(self) -> int:
        return self.clock.now_ms

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> ManualTimerHandle:
        handle = ManualTimerHandle()
        if delay_ms <= 0:

            def run_unless_cancelled() -> None:
                if not handle.cancelled:
                    handle.cancelled = True
                    callback()

            asyncio.get_running_loop().call_soon(run_unless_cancelled)
            return handle
        due = self.clock.now_ms + delay_ms
        heapq.heappush(self._due, (due, next(self._sequence), handle, callback))
        return handle

    def pending(self) -> int:
        """How many callbacks are scheduled and not cancelled."""
        return sum(1 for _, _, handle, _ in self._due if not handle.cancelled)

    def advance(self, ms: int) -> None:
        """Move the clock ``ms`` forward, running every callback that falls due on the way."""
        end = self.clock.now_ms + ms
        while self._due and self._due[0][0] <= end:
            due, _, handle, callback = heapq.heappop(self._due)
            if handle.cancelled:
                continue
            self.clock.now_ms = max(self.clock.now_ms, due)
            handle.cancelled = True  # it ran: a later cancel does nothing
            callback()
        self.clock.now_ms = end
