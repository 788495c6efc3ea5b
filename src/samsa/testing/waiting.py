"""Wait for a condition in a test: poll it until it holds, fail clearly when it never does.

A test waits on what it expects to see (a group settled, a segment deleted, a leader
elected), never for a fixed time. :func:`wait_until` polls ``condition`` every
``interval`` seconds and returns its first truthy value; past ``timeout`` seconds it
raises :class:`WaitTimeout`, whose message names ``what`` was awaited (``what`` may be
a callable, asked only then, to add the state last seen). The deadline only detects a
hang: the timeouts are generous because a busy machine is slow, not wrong.
:func:`wait_until_async` is the same for a coroutine, whose condition may itself be
a coroutine function.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["WaitTimeout", "wait_until", "wait_until_async"]

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_INTERVAL_S = 0.05


class WaitTimeout(AssertionError, TimeoutError):
    """A condition did not hold within its timeout: a test failure (an ``AssertionError``)
    that ``except TimeoutError`` also catches."""


def _message(what: str | Callable[[], str], timeout: float) -> str:
    described = what if isinstance(what, str) else what()
    return f"not within {timeout:g} s: {described}"


def wait_until(
    condition: Callable[[], T | None],
    what: str | Callable[[], str],
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    interval: float = DEFAULT_INTERVAL_S,
    step: Callable[[], object] | None = None,
) -> T:
    """Return ``condition()``'s first truthy value, calling it until it has one.

    Between calls, ``step()`` runs when given (a consumer's poll, which is also what
    makes progress), else the thread sleeps ``interval`` seconds. Raises
    :class:`WaitTimeout` naming ``what`` once ``timeout`` seconds have passed.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise WaitTimeout(_message(what, timeout))
        if step is None:
            time.sleep(interval)
        else:
            step()


async def wait_until_async(
    condition: Callable[[], T | None] | Callable[[], Awaitable[T | None]],
    what: str | Callable[[], str],
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    interval: float = DEFAULT_INTERVAL_S,
) -> T:
    """:func:`wait_until` on an event loop: ``condition`` may be a plain function or return
    an awaitable; between calls the loop runs other tasks for ``interval`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise WaitTimeout(_message(what, timeout))
        await asyncio.sleep(interval)
