"""Produce (key 0): served 3–13, advertised from 0 as Kafka 4.1 does.

librdkafka up to 2.11 enables compression only when Produce v0 is advertised,
so the range starts at 0; requests below v3 are refused (connection closed),
as Kafka 4 refuses them. Each partition must carry exactly one batch
(INVALID_RECORD otherwise). With acks=0 there is no response, and any error
closes the connection so the client notices.

Idempotent and transactional batches go through the partition's producer
state (:mod:`samsa.storage.producer_state`): retries are deduplicated, and
epoch, sequence and transaction-state errors are answered per partition.
Clients may not append to internal topics (INVALID_TOPIC_EXCEPTION per
partition, :mod:`samsa.broker.internal_topics`): only the coordinators write them.
Deviation: Kafka 4 verifies with the transaction coordinator that a
transactional batch's partition was added to its transaction (KIP-890) and
refuses it otherwise; samsa does not verify, and accepts transactional batches
with the usual idempotence checks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from samsa.broker.api import CloseConnectionRequest, Deferred, error_fields, respond
from samsa.broker.internal_topics import refuse_client_change
from samsa.broker.metadata_cache import MetadataCache
from samsa.broker.metrics.stats import note_error
from samsa.broker.registry import ApiRegistry
from samsa.broker.replica_manager import ReplicaManager
from samsa.errors import (
    ErrorCode,
    InvalidRecordError,
    InvalidRequiredAcksError,
    KafkaError,
    UnknownTopicIdError,
    for_code,
)
from samsa.protocol.build import duration_ms
from samsa.protocol.codec import RequestHeader
from samsa.records.batch import iter_batches
from samsa.storage.validator import RecordValidationError
from samsa.types import TopicPartition

API_KEY = 0


def _one_batch(records: Any) -> bytes:
    if not records:
        raise InvalidRecordError("produce request carries no record batch")
    batches = iter_batches(records)
    first = next(batches, None)
    if first is None or next(batches, None) is not None:
        raise InvalidRecordError("produce requests must carry exactly one record batch")
    return bytes(records) if not isinstance(records, bytes) else records


def register(registry: ApiRegistry, *, metadata: MetadataCache, replicas: ReplicaManager) -> None:

    async def handle(header: RequestHeader, body: Any) -> Any:
        acks = body.acks
        topics = []
        failed: KafkaError | None = None
        # acks=all: every partition is appended first, then all wait for their ISRs at once.
        replicating: list[tuple[dict[str, Any], Awaitable[ErrorCode]]] = []
        for topic in body.topic_data or ():
            name = getattr(topic, "name", None)
            if name is None:
                info = metadata.by_id(topic.topic_id)
                name = info.name if info is not None else None
            partitions = []
            for data in topic.partition_data or ():
                entry: dict[str, Any] = {"index": data.index, "log_start_offset": -1}
                try:
                    if name is None:
                        raise UnknownTopicIdError(f"no topic has id {topic.topic_id}")
                    if acks not in (0, 1, -1):
                        raise InvalidRequiredAcksError(f"acks must be 0, 1 or -1, not {acks}")
                    refuse_client_change(metadata, name, "append to")
                    tp = TopicPartition(name, data.index)
                    appended = await replicas.append(
                        tp, bytearray(_one_batch(data.records)), required_acks=acks
                    )
                    entry.update(
                        error_code=ErrorCode.NONE,
                        base_offset=appended.first_offset,
                        log_append_time=appended.log_append_time,
                        log_start_offset=appended.log_start_offset,
                    )
                    if acks == -1:
                        replicating.append((entry, replicas.wait_for_replication(
                            tp, appended.last_offset + 1, duration_ms(body.timeout)
                        )))  # fmt: skip
                except KafkaError as exc:
                    failed = exc
                    note_error(exc.code)
                    entry.update(error_fields(exc), base_offset=-1, log_append_time=-1)
                    if isinstance(exc, RecordValidationError):  # v8+: which records, and why
                        entry["record_errors"] = [
                            {"batch_index": e.batch_index, "batch_index_error_message": e.message}
                            for e in exc.record_errors
                        ]
                partitions.append(entry)
            topics.append(
                {
                    "name": name or "",
                    "topic_id": topic_id_of(topic),
                    "partition_responses": partitions,
                }
            )
        if replicating:
            # Appended in order; the wait for the ISR does not hold up the connection's
            # next requests (their responses still go out after this one).
            return Deferred(replicated(header, topics, replicating))
        if acks == 0:
            if failed is not None:
                raise CloseConnectionRequest(f"acks=0 produce failed: {failed}")
            return None
        return respond(header, {"responses": topics, "throttle_time": 0})

    async def replicated(
        header: RequestHeader,
        topics: list[dict[str, Any]],
        replicating: list[tuple[dict[str, Any], Awaitable[ErrorCode]]],
    ) -> Any:
        codes = await asyncio.gather(*(wait for _, wait in replicating))
        for (entry, _), code in zip(replicating, codes, strict=True):
            if code:
                entry.update(error_fields(for_code(code)(f"acks=all: {code.name}")))
                note_error(code)
        return respond(header, {"responses": topics, "throttle_time": 0})

    registry.add(API_KEY, 3, 13, handle, advertised_min=0)


def topic_id_of(topic: Any) -> Any:
    return getattr(topic, "topic_id", None)
