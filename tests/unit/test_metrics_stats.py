"""The broker's request accounting: what one request adds to the figures of its API."""

from __future__ import annotations

import pytest

from samsa.broker.metrics.stats import Histogram, RequestStats, RequestTiming


def test_an_observation_on_a_bucket_bound_counts_in_that_bucket() -> None:
    histogram = Histogram([0.001, 0.01])
    for value in (0.001, 0.005, 0.01, 2.0):
        histogram.observe(value)
    assert histogram.counts == [1, 2, 1]
    assert histogram.count == 4
    assert histogram.sum == pytest.approx(2.016)


def test_a_request_splits_its_total_time_into_queue_local_remote_and_send() -> None:
    timing = RequestTiming(arrived=10.0, started=10.5)
    timing.api_key, timing.api_version = 0, 9
    timing.remote = 2.0
    timing.ready = 13.5  # handled for 3 s, 2 of them waiting for the ISR
    timing.note_error(6)
    stats = RequestStats()
    stats.record(timing, written=14.0)
    produce = stats.apis[(0, None)]
    assert produce.requests == {9: 1}
    assert produce.errors == {6: 1}
    assert (produce.queue.sum, produce.local.sum, produce.remote.sum, produce.send.sum) == (
        0.5, 1.0, 2.0, 0.5,
    )  # fmt: skip
    assert produce.total.sum == 4.0
