"""The overview's throughput chart: records produced per second across the cluster,
sampled in the background from the log end offsets of every partition.

Kafka has no request that reports a broker's rate, but any broker answers ListOffsets:
the sum of the log end offsets of all (non-internal) partitions grows by what was
produced, so two samples give the rate between them. Deleting a topic lowers the sum;
such an interval counts as 0. The sampler is one task of the console's loop; a sample
that fails (a broker restarting) is skipped, and the next one tries again.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from dataclasses import dataclass

from samsa.client.admin import AsyncAdmin, OffsetSpec
from samsa.errors import SamsaError
from samsa.types import TopicPartition

__all__ = ["Chart", "ThroughputSampler"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Chart:
    """A line chart ready for an SVG ``polyline``: its points, the highest rate and the
    time the chart spans."""

    points: str
    peak: float
    latest: float
    span_s: float
    samples: int
    width: int
    height: int


class ThroughputSampler:
    """Samples the cluster's total log end offset every ``interval_s`` and keeps the last
    ``keep`` samples; :meth:`chart` draws the rates between them."""

    def __init__(self, admin: AsyncAdmin, interval_s: float = 5.0, keep: int = 120) -> None:
        self._admin = admin
        self.interval_s = interval_s
        self._samples: deque[tuple[float, int]] = deque(maxlen=keep)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="throughput")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                await self.sample()
            except (SamsaError, OSError) as exc:
                # Safe to skip: the chart only misses one point; the next sample retries.
                log.debug("throughput sample skipped: %s", exc)
            await asyncio.sleep(self.interval_s)

    async def sample(self) -> None:
        """Take one sample now."""
        topics = await self._admin.describe_topics()
        partitions = [
            TopicPartition(t.name, p.partition)
            for t in topics.values()
            if not t.is_internal and not t.name.startswith("__")
            for p in t.partitions
        ]
        total = 0
        if partitions:
            answers = await self._admin.list_offsets(
                dict.fromkeys(partitions, int(OffsetSpec.LATEST))
            )
            total = sum(r.offset for r in answers.values())
        self._samples.append((time.monotonic(), total))

    def rates(self) -> list[tuple[float, float, float]]:
        """(start, end, records per second) of each interval between samples, in seconds
        since the first sample."""
        samples = list(self._samples)
        if len(samples) < 2:
            return []
        first = samples[0][0]
        return [
            (t0 - first, t1 - first, max(0, n1 - n0) / (t1 - t0) if t1 > t0 else 0.0)
            for (t0, n0), (t1, n1) in itertools.pairwise(samples)
        ]

    def chart(self, width: int = 1200, height: int = 160) -> Chart:
        """The rates as a step line: each interval's rate drawn across the interval."""
        rates = self.rates()
        if not rates:
            return Chart("", 0.0, 0.0, 0.0, len(self._samples), width, height)
        span = max(rates[-1][1], 1e-9)
        peak = max(r for _, _, r in rates)
        scale = peak or 1.0

        def y(rate: float) -> str:
            return f"{height - rate / scale * (height - 24) - 2:.1f}"

        points = " ".join(
            f"{start / span * width:.1f},{y(rate)} {end / span * width:.1f},{y(rate)}"
            for start, end, rate in rates
        )
        return Chart(points, peak, rates[-1][2], span, len(self._samples), width, height)
