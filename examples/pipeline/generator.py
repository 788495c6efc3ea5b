"""Synthetic click events, as JSON records on a topic.

Each event is ``{"user": "u042", "page": "/pricing", "ts": 1700000000123}`` with
``ts`` its event time in epoch milliseconds. :func:`click_events` is
deterministic for a seed, so a test can compute the expected counts itself.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterable
from typing import Any

from samsa import Producer

PAGES = ("/", "/pricing", "/docs", "/blog", "/signup")


def click_events(seed: int, start_ms: int, count: int, spacing_ms: int) -> list[dict[str, Any]]:
    """``count`` events from ``start_ms``, one every ``spacing_ms``, pages skewed to the front."""
    rng = random.Random(seed)
    weights = [len(PAGES) - i for i in range(len(PAGES))]
    return [
        {
            "user": f"u{rng.randrange(100):03d}",
            "page": rng.choices(PAGES, weights)[0],
            "ts": start_ms + i * spacing_ms,
        }
        for i in range(count)
    ]


def produce_events(bootstrap: str, topic: str, events: Iterable[dict[str, Any]]) -> int:
    """Send ``events`` keyed by user; returns how many were sent."""
    sent = 0
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        for event in events:
            producer.send(topic, json.dumps(event).encode(), key=event["user"].encode())
            sent += 1
        producer.flush()
    return sent


def run_live(bootstrap: str, topic: str, per_second: int, stop: threading.Event) -> None:
    """Send about ``per_second`` events a second, stamped with the current time, until
    ``stop`` is set."""
    rng = random.Random()
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 20}) as producer:
        while not stop.is_set():
            now = int(time.time() * 1000)
            for event in click_events(rng.randrange(1 << 30), now, per_second // 10, 1):
                producer.send(topic, json.dumps(event).encode(), key=event["user"].encode())
            stop.wait(0.1)
