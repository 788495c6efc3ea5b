"""Committed offsets of every group: commits, transactional commits, tombstones and expiry.

Kafka's ``OffsetMetadataManager``. An OffsetCommit is checked against the group's
membership (:meth:`GroupMetadataManager.validate_offset_commit`) and each partition
against the metadata size limit, then the accepted offsets are appended as one
batch to the group's ``__consumer_offsets`` partition, and cached only once the
append succeeded. A failed append is answered per partition with the code Kafka 4's
coordinator answers (:func:`~samsa.coordinator.errors.write_error_code`).

A TxnOffsetCommit is appended as the producer's transactional batch and held
pending until the transaction's marker reaches that partition: COMMIT publishes
the offsets, ABORT drops them. A tombstone (OffsetDelete, expiry, group deletion,
a deleted topic) removes the offset, and what open transactions hold for the same
key, as the loader replays it. Not thread-safe: one writer, the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from samsa.coordinator.errors import write_error_code
from samsa.coordinator.group.group import GroupState
from samsa.coordinator.group.group_metadata_manager import GroupMetadataManager
from samsa.coordinator.group.loader import OffsetsByGroup
from samsa.coordinator.group.records import (
    OffsetKey,
    OffsetValue,
    encode_group_metadata_key,
    encode_offset_key,
    encode_offset_value,
)
from samsa.coordinator.timer import Timer
from samsa.errors import CorruptRecordError, ErrorCode, is_expected_error
from samsa.records import RecordBatchBuilder
from samsa.types import TopicPartition

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
CONSUMER_PROTOCOL_TYPE = "consumer"

AppendFn = Callable[[TopicPartition, bytes], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class OffsetCommitMember:
    """Who commits: the group, and the member's generation, id and instance id as sent."""

    group_id: str
    generation: int = -1
    member_id: str = ""
    group_instance_id: str | None = None

    @property
    def names_a_member(self) -> bool:
        return self.generation >= 0 or bool(self.member_id) or self.group_instance_id is not None


@dataclass(frozen=True, slots=True)
class PartitionOffset:
    """One partition's offset in a commit request; ``topic_exists`` as the broker knows it."""

    tp: TopicPartition
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    topic_exists: bool = True


class OffsetMetadataManager:
    """Owner of every group's committed and pending offsets (one writer: the loop)."""

    def __init__(
        self,
        partition_of: Callable[[str], TopicPartition],
        append: AppendFn,
        timer: Timer,
        groups: GroupMetadataManager,
    ) -> None:
        self._partition_of = partition_of
        self._append = append
        self._timer = timer
        self._groups = groups
        self._offsets: OffsetsByGroup = {}
        # Offsets committed inside open transactions: producer id → group → offsets.
        self._pending_txn: dict[int, OffsetsByGroup] = {}

    def load(self, offsets: OffsetsByGroup, pending: dict[int, OffsetsByGroup]) -> None:
        """Take the committed and pending offsets the loader read (of one partition or all)."""
        self._offsets.update(offsets)
        for producer_id, groups in pending.items():
            self._pending_txn.setdefault(producer_id, {}).update(groups)

    def unload(self, owned_elsewhere: Callable[[str], bool]) -> None:
        """Forget the offsets of the groups ``owned_elsewhere`` names."""
        for group_id in [g for g in self._offsets if owned_elsewhere(g)]:
            del self._offsets[group_id]
        for producer_id, groups in list(self._pending_txn.items()):
            for group_id in [g for g in groups if owned_elsewhere(g)]:
                del groups[group_id]
            if not groups:
                del self._pending_txn[producer_id]

    def groups_with_offsets(self) -> list[str]:
        return list(self._offsets)

    # -- OffsetCommit, TxnOffsetCommit -------------------------------------------------
    async def commit_offsets(
        self,
        member: OffsetCommitMember,
        partitions: Sequence[PartitionOffset],
        *,
        metadata_max_bytes: int,
        before_write: Callable[[], Awaitable[None]],
    ) -> list[ErrorCode]:
        """OffsetCommit: the error code of each of ``partitions``, in their order.

        ``before_write`` runs before the append (it creates the offsets topic);
        nothing is cached unless the append succeeded.
        """
        if not member.group_id:
            group_error = ErrorCode.INVALID_GROUP_ID
        else:
            group_error = self._groups.validate_offset_commit(
                member.group_id, member.generation, member.member_id, member.group_instance_id
            )
        codes, accepted = self._accept(group_error, partitions, metadata_max_bytes)
        if accepted:
            await before_write()
            try:
                await self.commit(member.group_id, accepted)
            except Exception as exc:
                failed = self._write_failed(member.group_id, exc, "storing offsets")
                codes = [failed if code == ErrorCode.NONE else code for code in codes]
        return codes

    async def commit_transactional_offsets(
        self,
        member: OffsetCommitMember,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[PartitionOffset],
        *,
        producer_error: ErrorCode,
        metadata_max_bytes: int,
        before_write: Callable[[], Awaitable[None]],
    ) -> list[ErrorCode]:
        """TxnOffsetCommit: the error code of each of ``partitions``, in their order.

        The member is checked only when the request names one; then
        ``producer_error``, the transaction coordinator's verdict on the producer
        (already in the request version's terms), applies.
        """
        group_error = ErrorCode.NONE
        if not member.group_id:
            group_error = ErrorCode.INVALID_GROUP_ID
        elif member.names_a_member:
            group_error = self._groups.validate_offset_commit(
                member.group_id, member.generation, member.member_id, member.group_instance_id
            )
        codes, accepted = self._accept(
            group_error or producer_error, partitions, metadata_max_bytes
        )
        if accepted:
            await before_write()
            try:
                await self.commit_transactional(
                    member.group_id, producer_id, producer_epoch, accepted
                )
            except Exception as exc:
                failed = self._write_failed(member.group_id, exc, "storing transactional offsets")
                codes = [failed if code == ErrorCode.NONE else code for code in codes]
        return codes

    def _accept(
        self, group_error: ErrorCode, partitions: Sequence[PartitionOffset], metadata_max_bytes: int
    ) -> tuple[list[ErrorCode], dict[TopicPartition, OffsetValue]]:
        """Each partition's code before the write, and the offsets to write."""
        now = self._timer.now_ms()
        codes: list[ErrorCode] = []
        accepted: dict[TopicPartition, OffsetValue] = {}
        for p in partitions:
            code = group_error
            if not code and not p.topic_exists:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if not code and len(p.metadata.encode()) > metadata_max_bytes:
                code = ErrorCode.OFFSET_METADATA_TOO_LARGE
            if not code:
                accepted[p.tp] = OffsetValue(p.offset, p.leader_epoch, p.metadata, now)
            codes.append(code)
        return codes, accepted

    @staticmethod
    def _write_failed(group_id: str, exc: Exception, what: str) -> ErrorCode:
        """The code a failed append is answered with, per partition as Kafka does."""
        failed = write_error_code(exc)
        if failed == ErrorCode.UNKNOWN_SERVER_ERROR:
            log.error("group %s: %s failed", group_id, what, exc_info=exc)
        return failed

    async def commit(self, group: str, offsets: Mapping[TopicPartition, OffsetValue]) -> None:
        """Append the commits as one batch to the group's offsets partition, then cache them."""
        if not offsets:
            return
        builder = RecordBatchBuilder()
        now = self._timer.now_ms()
        for tp, value in offsets.items():
            key = OffsetKey(group, tp.topic, tp.partition)
            builder.append(encode_offset_value(value), key=encode_offset_key(key), timestamp=now)
        await self._append(self._partition_of(group), builder.build())
        self._groups.get_or_create(group)
        self._offsets.setdefault(group, {}).update(offsets)

    async def commit_transactional(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets: Mapping[TopicPartition, OffsetValue],
    ) -> None:
        """Append as the producer's transactional batch; visible on its COMMIT marker."""
        if not offsets:
            return
        builder = RecordBatchBuilder(
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=0,
            is_transactional=True,
        )
        now = self._timer.now_ms()
        for tp, value in offsets.items():
            key = OffsetKey(group_id, tp.topic, tp.partition)
            builder.append(encode_offset_value(value), key=encode_offset_key(key), timestamp=now)
        await self._append(self._partition_of(group_id), builder.build())
        self._pending_txn.setdefault(producer_id, {}).setdefault(group_id, {}).update(offsets)

    def on_txn_marker(self, tp: TopicPartition, producer_id: int, commit: bool) -> None:
        """A COMMIT/ABORT marker reached an offsets partition: publish or drop the pending."""
        if tp.topic != OFFSETS_TOPIC:
            return
        by_group = self._pending_txn.get(producer_id)
        if not by_group:
            return
        for group_id in [g for g in by_group if self._partition_of(g) == tp]:
            offsets = by_group.pop(group_id)
            if commit:
                self._groups.get_or_create(group_id)
                self._offsets.setdefault(group_id, {}).update(offsets)
        if not by_group:
            del self._pending_txn[producer_id]

    # -- OffsetFetch -------------------------------------------------------------------
    def committed(
        self, group: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetValue | None]:
        """The group's committed offsets (all of them when ``partitions`` is None)."""
        stored = self._offsets.get(group, {})
        if partitions is None:
            return dict(stored)
        return {tp: stored.get(tp) for tp in partitions}

    def has_pending_transactional(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether an open transaction holds an offset for ``tp`` (UNSTABLE_OFFSET_COMMIT)."""
        return any(tp in groups.get(group_id, {}) for groups in self._pending_txn.values())

    # -- tombstones --------------------------------------------------------------------
    async def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete: drop committed offsets the group no longer consumes."""
        group = self._groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        subscribed: set[str] = set()
        if not group.is_(GroupState.EMPTY):
            if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
                return ErrorCode.NON_EMPTY_GROUP, {}
            try:
                subscribed = group.subscribed_topics()
            except CorruptRecordError:
                return ErrorCode.NON_EMPTY_GROUP, {}
        codes: dict[TopicPartition, ErrorCode] = {}
        deletable = []
        stored = self._offsets.get(group_id, {})
        for tp in partitions:
            if tp.topic in subscribed:
                codes[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            codes[tp] = ErrorCode.NONE
            if tp in stored:
                deletable.append(tp)
        try:
            await self.write_tombstones(group_id, deletable, group_record=False)
        except Exception as exc:
            # The offsets stay: nothing changes before a successful write.
            log.warning("group %s: writing offset deletions failed: %s", group_id, exc,
                        exc_info=not is_expected_error(exc))  # fmt: skip
            return write_error_code(exc), {}
        return ErrorCode.NONE, codes

    def offsets_of(self, group_id: str) -> list[TopicPartition]:
        return list(self._offsets.get(group_id, {}))

    def forget_group(self, group_id: str) -> None:
        """The group was deleted: drop whatever committed offsets the cache still holds."""
        self._offsets.pop(group_id, None)

    async def write_tombstones(
        self, group_id: str, partitions: list[TopicPartition], *, group_record: bool
    ) -> None:
        """Tombstone offsets of the group (and its group record) in one batch, then uncache."""
        if not partitions and not group_record:
            return
        builder = RecordBatchBuilder()
        now = self._timer.now_ms()
        for tp in partitions:
            key = encode_offset_key(OffsetKey(group_id, tp.topic, tp.partition))
            builder.append(None, key=key, timestamp=now)
        if group_record:
            builder.append(None, key=encode_group_metadata_key(group_id), timestamp=now)
        await self._append(self._partition_of(group_id), builder.build())
        stored = self._offsets.get(group_id)
        if stored is not None:
            for tp in partitions:
                stored.pop(tp, None)
            if not stored:
                del self._offsets[group_id]
        for by_group in self._pending_txn.values():
            # A tombstone also drops what open transactions hold for its key, as the
            # loader replays it (and Kafka's OffsetMetadataManager.replay).
            held = by_group.get(group_id, {})
            for tp in partitions:
                held.pop(tp, None)

    async def on_partitions_deleted(self, partitions: Iterable[TopicPartition]) -> int:
        """Remove every group's offsets of deleted partitions, as Kafka's onPartitionsDeleted.

        Committed offsets and those open transactions hold are dropped from the cache
        at once and tombstoned in each group's offsets partition, so a topic created
        again under the name starts without them, after a restart too. A failed
        tombstone append is logged and the rest go on: the topic is gone whatever
        happens here. Returns the number of committed offsets removed.
        """
        deleted = set(partitions)
        keys: dict[str, set[TopicPartition]] = {}
        for group_id, stored in list(self._offsets.items()):
            gone = deleted.intersection(stored)
            for tp in gone:
                del stored[tp]
            if gone:
                keys.setdefault(group_id, set()).update(gone)
            if not stored:
                del self._offsets[group_id]
        removed = sum(len(tps) for tps in keys.values())
        for by_group in self._pending_txn.values():
            for group_id, held in by_group.items():
                gone = deleted.intersection(held)
                for tp in gone:
                    del held[tp]
                keys.setdefault(group_id, set()).update(gone)
        by_partition: dict[TopicPartition, list[OffsetKey]] = {}
        for group_id, tps in keys.items():
            by_partition.setdefault(self._partition_of(group_id), []).extend(
                OffsetKey(group_id, tp.topic, tp.partition) for tp in sorted(tps)
            )
        now = self._timer.now_ms()
        for offsets_tp, offset_keys in sorted(by_partition.items()):
            if not offset_keys:
                continue
            builder = RecordBatchBuilder()
            for key in offset_keys:
                builder.append(None, key=encode_offset_key(key), timestamp=now)
            try:
                await self._append(offsets_tp, builder.build())
            except Exception as exc:
                # Safe to go on: the cache no longer holds them and the topic is gone; a
                # restart would bring them back, so the error names the groups.
                log.error(
                    "writing %d tombstones for offsets of deleted partitions to %s failed "
                    "(groups %s): %s",
                    len(offset_keys), offsets_tp, sorted({k.group for k in offset_keys}), exc,
                    exc_info=not is_expected_error(exc),
                )  # fmt: skip
        if removed:
            log.info("removed %d committed offsets of deleted partitions", removed)
        return removed

    # -- expiry ------------------------------------------------------------------------
    async def expire_offsets(self, retention_ms: int) -> int:
        """Remove offsets older than ``retention_ms``; empty groups without offsets die.

        An empty group's offsets expire that long after the group became empty (or
        after the commit, for groups that never had members); a group with members
        keeps the offsets of the topics it subscribes to.
        """
        now = self._timer.now_ms()
        removed = 0
        for group in self._groups.all_groups():
            group_id = group.group_id
            stored = self._offsets.get(group_id, {})
            expired: list[TopicPartition] = []
            if group.is_(GroupState.EMPTY):
                for tp, value in stored.items():
                    base = group.state_timestamp if group.state_timestamp >= 0 else -1
                    if base < 0:
                        base = value.commit_timestamp
                    if base + retention_ms <= now:
                        expired.append(tp)
            elif group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.is_(GroupState.STABLE):
                try:
                    subscribed = group.subscribed_topics()
                except CorruptRecordError:
                    continue
                expired = [
                    tp
                    for tp, value in stored.items()
                    if tp.topic not in subscribed and value.commit_timestamp + retention_ms <= now
                ]
            dies = group.is_(GroupState.EMPTY) and len(expired) == len(stored)
            if expired or dies:
                await self.write_tombstones(group_id, expired, group_record=dies)
                removed += len(expired)
            if dies and group.is_(GroupState.EMPTY) and not self._offsets.get(group_id):
                self._groups.remove_group(group)
        if removed:
            log.info("expired %d committed offsets", removed)
        return removed
