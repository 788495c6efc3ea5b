"""A rate over sampled windows and the throttle time it implies: Kafka's ``Rate``,
``SampledStat`` and ``QuotaUtils.throttleTime`` for client quotas.

A :class:`SampledRate` keeps ``quota.window.num`` samples of
``quota.window.size.seconds`` each. A value is added to the current sample (a
new one is started once the current one is a window old, reusing the oldest);
a sample older than all the windows together is reset before the rate is read.
The rate is the sum of the samples divided by the time they span — from the
start of the oldest to now — and that span is never taken as less than
``num - 1`` windows, so a client that just started is not measured over a few
milliseconds. The value just recorded counts: a request that takes a client
over its quota is answered, and the client is throttled for

    (rate - quota) / quota * span

the time after which the rate over the longer span is back at the quota
(Kafka's formula). Not thread-safe: one owner, the broker's loop.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class _Sample:
    start_ms: float
    value: float = 0.0


class SampledRate:
    """Units per second over the last ``samples`` windows of ``window_ms``."""

    def __init__(self, samples: int, window_ms: float, now_ms: float) -> None:
        self.samples = max(samples, 2)
        self.window_ms = window_ms
        self._ring = [_Sample(now_ms)]
        self._current = 0

    def record(self, value: float, now_ms: float) -> None:
        sample = self._ring[self._current]
        if now_ms - sample.start_ms >= self.window_ms:
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._ring):
                self._ring.append(_Sample(now_ms))
            else:
                self._ring[self._current] = _Sample(now_ms)
            sample = self._ring[self._current]
        sample.value += value

    def _purge(self, now_ms: float) -> None:
        expire_ms = self.samples * self.window_ms
        for sample in self._ring:
            if now_ms - sample.start_ms >= expire_ms:
                sample.start_ms, sample.value = now_ms, 0.0

    def span_ms(self, now_ms: float) -> float:
        """The time the samples cover, at least ``samples - 1`` windows (Kafka's
        ``Rate.windowSize``)."""
        self._purge(now_ms)
        oldest = min(s.start_ms for s in self._ring)
        elapsed = now_ms - oldest
        full = int(elapsed // self.window_ms)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return elapsed

    def rate(self, now_ms: float) -> float:
        """Units per second now."""
        span = self.span_ms(now_ms)
        total = sum(s.value for s in self._ring)
        return total / (span / 1000.0)

    def throttle_ms(self, bound: float, now_ms: float) -> float:
        """How long the client waits for the rate to come back to ``bound`` (0 if within it)."""
        span = self.span_ms(now_ms)
        value = sum(s.value for s in self._ring) / (span / 1000.0)
        if value <= bound:
            return 0.0
        return (value - bound) / bound * span
