"""Fetches waiting for data (Kafka's ``DelayedFetch`` in a ``DelayedOperationPurgatory``).

A fetch that read fewer than ``min_bytes`` (and no error) waits up to ``max_wait_ms``
for more: it is parked in the :class:`DelayedFetchPurgatory` as a
:class:`DelayedFetch`, watching keys — the partitions it reads, or a consumer's fetch
session (woken by :class:`~samsa.broker.replication.fetch_manager.FetchManager` when a
partition of the session changes). Whatever could give it more wakes it: an append
(a transaction marker is one: the last stable offset moves with it), a high watermark
move (a follower's fetch), a leadership change or the partition being stopped
(``Partition.note_change`` reaches :meth:`ReplicaManager
<samsa.broker.replication.replica_manager.ReplicaManager>` which calls
:meth:`DelayedFetchPurgatory.check_and_complete`). Woken, it reads again (its
``attempt``, the same read as the first); it completes once that read has
``min_bytes`` or failed, or when its deadline passes (then after one last read, as
Kafka's ``onComplete`` reads once more). Event-driven: nothing polls or sleeps.

The partitions' own ``acks=all`` waits (Kafka's ``DelayedProduce``) are in
:meth:`Partition.wait_for_acks <samsa.broker.replication.partition.Partition.wait_for_acks>`.

Deviation: Kafka's ``tryComplete`` adds up the bytes past each fetch offset from the
log's offset metadata without reading; here a woken fetch reads (an index lookup per
partition, no record bytes: they stay in the file regions the response sends), which
also serves a follower's fetch, whose reads tell the leader its log end.

Not thread-safe: used on the broker's loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Generic, Protocol, TypeVar

from samsa.broker.metrics.stats import add_remote_time


class FetchOutcome(Protocol):
    """What a read tells a delayed fetch: the record bytes read and whether one failed."""

    @property
    def total(self) -> int: ...

    @property
    def failed(self) -> bool: ...


R = TypeVar("R", bound=FetchOutcome)


def satisfied(outcome: FetchOutcome, min_bytes: int) -> bool:
    """A fetch can answer now: it read ``min_bytes`` (at least one), or a partition failed."""
    return outcome.failed or outcome.total >= max(min_bytes, 1)


class DelayedFetch(Generic[R]):
    """One fetch waiting for ``min_bytes`` until ``deadline`` (a ``time.monotonic`` value),
    reading again with ``attempt`` each time a key it watches changes."""

    __slots__ = ("_waiter", "attempt", "deadline", "keys", "min_bytes")

    def __init__(
        self,
        keys: Sequence[Hashable],
        min_bytes: int,
        deadline: float,
        attempt: Callable[[], R],
    ) -> None:
        self.keys = keys
        self.min_bytes = min_bytes
        self.deadline = deadline
        self.attempt = attempt
        self._waiter: asyncio.Future[None] | None = None

    def wake(self) -> None:
        """Something it watches changed: read again."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _wait(self, timeout_s: float) -> None:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiter = waiter
        try:
            await asyncio.wait_for(waiter, timeout_s)
        except TimeoutError:
            pass
        finally:
            self._waiter = None


class DelayedFetchPurgatory:
    """The delayed fetches waiting now, by the keys they watch (Kafka's fetch purgatory)."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._watchers: dict[Hashable, set[DelayedFetch[Any]]] = {}
        self._waiting = 0

    def __len__(self) -> int:
        """Fetches waiting now (Kafka's purgatory size)."""
        return self._waiting

    async def complete(self, fetch: DelayedFetch[R], first: R) -> R:
        """``first`` if it satisfies ``fetch``; else watch ``fetch``'s keys, reading again
        at each wake-up, until a read satisfies it or its deadline passes (Kafka's
        ``tryCompleteElseWatch``). The last read."""
        outcome = first
        if satisfied(outcome, fetch.min_bytes):
            return outcome
        monotonic = self._monotonic
        if fetch.deadline - monotonic() <= 0:
            return outcome
        watchers = self._watchers
        for key in fetch.keys:
            watchers.setdefault(key, set()).add(fetch)
        self._waiting += 1
        try:
            while True:
                left = fetch.deadline - monotonic()
                if left <= 0:
                    break
                waited = monotonic()
                await fetch._wait(left)
                add_remote_time(monotonic() - waited)
                outcome = fetch.attempt()
                if satisfied(outcome, fetch.min_bytes):
                    break
        finally:
            self._waiting -= 1
            for key in fetch.keys:
                waiting = watchers.get(key)
                if waiting is not None:
                    waiting.discard(fetch)
                    if not waiting:
                        del watchers[key]
        return outcome

    def check_and_complete(self, key: Hashable) -> None:
        """``key`` changed: the fetches watching it read again (Kafka's ``checkAndComplete``)."""
        waiting = self._watchers.get(key)
        if waiting:
            for fetch in waiting:
                fetch.wake()
