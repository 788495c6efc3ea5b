"""Log messages a peer can provoke at will, at most a few per interval.

A fuzzer or a broken client can send thousands of bad frames a second; each
one logged would fill the disk (one fuzzing run once wrote 34 MB of
tracebacks). A :class:`RateLimitedLog` lets ``burst`` records through per
``interval_s`` and counts the rest; the next record that gets through says how
many were suppressed. Owned by the event loop thread; not thread-safe.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["RateLimitedLog"]


class RateLimitedLog:
    """At most ``burst`` records per ``interval_s`` seconds through ``logger``."""

    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float = 60.0,
        burst: int = 10,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._interval_s = interval_s
        self._burst = burst
        self._clock = clock
        self._window_start = -interval_s
        self._in_window = 0
        self._suppressed = 0

    def allow(self) -> bool:
        """Take a slot in the current window; False (and counted) when there is none."""
        now = self._clock()
        if now - self._window_start >= self._interval_s:
            self._window_start = now
            self._in_window = 0
        if self._in_window >= self._burst:
            self._suppressed += 1
            return False
        self._in_window += 1
        return True

    def log(
        self,
        level: int,
        msg: str,
        *args: object,
        exc_info: BaseException | None = None,
        traceback_limit: RateLimitedLog | None = None,
    ) -> None:
        """Log ``msg % args`` if the window has room, with the count suppressed since the last.

        With ``traceback_limit``, ``exc_info``'s traceback is included only when that (usually
        sparser) limit has room too.
        """
        if not self.allow():
            return
        if exc_info is not None and traceback_limit is not None and not traceback_limit.allow():
            exc_info = None
        if self._suppressed:
            msg += " (%d similar messages suppressed)"
            args = (*args, self._suppressed)
            self._suppressed = 0
        self._logger.log(level, msg, *args, exc_info=exc_info)
