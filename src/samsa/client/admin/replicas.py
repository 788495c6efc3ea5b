"""Admin operations on partition leadership: preferred and unclean leader elections."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any

from samsa.client.admin.base import AdminBase, item_error
from samsa.client.errors import error_for
from samsa.errors import ErrorCode, KafkaError
from samsa.types import TopicPartition

__all__ = ["ElectionType", "ReplicaAdmin"]

ELECT_LEADERS = 43


class ElectionType(enum.IntEnum):
    """Kafka's ``ElectionType``: the preferred replica, or any live one (unclean)."""

    PREFERRED = 0
    UNCLEAN = 1


class ReplicaAdmin(AdminBase):
    """Leader elections (ElectLeaders, sent to the controller)."""

    async def elect_leaders(
        self,
        election_type: ElectionType = ElectionType.PREFERRED,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, KafkaError | None]:
        """Elect leaders of ``partitions`` (None: every partition); each partition's error,
        None where its leader changed. ``ElectionNotNeededError`` says the partition
        already has the leader asked for; nothing is raised here."""
        wanted = None if partitions is None else list(partitions)
        by_topic: dict[str, list[int]] = {}
        for tp in wanted or ():
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        body = {
            "election_type": int(election_type),
            "topic_partitions": None
            if wanted is None
            else [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
            "timeout": self._request_timeout(timeout_ms),
        }

        async def attempt() -> Any:
            cluster = self._cluster
            target = cluster.controller_id if cluster.controller_id in cluster.nodes else None
            response = await cluster.send(target, ELECT_LEADERS, body)
            code = int(getattr(response, "error_code", 0))
            if code == ErrorCode.NOT_CONTROLLER:
                cluster.request_update()
                raise error_for(code, "elect leaders: the controller moved")
            if code:
                raise error_for(code, "elect leaders")
            return response

        response = await self._retrying(attempt, "elect leaders", timeout_ms)
        results: dict[TopicPartition, KafkaError | None] = {}
        for topic in response.replica_election_results:
            for p in topic.partition_result:
                tp = TopicPartition(topic.topic, p.partition_id)
                results[tp] = item_error(int(p.error_code), str(tp), p.error_message)
        return results
