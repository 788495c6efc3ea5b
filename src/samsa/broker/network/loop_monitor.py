"""A watchdog of the broker's event loop: any stall longer than a threshold is logged
with the stack the loop was stuck in, and with its length and where it went once it ends.

Everything a broker serves runs on one event loop; a callback that blocks it —
a synchronous disk read, a long computation, a lock — delays every client's
every request, and shows up only as a long latency tail. The loop stamps a
heartbeat every ``threshold / 4``; a daemon thread wakes as often and, when the
heartbeat is older than ``event.loop.stall.threshold.ms`` (100 ms by default; 0
switches the watchdog off), logs one WARNING for that stall with the loop
thread's current Python stack (``sys._current_frames``). While the stall lasts it
samples the loop's stack at each wake; when the loop runs again it logs a second
WARNING with the stall's whole length and, when the stall moved on from where it
was first seen, the stack seen most: a request that spends 100 ms decoding and
5 s in its handler is reported with the 5 s and the handler, not only the
decoder's 100 ms. Reports are rate-limited (a loop stalled over and over logs a
few stalls a minute and counts the rest).

The lengths are measured by the loop itself: each heartbeat knows how long ago
the previous one was, so :attr:`stalls` and :attr:`longest_stall_s` count every
stall whole, including one the watchdog could not watch (native code holding the
GIL for all of it) and one that began right after another ended, between two of
the watchdog's wakes. The heartbeat is a float written by the loop thread and
read by the watchdog: a torn read is impossible in CPython, and a stale one only
delays a report by one tick.

A pass of Python's cyclic garbage collector stops every thread, the loop's
too, and shows no stack of its own: the monitor also times each collection
(``gc.callbacks``), by generation — :attr:`gc_collections`,
:attr:`gc_seconds`, :attr:`longest_gc_s` — and a stall report says when a
collection took part of it.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import logging
import sys
import threading
import time
import traceback
from types import FrameType

__all__ = ["LoopStallMonitor"]

log = logging.getLogger(__name__)

_REPORTS_PER_MINUTE = 5
_DISTINCT_STACKS = 64  # kept per stall; samples of further stacks are only counted

Stack = tuple[tuple[str, int, str], ...]


def _stack_of(frame: FrameType | None) -> Stack:
    """``frame``'s stack, outermost first, as (file, line, function) — cheap to take and
    to count, formatted only when reported."""
    entries = []
    while frame is not None:
        code = frame.f_code
        entries.append((code.co_filename, frame.f_lineno or 0, code.co_name))
        frame = frame.f_back
    entries.reverse()
    return tuple(entries)


def _format(stack: Stack) -> str:
    if not stack:
        return "(not found)"
    summary = traceback.StackSummary.from_list(
        [traceback.FrameSummary(file, line, name) for file, line, name in stack]
    )
    return "".join(summary.format())


class _Stall:
    """A stall the watchdog is watching: the heartbeat it stopped at and the loop's stacks
    sampled while it lasts."""

    def __init__(self, beat: float, first: Stack, reported: bool) -> None:
        self.beat = beat
        self.first = first
        self.reported = reported
        self.samples: collections.Counter[Stack] = collections.Counter({first: 1})
        self.unsampled = 0  # samples of stacks past _DISTINCT_STACKS

    def sample(self, stack: Stack) -> None:
        if stack in self.samples or len(self.samples) < _DISTINCT_STACKS:
            self.samples[stack] += 1
        else:
            self.unsampled += 1


class LoopStallMonitor:
    """Watches ``loop`` (the running loop of the thread that calls :meth:`start`)."""

    def __init__(self, threshold_s: float) -> None:
        self.threshold_s = threshold_s
        self.stalls = 0
        """Stalls seen since start (counted by the loop when each ends)."""
        self.longest_stall_s = 0.0
        """The longest stall since start, measured by the loop between two heartbeats."""
        self._beat = time.monotonic()
        self._ended: collections.deque[tuple[float, float]] = collections.deque(maxlen=16)
        """(heartbeat a stall stopped at, its length) of the last stalls, for their reports."""
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
        now = time.monotonic()
        gap = now - self._beat
        if gap > self.threshold_s:
            # The loop did not run between the last heartbeat and this one: the stall is
            # measured here, whole, whether or not the watchdog saw it.
            self.stalls += 1
            self.longest_stall_s = max(self.longest_stall_s, gap)
            self._ended.append((self._beat, gap))
        self._beat = now
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

    def _loop_stack(self) -> Stack:
        return _stack_of(sys._current_frames().get(self._loop_thread))

    def _watch(self) -> None:
        interval = self.threshold_s / 4
        stall: _Stall | None = None
        while not self._stopped.wait(interval):
            beat = self._beat
            now = time.monotonic()
            if now - beat > self.threshold_s:
                if stall is not None and stall.beat == beat:
                    stall.sample(self._loop_stack())
                    continue
                if stall is not None:  # it ended, and a new one began before this wake
                    self._ran_again(stall)
                stack = self._loop_stack()
                stall = _Stall(beat, stack, self._report(now - beat, stack))
            elif stall is not None:
                self._ran_again(stall)
                stall = None

    def _report(self, so_far_s: float, stack: Stack) -> bool:
        """Log the start of a stall unless too many were logged this minute; whether it was."""
        now = time.monotonic()
        if now - self._window_start >= 60.0:
            self._window_start, self._reported_in_window = now, 0
        if self._reported_in_window >= _REPORTS_PER_MINUTE:
            self._suppressed += 1
            return False
        self._reported_in_window += 1
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
            so_far_s * 1000, self.threshold_s * 1000, suppressed, collected, _format(stack),
        )  # fmt: skip
        return True

    def _ran_again(self, stall: _Stall) -> None:
        """Log the whole length of a reported stall that has ended, and where it went when
        that is not where it was first seen."""
        if not stall.reported:
            return
        length = next((gap for beat, gap in self._ended if beat == stall.beat), None)
        if length is None:  # not measured yet: the loop has not ticked since (rare)
            length = self._beat - stall.beat
        most, seen = stall.samples.most_common(1)[0]
        total = sum(stall.samples.values()) + stall.unsampled
        if most == stall.first:
            log.warning(
                "the event loop ran again after a stall of %.0f ms (%d of %d samples where "
                "it was first seen)", length * 1000, seen, total,
            )  # fmt: skip
            return
        log.warning(
            "the event loop ran again after a stall of %.0f ms; %d of %d samples of it were "
            "in:\n%s", length * 1000, seen, total, _format(most),
        )  # fmt: skip
