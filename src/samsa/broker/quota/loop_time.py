"""The time a coroutine spends running on the loop, its waits left out: what
``request_percentage`` counts (Kafka counts a request handler thread's time).

:class:`LoopTimed` drives the coroutine step by step, as the task would, and
adds up the time of each step; whatever the coroutine waits on (a future, a
sleep) is passed through to the task unchanged, so it behaves exactly as when
awaited directly.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Generator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class LoopTimed(Generic[T]):
    """Await it instead of ``awaitable``; then ``seconds`` is the time it ran."""

    def __init__(self, awaitable: Awaitable[T]) -> None:
        self._awaitable = awaitable
        self.seconds = 0.0

    def __await__(self) -> Generator[Any, Any, T]:
        steps = self._awaitable.__await__()
        send: Any = None
        throw: BaseException | None = None
        clock = time.perf_counter
        while True:
            started = clock()
            try:
                waited_on = steps.send(send) if throw is None else steps.throw(throw)
            except StopIteration as done:
                self.seconds += clock() - started
                return done.value  # type: ignore[no-any-return]
            except BaseException:
                self.seconds += clock() - started
                raise
            self.seconds += clock() - started
            try:
                send, throw = (yield waited_on), None
            except BaseException as exc:  # cancellation and the like go to the coroutine
                send, throw = None, exc
