"""The future the blocking producer's send() returns: a concurrent.futures.Future, made cheap.

A standard Future builds a ``threading.Condition`` (a lock, a deque and five
bound methods) when it is created. A producer creates one per record and most
are never waited on; profiling showed those objects, kept alive until their
batch is delivered, costing more than all the rest of send() — mostly in the
cyclic garbage collector. :class:`RecordFuture` creates its Condition on first
use instead: by a caller that waits, polls, cancels or adds a callback. When
the producer completes a future nobody has touched, it just stores the
outcome; anyone arriving later finds it there.

This leans on the attributes CPython's ``Future`` keeps (``_state``,
``_result``, ``_exception``, ``_waiters``, ``_done_callbacks``, ``_condition``),
unchanged since Python 3.2; the tests exercise every public method and
``concurrent.futures.wait`` against it.
"""

from __future__ import annotations

import concurrent.futures
import threading
from concurrent.futures._base import FINISHED, PENDING
from typing import Any

from samsa.client.producer.types import RecordMetadata

__all__ = ["RecordFuture"]

_CREATE = threading.Lock()  # makes the first use and a completion mutually exclusive


class RecordFuture(concurrent.futures.Future[RecordMetadata]):
    """A :class:`concurrent.futures.Future` of a record's :class:`RecordMetadata`."""

    def __init__(self) -> None:  # not the base __init__: it would build the Condition now
        self._lazy_condition: threading.Condition | None = None
        self._state = PENDING
        self._result: Any = None
        self._exception: BaseException | None = None
        self._waiters: list[Any] = []
        self._done_callbacks: list[Any] = []

    @property
    def _condition(self) -> threading.Condition:
        condition = self._lazy_condition
        if condition is None:
            with _CREATE:
                condition = self._lazy_condition
                if condition is None:
                    condition = self._lazy_condition = threading.Condition()
        return condition

    @_condition.setter
    def _condition(self, condition: threading.Condition) -> None:
        self._lazy_condition = condition

    def set_result(self, result: RecordMetadata) -> None:
        with _CREATE:
            if self._lazy_condition is None and self._state == PENDING:
                # Untouched so far: no waiter and no callback can exist yet.
                self._result, self._state = result, FINISHED
                return
        super().set_result(result)

    def set_exception(self, exception: BaseException | None) -> None:
        with _CREATE:
            if self._lazy_condition is None and self._state == PENDING:
                self._exception, self._state = exception, FINISHED
                return
        super().set_exception(exception)
