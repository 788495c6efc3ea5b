"""Admin operations on consumer groups and their committed offsets."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from samsa.client.admin.base import (
    AdminBase,
    finish,
    item_error,
)
from samsa.client.admin.types import (
    GroupDescription,
    GroupListing,
    MemberDescription,
    OffsetAndMetadata,
)
from samsa.client.cluster import COORDINATOR_ERRORS, CoordinatorType
from samsa.client.errors import error_for
from samsa.errors import CorruptRecordError, KafkaError
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.consumer_protocol import PROTOCOL_TYPE, parse_assignment
from samsa.types import TopicPartition

__all__ = ["GroupAdmin"]


class GroupAdmin(AdminBase):
    """Groups (list, describe, delete) and their offsets (list, alter, delete)."""

    # -- groups ----------------------------------------------------------------------------

    async def list_groups(
        self,
        *,
        states: Iterable[str] = (),
        types: Iterable[str] = (),
        timeout_ms: int | None = None,
    ) -> list[GroupListing]:
        """Groups of every broker, sorted by id; ``states`` filters (Stable, Empty…)."""
        body = {"states_filter": list(states), "types_filter": list(types)}
        await self.start()
        listings: dict[str, GroupListing] = {}
        for node_id in sorted(self._cluster.nodes):

            async def attempt(node_id: int = node_id) -> Any:
                response = await self._cluster.send(node_id, ApiKey.LIST_GROUPS, body)
                code = int(response.error_code)
                if code:
                    raise error_for(code, f"ListGroups on broker {node_id}")
                return response

            response = await self._retrying(attempt, "list groups", timeout_ms)
            for g in response.groups:
                listings[g.group_id] = GroupListing(
                    g.group_id,
                    g.protocol_type,
                    getattr(g, "group_state", ""),
                    getattr(g, "group_type", ""),
                )
        return [listings[g] for g in sorted(listings)]

    async def describe_groups(
        self, group_ids: Iterable[str], *, timeout_ms: int | None = None
    ) -> dict[str, GroupDescription]:
        """State, protocol and members of groups (an unknown group is state 'Dead')."""
        descriptions: dict[str, GroupDescription] = {}
        for group_id in group_ids:
            response = await self._to_coordinator(
                group_id,
                ApiKey.DESCRIBE_GROUPS,
                {"groups": [group_id]},
                lambda r: int(r.groups[0].error_code),
                timeout_ms,
            )
            group = response.groups[0]
            error = item_error(int(group.error_code), f"group {group_id!r}")
            if error is not None:
                raise error
            coordinator_id = await self._cluster.coordinator(group_id, CoordinatorType.GROUP)
            descriptions[group_id] = GroupDescription(
                group_id,
                group.group_state,
                group.protocol_type,
                group.protocol_data,
                tuple(_member(m, group.protocol_type) for m in group.members),
                self._cluster.nodes.get(coordinator_id),
            )
        return descriptions

    async def delete_groups(
        self,
        group_ids: Iterable[str],
        *,
        timeout_ms: int | None = None,
        raise_on_error: bool = True,
    ) -> dict[str, KafkaError | None]:
        """Delete empty groups and their committed offsets."""
        results: dict[str, KafkaError | None] = {}
        for group_id in group_ids:
            response = await self._to_coordinator(
                group_id,
                ApiKey.DELETE_GROUPS,
                {"groups_names": [group_id]},
                lambda r: int(r.results[0].error_code),
                timeout_ms,
            )
            results[group_id] = item_error(
                int(response.results[0].error_code), f"group {group_id!r}"
            )
        return finish(results, raise_on_error)

    async def list_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (all of them, or of ``partitions``).

        Partitions without a committed offset are left out.
        """
        topics = None
        if partitions is not None:
            grouped: dict[str, list[int]] = {}
            for tp in sorted(partitions):
                grouped.setdefault(tp.topic, []).append(tp.partition)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in grouped.items()]
        body = {
            "group_id": group_id,
            "topics": topics,
            "groups": [{"group_id": group_id, "topics": topics}],
            "require_stable": require_stable,
        }

        def error_of(response: Any) -> int:
            group = response.groups[0] if hasattr(response, "groups") else response
            return int(getattr(group, "error_code", 0))

        response = await self._to_coordinator(
            group_id, ApiKey.OFFSET_FETCH, body, error_of, timeout_ms
        )
        group = response.groups[0] if hasattr(response, "groups") else response
        error = item_error(error_of(response), f"group {group_id!r}")
        if error is not None:
            raise error
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        for topic in group.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, int(p.partition_index))
                error = item_error(int(p.error_code), f"group {group_id!r} {tp}")
                if error is not None:
                    raise error
                if int(p.committed_offset) >= 0:
                    offsets[tp] = OffsetAndMetadata(
                        int(p.committed_offset),
                        p.metadata or "",
                        int(getattr(p, "committed_leader_epoch", -1)),
                    )
        return offsets

    async def alter_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        *,
        timeout_ms: int | None = None,
        raise_on_error: bool = True,
    ) -> dict[TopicPartition, KafkaError | None]:
        """Commit ``offsets`` for a group with no active members (as the reset tool does)."""
        grouped: dict[str, list[dict[str, Any]]] = {}
        for tp, value in sorted(offsets.items()):
            om = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
            grouped.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "committed_offset": om.offset,
                 "committed_leader_epoch": om.leader_epoch, "committed_metadata": om.metadata}
            )  # fmt: skip
        body = {
            "group_id": group_id,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in grouped.items()],
        }

        def error_of(response: Any) -> int:
            codes = [int(p.error_code) for t in response.topics for p in t.partitions]
            return next((c for c in codes if c in COORDINATOR_ERRORS), 0)

        response = await self._to_coordinator(
            group_id, ApiKey.OFFSET_COMMIT, body, error_of, timeout_ms
        )
        results = {
            TopicPartition(t.name, int(p.partition_index)): item_error(
                int(p.error_code), f"group {group_id!r} {t.name}-{p.partition_index}"
            )
            for t in response.topics
            for p in t.partitions
        }
        return finish(results, raise_on_error)

    async def delete_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition],
        *,
        timeout_ms: int | None = None,
        raise_on_error: bool = True,
    ) -> dict[TopicPartition, KafkaError | None]:
        """Delete committed offsets of partitions the group no longer consumes (OffsetDelete)."""
        grouped: dict[str, list[dict[str, int]]] = {}
        for tp in sorted(partitions):
            grouped.setdefault(tp.topic, []).append({"partition_index": tp.partition})
        body = {
            "group_id": group_id,
            "topics": [{"name": t, "partitions": ps} for t, ps in grouped.items()],
        }
        response = await self._to_coordinator(
            group_id, ApiKey.OFFSET_DELETE, body, lambda r: int(r.error_code), timeout_ms
        )
        error = item_error(int(response.error_code), f"group {group_id!r}")
        if error is not None:
            raise error
        results = {
            TopicPartition(t.name, int(p.partition_index)): item_error(
                int(p.error_code), f"group {group_id!r} {t.name}-{p.partition_index}"
            )
            for t in response.topics
            for p in t.partitions
        }
        return finish(results, raise_on_error)


def _member(member: Any, protocol_type: str) -> MemberDescription:
    assignment: tuple[TopicPartition, ...] = ()
    if protocol_type == PROTOCOL_TYPE and member.member_assignment:
        try:
            assignment = tuple(
                TopicPartition(topic, p)
                for topic, partitions in parse_assignment(member.member_assignment).partitions
                for p in partitions
            )
        except CorruptRecordError:
            assignment = ()  # another client's private format: shown as raw bytes only
    return MemberDescription(
        member.member_id,
        getattr(member, "group_instance_id", None),
        member.client_id,
        member.client_host,
        assignment,
        member.member_metadata,
        member.member_assignment,
    )
