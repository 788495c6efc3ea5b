"""Fetch (key 1), versions 0–17: reads up to the high watermark with long polling.

With ``isolation_level`` 1 (read_committed) reads stop at the last stable
offset and each partition lists the aborted transactions overlapping what it
returns (up to Kafka's upper bound, see :meth:`Log.read`), so the consumer
drops their records; with 0 that list is null. Every partition answers its
last stable offset, whatever the isolation level, as Kafka does.

A fetch that finds fewer than ``min_bytes`` waits in the fetch purgatory (a
:class:`~samsa.broker.replication.delayed_fetch.DelayedFetch`, Kafka's) until a
partition it reads is appended to (a transaction marker is an append: the LSO moves
with it), changes leader, or ``max_wait_ms`` passes — event-driven, no sleeping loop.
The first partition with data returns at least one whole batch even when it
is larger than ``partition_max_bytes``/``max_bytes`` (KIP-74); the response
is capped by the smaller of ``max_bytes`` and the broker's ``fetch.max.bytes``.
Record data is never read into Python: the response is encoded around file
regions that the connection sends with ``os.sendfile``.
Versions 13+ name topics by id.

Versions 7+ may use incremental fetch sessions (KIP-227; the rules are in
:mod:`samsa.broker.replication.fetch_session`, and the handler asks
:class:`~samsa.broker.replication.fetch_manager.FetchManager`, their one owner, for a
request's :class:`~samsa.broker.replication.fetch_manager.FetchContext`: which
partitions to read and answer, and what to remember): session id 0 with epoch 0
makes a session (its id is answered, or 0 when the cache has no slot for it), epoch -1 is a
sessionless full fetch (and closes the session it names), a session's id
with its next epoch an incremental fetch. An incremental fetch updates the
session's partitions from the request (added, changed, forgotten), reads in
the session's order and within the same limits as a full fetch, and answers
only the partitions with records, an error, or offsets other than last
answered; a consumer's fetch looks only at the partitions that told the
session of a change (or that it named, that errored or that are owed data),
and long-polls on its session. An unknown session is
FETCH_SESSION_ID_NOT_FOUND, a wrong epoch INVALID_FETCH_SESSION_EPOCH, a
session made by name asked by id (or the reverse)
FETCH_SESSION_TOPIC_ID_ERROR: each a top-level error with no partitions.
A throttled response answers no partitions and changes no cached offsets
(a session it would have made is not made). Followers may use sessions too
(samsa's replica fetchers do not); their sessions are read whole.

Versions 0–3 (Kafka 3.9 served them; Kafka 4 does not) want message formats v0
(Fetch 0–1) or v1 (2–3): the batches read are down-converted
(:func:`samsa.records.legacy.down_convert`, headers dropped, control batches
skipped), within ``partition_max_bytes`` and the response's ``max_bytes`` (v3;
older versions have none), the first message of the response going in whatever
its size. Conversions that may read or inflate more than
``DOWN_CONVERT_INLINE_BYTES`` run on a worker thread. Conversion goes batch by
batch and stops at the limits, which also bound the bytes of messages compressed
batches are inflated to, so a few megabytes of gzip that inflate to gigabytes
cost a fetch no more than its limits. The response's first batch may inflate to
the larger of the limits and the topic's ``max.message.bytes`` (every batch a
v0–2 producer wrote fits); one that inflates further is answered as Kafka
answers a message larger than an old client's fetch size: the partition's
records are a message header whose size runs past the response, and the client
reports a message too large. Deviation: Kafka bounds the compressed bytes it
sends, not the bytes it inflates, so an old client gets fewer records per fetch
from a compressed topic from samsa than from Kafka. Versions 4+ are untouched:
their record data still goes from the segment files to the socket.

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
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from samsa.acl import AclOperation, ResourceType
from samsa.broker.api import RawResponse
from samsa.broker.config import BrokerConfig
from samsa.broker.metadata.metadata_cache import MetadataCache
from samsa.broker.metrics.stats import name_request, note_error
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.quota.manager import ClientQuotas, request_throttle
from samsa.broker.replication.delayed_fetch import DelayedFetch, satisfied
from samsa.broker.replication.fetch_manager import FetchContext, Read
from samsa.broker.replication.fetch_session import (
    FINAL_EPOCH,
    INVALID_SESSION_ID,
    CachedPartition,
    PartitionKey,
)
from samsa.broker.replication.replica_manager import ReplicaManager
from samsa.broker.security.authorizer import authorize, authorize_cluster
from samsa.errors import (
    ErrorCode,
    KafkaError,
    TopicAuthorizationFailedError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import RequestHeader
from samsa.protocol.fetch_response import (
    TOPIC_IDS_FROM,
    FetchPartition,
    FetchTopic,
    encode_fetch_response,
)
from samsa.records.legacy import InflationBudget, down_convert
from samsa.storage.segment import FileRegion
from samsa.types import TopicPartition

log = logging.getLogger(__name__)

_REFUSED_UNREAD = (TopicAuthorizationFailedError, UnknownTopicIdError, UnknownTopicOrPartitionError)

TOPIC = ResourceType.TOPIC
READ_COMMITTED = 1
DOWN_CONVERT_FROM = 4
"""Versions below this want message formats v0/v1."""
DOWN_CONVERT_INLINE_BYTES = 256 * 1024
"""Down-conversions that may read or inflate more than this run off the event loop."""


def down_convert_all(
    topics: list[FetchTopic],
    version: int,
    fetch_offsets: dict[tuple[str, int], int],
    partition_max_bytes: dict[tuple[str, int], int],
    max_bytes: int,
    *,
    max_message_bytes: dict[str, int],
) -> None:
    """Replace each partition's file region by its records as a v0 (Fetch 0–1) or v1
    (Fetch 2–3) message set, within the partition's and the response's limits: on the
    bytes sent, and on the bytes of messages compressed batches inflate to. The
    response's first batch may inflate to its topic's ``max.message.bytes``
    (``max_message_bytes``, by topic name) when that is more than the limits."""
    magic = 0 if version < 2 else 1
    remaining = max_bytes
    inflation = InflationBudget(max_bytes)
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
                inflation=inflation, max_first_inflated=max_message_bytes[topic.name],
            )  # fmt: skip
            p.records = converted
            remaining -= len(converted)


@dataclass(slots=True)
class FetchRead:
    """One read of a fetch's partitions: the topics to answer, their record bytes, whether
    a partition failed, each partition read with what it answered, and those read."""

    topics: list[FetchTopic]
    total: int
    failed: bool
    done: list[Read]
    wanted: list[CachedPartition]


def register(
    registry: ApiRegistry,
    *,
    config: Callable[[], BrokerConfig],
    metadata: MetadataCache,
    replicas: ReplicaManager,
    quotas: ClientQuotas,
) -> None:
    broker_max_bytes = int(config()["fetch.max.bytes"])
    sessions = replicas.fetch_manager
    sessions.set_cache_slots(int(config()["max.incremental.fetch.session.cache.slots"]))
    purgatory = replicas.fetch_purgatory

    def read_all(
        context: FetchContext,
        wanted: list[CachedPartition],
        body: Any,
        follower: int,
        *,
        refused: Callable[[str | None], bool],
        quota_bytes: float | None,
    ) -> FetchRead:
        """Read ``wanted`` in order, within the response's limits; the partitions the
        context answers go in the response."""
        remaining = min(body.max_bytes, broker_max_bytes)
        if quota_bytes is not None:
            remaining = min(remaining, int(quota_bytes))
        committed = body.isolation_level == READ_COMMITTED and follower < 0
        total = 0
        failed = False
        topics: list[FetchTopic] = []
        done: list[Read] = []
        for c in wanted:
            name = c.topic
            entry = FetchPartition(c.partition)
            leader_epoch = -2
            try:
                if refused(name):
                    raise TopicAuthorizationFailedError(f"not authorized to fetch {name}")
                if name is None:
                    raise UnknownTopicIdError(f"no topic has id {c.topic_id}")
                limit = min(c.max_bytes, remaining)
                tp = TopicPartition(name, c.partition) if c.tp is None else c.tp
                max_bytes = None if limit <= 0 and total else max(limit, 0)
                if follower >= 0:
                    read = replicas.read_for_follower(
                        tp, follower, c.fetch_offset, max_bytes, min_one_message=total == 0,
                        current_leader_epoch=c.current_leader_epoch,
                    )  # fmt: skip
                else:
                    read = replicas.read(
                        tp, c.fetch_offset, max_bytes, read_committed=committed,
                        min_one_message=total == 0,
                        current_leader_epoch=c.current_leader_epoch,
                    )  # fmt: skip
                leader_epoch = replicas.leader_epoch_of(tp)
                entry.high_watermark = read.high_watermark
                entry.last_stable_offset = read.last_stable_offset
                entry.log_start_offset = read.log_start_offset
                if committed:
                    entry.aborted_transactions = []
                data = read.data
                if data is not None:
                    if committed:
                        entry.aborted_transactions = data.aborted_transactions
                    region = data.region
                    if region.length:
                        entry.records = region
                        total += region.length
                        remaining -= region.length
            except KafkaError as exc:
                entry.error_code = exc.code
                # As Kafka: a partition refused before any read (unknown, not authorized)
                # lists no aborted transactions, one the read refused lists null.
                entry.aborted_transactions = [] if isinstance(exc, _REFUSED_UNREAD) else None
                failed = True
                note_error(exc.code)
            done.append((c, entry, leader_epoch))
            if not context.answers(c, entry):
                continue
            if not topics or topics[-1].name != (name or "") or (topics[-1].topic_id != c.topic_id):
                topics.append(FetchTopic(name or "", c.topic_id))
            topics[-1].partitions.append(entry)
        return FetchRead(topics, total, failed, done, wanted)

    def resolve(
        topic: str | None, topic_id: uuid.UUID | None
    ) -> tuple[str | None, uuid.UUID | None]:
        if topic is None and topic_id is not None:
            info = metadata.by_id(topic_id)
            return (info.name if info is not None else None), topic_id
        return topic, topic_id

    def partitions_of(body: Any) -> list[CachedPartition]:
        """The request's partitions, in its order."""
        partitions: list[CachedPartition] = []
        for topic in body.topics:
            name, topic_id = resolve(
                getattr(topic, "topic", None), getattr(topic, "topic_id", None)
            )
            for p in topic.partitions:
                partitions.append(
                    CachedPartition(
                        name, topic_id, p.partition, p.fetch_offset, p.partition_max_bytes,
                        getattr(p, "current_leader_epoch", -1),
                    )
                )  # fmt: skip
        return partitions

    def forgotten_of(body: Any, uses_ids: bool) -> list[PartitionKey]:
        forgotten: list[PartitionKey] = []
        for topic in getattr(body, "forgotten_topics_data", ()):
            key_topic = topic.topic_id if uses_ids else topic.topic
            forgotten.extend((key_topic, index) for index in topic.partitions)
        return forgotten

    def session_error(header: RequestHeader, code: ErrorCode) -> RawResponse:
        note_error(code)
        chunks, size = encode_fetch_response(
            header.api_version, header.correlation_id, [], error_code=code
        )
        return RawResponse(chunks, size)

    async def handle(header: RequestHeader, body: Any) -> Any:
        replica_state = getattr(body, "replica_state", None)
        follower = (
            replica_state.replica_id
            if replica_state is not None
            else getattr(body, "replica_id", -1)
        )
        name_request("FetchFollower" if follower >= 0 else "FetchConsumer")
        committed = body.isolation_level == READ_COMMITTED and follower < 0
        # Fetch sessions came with v7 (KIP-227): v4-v6 requests carry no session fields.
        session_epoch = getattr(body, "session_epoch", FINAL_EPOCH)
        context = sessions.new_context(
            version=header.api_version,
            session_id=getattr(body, "session_id", INVALID_SESSION_ID),
            session_epoch=session_epoch,
            follower=follower >= 0,
            read_committed=committed,
            partitions=partitions_of(body),
            forgotten=forgotten_of(body, header.api_version >= TOPIC_IDS_FROM)
            if session_epoch > 0
            else (),
        )
        if context.error:
            return session_error(header, context.error)
        deadline = time.monotonic() + body.max_wait.total_seconds()
        if follower >= 0:
            request_throttle().exempt = True
        quota_bytes = None
        requester = ("", "")
        if follower < 0 and quotas.fetch.enabled:
            requester = quotas.requester(header.client_id)
            quota_bytes = quotas.fetch.max_value_in_window(*requester)
        refused = _access(follower)

        def attempt() -> FetchRead:
            return read_all(context, context.to_read(), body, follower, refused=refused,
                            quota_bytes=quota_bytes)  # fmt: skip

        result = attempt()
        if not satisfied(result, body.min_bytes):
            delayed = DelayedFetch(context.wait_keys(result.wanted), body.min_bytes, deadline,
                                   attempt)  # fmt: skip
            result = await purgatory.complete(delayed, result)
        topics, total = result.topics, result.total
        # Counted from the file regions before down-conversion replaces them, and recorded
        # only when the response goes out (a quota may withhold it below).
        sent_by_topic = region_bytes(topics) if total else {}
        if header.api_version < DOWN_CONVERT_FROM:
            fetch_offsets: dict[tuple[str, int], int] = {}
            partition_max_bytes: dict[tuple[str, int], int] = {}
            for c in result.wanted:
                key = (c.topic or "", c.partition)
                fetch_offsets.setdefault(key, c.fetch_offset)
                partition_max_bytes.setdefault(key, c.max_bytes)
            response_max = min(body.max_bytes, broker_max_bytes)
            args = (topics, header.api_version, fetch_offsets, partition_max_bytes, response_max)
            # Read here, on the loop that owns the topic configs, not by the worker thread.
            max_message_bytes = {
                t.name: replicas.topic_config(t.name).max_message_bytes for t in topics
            }
            may_inflate = max([response_max, *max_message_bytes.values()])
            if max(total, may_inflate) > DOWN_CONVERT_INLINE_BYTES:
                await asyncio.to_thread(
                    down_convert_all, *args, max_message_bytes=max_message_bytes
                )
            else:
                down_convert_all(*args, max_message_bytes=max_message_bytes)
        chunks, size = encode_fetch_response(
            header.api_version, header.correlation_id, topics, session_id=context.session_id()
        )
        if quota_bytes is not None:
            throttle_ms = quotas.fetch.record(*requester, size)
            if throttle_ms > 0:
                # Not sent, so not counted: the consumer asks again once unmuted.
                quotas.fetch.unrecord(*requester, size)
                request_throttle().add(throttle_ms)
                chunks, size = encode_fetch_response(
                    header.api_version, header.correlation_id, [],
                    throttle_time_ms=throttle_ms, session_id=context.withhold(),
                )  # fmt: skip
                return RawResponse(chunks, size)
        count_bytes_out(sent_by_topic, follower >= 0)
        context.complete(result.done)
        return RawResponse(chunks, size)

    def count_bytes_out(sent_by_topic: dict[str, int], to_follower: bool) -> None:
        for name, sent in sent_by_topic.items():
            stats = replicas.topic_stats.topic(name)
            if to_follower:
                stats.replication_bytes_out += sent
            else:
                stats.bytes_out += sent

    registry.add(ApiKey.FETCH, 0, 17, handle)


def region_bytes(topics: list[FetchTopic]) -> dict[str, int]:
    """The record bytes of each topic's file regions in a response (what ``sendfile`` sends)."""
    sent_by_topic: dict[str, int] = {}
    for topic in topics:
        sent = sum(
            p.records.length
            for p in topic.partitions
            if p.records is not None and not isinstance(p.records, bytes)
        )
        if sent:
            sent_by_topic[topic.name] = sent
    return sent_by_topic


def _access(follower: int) -> Callable[[str | None], bool]:
    """Whether the request being served may not fetch from a topic (each topic asked once)."""
    if follower >= 0:
        allowed = authorize_cluster(AclOperation.CLUSTER_ACTION)
        return lambda _name: not allowed
    refused: dict[str, bool] = {}

    def is_refused(name: str | None) -> bool:
        if name is None:
            return False
        found = refused.get(name)
        if found is None:
            found = refused[name] = not authorize(AclOperation.READ, TOPIC, name)
        return found

    return is_refused
