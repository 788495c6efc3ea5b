"""The consumer's fetcher: background Fetch requests that fill a buffer ``poll()`` drains.

Java's ``Fetcher``, with its prefetch. A task keeps one Fetch in flight per
broker that leads fetchable partitions, on a connection of its own (a long
poll must not hold up the shared one). A partition is fetched again only once
``poll()`` has taken everything buffered for it, so at most one response per
partition waits in memory; while the user works on one poll's records, the
next ones are already on their way.

Each buffered fetch remembers the position it was asked for; ``drain`` drops
it when the position changed since (a seek, a reset, a new assignment).
Records come out in offset order per partition, partitions in turn.

``read_committed``: the broker returns data up to the last stable offset and
lists the aborted transactions of the range; batches of an aborted
transaction are skipped from its first offset until its ABORT marker, as
Kafka's consumer does. Control batches are never returned, but the position
moves past them.

A fetcher built with a ``batch_decoder`` hands out what the decoder makes of each
response's accepted batches (after the CRC check and the transactional filtering
above) instead of records: a columnar reader decodes whole fetches without
per-record objects.

Partition errors: leader changes (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
fenced or unknown leader epoch…) refresh the metadata and retry after
``retry.backoff.ms``; OFFSET_OUT_OF_RANGE resets the position by
``auto.offset.reset`` (``none``: ``poll()`` raises it); anything else, and a
corrupt batch, is raised by ``poll()`` once the records before it are returned.

Partitions without a position but with a reset strategy (``seek_to_*``,
``auto.offset.reset``) are looked up with ListOffsets in the background too.

Owned by one event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from samsa.client.cluster import Cluster, topic_partitions
from samsa.client.config import ClientConfig
from samsa.client.connection import BrokerConnection
from samsa.client.consumer.subscription import SubscriptionState
from samsa.client.consumer.types import ConsumerRecord
from samsa.client.errors import RecordDeserializationError, error_for
from samsa.errors import CorruptRecordError, ErrorCode, KafkaError, SamsaError, TruncatedBatchError
from samsa.protocol.api_keys import ApiKey
from samsa.records.batch import RecordBatchView, TimestampType, read_batch
from samsa.records.control import ControlRecordType, control_record_type
from samsa.records.reader import iter_records, record_tuples
from samsa.types import TopicPartition

__all__ = ["EARLIEST", "LATEST", "Fetcher"]

log = logging.getLogger(__name__)

LATEST, EARLIEST = -1, -2
RETRY_PARTITION = frozenset(
    {
        3,  # UNKNOWN_TOPIC_OR_PARTITION
        5,  # LEADER_NOT_AVAILABLE
        6,  # NOT_LEADER_OR_FOLLOWER
        9,  # REPLICA_NOT_AVAILABLE
        56,  # KAFKA_STORAGE_ERROR
        74,  # FENCED_LEADER_EPOCH
        75,  # UNKNOWN_LEADER_EPOCH
        78,  # OFFSET_NOT_AVAILABLE
    }
)
ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}
Deserializer = Callable[[bytes], Any] | None
BatchDecoder = Callable[[TopicPartition, list[RecordBatchView], int], Any]
"""``(partition, batches, position) -> item or None``: the records at or after
``position`` of a response's accepted batches, as one item with ``offset`` (the last
offset it holds) and ``leader_epoch`` attributes; None when they hold none. It raises
KafkaError (CorruptRecordError…) for a batch it cannot decode."""


class _Buffered:
    """Records (or decoded batches) of one partition from one response, not yet returned."""

    __slots__ = ("index", "next_offset", "position", "records")

    def __init__(self, position: int, records: list[Any], next_offset: int) -> None:
        self.position = position
        self.records = records
        self.index = 0
        self.next_offset = next_offset


class Fetcher:
    """Prefetches records of the fetchable partitions (see the module docstring)."""

    def __init__(
        self,
        cluster: Cluster,
        config: ClientConfig,
        subscriptions: SubscriptionState,
        *,
        key_deserializer: Deserializer = None,
        value_deserializer: Deserializer = None,
        batch_decoder: BatchDecoder | None = None,
    ) -> None:
        self.cluster = cluster
        self.batch_decoder = batch_decoder
        self.subscriptions = subscriptions
        self.isolation_level = ISOLATION_LEVELS[config["isolation.level"]]
        self.check_crcs: bool = config["check.crcs"]
        self.max_wait_ms: int = config["fetch.max.wait.ms"]
        self.min_bytes: int = config["fetch.min.bytes"]
        self.max_bytes: int = config["fetch.max.bytes"]
        self.partition_max_bytes: int = config["max.partition.fetch.bytes"]
        self.request_timeout_ms: int = config["request.timeout.ms"]
        self.rack: str = config["client.rack"]
        self.key_deserializer = key_deserializer
        self.value_deserializer = value_deserializer
        self.data = asyncio.Event()
        """Set when records (or an error to raise) are buffered; ``poll()`` waits on it."""
        self._buffer: dict[TopicPartition, _Buffered] = {}
        self._errors: dict[TopicPartition, tuple[int, SamsaError]] = {}
        """Per partition: an error poll() raises once the position reaches its offset."""
        self._connections: dict[int, BrokerConnection] = {}
        self._busy_nodes: set[int] = set()
        self._in_flight: set[TopicPartition] = set()  # partitions in a Fetch or a reset right now
        self._retry_at: dict[Any, float] = {}  # partition or ("node", id) → monotonic time
        self._wake = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._children: set[asyncio.Task[Any]] = set()
        self._metadata_wait: asyncio.Task[Any] | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"samsa-fetcher-{self.cluster.client_id}"
            )

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        tasks = [t for t in (self._task, self._metadata_wait, *self._children) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        connections = list(self._connections.values())
        self._connections.clear()
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)

    def wakeup(self) -> None:
        """Look for work now (the assignment, a position or a pause changed)."""
        self._wake.set()

    # -- the fetch loop --------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                self._send_fetches()
            except Exception:  # a bug here must not silently stop all fetching
                log.exception("%s: fetcher round failed", self.cluster.client_id)
                await asyncio.sleep(self.cluster.retry_backoff.initial_ms / 1000)
                self._wake.set()
            await self._wake.wait()

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._children.add(task)
        task.add_done_callback(self._children.discard)

    def _backing_off(self, key: Any, now: float) -> bool:
        """Whether ``key`` (a partition, or ("node", id)) waits out a backoff at loop time
        ``now``; if so, a wake-up is due when it ends."""
        retry_at = self._retry_at.get(key)
        if retry_at is None:
            return False
        if retry_at <= now:
            del self._retry_at[key]
            return False
        self._wake_at(retry_at)
        return True

    def _back_off(self, key: Any) -> None:
        loop = asyncio.get_running_loop()
        retry_at = loop.time() + self.cluster.retry_backoff.initial_ms / 1000
        self._retry_at[key] = retry_at
        self._wake_at(retry_at)

    def _wake_at(self, when: float) -> None:
        """Wake the fetch loop at loop time ``when`` (one timer: the earliest asked for)."""
        timer = self._timer
        if timer is not None and not timer.cancelled() and timer.when() <= when:
            return
        if timer is not None:
            timer.cancel()
        self._timer = asyncio.get_running_loop().call_at(when, self._timer_fired)

    def _timer_fired(self) -> None:
        self._timer = None
        self._wake.set()

    def _send_fetches(self) -> None:
        subscriptions = self.subscriptions
        cluster = self.cluster
        now = asyncio.get_running_loop().time()
        by_node: dict[int, dict[TopicPartition, int]] = {}
        to_reset: dict[TopicPartition, int] = {}
        missing_leader = False
        for tp, state in subscriptions.assignment.items():
            if (
                tp in self._in_flight
                or tp in self._buffer
                or tp in self._errors
                or self._backing_off(tp, now)
            ):
                continue
            if state.position is None:
                if state.reset is not None:
                    to_reset[tp] = EARLIEST if state.reset == "earliest" else LATEST
                continue
            if state.paused:
                continue
            leader = cluster.leader_for(tp)
            if leader is None:
                missing_leader = True
                continue
            if leader in self._busy_nodes or self._backing_off(("node", leader), now):
                continue
            by_node.setdefault(leader, {})[tp] = state.position
        if missing_leader:
            self._await_metadata()
        for node, positions in by_node.items():
            self._busy_nodes.add(node)
            self._in_flight.update(positions)
            self._spawn(self._fetch(node, positions))
        if to_reset:
            self._in_flight.update(to_reset)
            self._spawn(self._reset(to_reset))

    def _await_metadata(self) -> None:
        if self._metadata_wait is not None and not self._metadata_wait.done():
            return

        async def wait() -> None:
            await self.cluster.wait_for_update(self.max_wait_ms / 1000 + 1)
            self._wake.set()

        self._metadata_wait = asyncio.get_running_loop().create_task(wait())

    async def _connection(self, node: int) -> BrokerConnection:
        connection = self._connections.get(node)
        if connection is not None and connection.usable:
            return connection
        if connection is not None:
            await connection.close()
        connection = self._connections[node] = await self.cluster.open_connection(node)
        return connection

    async def _fetch(self, node: int, positions: dict[TopicPartition, int]) -> None:
        try:
            topics = [
                {
                    "topic": topic,
                    "partitions": [
                        {
                            "partition": p,
                            "current_leader_epoch": -1,
                            "fetch_offset": positions[TopicPartition(topic, p)],
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": self.partition_max_bytes,
                        }
                        for p in partitions
                    ],
                }
                for topic, partitions in topic_partitions(positions).items()
            ]
            body = {
                "replica_id": -1,
                "max_wait": self.max_wait_ms,
                "min_bytes": self.min_bytes,
                "max_bytes": self.max_bytes,
                "isolation_level": self.isolation_level,
                "session_id": 0,
                "session_epoch": -1,
                "topics": topics,
                "forgotten_topics_data": [],
                "rack_id": self.rack,
            }
            try:
                connection = await self._connection(node)
                response = await connection.request(
                    ApiKey.FETCH, body, timeout_ms=self.max_wait_ms + self.request_timeout_ms
                )
            except KafkaError as exc:
                log.info("%s: fetch from node %d failed: %s", self.cluster.client_id, node, exc)
                broken = self._connections.pop(node, None)
                if broken is not None:
                    await broken.close()
                self.cluster.request_update()
                self._back_off(("node", node))
                return
            code = int(response.error_code)
            if code:
                log.info("%s: fetch from node %d: %s", self.cluster.client_id, node, code)
                self.cluster.request_update()
                self._back_off(("node", node))
                return
            for topic in response.responses:
                for partition in topic.partitions:
                    tp = TopicPartition(topic.topic, int(partition.partition_index))
                    if tp in positions:
                        try:
                            self._handle(tp, positions[tp], partition)
                        except Exception as exc:  # a bug must not turn into a fetch loop
                            log.exception("%s: cannot handle fetched data of %s",
                                          self.cluster.client_id, tp)  # fmt: skip
                            self._fail(tp, positions[tp], SamsaError(f"{tp}: {exc!r}"))
        finally:
            self._busy_nodes.discard(node)
            self._in_flight.difference_update(positions)
            self._wake.set()

    def _handle(self, tp: TopicPartition, position: int, partition: Any) -> None:
        state = self.subscriptions.assignment.get(tp)
        if state is None or state.position != position:
            return  # reassigned or sought while the request was out
        code = int(partition.error_code)
        if code == ErrorCode.NONE:
            state.high_watermark = int(partition.high_watermark)
            state.last_stable_offset = int(partition.last_stable_offset)
            state.log_start_offset = int(partition.log_start_offset)
            records, next_offset, error = self._parse(
                tp, position, partition.records, partition.aborted_transactions
            )
            if records or next_offset > position:
                self._buffer[tp] = _Buffered(position, records, next_offset)
                self.data.set()
            if error is not None:
                self._fail(tp, next_offset, error)
        elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
            strategy = self.subscriptions.default_reset
            if strategy == "none":
                self._fail(
                    tp,
                    position,
                    error_for(
                        code,
                        f"fetch position {position} is out of range for partition {tp} and "
                        "auto.offset.reset is none: seek to a valid offset",
                    ),
                )
            else:
                log.info(
                    "%s: offset %d out of range for %s; resetting to %s",
                    self.cluster.client_id, position, tp, strategy,
                )  # fmt: skip
                self.subscriptions.request_reset([tp], strategy)
        elif code in RETRY_PARTITION:
            self.cluster.request_update()
            self._back_off(tp)
        else:
            self._fail(tp, position, error_for(code, f"fetching partition {tp}"))

    def _fail(self, tp: TopicPartition, offset: int, error: SamsaError) -> None:
        """Have poll() raise ``error`` when ``tp``'s position is ``offset``; the partition
        is not fetched again until then (after that, not before ``retry.backoff.ms``)."""
        self._errors[tp] = (offset, error)
        self.data.set()

    def _parse(
        self, tp: TopicPartition, position: int, data: bytes | None, aborted: Iterable[Any] | None
    ) -> tuple[list[Any], int, SamsaError | None]:
        if self.batch_decoder is not None:
            return self._parse_decoded(tp, position, data, aborted)
        return self._parse_records(tp, position, data, aborted)

    def _parse_decoded(
        self, tp: TopicPartition, position: int, data: bytes | None, aborted: Iterable[Any] | None
    ) -> tuple[list[Any], int, SamsaError | None]:
        """:meth:`_parse_records` with a ``batch_decoder``: the accepted batches of the
        response go to it together (one item), or one by one when that fails, to return
        what comes before a corrupt batch and raise at its offset."""
        assert self.batch_decoder is not None
        batches, next_offset, error = self._parse_records(tp, position, data, aborted)
        try:
            item = self.batch_decoder(tp, batches, position) if batches else None
        except KafkaError:
            pass
        else:
            return ([] if item is None else [item]), next_offset, error
        items: list[Any] = []
        for batch in batches:
            try:
                item = self.batch_decoder(tp, [batch], position)
            except KafkaError as exc:  # corrupt records, an unknown codec
                if isinstance(exc, CorruptRecordError):
                    exc = _corrupt(tp, batch.base_offset, exc)
                return items, max(position, batch.base_offset), exc
            if item is not None:
                items.append(item)
        return items, next_offset, error

    def _parse_records(
        self, tp: TopicPartition, position: int, data: bytes | None, aborted: Iterable[Any] | None
    ) -> tuple[list[Any], int, SamsaError | None]:
        """Records (the accepted batches, with a ``batch_decoder``) at or after ``position``
        in a partition's fetched bytes, the offset after the last complete batch (or
        ``position`` when there is none), and the error that stopped the parse early (a
        corrupt batch, a deserializer that raised), if one did: the records before it are
        returned and the offset is where it happened."""
        records: list[Any] = []
        next_offset = position
        if not data:
            return records, next_offset, None
        topic, partition = tp
        read_committed = self.isolation_level == 1
        aborted_heap = (
            [(int(a.first_offset), int(a.producer_id)) for a in aborted]
            if read_committed and aborted
            else []
        )
        heapq.heapify(aborted_heap)
        aborted_producers: set[int] = set()
        key_deserializer, value_deserializer = self.key_deserializer, self.value_deserializer
        batch_decoder = self.batch_decoder
        view = memoryview(data)
        pos = 0
        append = records.append
        while pos < len(view):
            try:
                batch = read_batch(view, pos)
            except TruncatedBatchError:
                break  # the broker cut the last batch at the size limit
            pos += batch.size
            if batch.next_offset <= position:
                continue
            if self.check_crcs:
                try:
                    batch.validate()
                except CorruptRecordError as exc:
                    return records, next_offset, _corrupt(tp, batch.base_offset, exc)
            if read_committed:
                while aborted_heap and aborted_heap[0][0] <= batch.last_offset:
                    aborted_producers.add(heapq.heappop(aborted_heap)[1])
                if batch.is_control:
                    if batch.producer_id in aborted_producers:
                        marker = next(iter_records(batch), None)
                        if marker is not None and (
                            control_record_type(marker) is ControlRecordType.ABORT
                        ):
                            aborted_producers.discard(batch.producer_id)
                    next_offset = batch.next_offset
                    continue
                if batch.is_transactional and batch.producer_id in aborted_producers:
                    next_offset = batch.next_offset
                    continue
            elif batch.is_control:
                next_offset = batch.next_offset
                continue
            if batch_decoder is not None:
                append(batch)  # decoded by _parse_decoded
                next_offset = batch.next_offset
                continue
            timestamp_type = int(batch.timestamp_type is TimestampType.LOG_APPEND_TIME)
            leader_epoch = batch.partition_leader_epoch
            batch_start = len(records)
            try:
                for offset, timestamp, raw_key, raw_value, headers in record_tuples(batch):
                    if offset < position:
                        continue
                    key, value = raw_key, raw_value
                    try:
                        if key_deserializer is not None and key is not None:
                            key = key_deserializer(key)
                        if value_deserializer is not None and value is not None:
                            value = value_deserializer(value)
                    except Exception as exc:  # the user's deserializer
                        return records, offset, _undeserializable(tp, offset, exc)
                    append(
                        ConsumerRecord(
                            topic,
                            partition,
                            offset,
                            timestamp,
                            timestamp_type,
                            key,
                            value,
                            headers,
                            leader_epoch,
                            -1 if raw_key is None else len(raw_key),
                            -1 if raw_value is None else len(raw_value),
                        )
                    )
            except KafkaError as exc:  # corrupt records, an unknown codec
                del records[batch_start:]  # the batch is returned whole or not at all
                if isinstance(exc, CorruptRecordError):
                    exc = _corrupt(tp, batch.base_offset, exc)
                return records, next_offset, exc
            next_offset = batch.next_offset
        return records, next_offset, None

    # -- handing records out ---------------------------------------------------------------

    def drain(self, max_records: int) -> list[Any]:
        """Up to ``max_records`` buffered records (decoded batches, with a ``batch_decoder``)
        of fetchable partitions, positions moved past them. Raises a partition's error
        once nothing before it is left to return."""
        out: list[Any] = []
        assignment = self.subscriptions.assignment
        for tp in list(self._buffer):
            buffered = self._buffer[tp]
            state = assignment.get(tp)
            if state is None or state.position != buffered.position:
                del self._buffer[tp]
                self._wake.set()
                continue
            if state.paused or len(out) >= max_records:
                continue
            records = buffered.records
            end = min(len(records), buffered.index + max_records - len(out))
            if end > buffered.index:
                out.extend(records[buffered.index : end])
                last = records[end - 1]
                state.position = last.offset + 1
                state.leader_epoch = last.leader_epoch
                buffered.index = end
            if buffered.index >= len(records):
                state.position = max(state.position, buffered.next_offset)
                del self._buffer[tp]
                self._wake.set()
            else:
                buffered.position = state.position
                del self._buffer[tp]  # to the back of the line: partitions take turns
                self._buffer[tp] = buffered
        for tp, (offset, error) in list(self._errors.items()):
            state = assignment.get(tp)
            if tp in self._buffer and state is not None:
                continue  # the records before the error come first
            if state is None or state.position != offset:
                del self._errors[tp]  # unassigned, or sought elsewhere
                self._wake.set()
            elif not out and not state.paused:
                del self._errors[tp]
                self._back_off(tp)  # fetched again (and failing again) not before the backoff
                raise error
        self.update_data_flag()
        return out

    def update_data_flag(self) -> None:
        """Set :attr:`data` exactly when poll() has something to return (records of a
        paused partition wait in the buffer without waking it)."""
        if self.has_data():
            self.data.set()
        else:
            self.data.clear()

    def has_data(self) -> bool:
        assignment = self.subscriptions.assignment
        return any(
            (s := assignment.get(tp)) is not None and not s.paused
            for tp in (*self._buffer, *self._errors)
        )

    # -- offsets by time or position -------------------------------------------------------

    async def _reset(self, specs: dict[TopicPartition, int]) -> None:
        try:
            found = await self.list_offsets(specs, timeout_ms=self.request_timeout_ms)
        except KafkaError as exc:
            log.info("%s: offset reset failed (will retry): %s", self.cluster.client_id, exc)
            for tp in specs:
                self._back_off(tp)
            return
        finally:
            self._in_flight.difference_update(specs)
            self._wake.set()
        for tp, (offset, _timestamp, epoch) in found.items():
            state = self.subscriptions.assignment.get(tp)
            if state is not None and state.position is None and state.reset is not None:
                state.position = offset
                state.leader_epoch = epoch
                state.reset = None

    async def list_offsets(
        self, specs: Mapping[TopicPartition, int], *, timeout_ms: int
    ) -> dict[TopicPartition, tuple[int, int, int]]:
        """(offset, timestamp, leader epoch) per partition for ListOffsets specs: -2
        earliest, -1 latest (the LSO for read_committed), or a timestamp in ms (offset -1
        when no record is that recent)."""
        remaining = dict(specs)
        results: dict[TopicPartition, tuple[int, int, int]] = {}
        cluster = self.cluster

        async def attempt() -> None:
            if any(cluster.leader_for(tp) is None for tp in remaining):
                await cluster.refresh({tp[0] for tp in remaining})
            by_leader: dict[int, dict[TopicPartition, int]] = {}
            for tp, spec in remaining.items():
                leader = cluster.leader_for(tp)
                if leader is None:
                    if tp[0] in cluster.topic_errors:
                        raise error_for(cluster.topic_errors[tp[0]], f"topic {tp[0]!r}")
                    raise error_for(ErrorCode.LEADER_NOT_AVAILABLE, f"partition {tp} has no leader")
                by_leader.setdefault(leader, {})[tp] = spec
            answers = await asyncio.gather(
                *(self._list_offsets_at(node, part) for node, part in by_leader.items()),
                return_exceptions=True,
            )
            retry: KafkaError | None = None
            for answer in answers:
                if isinstance(answer, BaseException):
                    if not isinstance(answer, KafkaError):
                        raise answer
                    retry = answer
                    continue
                for tp, (code, value) in answer.items():
                    if code == ErrorCode.NONE:
                        results[tp] = value
                        remaining.pop(tp, None)
                    else:
                        error = error_for(code, f"ListOffsets for partition {tp}")
                        if not error.retriable:
                            raise error
                        retry = error
            if remaining:
                raise retry or error_for(
                    ErrorCode.LEADER_NOT_AVAILABLE, "ListOffsets did not answer every partition"
                )

        await cluster.retrying(attempt, timeout_ms=timeout_ms, what="ListOffsets")
        return results

    async def _list_offsets_at(
        self, node: int, specs: dict[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, tuple[int, int, int]]]:
        topics = [
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": p,
                        "current_leader_epoch": -1,
                        "timestamp": specs[TopicPartition(topic, p)],
                    }
                    for p in partitions
                ],
            }
            for topic, partitions in topic_partitions(specs).items()
        ]
        response = await self.cluster.send(
            node,
            ApiKey.LIST_OFFSETS,
            {
                "replica_id": -1,
                "isolation_level": self.isolation_level,
                "topics": topics,
                "timeout": self.request_timeout_ms,
            },
        )
        out: dict[TopicPartition, tuple[int, tuple[int, int, int]]] = {}
        for topic in response.topics:
            for p in topic.partitions:
                out[TopicPartition(topic.name, int(p.partition_index))] = (
                    int(p.error_code),
                    (int(p.offset), int(p.timestamp), int(getattr(p, "leader_epoch", -1))),
                )
        return out


def _corrupt(tp: TopicPartition, offset: int, error: CorruptRecordError) -> CorruptRecordError:
    corrupt = CorruptRecordError(
        f"partition {tp}: the batch at offset {offset} is corrupt: {error}; skip it with "
        f"seek() past its last offset, or read it with check.crcs=false"
    )
    corrupt.__cause__ = error
    return corrupt


def _undeserializable(tp: TopicPartition, offset: int, error: Exception) -> SamsaError:
    failure = RecordDeserializationError(
        f"the deserializer failed on the record at offset {offset} of {tp}: {error!r}; fix "
        f"the deserializer, or skip the record with seek(TopicPartition({tp.topic!r}, "
        f"{tp.partition}), {offset + 1})",
        tp,
        offset,
    )
    failure.__cause__ = error
    return failure
