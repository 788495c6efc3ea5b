"""Helpers shared by samsa's tests."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import pytest
from hypothesis import HealthCheck, settings

from samsa.records import CompressionType, Record, RecordBatchBuilder, iter_records, read_batch
from samsa.storage import Log
from samsa.testing.clock import ManualClock, ManualTimer
from samsa.testing.zookeeper import ZooKeeperServer, start_zookeeper

# Hypothesis's deadline and "too slow" health check time each example on the wall
# clock, so a machine busy with other work (a broker, ZooKeeper, Spark) fails them
# with nothing wrong in the code: the tests check results, never speed.
settings.register_profile("samsa", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("samsa")

# Re-exported: tests written before the clocks moved to samsa.testing import them from here.
__all__ = ["ManualClock", "ManualTimer", "make_batch", "read_log"]


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
