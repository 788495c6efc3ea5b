"""The event-loop watchdog logs a stall with the stack the loop is stuck in, once per
stall, and nothing while the loop runs.

A busy machine can hold the loop back briefly by itself: reports are matched by the
function that blocks the loop here, and thresholds leave room for scheduling."""

from __future__ import annotations

import asyncio
import gc
import logging
import random
import time

import pytest

from samsa.broker.network.loop_monitor import LoopStallMonitor


def _blocks_the_loop_for(seconds: float) -> None:
    time.sleep(seconds)


async def _watched(threshold_s: float, stalls: list[float]) -> LoopStallMonitor:
    monitor = LoopStallMonitor(threshold_s)
    monitor.start()
    try:
        for stall in stalls:
            await asyncio.sleep(0.1)  # the loop runs: no report
            _blocks_the_loop_for(stall)
        await asyncio.sleep(0.2)
    finally:
        monitor.stop()
    return monitor


def _reports_of_the_block(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r for r in caplog.records
        if r.levelno == logging.WARNING and "_blocks_the_loop_for" in r.getMessage()
    ]  # fmt: skip


def test_a_stall_is_logged_with_the_function_the_loop_is_stuck_in(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="samsa.broker.network.loop_monitor"):
        monitor = asyncio.run(_watched(0.2, [1.0]))
    assert len(_reports_of_the_block(caplog)) == 1
    assert monitor.stalls >= 1
    assert monitor.longest_stall_s >= 0.8
    assert any("ran again after a stall" in r.getMessage() for r in caplog.records)


def test_a_loop_that_keeps_running_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="samsa.broker.network.loop_monitor"):
        monitor = asyncio.run(_watched(1.0, [0.0, 0.0, 0.0]))
    assert monitor.stalls == 0
    assert not caplog.records


def test_two_stalls_are_two_reports(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="samsa.broker.network.loop_monitor"):
        monitor = asyncio.run(_watched(0.2, [0.8, 0.8]))
    assert monitor.stalls >= 2
    assert len(_reports_of_the_block(caplog)) == 2


def test_a_threshold_of_zero_switches_the_watchdog_off() -> None:
    monitor = asyncio.run(_watched(0.0, [0.2]))
    assert monitor.stalls == 0


def test_garbage_collections_are_counted_and_timed_by_generation() -> None:
    async def collect() -> LoopStallMonitor:
        monitor = LoopStallMonitor(1.0)
        monitor.start()
        try:
            gc.collect(2)
            gc.collect(0)
        finally:
            monitor.stop()
        return monitor

    monitor = asyncio.run(collect())
    assert monitor.gc_collections[2] >= 1 and monitor.gc_collections[0] >= 1
    assert monitor.gc_seconds[2] > 0
    assert monitor.longest_gc_s >= monitor.gc_seconds[2] / monitor.gc_collections[2]


def _decodes_for(seconds: float) -> None:
    time.sleep(seconds)


def _handles_for(seconds: float) -> None:
    time.sleep(seconds)


def _holds_the_gil(values: list[float], times: int) -> float:
    """Block the loop in native code that keeps the GIL (the watchdog cannot run during
    it); how long it took."""
    started = time.monotonic()
    for _ in range(times):
        sorted(values)
    return time.monotonic() - started


def test_a_stall_that_begins_as_soon_as_another_ends_is_measured_whole() -> None:
    values = [random.random() for _ in range(500_000)]

    async def two_stalls() -> tuple[LoopStallMonitor, float]:
        monitor = LoopStallMonitor(0.1)
        monitor.start()
        try:
            await asyncio.sleep(0.1)
            first = _holds_the_gil(values, 3)
            # Two turns of the loop: its heartbeat runs between the stalls, while the
            # watchdog, woken once the first ended, waits for its next wake.
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            _holds_the_gil(values, 1)
            await asyncio.sleep(0.2)
        finally:
            monitor.stop()
        return monitor, first

    monitor, first = asyncio.run(two_stalls())
    assert monitor.stalls >= 2
    assert monitor.longest_stall_s >= first


def test_the_end_of_a_stall_reports_its_whole_length_and_where_most_of_it_went(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def decode_then_handle() -> None:
        monitor = LoopStallMonitor(0.1)
        monitor.start()
        try:
            await asyncio.sleep(0.1)
            _decodes_for(0.3)  # where the stall is first seen
            _handles_for(2.0)  # where it goes
            await asyncio.sleep(0.2)
        finally:
            monitor.stop()

    with caplog.at_level(logging.WARNING, logger="samsa.broker.network.loop_monitor"):
        asyncio.run(decode_then_handle())
    first, *_ = (r.getMessage() for r in caplog.records if "_decodes_for" in r.getMessage())
    assert "has not run for" in first
    ends = [r.getMessage() for r in caplog.records if "ran again after a stall" in r.getMessage()]
    assert len(ends) == 1
    length_ms = float(ends[0].split("after a stall of ")[1].split(" ms")[0])
    assert length_ms >= 2300
    assert "_handles_for" in ends[0] and "_decodes_for" not in ends[0]
