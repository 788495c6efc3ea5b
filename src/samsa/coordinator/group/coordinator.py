"""The group coordinator: the service the group handlers call, over two owners of state.

As Kafka's group coordinator shard, it puts together

* :class:`~.group_metadata_manager.GroupMetadataManager` — the membership state
  machine (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, rebalance and session
  timeouts) and the group records;
* :class:`~.offset_metadata_manager.OffsetMetadataManager` — committed and
  pending transactional offsets, their tombstones and expiry;

and owns what spans both: loading them from ``__consumer_offsets`` at start-up
(:mod:`.loader`), the periodic offset expiry, and group deletion (offset and group
tombstones in one batch). A group's partition of ``__consumer_offsets`` is
``abs(hash(group)) % offsets.topic.num.partitions``, in Kafka's record formats
(:mod:`.records`). Time comes from a :class:`~samsa.coordinator.timer.Timer`, the
event loop's unless a test passes a manual one. Not thread-safe: everything runs on
the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence

from samsa.coordinator.errors import write_error_code
from samsa.coordinator.group.consumer_group import CONSUMER_PROTOCOL_TYPE, ConsumerGroup
from samsa.coordinator.group.consumer_group_manager import (
    ConsumerGroupConfig,
    ConsumerGroupManager,
    HeartbeatRequest,
    HeartbeatResult,
    TopicLookup,
)
from samsa.coordinator.group.consumer_group_records import group_records
from samsa.coordinator.group.group import (
    GroupConfig,
    GroupDescription,
    GroupState,
    JoinRequest,
    JoinResult,
    MemberDescription,
    SyncResult,
)
from samsa.coordinator.group.group_metadata_manager import AppendFn, GroupMetadataManager
from samsa.coordinator.group.loader import load_groups
from samsa.coordinator.group.offset_metadata_manager import (
    OFFSETS_TOPIC,
    OffsetCommitMember,
    OffsetMetadataManager,
    PartitionOffset,
)
from samsa.coordinator.group.records import OffsetValue, partition_for
from samsa.coordinator.timer import LoopTimer, Timer, TimerHandle
from samsa.errors import ErrorCode, is_expected_error
from samsa.records import RecordBatchBuilder
from samsa.storage import Log
from samsa.types import TopicPartition

log = logging.getLogger(__name__)

OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "104857600"}

__all__ = [
    "OFFSETS_TOPIC",
    "OFFSETS_TOPIC_CONFIGS",
    "GroupConfig",
    "GroupCoordinator",
    "GroupDescription",
    "JoinRequest",
    "MemberDescription",
    "OffsetCommitMember",
    "PartitionOffset",
]


async def _nothing() -> None:
    return None


class GroupCoordinator:
    """Every group's membership and committed offsets (one writer: the loop).

    ``clock`` gives the wall-clock milliseconds record timestamps and retention use;
    ``timer`` (default: ``clock`` and the running event loop) schedules timeouts.
    """

    def __init__(
        self,
        partitions: int,
        append: AppendFn,
        clock: Callable[[], int],
        config: GroupConfig | None = None,
        *,
        timer: Timer | None = None,
        consumer_config: ConsumerGroupConfig | None = None,
    ) -> None:
        self.partitions = partitions
        self.config = config or GroupConfig()
        self._timer = timer or LoopTimer(clock)
        self.group_metadata_manager = GroupMetadataManager(
            self.partition_of, append, self._timer, self.config
        )
        self.offset_metadata_manager = OffsetMetadataManager(
            self.partition_of, append, self._timer, self.group_metadata_manager
        )
        self.consumer_groups = ConsumerGroupManager(self._timer, consumer_config)
        """Groups of the consumer protocol (KIP-848); a group id names a classic group or a
        consumer group, never both at once."""
        self.consumer_groups.on_change = self._consumer_group_changed
        self._append = append
        self._changed_consumer_groups: dict[str, ConsumerGroup] = {}
        self._consumer_group_writes: set[asyncio.Task[None]] = set()
        self._in_heartbeat = False
        self._expiry_timer: TimerHandle | None = None
        self._expiry_task: asyncio.Task[None] | None = None
        self._owned: set[int] | None = None
        """The offsets partitions whose groups this coordinator serves (None: all of them,
        a single node)."""

    def partition_of(self, group: str) -> TopicPartition:
        return TopicPartition(OFFSETS_TOPIC, partition_for(group, self.partitions))

    # -- which groups are this coordinator's (a cluster) -------------------------------
    def own_led_partitions_only(self) -> None:
        """A cluster: serve only the groups of the offsets partitions this broker leads
        (:meth:`load_partition`); others are NOT_COORDINATOR."""
        self._owned = set()

    def coordinator_error(self, group_id: str) -> ErrorCode:
        """NONE if this coordinator serves ``group_id``, else NOT_COORDINATOR (the client
        finds the coordinator again)."""
        if self._owned is None or partition_for(group_id, self.partitions) in self._owned:
            return ErrorCode.NONE
        return ErrorCode.NOT_COORDINATOR

    def load_partition(self, index: int, partition_log: Log) -> None:
        """This broker leads ``__consumer_offsets`` partition ``index`` now: take its groups
        and offsets from the log and serve them."""
        if self._owned is None or index in self._owned:
            return
        self.unload_partition(index)  # whatever an earlier leadership left behind
        loaded = load_groups([partition_log])
        self.offset_metadata_manager.load(loaded.offsets, loaded.pending)
        self.group_metadata_manager.load(loaded.metadata, loaded.offsets)
        consumer = self._load_consumer_groups(loaded.consumer_groups.groups())
        groups = set(loaded.metadata) | set(loaded.offsets)
        self.group_metadata_manager.start(groups)
        self.consumer_groups.start(consumer)
        self._owned.add(index)
        log.info("coordinating the %d groups of %s", len(groups),
                 TopicPartition(OFFSETS_TOPIC, index))  # fmt: skip

    def unload_partition(self, index: int) -> None:
        """Another broker leads partition ``index`` now: forget its groups (their waiting
        requests are answered NOT_COORDINATOR)."""
        if self._owned is None:
            return
        self._owned.discard(index)

        def elsewhere(group_id: str) -> bool:
            return partition_for(group_id, self.partitions) == index

        removed = self.group_metadata_manager.unload(elsewhere)
        self.offset_metadata_manager.unload(elsewhere)
        for group in self.consumer_groups.groups():
            if elsewhere(group.group_id):
                self.consumer_groups.remove_group(group.group_id)
                removed += 1
        if removed:
            log.info("no longer coordinating the %d groups of %s", removed,
                     TopicPartition(OFFSETS_TOPIC, index))  # fmt: skip

    # -- lifecycle -------------------------------------------------------------------
    def load(self, logs: Iterable[Log]) -> None:
        """Rebuild groups and offsets from the offsets topic (:mod:`.loader`); never raises."""
        loaded = load_groups(logs)
        self.offset_metadata_manager.load(loaded.offsets, loaded.pending)
        self.group_metadata_manager.load(loaded.metadata, loaded.offsets)
        self._load_consumer_groups(loaded.consumer_groups.groups())
        groups = len(self.groups())
        if groups or loaded.skipped:
            log.info(
                "loaded %d groups (%d with committed offsets); %d unreadable records skipped",
                groups,
                len(loaded.offsets),
                loaded.skipped,
            )

    def start(self) -> None:
        """Start session timers of loaded members and the periodic offset expiry (in a
        cluster, a partition's members are armed as it is loaded)."""
        if self._owned is None:
            self.group_metadata_manager.start()
            self.consumer_groups.start()
        self._schedule_expiry()

    async def shutdown(self) -> None:
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None
        if self._expiry_task is not None:
            self._expiry_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._expiry_task
        await self.group_metadata_manager.shutdown()
        self.consumer_groups.shutdown()
        for task in list(self._consumer_group_writes):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _schedule_expiry(self) -> None:
        self._expiry_timer = self._timer.call_later(
            self.config.retention_check_interval_ms, self._expiry_due
        )

    def _expiry_due(self) -> None:
        self._expiry_timer = None
        self._expiry_task = asyncio.get_running_loop().create_task(self._expire_and_reschedule())

    async def _expire_and_reschedule(self) -> None:
        try:
            await self.expire_offsets()
        except Exception:
            log.exception("offset expiry failed")
        self._expiry_task = None
        self._schedule_expiry()  # the next check counts from the end of this one

    # -- membership ------------------------------------------------------------------
    async def join(self, req: JoinRequest) -> JoinResult:
        if error := self.coordinator_error(req.group_id):
            return JoinResult(error, req.member_id)
        consumer_group = self.consumer_groups.get(req.group_id)
        if consumer_group is not None and consumer_group.members:
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
        return await self.group_metadata_manager.join(req)

    async def sync(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        *,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Mapping[str, bytes],
    ) -> SyncResult:
        if error := self.coordinator_error(group_id):
            return SyncResult(error)
        return await self.group_metadata_manager.sync(
            group_id,
            generation,
            member_id,
            group_instance_id=group_instance_id,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments=assignments,
        )

    def heartbeat(
        self, group_id: str, generation: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        if error := self.coordinator_error(group_id):
            return error
        return self.group_metadata_manager.heartbeat(
            group_id, generation, member_id, group_instance_id
        )

    def leave(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        if error := self.coordinator_error(group_id):
            return error, [error] * len(members)
        return self.group_metadata_manager.leave(group_id, members)

    # -- consumer groups (KIP-848) ----------------------------------------------------
    def _load_consumer_groups(self, groups: Iterable[ConsumerGroup]) -> set[str]:
        loaded = set()
        for group in groups:
            group.written = group_records(group)
            self.consumer_groups.add_group(group)
            loaded.add(group.group_id)
        return loaded

    def _consumer_group_changed(self, group: ConsumerGroup) -> None:
        self._changed_consumer_groups[group.group_id] = group
        if not self._in_heartbeat:
            # A timeout changed the group: write it on the loop's next turn.
            task = asyncio.get_running_loop().create_task(self._write_consumer_groups_logged())
            self._consumer_group_writes.add(task)
            task.add_done_callback(self._consumer_group_writes.discard)

    async def _write_consumer_groups_logged(self) -> None:
        try:
            await self._write_consumer_groups()
        except Exception as exc:
            # The records are written again with the group's next change.
            log.warning("writing consumer group records failed: %s", exc)

    async def _write_consumer_groups(self) -> None:
        """Append the records of every changed group that differ from what was written
        (tombstones for the keys it no longer has), one batch per group."""
        changed, self._changed_consumer_groups = self._changed_consumer_groups, {}
        while changed:
            group_id, group = next(iter(changed.items()))
            live = self.consumer_groups.get(group_id) is group
            records = group_records(group) if live else {}
            builder = RecordBatchBuilder()
            now = self._timer.now_ms()
            count = 0
            for key in group.written.keys() - records.keys():
                builder.append(None, key=key, timestamp=now)
                count += 1
            for key, value in records.items():
                if group.written.get(key) != value:
                    builder.append(value, key=key, timestamp=now)
                    count += 1
            if count:
                try:
                    await self._append(self.partition_of(group_id), builder.build())
                except Exception:
                    for gid, g in changed.items():  # written again with the next change
                        self._changed_consumer_groups.setdefault(gid, g)
                    raise
                group.written = records
            del changed[group_id]

    async def consumer_group_heartbeat(
        self,
        req: HeartbeatRequest,
        topics: TopicLookup,
        all_topics: Callable[[], Iterable[str]] = tuple,
    ) -> HeartbeatResult:
        """ConsumerGroupHeartbeat; a classic group of the same id with members refuses it.
        The answer waits for the group's changed records to be written."""
        result = self._consumer_group_heartbeat(req, topics, all_topics)
        try:
            await self._write_consumer_groups()
        except Exception as exc:
            log.warning("group %s: writing its records failed: %s", req.group_id, exc)
            return HeartbeatResult(write_error_code(exc), str(exc))
        return result

    def _consumer_group_heartbeat(
        self, req: HeartbeatRequest, topics: TopicLookup, all_topics: Callable[[], Iterable[str]]
    ) -> HeartbeatResult:
        if error := self.coordinator_error(req.group_id):
            return HeartbeatResult(error)
        classic = self.group_metadata_manager.get(req.group_id)
        if (
            classic is not None
            and not classic.is_(GroupState.EMPTY)
            and not classic.is_(GroupState.DEAD)
        ):
            return HeartbeatResult(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group."
            )
        self._in_heartbeat = True
        try:
            return self.consumer_groups.heartbeat(req, topics, all_topics)
        finally:
            self._in_heartbeat = False

    def consumer_group(self, group_id: str) -> tuple[ErrorCode, str | None, ConsumerGroup | None]:
        """ConsumerGroupDescribe's view of ``group_id``: an error and message, or the group."""
        if error := self.coordinator_error(group_id):
            return error, None, None
        group = self.consumer_groups.get(group_id)
        if group is not None:
            return ErrorCode.NONE, None, group
        classic = self.group_metadata_manager.get(group_id)
        if classic is not None and not classic.is_(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.", None
        return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None

    def validate_offset_fetch(
        self, group_id: str, member_id: str | None, member_epoch: int
    ) -> ErrorCode:
        """OffsetFetch v9+ from a member of a consumer group: its id and epoch must be
        current (classic groups check nothing)."""
        group = self.consumer_groups.get(group_id)
        if group is None:
            return ErrorCode.NONE
        return self.consumer_groups.validate_offset_fetch(group, member_id, member_epoch)

    # -- offsets ---------------------------------------------------------------------
    async def commit_offsets(
        self,
        member: OffsetCommitMember,
        partitions: Sequence[PartitionOffset],
        *,
        metadata_max_bytes: int,
        before_write: Callable[[], Awaitable[None]] = _nothing,
        api_version: int = 9,
    ) -> list[ErrorCode]:
        """OffsetCommit; see :meth:`OffsetMetadataManager.commit_offsets`."""
        if error := self.coordinator_error(member.group_id):
            return [error] * len(partitions)
        consumer_group = self.consumer_groups.get(member.group_id)
        if consumer_group is not None:
            error = self.consumer_groups.validate_offset_commit(
                consumer_group, member.member_id, member.generation, api_version
            )
            if error:
                return [error] * len(partitions)
            member = OffsetCommitMember(member.group_id)  # checked: no classic member to check
        return await self.offset_metadata_manager.commit_offsets(
            member, partitions, metadata_max_bytes=metadata_max_bytes, before_write=before_write
        )

    async def commit_transactional_offsets(
        self,
        member: OffsetCommitMember,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[PartitionOffset],
        *,
        producer_error: ErrorCode,
        metadata_max_bytes: int,
        before_write: Callable[[], Awaitable[None]] = _nothing,
    ) -> list[ErrorCode]:
        """TxnOffsetCommit; see :meth:`OffsetMetadataManager.commit_transactional_offsets`."""
        if error := self.coordinator_error(member.group_id):
            return [error] * len(partitions)
        return await self.offset_metadata_manager.commit_transactional_offsets(
            member,
            producer_id,
            producer_epoch,
            partitions,
            producer_error=producer_error,
            metadata_max_bytes=metadata_max_bytes,
            before_write=before_write,
        )

    async def commit(self, group: str, offsets: Mapping[TopicPartition, OffsetValue]) -> None:
        """Write offsets as they are, unchecked (an append error is raised)."""
        await self.offset_metadata_manager.commit(group, offsets)

    async def commit_transactional(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets: Mapping[TopicPartition, OffsetValue],
    ) -> None:
        """Write transactional offsets as they are, unchecked (an append error is raised)."""
        await self.offset_metadata_manager.commit_transactional(
            group_id, producer_id, producer_epoch, offsets
        )

    def committed(
        self, group: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetValue | None]:
        return self.offset_metadata_manager.committed(group, partitions)

    def has_pending_transactional(self, group_id: str, tp: TopicPartition) -> bool:
        return self.offset_metadata_manager.has_pending_transactional(group_id, tp)

    def on_txn_marker(self, tp: TopicPartition, producer_id: int, commit: bool) -> None:
        self.offset_metadata_manager.on_txn_marker(tp, producer_id, commit)

    async def on_partitions_deleted(self, partitions: Iterable[TopicPartition]) -> int:
        return await self.offset_metadata_manager.on_partitions_deleted(partitions)

    async def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        if error := self.coordinator_error(group_id):
            return error, {}
        return await self.offset_metadata_manager.delete_offsets(group_id, partitions)

    async def expire_offsets(self) -> int:
        """Remove offsets past ``offsets.retention.minutes``; empty groups without offsets die."""
        return await self.offset_metadata_manager.expire_offsets(self.config.offsets_retention_ms)

    # -- group admin -------------------------------------------------------------------
    def list_groups(self) -> list[tuple[str, str, str, str]]:
        """``(group_id, protocol_type, state, group_type)`` of every live group."""
        consumer = {
            g.group_id: (g.group_id, CONSUMER_PROTOCOL_TYPE, g.state, "consumer")
            for g in self.consumer_groups.groups()
            if not self.coordinator_error(g.group_id)
        }
        classic = [
            (g.group_id, g.protocol_type or "", g.state.value, "classic")
            for g in self.group_metadata_manager.all_groups()
            if not g.is_(GroupState.DEAD)
            and not self.coordinator_error(g.group_id)
            and g.group_id not in consumer
        ]
        return classic + list(consumer.values())

    def describe(self, group_id: str) -> GroupDescription:
        if self.consumer_groups.get(group_id) is not None:
            # DescribeGroups before v6 shows a consumer group as a dead classic one.
            return GroupDescription(group_id, GroupState.DEAD.value, "", "")
        group = self.group_metadata_manager.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return GroupDescription(group_id, GroupState.DEAD.value, "", "")
        stable = group.is_(GroupState.STABLE)
        members = [
            MemberDescription(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        return GroupDescription(
            group_id,
            group.state.value,
            group.protocol_type or "",
            (group.protocol_name or "") if stable else "",
            members,
        )

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        """DeleteGroups: an Empty group's offsets and record are tombstoned in one batch."""
        results: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            group = self.group_metadata_manager.get(group_id)
            consumer_group = self.consumer_groups.get(group_id)
            if consumer_group is not None and not self.coordinator_error(group_id):
                results[group_id] = await self._delete_consumer_group(consumer_group)
                continue
            if not group_id:
                results[group_id] = ErrorCode.INVALID_GROUP_ID
            elif error := self.coordinator_error(group_id):
                results[group_id] = error
            elif group is None or group.is_(GroupState.DEAD):
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_(GroupState.EMPTY):
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
            else:
                offsets = self.offset_metadata_manager
                try:
                    await offsets.write_tombstones(
                        group_id, offsets.offsets_of(group_id), group_record=True
                    )
                except Exception as exc:
                    # The group stays as it was: nothing changes before a successful write.
                    results[group_id] = write_error_code(exc)
                    log.warning("group %s: writing its deletion failed: %s", group_id, exc,
                                exc_info=not is_expected_error(exc))  # fmt: skip
                    continue
                self.group_metadata_manager.remove_group(group)
                offsets.forget_group(group_id)
                results[group_id] = ErrorCode.NONE
                log.info("group %s deleted", group_id)
        return results

    async def _delete_consumer_group(self, group: ConsumerGroup) -> ErrorCode:
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        offsets = self.offset_metadata_manager
        try:
            await offsets.write_tombstones(
                group.group_id, offsets.offsets_of(group.group_id), group_record=False
            )
        except Exception as exc:
            log.warning("group %s: writing its deletion failed: %s", group.group_id, exc)
            return write_error_code(exc)
        self.consumer_groups.remove_group(group.group_id)
        self._changed_consumer_groups[group.group_id] = group
        try:
            await self._write_consumer_groups()
        except Exception as exc:
            log.warning("group %s: writing its deletion failed: %s", group.group_id, exc)
            self.consumer_groups.add_group(group)
            return write_error_code(exc)
        offsets.forget_group(group.group_id)
        classic = self.group_metadata_manager.get(group.group_id)
        if classic is not None:
            self.group_metadata_manager.remove_group(classic)
        log.info("consumer group %s deleted", group.group_id)
        return ErrorCode.NONE

    def groups(self) -> list[str]:
        return sorted(set(self.group_metadata_manager.groups())
                      | {g.group_id for g in self.consumer_groups.groups()})  # fmt: skip
