"""The fetch manager alone (KIP-227): sessions made, moved from epoch to epoch, closed and
evicted, and the partitions an incremental fetch reads, over a real replica manager."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from tests.conftest import make_batch
from tests.local_replicas import T0, TOPIC, Outcome, local_replica_manager, read

from samsa.broker.replication.fetch_manager import FetchContext, FetchManager
from samsa.broker.replication.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    CachedPartition,
    PartitionKey,
)
from samsa.broker.replication.partition import LeaderAndIsrState
from samsa.broker.replication.replica_manager import ReplicaManager
from samsa.errors import ErrorCode
from samsa.types import TopicPartition

BY_NAME = 12
BY_ID = 13


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[ReplicaManager]:
    with local_replica_manager(tmp_path, {TOPIC: 3}) as manager:
        yield manager


def _partitions(*indexes: int, offset: int = 0) -> list[CachedPartition]:
    return [CachedPartition(TOPIC, None, p, offset, 1 << 20) for p in indexes]


def _full(
    manager: FetchManager,
    partitions: list[CachedPartition],
    *,
    session_id: int = 0,
    epoch: int = INITIAL_EPOCH,
    version: int = BY_NAME,
    follower: bool = False,
) -> FetchContext:
    return manager.new_context(
        version=version, session_id=session_id, session_epoch=epoch, follower=follower,
        read_committed=False, partitions=partitions,
    )  # fmt: skip


def _incremental(
    manager: FetchManager,
    session_id: int,
    epoch: int,
    partitions: Sequence[CachedPartition] = (),
    *,
    forgotten: Sequence[PartitionKey] = (),
    version: int = BY_NAME,
    follower: bool = False,
) -> FetchContext:
    return manager.new_context(
        version=version, session_id=session_id, session_epoch=epoch, follower=follower,
        read_committed=False, partitions=list(partitions), forgotten=forgotten,
    )  # fmt: skip


def _served(replicas: ReplicaManager, context: FetchContext) -> Outcome:
    """Read what ``context`` says and send the response: the session remembers it."""
    outcome = read(replicas, context.to_read())
    context.session_id()
    context.complete(outcome.done)
    return outcome


def _session(replicas: ReplicaManager, *indexes: int, follower: bool = False) -> int:
    """A session of ``indexes`` made by a full fetch that was answered; its id."""
    context = _full(replicas.fetch_manager, _partitions(*indexes), follower=follower)
    _served(replicas, context)
    return context.session_id()


def _append(replicas: ReplicaManager, partition: int) -> None:
    tp = TopicPartition(TOPIC, partition)
    asyncio.run(replicas.append(tp, make_batch([b"v"], timestamp=T0), required_acks=1))


def test_a_full_fetch_at_epoch_zero_makes_a_session_whose_next_fetch_carries_epoch_one(
    replicas: ReplicaManager,
) -> None:
    session_id = _session(replicas, 0, 1, 2)
    manager = replicas.fetch_manager
    assert session_id != 0
    assert _incremental(manager, session_id, 1).error == ErrorCode.NONE
    assert _incremental(manager, session_id, 2).error == ErrorCode.NONE
    assert manager.cache.incremental_fetches == 2


def test_a_fetch_at_epoch_minus_one_or_older_than_version_7_makes_no_session(
    replicas: ReplicaManager,
) -> None:
    manager = replicas.fetch_manager
    assert _full(manager, _partitions(0), epoch=FINAL_EPOCH).session_id() == 0
    assert _full(manager, _partitions(0), version=6).session_id() == 0
    assert len(manager.cache) == 0


def test_an_unknown_session_is_fetch_session_id_not_found(replicas: ReplicaManager) -> None:
    context = _incremental(replicas.fetch_manager, 12345, 1)
    assert context.error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert context.to_read() == []


def test_a_wrong_epoch_is_invalid_fetch_session_epoch_and_leaves_the_session_as_it_was(
    replicas: ReplicaManager,
) -> None:
    session_id = _session(replicas, 0)
    manager = replicas.fetch_manager
    assert _incremental(manager, session_id, 2).error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert _incremental(manager, session_id, 1).error == ErrorCode.NONE


def test_a_session_made_by_topic_name_asked_by_topic_id_is_a_topic_id_error(
    replicas: ReplicaManager,
) -> None:
    session_id = _session(replicas, 0)
    context = _incremental(replicas.fetch_manager, session_id, 1, version=BY_ID)
    assert context.error == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR


def test_epoch_minus_one_closes_the_session_it_names(replicas: ReplicaManager) -> None:
    session_id = _session(replicas, 0)
    manager = replicas.fetch_manager
    assert (
        _full(manager, _partitions(0), session_id=session_id, epoch=FINAL_EPOCH).session_id() == 0
    )
    assert _incremental(manager, session_id, 1).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_epoch_zero_naming_a_session_replaces_it_with_a_new_one(replicas: ReplicaManager) -> None:
    old = _session(replicas, 0)
    manager = replicas.fetch_manager
    context = _full(manager, _partitions(0), session_id=old)
    _served(replicas, context)
    assert context.session_id() not in (0, old)
    assert _incremental(manager, old, 1).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert len(manager.cache) == 1


def test_an_incremental_fetch_reads_and_answers_only_the_partitions_that_changed(
    replicas: ReplicaManager,
) -> None:
    session_id = _session(replicas, 0, 1, 2)
    manager = replicas.fetch_manager
    assert _served(replicas, _incremental(manager, session_id, 1)).partitions == []
    _append(replicas, 1)
    context = _incremental(manager, session_id, 2)
    outcome = _served(replicas, context)
    assert outcome.partitions == [1]
    c, entry, _ = outcome.done[0]
    assert entry.high_watermark == 1
    assert context.answers(c, entry)


def test_a_partition_read_again_with_nothing_new_is_not_answered(
    replicas: ReplicaManager,
) -> None:
    _append(replicas, 0)
    session_id = _session(replicas, 0)
    # The client is at the high watermark now: it names the partition at its new offset.
    context = _incremental(replicas.fetch_manager, session_id, 1, _partitions(0, offset=1))
    outcome = _served(replicas, context)
    c, entry, _ = outcome.done[0]
    assert outcome.total == 0
    assert not context.answers(c, entry)


def test_a_partition_named_again_with_a_new_offset_is_read_at_once(
    replicas: ReplicaManager,
) -> None:
    session_id = _session(replicas, 0, 1, 2)
    context = _incremental(replicas.fetch_manager, session_id, 1, _partitions(2, offset=5))
    assert [c.partition for c in context.to_read()] == [2]
    assert context.to_read()[0].fetch_offset == 5


def test_a_forgotten_partition_leaves_the_session(replicas: ReplicaManager) -> None:
    session_id = _session(replicas, 0, 1)
    manager = replicas.fetch_manager
    _served(replicas, _incremental(manager, session_id, 1, forgotten=[(TOPIC, 1)]))
    _append(replicas, 1)
    assert _incremental(manager, session_id, 2).to_read() == []


def test_a_partition_that_changes_leader_is_read_and_answered_with_the_error(
    replicas: ReplicaManager,
) -> None:
    session_id = _session(replicas, 0, 1)
    replicas.apply_leadership(TopicPartition(TOPIC, 0), LeaderAndIsrState(1, 1, (1, 0), (1, 0)))
    context = _incremental(replicas.fetch_manager, session_id, 1)
    outcome = _served(replicas, context)
    c, entry, _ = outcome.done[0]
    assert outcome.partitions == [0]
    assert entry.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert context.answers(c, entry)


def test_a_withheld_response_makes_no_session(replicas: ReplicaManager) -> None:
    context = _full(replicas.fetch_manager, _partitions(0))
    read(replicas, context.to_read())
    assert context.session_id() != 0
    assert context.withhold() == 0
    assert len(replicas.fetch_manager.cache) == 0


def test_a_withheld_incremental_response_reads_the_same_partitions_next_time(
    replicas: ReplicaManager,
) -> None:
    session_id = _session(replicas, 0, 1, 2)
    manager = replicas.fetch_manager
    _append(replicas, 2)
    withheld = _incremental(manager, session_id, 1)
    assert read(replicas, withheld.to_read()).partitions == [2]
    assert withheld.withhold() == session_id
    assert read(replicas, _incremental(manager, session_id, 2).to_read()).partitions == [2]


def test_a_full_cache_evicts_a_smaller_consumer_session_for_a_larger_one(
    replicas: ReplicaManager,
) -> None:
    manager = replicas.fetch_manager
    manager.set_cache_slots(1)
    small = _session(replicas, 0)
    large = _session(replicas, 0, 1, 2)
    assert large != 0
    assert _incremental(manager, small, 1).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert _incremental(manager, large, 1).error == ErrorCode.NONE
    assert manager.cache.evictions == 1


def test_a_full_cache_makes_no_session_for_a_newcomer_that_does_not_outrank(
    replicas: ReplicaManager,
) -> None:
    replicas.fetch_manager.set_cache_slots(1)
    kept = _session(replicas, 0, 1)
    assert _session(replicas, 2) == 0
    assert _incremental(replicas.fetch_manager, kept, 1).error == ErrorCode.NONE


def test_a_follower_session_is_read_whole_on_every_fetch(replicas: ReplicaManager) -> None:
    session_id = _session(replicas, 0, 1, 2, follower=True)
    context = _incremental(replicas.fetch_manager, session_id, 1, follower=True)
    assert [c.partition for c in context.to_read()] == [0, 1, 2]


def test_a_follower_fetch_on_a_consumer_session_reads_what_the_session_was_told_of(
    replicas: ReplicaManager,
) -> None:
    session_id = _session(replicas, 0, 1, 2)
    _append(replicas, 1)
    context = _incremental(replicas.fetch_manager, session_id, 1, follower=True)
    assert [c.partition for c in context.to_read()] == [1]
    assert context.wait_keys(context.to_read()) == [TopicPartition(TOPIC, 1)]
