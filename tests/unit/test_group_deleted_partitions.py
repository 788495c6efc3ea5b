"""Offsets of deleted partitions are forgotten (Kafka's onPartitionsDeleted); failed deletions
change nothing and answer an error.

Driven through the coordinator with real logs for ``__consumer_offsets`` (the
harness of ``test_group_coordinator``); reloads replay what was written.
"""

from __future__ import annotations

from pathlib import Path

from tests.unit.test_group_coordinator import Harness, _write_marker, run

from samsa.coordinator.group.records import OffsetValue
from samsa.errors import ErrorCode
from samsa.types import TopicPartition

DELETED = TopicPartition("orders", 0)
KEPT = TopicPartition("orders-archive", 0)


def test_deleted_partitions_lose_committed_offsets_in_every_group(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        await c.commit(
            "billing", {DELETED: OffsetValue(10, -1, "", 0), KEPT: OffsetValue(3, -1, "", 0)}
        )
        await c.commit("audit", {DELETED: OffsetValue(7, -1, "", 0)})
        assert await c.on_partitions_deleted([DELETED, TopicPartition("orders", 1)]) == 2
        for coordinator in (c, h.reload()):
            assert coordinator.committed("billing") == {KEPT: OffsetValue(3, -1, "", 0)}
            assert coordinator.committed("audit") == {}

    run(scenario, tmp_path)


def test_deleted_partitions_lose_offsets_an_open_transaction_holds(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        await c.commit_transactional("billing", 77, 0, {DELETED: OffsetValue(10, -1, "", 0)})
        await c.on_partitions_deleted([DELETED])
        assert not c.has_pending_transactional("billing", DELETED)
        _write_marker(h, "billing", 77, commit=True)  # the transaction commits afterwards
        for coordinator in (c, h.reload()):
            assert coordinator.committed("billing") == {}

    run(scenario, tmp_path)


def test_a_failed_tombstone_write_still_forgets_the_offsets(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        await c.commit("billing", {DELETED: OffsetValue(10, -1, "", 0)})
        h.fail_appends = True
        assert await c.on_partitions_deleted([DELETED]) == 1  # logged, not raised
        assert c.committed("billing") == {}

    run(scenario, tmp_path)


def test_an_offset_deletion_whose_write_fails_answers_an_error_and_keeps_the_offsets(
    tmp_path: Path,
) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        await c.commit("billing", {KEPT: OffsetValue(3, -1, "", 0)})
        h.fail_appends = True
        assert await c.delete_offsets("billing", [KEPT]) == (ErrorCode.UNKNOWN_SERVER_ERROR, {})
        assert c.committed("billing") == {KEPT: OffsetValue(3, -1, "", 0)}

    run(scenario, tmp_path)


def test_a_group_deletion_whose_write_fails_answers_an_error_and_keeps_the_group(
    tmp_path: Path,
) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        await c.commit("billing", {KEPT: OffsetValue(3, -1, "", 0)})
        h.fail_appends = True
        assert await c.delete_groups(["billing"]) == {"billing": ErrorCode.UNKNOWN_SERVER_ERROR}
        assert "billing" in c.groups()
        assert c.committed("billing") == {KEPT: OffsetValue(3, -1, "", 0)}

    run(scenario, tmp_path)


def test_an_offset_deletion_drops_what_an_open_transaction_holds_as_a_reload_does(
    tmp_path: Path,
) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        await c.commit("billing", {KEPT: OffsetValue(3, -1, "", 0)})
        await c.commit_transactional("billing", 77, 0, {KEPT: OffsetValue(9, -1, "", 0)})
        assert await c.delete_offsets("billing", [KEPT]) == (0, {KEPT: 0})
        _write_marker(h, "billing", 77, commit=True)
        for coordinator in (c, h.reload()):
            assert coordinator.committed("billing") == {}

    run(scenario, tmp_path)
