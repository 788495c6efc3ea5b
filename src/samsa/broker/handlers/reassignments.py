"""AlterPartitionReassignments (key 45, versions 0–1) and ListPartitionReassignments (key 46,
version 0): moving partitions between brokers (KIP-455).

The controller runs them (:mod:`samsa.cluster.controller_admin`); another
broker answers NOT_CONTROLLER and the client asks the controller the metadata
names. A partition with a target replica list starts moving there (its new
replicas fetch from the leader; once all are in sync the old ones leave); a
null list cancels its move (NO_REASSIGNMENT_IN_PROGRESS if there is none).
Version 1's ``allow_replication_factor_change`` false refuses a target of
another size (INVALID_REPLICATION_FACTOR, KIP-860). List answers each move
under way: the replicas while it runs (target first), the ones being added and
the ones being removed. Deviation: no replication throttle
(``leader.replication.throttled.rate``): a move copies as fast as followers fetch.
A single node has nothing to move: a target naming only itself changes
nothing, any other broker is INVALID_REPLICA_ASSIGNMENT. With the authorizer on,
Alter needs ALTER on the cluster and List DESCRIBE (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from samsa.acl import AclOperation
from samsa.broker.api import respond
from samsa.broker.metadata.metadata_cache import MetadataCache
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.security.authorizer import authorize_cluster
from samsa.cluster.reassignment import Reassignment
from samsa.errors import ErrorCode
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import RequestHeader
from samsa.types import TopicPartition

_CLUSTER_DENIED = "Cluster authorization failed."

Results = dict[TopicPartition, tuple[ErrorCode, str | None]]
Reassign = Callable[[dict[TopicPartition, tuple[int, ...] | None]], Awaitable[Results | None]]
"""Starts or cancels moves; None when this broker is not the controller."""
ListMoves = Callable[[list[TopicPartition] | None], dict[TopicPartition, Reassignment] | None]


def single_node_reassignments(metadata: MetadataCache, node_id: int) -> tuple[Reassign, ListMoves]:
    async def reassign(targets: dict[TopicPartition, tuple[int, ...] | None]) -> Results:
        results: Results = {}
        for tp, target in targets.items():
            if metadata.leadership(tp) is None:
                results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp} does not exist")
            elif target is None:
                results[tp] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "nothing moves here")
            elif list(target) != [node_id]:
                results[tp] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               f"this single broker ({node_id}) is the only one")  # fmt: skip
            else:
                results[tp] = (ErrorCode.NONE, None)
        return results

    def moves(partitions: list[TopicPartition] | None) -> dict[TopicPartition, Reassignment]:
        return {}

    return reassign, moves


def register(
    registry: ApiRegistry,
    *,
    metadata: MetadataCache,
    reassign: Reassign,
    moves: ListMoves,
) -> None:
    async def alter(header: RequestHeader, body: Any) -> Any:
        if not authorize_cluster(AclOperation.ALTER):
            return respond(header, {"throttle_time": 0, "responses": [],
                                    "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                    "error_message": _CLUSTER_DENIED})  # fmt: skip
        allow_resize = getattr(body, "allow_replication_factor_change", True)
        targets: dict[TopicPartition, tuple[int, ...] | None] = {}
        refused: Results = {}
        for topic in body.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                target = None if p.replicas is None else tuple(p.replicas)
                state = metadata.leadership(tp)
                if (
                    not allow_resize
                    and target is not None
                    and state is not None
                    and len(target) != len(_original(moves, tp, state.replicas))
                ):
                    refused[tp] = (ErrorCode.INVALID_REPLICATION_FACTOR,
                                   "allow_replication_factor_change is false")  # fmt: skip
                else:
                    targets[tp] = target
        results = await reassign(targets) if targets else {}
        if results is None:
            return respond(header, {"throttle_time": 0, "error_code": ErrorCode.NOT_CONTROLLER,
                                    "error_message": "this broker is not the controller",
                                    "responses": []})  # fmt: skip
        results.update(refused)
        grouped: dict[str, list[dict[str, Any]]] = {}
        for tp, (code, message) in sorted(results.items()):
            grouped.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "error_code": code, "error_message": message}
            )
        return respond(header, {
            "throttle_time": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "responses": [{"name": t, "partitions": ps} for t, ps in grouped.items()],
        })  # fmt: skip

    async def list_moves(header: RequestHeader, body: Any) -> Any:
        if not authorize_cluster(AclOperation.DESCRIBE):
            return respond(header, {"throttle_time": 0, "topics": [],
                                    "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                    "error_message": _CLUSTER_DENIED})  # fmt: skip
        wanted = None
        if body.topics is not None:
            wanted = [TopicPartition(t.name, p) for t in body.topics for p in t.partition_indexes]
        found = moves(wanted)
        if found is None:
            return respond(header, {"throttle_time": 0, "error_code": ErrorCode.NOT_CONTROLLER,
                                    "error_message": "this broker is not the controller",
                                    "topics": []})  # fmt: skip
        grouped: dict[str, list[dict[str, Any]]] = {}
        for tp, move in sorted(found.items()):
            grouped.setdefault(tp.topic, []).append({
                "partition_index": tp.partition, "replicas": list(move.replicas),
                "adding_replicas": list(move.adding), "removing_replicas": list(move.removing),
            })  # fmt: skip
        return respond(header, {
            "throttle_time": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in grouped.items()],
        })  # fmt: skip

    registry.add(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 1, alter)
    registry.add(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0, list_moves)


def _original(moves: ListMoves, tp: TopicPartition, replicas: tuple[int, ...]) -> tuple[int, ...]:
    ongoing = (moves([tp]) or {}).get(tp)
    return ongoing.original if ongoing is not None else replicas
