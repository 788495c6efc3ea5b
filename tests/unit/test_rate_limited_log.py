"""RateLimitedLog: a burst per interval gets through, the rest is counted and reported."""

from __future__ import annotations

import logging

import pytest

from samsa.broker.rate_limited_log import RateLimitedLog
from samsa.testing.clock import ManualClock


def test_only_a_burst_per_interval_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    limited = RateLimitedLog(logging.getLogger("test.limited"), 60.0, 3, ManualClock().seconds)
    with caplog.at_level(logging.WARNING, logger="test.limited"):
        for i in range(100):
            limited.log(logging.WARNING, "bad frame %d", i)
    assert [r.getMessage() for r in caplog.records] == ["bad frame 0", "bad frame 1", "bad frame 2"]


def test_the_next_interval_reports_how_many_were_suppressed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock()
    limited = RateLimitedLog(logging.getLogger("test.limited"), 60.0, 1, clock.seconds)
    with caplog.at_level(logging.WARNING, logger="test.limited"):
        for _ in range(5):
            limited.log(logging.WARNING, "bad frame")
        clock.advance(60_000)
        limited.log(logging.WARNING, "bad frame")
    assert [r.getMessage() for r in caplog.records] == [
        "bad frame",
        "bad frame (4 similar messages suppressed)",
    ]
