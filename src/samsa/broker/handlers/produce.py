"""Produce (key 0), versions 0–13 (Kafka 3.9 served 0–11).

Versions 0–2 carry message sets in message formats v0/v1 (magic 0 and 1): each
partition's set is validated (CRC-32 of every message, sizes, codec, nested
sets; CORRUPT_MESSAGE otherwise, nothing appended) and converted to one
RecordBatch v2 (:func:`samsa.records.legacy.message_set_to_batch`: magic 1
keeps its timestamps, magic 0 records get the broker's time, as Kafka stamped
them; sets over 64 KiB, before or after inflation, are converted on a worker
thread) before it takes the
path every batch takes. The topic is authorised and the partition's leadership
checked before anything is decompressed, and a set whose messages, wrappers
inflated, come to more than the topic's ``max.message.bytes`` is refused with
MESSAGE_TOO_LARGE as soon as inflation passes it — a small wrapper that
inflates hugely costs the broker no more than the limit. Deviation: Kafka
checks the converted batch against ``max.message.bytes`` (samsa does too, on
append) but inflates without a limit, so a set that decompresses past the
limit and recompresses under it is accepted by Kafka and refused by samsa (an
uncompressed set counts its messages' sizes the same way). A v0–2 request
carrying a RecordBatch v2 is appended as it is. v3+ must carry exactly one
batch per partition (INVALID_RECORD otherwise). With acks=0 there is no
response, and any error closes the connection so the client notices.

Idempotent and transactional batches go through the partition's producer
state (:mod:`samsa.storage.producer_state`): retries are deduplicated, and
epoch, sequence and transaction-state errors are answered per partition.
With the authorizer on, a transactional Produce needs WRITE on its transactional
id (every partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED otherwise) and
each topic WRITE (TOPIC_AUTHORIZATION_FAILED for its partitions), as Kafka's.
Clients may not append to internal topics (INVALID_TOPIC_EXCEPTION per
partition, :mod:`samsa.broker.metadata.internal_topics`): only the coordinators write them.
Deviation: Kafka 4 verifies with the transaction coordinator that a
transactional batch's partition was added to its transaction (KIP-890) and
refuses it otherwise; samsa does not verify, and accepts transactional batches
with the usual idempotence checks.

Responses to v3–13 are encoded here, from the handler's values, without kio's
entities (:mod:`samsa.protocol.produce_response`); v0–2 go through kio and the
old layout.

A client over its ``producer_byte_rate`` (the request's bytes count) gets its
answer with ``throttle_time_ms`` and is then muted for that long
(:mod:`samsa.broker.quota`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from samsa.acl import AclOperation, ResourceType
from samsa.broker.api import CloseConnectionRequest, Deferred, error_fields, respond
from samsa.broker.metadata.internal_topics import refuse_client_change
from samsa.broker.metadata.metadata_cache import MetadataCache
from samsa.broker.metrics.stats import note_error
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.quota.manager import ClientQuotas, request_throttle
from samsa.broker.replication.replica_manager import ReplicaManager
from samsa.broker.security.authorizer import authorize
from samsa.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    InvalidRequiredAcksError,
    KafkaError,
    KafkaStorageError,
    MessageTooLargeError,
    NotLeaderOrFollowerError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
    for_code,
)
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import duration_ms
from samsa.protocol.codec import RequestHeader
from samsa.protocol.produce_response import FIRST_VERSION as FIRST_ENCODED_VERSION
from samsa.protocol.produce_response import encode_produce_response
from samsa.records.batch import MAGIC, MAGIC_POS, iter_batches
from samsa.records.builder import now_ms
from samsa.records.legacy import is_message_set, message_set_to_batch
from samsa.storage.validator import RecordValidationError
from samsa.types import TopicPartition

WRITE, TOPIC = AclOperation.WRITE, ResourceType.TOPIC


def _one_batch(records: Any) -> bytes | memoryview:
    """The partition's one batch, as received: a writable view of the request's frame when
    the connection has one (the log then assigns offsets in it), else bytes (copied once
    by the log)."""
    if not records:
        raise InvalidRecordError("produce request carries no record batch")
    if len(records) > MAGIC_POS and records[MAGIC_POS] != MAGIC:
        # Kafka's answer: an older format in a Produce v3+ is refused, not taken as damage.
        raise InvalidRecordError(
            "Produce requests with version 3 and above are only allowed to contain record "
            f"batches with magic version 2, not {records[MAGIC_POS]}"
        )
    batches = iter_batches(records)
    first = next(batches, None)
    if first is None or next(batches, None) is not None:
        raise InvalidRecordError("produce requests must carry exactly one record batch")
    return records if isinstance(records, bytes | memoryview) else bytes(records)


CONVERT_INLINE_BYTES = 64 * 1024
"""Message sets larger than this, or holding more than this once inflated, are converted
off the event loop (per-record work)."""


async def _legacy_batch(
    records: Any, replicas: ReplicaManager, tp: TopicPartition
) -> bytes | memoryview:
    """Produce v0–2: a message set as one RecordBatch v2 (a v2 batch passes through).

    Nothing is decompressed for a partition this broker does not lead, and the set's
    messages may come to at most the topic's ``max.message.bytes`` once decompressed
    (MESSAGE_TOO_LARGE past it, found without inflating further)."""
    if not records or not is_message_set(records):
        return _one_batch(records)
    limit = replicas.leader_partition(tp).log.config.max_message_bytes
    data = bytes(records)
    if len(data) <= CONVERT_INLINE_BYTES:
        try:  # most small sets stay small once inflated: converted here, on the loop
            return message_set_to_batch(
                data, now_ms=now_ms(), max_decompressed=min(limit, CONVERT_INLINE_BYTES)
            )
        except MessageTooLargeError:
            if limit <= CONVERT_INLINE_BYTES:
                raise
    return await asyncio.to_thread(
        message_set_to_batch, data, now_ms=now_ms(), max_decompressed=limit
    )


_WITHOUT_LOG_START = (
    UnknownTopicOrPartitionError, NotLeaderOrFollowerError, MessageTooLargeError,
    CorruptRecordError, KafkaStorageError, UnknownTopicIdError,
)  # fmt: skip
"""Refusals answered with log start offset -1 even by a partition's leader (Kafka's
ReplicaManager: the append never reached the log); other refusals carry the partition's."""


def _log_start_offset(replicas: ReplicaManager, tp: TopicPartition) -> int:
    """The log start offset an error answer carries: the partition's when this broker has
    it, -1 otherwise (as Kafka's ReplicaManager answers a refused append)."""
    partition = replicas.get(tp)
    if partition is None or partition.log is None:
        return -1
    return int(partition.log.log_start_offset)


def register(
    registry: ApiRegistry,
    *,
    metadata: MetadataCache,
    replicas: ReplicaManager,
    quotas: ClientQuotas,
) -> None:

    async def handle(header: RequestHeader, body: Any) -> Any:
        acks = body.acks
        legacy = header.api_version < 3
        throttle = request_throttle()
        throttle.add(quotas.record_produce(header.client_id, throttle.size))
        topics = []
        failed: KafkaError | None = None
        # acks=all: every partition is appended first, then all wait for their ISRs at once.
        replicating: list[tuple[dict[str, Any], Awaitable[ErrorCode]]] = []
        refused = _transaction_refused(getattr(body, "transactional_id", None))
        for topic in body.topic_data or ():
            name = getattr(topic, "name", None)
            if name is None:
                info = metadata.by_id(topic.topic_id)
                name = info.name if info is not None else None
            if refused is None and name is not None and not authorize(WRITE, TOPIC, name):
                topic_refused: KafkaError | None = TopicAuthorizationFailedError(name)
            else:
                topic_refused = refused
            partitions = []
            for data in topic.partition_data or ():
                entry: dict[str, Any] = {"index": data.index, "log_start_offset": -1}
                appending: TopicPartition | None = None
                try:
                    if topic_refused is not None:
                        raise topic_refused
                    if name is None:
                        raise UnknownTopicIdError(f"no topic has id {topic.topic_id}")
                    if acks not in (0, 1, -1):
                        raise InvalidRequiredAcksError(f"acks must be 0, 1 or -1, not {acks}")
                    refuse_client_change(metadata, name, "append to")
                    tp = TopicPartition(name, data.index)
                    batch = (
                        await _legacy_batch(data.records, replicas, tp)
                        if legacy
                        else _one_batch(data.records)
                    )
                    appending = tp
                    appended = await replicas.append(tp, batch, required_acks=acks)
                    entry.update(
                        error_code=ErrorCode.NONE,
                        base_offset=appended.first_offset,
                        log_append_time=appended.log_append_time,
                        log_start_offset=appended.log_start_offset,
                    )
                    if acks == -1:
                        # An append the ISR holds already (always, when the ISR is the
                        # leader alone) is answered now, not from a delayed wait.
                        done = replicas.replication_done(tp, appended.last_offset + 1)
                        if done is None:
                            replicating.append((entry, replicas.wait_for_replication(
                                tp, appended.last_offset + 1, duration_ms(body.timeout)
                            )))  # fmt: skip
                        elif done:
                            _replication_failed(entry, done)
                except KafkaError as exc:
                    failed = exc
                    note_error(exc.code)
                    entry.update(error_fields(exc), base_offset=-1, log_append_time=-1)
                    if appending is not None and not isinstance(exc, _WITHOUT_LOG_START):
                        entry["log_start_offset"] = _log_start_offset(replicas, appending)
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
            return Deferred(replicated(header, topics, replicating, throttle.ms))
        if acks == 0:
            if failed is not None:
                raise CloseConnectionRequest(f"acks=0 produce failed: {failed}")
            return None
        return _answer(header, topics, throttle.ms)

    async def replicated(
        header: RequestHeader,
        topics: list[dict[str, Any]],
        replicating: list[tuple[dict[str, Any], Awaitable[ErrorCode]]],
        throttle_ms: int,
    ) -> Any:
        if len(replicating) == 1:  # the usual case: awaited as it is, no task and no gather
            codes = [await replicating[0][1]]
        else:
            codes = list(await asyncio.gather(*(wait for _, wait in replicating)))
        for (entry, _), code in zip(replicating, codes, strict=True):
            if code:
                _replication_failed(entry, code)
        return _answer(header, topics, throttle_ms)

    def _replication_failed(entry: dict[str, Any], code: ErrorCode) -> None:
        entry.update(error_fields(for_code(code)(f"acks=all: {code.name}")))
        note_error(code)

    registry.add(ApiKey.PRODUCE, 0, 13, handle)


def _answer(header: RequestHeader, topics: list[dict[str, Any]], throttle_ms: int) -> Any:
    """The response: v3–13 encoded here (:mod:`samsa.protocol.produce_response`), the
    versions kio lacks through kio's classes and the old layout."""
    if header.api_version >= FIRST_ENCODED_VERSION:
        return encode_produce_response(
            header.api_version, header.correlation_id, topics, throttle_ms
        )
    return respond(header, {"responses": topics, "throttle_time": throttle_ms})


def _transaction_refused(transactional_id: str | None) -> KafkaError | None:
    if transactional_id is None or authorize(
        WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    ):
        return None
    return TransactionalIdAuthorizationFailedError(transactional_id)


def topic_id_of(topic: Any) -> Any:
    return getattr(topic, "topic_id", None)
