"""ElectLeaders (key 43), versions 0–2: preferred and unclean leader elections on request.

The controller runs them (``Controller.elect_leaders``): another broker answers
NOT_CONTROLLER, and the client sends the request to the controller the
metadata names. Each partition gets its own answer: NONE when its leader
changed; ELECTION_NOT_NEEDED when the preferred replica already leads (or, for
an unclean election, when the partition has a live leader);
PREFERRED_LEADER_NOT_AVAILABLE when the preferred replica is not alive and in
the ISR; ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica is alive;
UNKNOWN_TOPIC_OR_PARTITION. Version 0 is a preferred election; a null
partition list means every partition. Elections complete within the request
(the controller writes the new states at once), so ``timeout`` is not used. A
single node leads every partition as its only replica: every election there is
not needed. With the authorizer on, it needs ALTER on the cluster
(CLUSTER_AUTHORIZATION_FAILED for the request and each partition), as Kafka's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from samsa.acl import AclOperation
from samsa.broker.api import respond
from samsa.broker.metadata.metadata_cache import MetadataCache
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.security.authorizer import authorize_cluster
from samsa.errors import ErrorCode
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import RequestHeader
from samsa.types import TopicPartition

UNCLEAN = 1

ElectionResults = dict[TopicPartition, tuple[ErrorCode, str | None]]
Elect = Callable[[list[TopicPartition] | None, bool], Awaitable[ElectionResults | None]]
"""Runs the elections; None when this broker is not the controller."""


def single_node_elections(metadata: MetadataCache) -> Elect:
    """A single node's answer: each existing partition already has its preferred leader."""

    async def elect(partitions: list[TopicPartition] | None, unclean: bool) -> ElectionResults:
        if partitions is None:
            partitions = [
                TopicPartition(info.name, p)
                for info in metadata.topics().values()
                for p in range(info.partitions)
            ]
        return {
            tp: (ErrorCode.ELECTION_NOT_NEEDED, "this broker is the only replica")
            if metadata.leadership(tp) is not None
            else (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp} does not exist")
            for tp in partitions
        }

    return elect


def register(registry: ApiRegistry, *, elect: Elect) -> None:
    async def handle(header: RequestHeader, body: Any) -> Any:
        unclean = getattr(body, "election_type", 0) == UNCLEAN
        wanted = None
        if body.topic_partitions is not None:
            wanted = [
                TopicPartition(t.topic, p) for t in body.topic_partitions for p in t.partitions
            ]
        if not authorize_cluster(AclOperation.ALTER):
            return _refused(header, wanted, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
        results = await elect(wanted, unclean)
        if results is None:
            not_controller = "this broker is not the controller"
            return _refused(header, wanted, ErrorCode.NOT_CONTROLLER, not_controller)
        grouped: dict[str, list[dict[str, Any]]] = {}
        for tp, (code, message) in results.items():
            grouped.setdefault(tp.topic, []).append(
                {"partition_id": tp.partition, "error_code": code, "error_message": message}
            )
        return respond(header, {
            "throttle_time": 0, "error_code": ErrorCode.NONE,
            "replica_election_results": [{"topic": t, "partition_result": ps}
                                         for t, ps in grouped.items()],
        })  # fmt: skip

    registry.add(ApiKey.ELECT_LEADERS, 0, 2, handle)


def _refused(
    header: RequestHeader, wanted: list[TopicPartition] | None, code: ErrorCode, message: str | None
) -> Any:
    """The request refused as a whole: ``code`` for it and for each partition it names."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp in wanted or ():
        by_topic.setdefault(tp.topic, []).append(
            {"partition_id": tp.partition, "error_code": code, "error_message": message}
        )
    return respond(header, {
        "throttle_time": 0, "error_code": code,
        "replica_election_results": [{"topic": t, "partition_result": ps}
                                     for t, ps in by_topic.items()],
    })  # fmt: skip
