"""Helpers shared by samsa's tests."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Iterator, Sequence

import pytest
from hypothesis import HealthCheck, settings

from samsa.records import CompressionType, Record, RecordBatchBuilder, iter_records, read_batch
from samsa.storage import Log
from samsa.testing.zookeeper import ZooKeeperServer, start_zookeeper

# Hypothesis's deadline and "too slow" health check time each example on the wall
# clock, so a machine busy with other work (a broker, ZooKeeper, Spark) fails them
# with nothing wrong in the code: the tests check results, never speed.
settings.register_profile("samsa", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("samsa")


class ManualClock:
    """A millisecond clock that moves only when a test says so."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms


class ManualTimerHandle:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualTimer:
    """A coordinator ``Timer`` (:mod:`samsa.coordinator.timer`) on a :class:`ManualClock`.

    Callbacks run inside :meth:`advance`, each at its due time, in due order (ties
    in the order they were scheduled), so a test decides exactly when every session,
    rebalance or expiry timeout fires. A callback due now (a delay of 0) runs on the
    event loop's next turn, as the loop's own ``call_later(0)`` does, without the
    clock moving.
    """

    def __init__(self, clock: ManualClock | None = None) -> None:
        self.clock = clock or ManualClock()
        self._due: list[tuple[int, int, ManualTimerHandle, Callable[[], None]]] = []
        self._sequence = itertools.count()

    def now_ms(self) -> int:
        return self.clock.now_ms

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> ManualTimerHandle:
        handle = ManualTimerHandle()
        if delay_ms <= 0:

            def run_unless_cancelled() -> None:
                if not handle.cancelled:
                    handle.cancelled = True
                    callback()

            asyncio.get_running_loop().call_soon(run_unless_cancelled)
            return handle
        due = self.clock.now_ms + delay_ms
        heapq.heappush(self._due, (due, next(self._sequence), handle, callback))
        return handle

    def pending(self) -> int:
        """How many callbacks are scheduled and not cancelled."""
        return sum(1 for _, _, handle, _ in self._due if not handle.cancelled)

    def advance(self, ms: int) -> None:
        """Move the clock ``ms`` forward, running every callback that falls due on the way."""
        end = self.clock.now_ms + ms
        while self._due and self._due[0][0] <= end:
            due, _, handle, callback = heapq.heappop(self._due)
            if handle.cancelled:
                continue
            self.clock.now_ms = max(self.clock.now_ms, due)
            handle.cancelled = True  # it ran: a later cancel does nothing
            callback()
        self.clock.now_ms = end


def make_batch(
    values: Sequence[bytes | None],
    *,
    timestamp: int | Sequence[int],
    keys: Sequence[bytes | None] | None = None,
    compression: CompressionType = CompressionType.NONE,
) -> bytearray:
    """A writable batch of ``values`` (bytearray, as the log rewrites base offsets in place)."""
    builder = RecordBatchBuilder(compression=compression)
    for i, value in enumerate(values):
        ts = timestamp if isinstance(timestamp, int) else timestamp[i]
        builder.append(value, key=None if keys is None else keys[i], timestamp=ts)
    return bytearray(builder.build())


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def read_log(log: Log, start: int | None = None, max_bytes: int = 1 << 20) -> list[Record]:
    """Every record from ``start`` to the log end, fetch by fetch as a consumer reads.

    A fetch covers one segment and may end inside a batch; the partial batch is
    dropped and fetched again, as Kafka clients do. Every batch's CRC is checked.
    """
    offset = log.log_start_offset if start is None else start
    records: list[Record] = []
    while offset < log.log_end_offset:
        data = log.read(offset, max_bytes).region.read()
        position, progressed = 0, False
        while len(data) - position >= 12:
            size = int.from_bytes(data[position + 8 : position + 12], "big") + 12
            if position + size > len(data):
                break
            batch = read_batch(data, position)
            batch.validate()
            records += [r for r in iter_records(batch) if r.offset >= offset]
            offset = max(offset, batch.next_offset)
            position += size
            progressed = True
        if not progressed:
            raise AssertionError(f"a read at offset {offset} returned no whole batch")
    return records


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper server for the session; each test gets a chroot of its own."""
    server = start_zookeeper(tmp_path_factory.mktemp("zookeeper"))
    try:
        yield server
    finally:
        server.stop()


_chroots = itertools.count()


@pytest.fixture
def zk_connect(zookeeper: ZooKeeperServer) -> str:
    """A ``zookeeper.connect`` string with a fresh chroot, so tests never see each other."""
    return f"{zookeeper.connect}/test-{next(_chroots)}"
