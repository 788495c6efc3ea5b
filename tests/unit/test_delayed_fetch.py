"""Delayed fetches in the fetch purgatory: woken by an append, by a leadership change or a
change of a partition of their session, and answered at their deadline otherwise."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Hashable, Iterator
from pathlib import Path

import pytest
from tests.conftest import make_batch
from tests.local_replicas import T0, TOPIC, Outcome, local_replica_manager, read

from samsa.broker.replication.delayed_fetch import DelayedFetch
from samsa.broker.replication.fetch_session import CachedPartition
from samsa.broker.replication.partition import LeaderAndIsrState
from samsa.broker.replication.replica_manager import ReplicaManager
from samsa.errors import ErrorCode
from samsa.types import TopicPartition

TP = TopicPartition(TOPIC, 0)
OTHER = TopicPartition(TOPIC, 1)
LONG_WAIT_S = 60.0
"""Longer than any test runs: a fetch that is not woken fails its test by timing out."""


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[ReplicaManager]:
    with local_replica_manager(tmp_path, {TOPIC: 3}) as manager:
        yield manager


def _wanted(*indexes: int) -> list[CachedPartition]:
    return [CachedPartition(TOPIC, None, p, 0, 1 << 20) for p in indexes]


def _delayed(
    replicas: ReplicaManager,
    keys: list[Hashable],
    wanted: list[CachedPartition],
    *,
    min_bytes: int = 1,
    wait_s: float = LONG_WAIT_S,
) -> DelayedFetch[Outcome]:
    return DelayedFetch(keys, min_bytes, time.monotonic() + wait_s, lambda: read(replicas, wanted))


async def _parked(replicas: ReplicaManager, fetch: DelayedFetch[Outcome]) -> asyncio.Task[Outcome]:
    """``fetch`` waiting in the purgatory after a first read that found nothing."""
    first = fetch.attempt()
    assert first.total == 0
    task = asyncio.ensure_future(replicas.fetch_purgatory.complete(fetch, first))
    while replicas.delayed_fetches == 0:  # until the task runs and waits
        await asyncio.sleep(0)
    return task


async def _append(replicas: ReplicaManager, tp: TopicPartition, value: bytes = b"v") -> None:
    await replicas.append(tp, make_batch([value], timestamp=T0), required_acks=1)


def test_a_delayed_fetch_completes_when_a_partition_it_waits_on_is_appended_to(
    replicas: ReplicaManager,
) -> None:
    async def scenario() -> Outcome:
        waiting = await _parked(replicas, _delayed(replicas, [TP], _wanted(0)))
        await _append(replicas, TP)
        return await waiting

    outcome = asyncio.run(scenario())
    assert outcome.total > 0
    assert outcome.partitions == [0]
    assert replicas.delayed_fetches == 0


def test_a_delayed_fetch_short_of_min_bytes_after_an_append_waits_for_the_next(
    replicas: ReplicaManager,
) -> None:
    batch_bytes = len(make_batch([b"v" * 100], timestamp=T0))
    reads: list[Outcome] = []

    def attempt() -> Outcome:
        reads.append(read(replicas, _wanted(0)))
        return reads[-1]

    async def scenario() -> tuple[Outcome, bool]:
        fetch = DelayedFetch([TP], batch_bytes + 1, time.monotonic() + LONG_WAIT_S, attempt)
        waiting = await _parked(replicas, fetch)
        await _append(replicas, TP, b"v" * 100)
        while len(reads) < 2:  # woken, it reads again
            await asyncio.sleep(0)
        answered_early = waiting.done()
        await _append(replicas, TP, b"v" * 100)
        return await waiting, answered_early

    outcome, answered_early = asyncio.run(scenario())
    assert reads[1].total == batch_bytes
    assert not answered_early
    assert outcome.total == 2 * batch_bytes


def test_a_delayed_fetch_nothing_wakes_answers_what_it_has_at_its_deadline(
    replicas: ReplicaManager,
) -> None:
    async def scenario() -> Outcome:
        waiting = await _parked(replicas, _delayed(replicas, [TP], _wanted(0), wait_s=0.05))
        await _append(replicas, OTHER)  # not a partition it reads
        return await waiting

    outcome = asyncio.run(scenario())
    assert outcome.total == 0
    assert not outcome.failed
    assert replicas.delayed_fetches == 0


def test_a_delayed_fetch_completes_with_the_error_when_its_partition_changes_leader(
    replicas: ReplicaManager,
) -> None:
    async def scenario() -> Outcome:
        waiting = await _parked(replicas, _delayed(replicas, [TP], _wanted(0)))
        replicas.apply_leadership(TP, LeaderAndIsrState(1, 1, (1, 0), (1, 0)))
        return await waiting

    outcome = asyncio.run(scenario())
    assert outcome.failed
    assert outcome.done[0][1].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_consumer_session_fetch_waits_on_its_session_and_reads_the_partition_that_changed(
    replicas: ReplicaManager,
) -> None:
    manager = replicas.fetch_manager
    full = manager.new_context(
        version=12, session_id=0, session_epoch=0, follower=False, read_committed=False,
        partitions=_wanted(0, 1, 2),
    )  # fmt: skip
    first = read(replicas, full.to_read())
    session_id = full.session_id()
    full.complete(first.done)
    context = manager.new_context(
        version=12, session_id=session_id, session_epoch=1, follower=False,
        read_committed=False, partitions=[],
    )  # fmt: skip
    assert context.wait_keys(context.to_read()) == [context.session]

    async def scenario() -> Outcome:
        fetch = DelayedFetch(
            context.wait_keys([]), 1, time.monotonic() + LONG_WAIT_S,
            lambda: read(replicas, context.to_read()),
        )  # fmt: skip
        waiting = await _parked(replicas, fetch)
        await _append(replicas, TopicPartition(TOPIC, 2))
        return await waiting

    outcome = asyncio.run(scenario())
    assert outcome.partitions == [2]
    assert outcome.total > 0
