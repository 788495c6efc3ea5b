"""Fetch (key 1), versions 0–17: reads up to the high watermark with long polling.

With ``isolation_level`` 1 (read_committed) reads stop at the last stable
offset and each partition lists the aborted transactions overlapping what it
returns (up to Kafka's upper bound, see :meth:`Log.read`), so the consumer
drops their records; with 0 that list is null. Every partition answers its
last stable offset, whatever the isolation level, as Kafka does.

A fetch that finds fewer than ``min_bytes`` waits until a partition it reads
is appended to (a transaction marker is an append: the LSO moves with it), or
``max_wait_ms`` passes — event-driven, no sleeping loop.
The first partition with data returns at least one whole batch even when it
is larger than ``partition_max_bytes``/``max_bytes`` (KIP-74); the response
is capped by the smaller of ``max_bytes`` and the broker's ``fetch.max.bytes``.
Record data is never read into Python: the response is encoded around file
regions that the connection sends with ``os.sendfile``. Fetch sessions are
declined (session id 0), which every client handles with full fetches.
Versions 13+ name topics by id.

Versions 0–3 (Kafka 3.9 served them; Kafka 4 does not) want message formats v0
(Fetch 0–1) or v1 (2–3): the batches read are down-converted
(:func:`samsa.records.legacy.down_convert`, headers dropped, control batches
skipped), within ``partition_max_bytes`` and the response's ``max_bytes`` (v3;
older versions have none), the first message of the response going in whatever
its size. Reads of more than ``DOWN_CONVERT_INLINE_BYTES`` are converted on a
worker thread. Versions 4+ are untouched: their record data still goes from
the segment files to the socket.

A fetch from a follower (a replica id ≥ 0) reads up to the log end and tells
the leader the follower's log end (:meth:`ReplicaManager.read_for_follower`).
Only the leader serves a partition: other brokers answer
NOT_LEADER_OR_FOLLOWER, and a ``current_leader_epoch`` older or newer than
the leader's is FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH (KIP-320).
Deviation: no fetching from followers for consumers (KIP-392).

With the authorizer on, a consumer needs READ on each topic and a follower
CLUSTER_ACTION on the cluster; a refused partition answers
TOPIC_AUTHORIZATION_FAILED, as Kafka's.

A consumer with a ``consumer_byte_rate`` is never sent more than its quota
allows over the measured window; a response that would take it over the quota
is not sent: the consumer gets an empty response with ``throttle_time_ms`` and
is muted for that long, and the bytes are not counted (Kafka's behaviour).

The bytes a response carries are counted per topic from its file regions'
lengths (consumers' as bytes out, followers' as replication bytes out); the
long poll's wait is the request's remote time, per-partition error codes are
counted, and requests are named ``FetchConsumer`` or ``FetchFollower`` as Kafka
names them in its request metrics (:mod:`samsa.broker.metrics.stats`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from samsa.acl import AclOperation, ResourceType
from samsa.broker.api import RawResponse
from samsa.broker.authorizer import authorize, authorize_cluster
from samsa.broker.config import BrokerConfig
from samsa.broker.metadata_cache import MetadataCache
from samsa.broker.metrics.stats import add_remote_time, name_request, note_error
from samsa.broker.quota.manager import ClientQuotas, request_throttle
from samsa.broker.registry import ApiRegistry
from samsa.broker.replica_manager import ReplicaManager
from samsa.errors import ErrorCode, KafkaError, TopicAuthorizationFailedError, UnknownTopicIdError
from samsa.protocol.codec import RequestHeader
from samsa.protocol.fetch_response import FetchPartition, FetchTopic, encode_fetch_response
from samsa.records.legacy import down_convert
from samsa.storage.segment import FileRegion
from samsa.types import TopicPartition

API_KEY = 1
TOPIC = ResourceType.TOPIC
READ_COMMITTED = 1
DOWN_CONVERT_FROM = 4
"""Versions below this want message formats v0/v1."""
DOWN_CONVERT_INLINE_BYTES = 256 * 1024
"""Reads larger than this are down-converted off the event loop."""


def down_convert_all(
    topics: list[FetchTopic],
    version: int,
    fetch_offsets: dict[tuple[str, int], int],
    partition_max_bytes: dict[tuple[str, int], int],
    max_bytes: int,
) -> None:
    """Replace each partition's file region by its records as a v0 (Fetch 0–1) or v1
    (Fetch 2–3) message set, within the partition's and the response's limits."""
    magic = 0 if version < 2 else 1
    remaining = max_bytes
    for topic in topics:
        for p in topic.partitions:
            region = p.records
            if not isinstance(region, FileRegion):
                continue
            key = (topic.name, p.partition_index)
            first = remaining == max_bytes
            converted = down_convert(
                region.read(), magic, fetch_offsets[key],
                max(min(partition_max_bytes[key], remaining), 0), min_one_message=first,
            )  # fmt: skip
            p.records = converted
            remaining -= len(converted)


def register(
    registry: ApiRegistry,
    *,
    config: Callable[[], BrokerConfig],
    metadata: MetadataCache,
    replicas: ReplicaManager,
    quotas: ClientQuotas,
) -> None:
    broker_max_bytes = int(config()["fetch.max.bytes"])

    def read_all(
        body: Any,
        names: list[str | None],
        follower: int,
        refused: set[str | None],
        quota_bytes: float | None,
    ) -> tuple[list[FetchTopic], int, bool]:
        remaining = min(body.max_bytes, broker_max_bytes)
        if quota_bytes is not None:
            remaining = min(remaining, int(quota_bytes))
        committed = body.isolation_level == READ_COMMITTED and follower < 0
        total = 0
        failed = False
        topics = []
        seen: set[tuple[str | None, int]] = set()
        for topic, name in zip(body.topics, names, strict=True):
            result = FetchTopic(name or "", getattr(topic, "topic_id", None))
            for p in topic.partitions:
                if (name, p.partition) in seen:
                    continue  # a partition named twice is read once
                seen.add((name, p.partition))
                entry = FetchPartition(p.partition)
                result.partitions.append(entry)
                try:
                    if name in refused:
                        raise TopicAuthorizationFailedError(f"not authorized to fetch {name}")
                    if name is None:
                        raise UnknownTopicIdError(f"no topic has id {topic.topic_id}")
                    limit = min(p.partition_max_bytes, remaining)
                    tp = TopicPartition(name, p.partition)
                    max_bytes = None if limit <= 0 and total else max(limit, 0)
                    epoch = getattr(p, "current_leader_epoch", -1)
                    if follower >= 0:
                        read = replicas.read_for_follower(
                            tp, follower, p.fetch_offset, max_bytes, min_one_message=total == 0,
                            current_leader_epoch=epoch,
                        )  # fmt: skip
                    else:
                        read = replicas.read(
                            tp, p.fetch_offset, max_bytes, read_committed=committed,
                            min_one_message=total == 0, current_leader_epoch=epoch,
                        )  # fmt: skip
                    entry.high_watermark = read.high_watermark
                    entry.last_stable_offset = read.last_stable_offset
                    entry.log_start_offset = read.log_start_offset
                    if committed:
                        entry.aborted_transactions = []
                    data = read.data
                    if data is None:
                        continue
                    if committed:
                        entry.aborted_transactions = data.aborted_transactions
                    region = data.region
                    if region.length:
                        entry.records = region
                        total += region.length
                        remaining -= region.length
                except KafkaError as exc:
                    entry.error_code = exc.code
                    entry.aborted_transactions = None
                    failed = True
                    note_error(exc.code)
            topics.append(result)
        return topics, total, failed

    async def handle(header: RequestHeader, body: Any) -> Any:
        replica_state = getattr(body, "replica_state", None)
        follower = (
            replica_state.replica_id
            if replica_state is not None
            else getattr(body, "replica_id", -1)
        )
        name_request("FetchFollower" if follower >= 0 else "FetchConsumer")
        # Fetch sessions came with v7 (KIP-227): v4-v6 requests carry no session fields.
        if getattr(body, "session_id", 0) != 0 and body.session_epoch != -1:
            note_error(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
            chunks, size = encode_fetch_response(
                header.api_version, header.correlation_id, [],
                error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
            )  # fmt: skip
            return RawResponse(chunks, size)
        names: list[str | None] = []
        for topic in body.topics:
            name = getattr(topic, "topic", None)
            if name is None:
                info = metadata.by_id(topic.topic_id)
                name = info.name if info is not None else None
            names.append(name)
        refused = _refused(names, follower)
        deadline = time.monotonic() + body.max_wait.total_seconds()
        if follower >= 0:
            request_throttle().exempt = True
        quota_bytes = None
        requester = ("", "")
        if follower < 0 and quotas.fetch.enabled:
            requester = quotas.requester(header.client_id)
            quota_bytes = quotas.fetch.max_value_in_window(*requester)
        topics, total, failed = read_all(body, names, follower, refused, quota_bytes)
        tps = [
            TopicPartition(name, p.partition)
            for topic, name in zip(body.topics, names, strict=True)
            if name is not None
            for p in topic.partitions
        ]
        while total < max(body.min_bytes, 1) and not failed:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            waited = time.monotonic()
            await replicas.wait_for_data(tps, left)
            add_remote_time(time.monotonic() - waited)
            topics, total, failed = read_all(body, names, follower, refused, quota_bytes)
        if total:
            count_bytes_out(topics, follower >= 0)
        if header.api_version < DOWN_CONVERT_FROM:
            fetch_offsets: dict[tuple[str, int], int] = {}
            partition_max_bytes: dict[tuple[str, int], int] = {}
            for topic, name in zip(body.topics, names, strict=True):
                for p in topic.partitions:
                    key = (name or "", p.partition)
                    fetch_offsets.setdefault(key, p.fetch_offset)
                    partition_max_bytes.setdefault(key, p.partition_max_bytes)
            args = (topics, header.api_version, fetch_offsets, partition_max_bytes,
                    min(body.max_bytes, broker_max_bytes))  # fmt: skip
            if total > DOWN_CONVERT_INLINE_BYTES:
                await asyncio.to_thread(down_convert_all, *args)
            else:
                down_convert_all(*args)
        chunks, size = encode_fetch_response(header.api_version, header.correlation_id, topics)
        if quota_bytes is not None:
            throttle_ms = quotas.fetch.record(*requester, size)
            if throttle_ms > 0:
                # Not sent, so not counted: the consumer asks again once unmuted.
                quotas.fetch.unrecord(*requester, size)
                request_throttle().add(throttle_ms)
                chunks, size = encode_fetch_response(
                    header.api_version, header.correlation_id, [], throttle_time_ms=throttle_ms
                )
        return RawResponse(chunks, size)

    def count_bytes_out(topics: list[FetchTopic], to_follower: bool) -> None:
        for topic in topics:
            sent = 0
            for p in topic.partitions:
                records = p.records
                if records is not None and not isinstance(records, bytes):
                    sent += records.length
            if sent:
                stats = replicas.topic_stats.topic(topic.name)
                if to_follower:
                    stats.replication_bytes_out += sent
                else:
                    stats.bytes_out += sent

    registry.add(API_KEY, 0, 17, handle)


def _refused(names: list[str | None], follower: int) -> set[str | None]:
    """The topics the request being served may not fetch from."""
    if follower >= 0:
        return set() if authorize_cluster(AclOperation.CLUSTER_ACTION) else set(names)
    return {n for n in names if n is not None and not authorize(AclOperation.READ, TOPIC, n)}
