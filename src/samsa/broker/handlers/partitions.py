"""CreatePartitions (key 37, versions 0–3) and DeleteRecords (key 21, versions 0–2).

Single node: new partitions are led by this broker, so a manual assignment may
name only this broker, one replica per partition (the replication factor of
every topic here). One request may add at most 10 000 partitions
(POLICY_VIOLATION otherwise, as Kafka caps CreateTopics, KAFKA-17870).
Both refuse internal topics (INVALID_TOPIC_EXCEPTION, see
:mod:`samsa.broker.internal_topics`). DeleteRecords completes at once — there
are no followers whose low watermark to wait for — so ``timeout`` is not used;
offset -1 means the high watermark.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Protocol

from samsa.broker.api import error_fields, respond
from samsa.broker.internal_topics import refuse_client_change
from samsa.broker.registry import ApiRegistry
from samsa.broker.replica_manager import ReplicaManager
from samsa.cluster.local import LocalMetadataStore, TopicInfo
from samsa.errors import (
    ErrorCode,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidRequestError,
    KafkaError,
    PolicyViolationError,
    UnknownTopicOrPartitionError,
)
from samsa.protocol.codec import RequestHeader
from samsa.types import TopicPartition


class PartitionsServices(Protocol):
    """The part of the broker CreatePartitions and DeleteRecords use."""

    @property
    def metadata(self) -> LocalMetadataStore: ...

    @property
    def node_id(self) -> int: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...


CREATE_PARTITIONS = 37
DELETE_RECORDS = 21
MAX_PARTITIONS_PER_REQUEST = 10_000


def _added_partitions(broker: PartitionsServices, topic: Any) -> int:
    info = broker.metadata.get(topic.name)
    return max(topic.count - info.partitions, 0) if info is not None else 0


def _check_assignments(broker: PartitionsServices, info: TopicInfo, topic: Any) -> None:
    added = topic.count - info.partitions
    if len(topic.assignments) != added:
        raise InvalidReplicaAssignmentError(
            f"Attempted to add {added} additional partition(s), but "
            f"{len(topic.assignments)} assignment(s) were specified."
        )
    for assignment in topic.assignments:
        replicas = list(assignment.broker_ids)
        if not replicas:
            raise InvalidReplicaAssignmentError(
                "The manual partition assignment includes an empty replica list."
            )
        for replica in replicas:
            if replica != broker.node_id:
                raise InvalidReplicaAssignmentError(
                    f"The manual partition assignment includes broker {replica}, but no such "
                    f"broker is registered (this single broker is {broker.node_id})."
                )
        if len(replicas) != 1:
            raise InvalidReplicaAssignmentError(
                f"The manual partition assignment includes a partition with {len(replicas)} "
                "replica(s), but this is not consistent with previous partitions, which have "
                "1 replica(s)."
            )


def _grow_one(
    broker: PartitionsServices, topic: Any, validate_only: bool, over_limit: bool
) -> dict[str, Any]:
    name = topic.name
    try:
        if over_limit:
            raise PolicyViolationError("Excessively large number of partitions per request.")
        info = broker.metadata.get(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
        refuse_client_change(broker.metadata, name, "add partitions to")
        if topic.count == info.partitions:
            raise InvalidPartitionsError(f"Topic already has {info.partitions} partition(s).")
        if topic.count < info.partitions:
            raise InvalidPartitionsError(
                f"The topic {name} currently has {info.partitions} partition(s); "
                f"{topic.count} would not be an increase."
            )
        if topic.assignments is not None:
            _check_assignments(broker, info, topic)
        grown = broker.metadata.set_partitions(name, topic.count, validate_only=True)
        if not validate_only:
            # The new logs first (all or none), then the table: never a count without logs.
            broker.replica_manager.ensure_partitions(grown)
            broker.metadata.set_partitions(name, topic.count)
        return {"name": name, "error_code": ErrorCode.NONE, "error_message": None}
    except KafkaError as exc:
        return {"name": name, **error_fields(exc)}


def _delete_before(broker: PartitionsServices, tp: TopicPartition, offset: int) -> int:
    """Move ``tp``'s log start offset to ``offset`` (-1: the high watermark); the new start."""
    refuse_client_change(broker.metadata, tp.topic, "delete records of")
    return broker.replica_manager.delete_records(tp, offset)


def register(registry: ApiRegistry, broker: PartitionsServices) -> None:
    async def create_partitions(header: RequestHeader, body: Any) -> Any:
        names = Counter(topic.name for topic in body.topics)
        unique = [topic for topic in body.topics if names[topic.name] == 1]
        over = sum(_added_partitions(broker, t) for t in unique) > MAX_PARTITIONS_PER_REQUEST
        results = [_grow_one(broker, topic, body.validate_only, over) for topic in unique]
        duplicate = error_fields(InvalidRequestError("Duplicate topic name."))
        results += [{"name": name, **duplicate} for name, count in names.items() if count > 1]
        return respond(header, {"throttle_time": 0, "results": results})

    async def delete_records(header: RequestHeader, body: Any) -> Any:
        topics = []
        for topic in body.topics:
            partitions = []
            for p in topic.partitions:
                entry: dict[str, Any] = {"partition_index": p.partition_index}
                try:
                    tp = TopicPartition(topic.name, p.partition_index)
                    entry.update(
                        low_watermark=_delete_before(broker, tp, p.offset),
                        error_code=ErrorCode.NONE,
                    )
                except KafkaError as exc:
                    entry.update(low_watermark=-1, error_code=exc.code)
                partitions.append(entry)
            topics.append({"name": topic.name, "partitions": partitions})
        return respond(header, {"throttle_time": 0, "topics": topics})

    registry.add(CREATE_PARTITIONS, 0, 3, create_partitions)
    registry.add(DELETE_RECORDS, 0, 2, delete_records)
