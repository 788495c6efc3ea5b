"""A watchdog of the broker's event loop: any stall longer than a threshold is logged
with the stack the loop was stuck in.

Everything a broker serves runs on one event loop; a callback that blocks it —
a synchronous disk read, a long computation, a lock — delays every client's
every request, and shows up only as a long latency tail. The loop stamps a
heartbeat every ``threshold / 4``; a daemon thread wakes as often and, when the
heartbeat is older than ``event.loop.stall.threshold.ms`` (100 ms by default; 0
switches the watchdog off), logs one WARNING for that stall with the loop
thread's current Python stack (``sys._current_frames``), then one INFO line
with its length when the loop runs again. Reports are rate-limited (a loop
stalled over and over logs a few stacks a minute and counts the rest).

The heartbeat is a float written by the loop thread and read by the watchdog:
a torn read is impossible in CPython, and a stale one only delays a report by
one tick. :attr:`stalls` and :attr:`longest_stall_s` count what was seen.

A pass of Python's cyclic garbage collector stops every thread, the loop's
too, and shows no stack of its own: the monitor also times each collection
(``gc.callbacks``), by generation — :attr:`gc_collections`,
:attr:`gc_seconds`, :attr:`longest_gc_s` — and a stall report says when a
collection took part of it.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import threading
import time
import traceback

__all__ = ["LoopStallMonitor"]

log = logging.getLogger(__name__)

_REPORTS_PER_MINUTE = 5


class LoopStallMonitor:
    """Watches ``loop`` (the running loop of the thread that calls :meth:`start`)."""

    def __init__(self, threshold_s: float) -> None:
        self.threshold_s = threshold_s
        self.stalls = 0
        """Stalls seen since start."""
        self.longest_stall_s = 0.0
        self._beat = time.monotonic()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._timer: asyncio.TimerHandle | None = None
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        self._window_start = 0.0
        self._reported_in_window = 0
        self._suppressed = 0
        self.gc_collections = [0, 0, 0]
        """Collections by generation since start."""
        self.gc_seconds = [0.0, 0.0, 0.0]
        """Time spent collecting, by generation."""
        self.longest_gc_s = 0.0
        self._gc_started = 0.0
        self._gc_ended = 0.0
        self._gc_last_s = 0.0
        self._gc_last_generation = 0

    def start(self) -> None:
        if self.threshold_s <= 0 or self._thread is not None:
            return
        gc.callbacks.append(self._on_gc)
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._beat = time.monotonic()
        self._tick()
        self._thread = threading.Thread(target=self._watch, name="samsa-loop-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        self._stopped.set()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._thread is not None:
            self._thread.join(timeout=1.0)
            self._thread = None

    def _tick(self) -> None:
        self._beat = time.monotonic()
        assert self._loop is not None
        self._timer = self._loop.call_later(self.threshold_s / 4, self._tick)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        now = time.perf_counter()
        if phase == "start":
            self._gc_started = now
            return
        took = now - self._gc_started
        generation = info["generation"]
        self.gc_collections[generation] += 1
        self.gc_seconds[generation] += took
        self.longest_gc_s = max(self.longest_gc_s, took)
        self._gc_ended, self._gc_last_s, self._gc_last_generation = now, took, generation

    def _watch(self) -> None:
        interval = self.threshold_s / 4
        stalled_since: float | None = None
        while not self._stopped.wait(interval):
            beat = self._beat
            now = time.monotonic()
            if now - beat > self.threshold_s:
                if stalled_since != beat:  # a new stall: the heartbeat it stopped at
                    stalled_since = beat
                    self.stalls += 1
                    self._report(now - beat)
            elif stalled_since is not None:
                length = beat - stalled_since
                self.longest_stall_s = max(self.longest_stall_s, length)
                if self._reported_in_window:
                    log.info("the event loop ran again after a stall of %.0f ms", length * 1000)
                stalled_since = None

    def _report(self, so_far_s: float) -> None:
        now = time.monotonic()
        if now - self._window_start >= 60.0:
            self._window_start, self._reported_in_window = now, 0
        if self._reported_in_window >= _REPORTS_PER_MINUTE:
            self._suppressed += 1
            return
        self._reported_in_window += 1
        frame = sys._current_frames().get(self._loop_thread)
        stack = "".join(traceback.format_stack(frame)) if frame is not None else "(not found)"
        suppressed = f" ({self._suppressed} more stalls not shown)" if self._suppressed else ""
        self._suppressed = 0
        collected = ""
        if time.perf_counter() - self._gc_ended <= so_far_s:
            collected = (
                f"; {self._gc_last_s * 1000:.0f} ms of it a garbage collection of generation "
                f"{self._gc_last_generation}"
            )
        log.warning(
            "the event loop has not run for %.0f ms (event.loop.stall.threshold.ms %.0f)%s%s; "
            "it is in:\n%s",
            so_far_s * 1000, self.threshold_s * 1000, suppressed, collected, stack,
        )  # fmt: skip
