"""Admin operations sent to partition leaders: ListOffsets and DeleteRecords."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from samsa.client.admin.base import (
    ISOLATION_LEVELS,
    AdminBase,
)
from samsa.client.admin.types import (
    ListOffsetsResult,
)
from samsa.protocol.api_keys import ApiKey
from samsa.types import TopicPartition

__all__ = ["RecordAdmin"]


class RecordAdmin(AdminBase):
    """Offsets by time or position, and deleting records, partition by partition."""

    # -- records and offsets ---------------------------------------------------------------

    async def delete_records(
        self, before: Mapping[TopicPartition, int], *, timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        """Delete records below each offset (-1: the high watermark); returns the new
        log start offsets (low watermarks). A failed partition raises its error."""

        async def send(leader: int, tps: list[TopicPartition]) -> dict[TopicPartition, Any]:
            grouped: dict[str, list[dict[str, int]]] = {}
            for tp in tps:
                grouped.setdefault(tp.topic, []).append(
                    {"partition_index": tp.partition, "offset": before[tp]}
                )
            response = await self._cluster.send(
                leader,
                ApiKey.DELETE_RECORDS,
                {
                    "topics": [{"name": t, "partitions": ps} for t, ps in grouped.items()],
                    "timeout": self._request_timeout(timeout_ms),
                },
            )
            return {
                TopicPartition(t.name, int(p.partition_index)): (
                    int(p.error_code),
                    int(p.low_watermark),
                )
                for t in response.topics
                for p in t.partitions
            }

        return await self._by_leader(before, send, "delete records", timeout_ms)

    async def list_offsets(
        self,
        specs: Mapping[TopicPartition, int],
        *,
        isolation_level: str = "read_uncommitted",
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, ListOffsetsResult]:
        """Offsets by :class:`~samsa.client.admin_types.OffsetSpec` (LATEST, EARLIEST,
        MAX_TIMESTAMP) or by timestamp in ms: the first offset whose record is at or after it
        (offset -1 when there is none)."""
        level = ISOLATION_LEVELS[isolation_level]

        async def send(leader: int, tps: list[TopicPartition]) -> dict[TopicPartition, Any]:
            grouped: dict[str, list[dict[str, int]]] = {}
            for tp in tps:
                grouped.setdefault(tp.topic, []).append(
                    {"partition_index": tp.partition, "timestamp": int(specs[tp]),
                     "current_leader_epoch": -1}
                )  # fmt: skip
            response = await self._cluster.send(
                leader,
                ApiKey.LIST_OFFSETS,
                {
                    "replica_id": -1,
                    "isolation_level": level,
                    "topics": [{"name": t, "partitions": ps} for t, ps in grouped.items()],
                    "timeout": self._request_timeout(timeout_ms),
                },
            )
            return {
                TopicPartition(t.name, int(p.partition_index)): (
                    int(p.error_code),
                    ListOffsetsResult(
                        int(p.offset), int(p.timestamp), int(getattr(p, "leader_epoch", -1))
                    ),
                )
                for t in response.topics
                for p in t.partitions
            }

        return await self._by_leader(specs, send, "list offsets", timeout_ms)
