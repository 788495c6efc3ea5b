"""Followers fetching from their leaders (Kafka's ``ReplicaFetcherManager`` and threads).

One :class:`ReplicaFetcher` task per leader broker fetches every partition this
broker follows there, over one connection, with the Fetch API and this
broker's id as the replica id, as Kafka's followers do:

1. **Truncation first** (KIP-101/279). A partition that starts following —
   a new leader, a new epoch — asks the leader where its own latest epoch
   ended (OffsetForLeaderEpoch) and cuts its log there, so it never keeps
   records the new leader does not have at the same offsets. If the leader
   does not know that epoch, the follower cuts to where its own largest epoch
   below the leader's answer ends and asks again; a leader that knows no epoch
   at all is answered by cutting to the high watermark.
2. **Fetching** from the log end: the leader's batches are appended unchanged
   (offsets, epochs and CRCs as the leader wrote them) and the leader's high
   watermark is taken, never past the local log end. The fetch's offset tells
   the leader this follower's log end, which moves the high watermark and the
   ISR there. A partition whose log is behind the leader's log start starts
   again at the leader's log start.

A fetcher that cannot reach its leader, or gets an error for a partition
(leadership moved: NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH…), backs off
``replica.fetch.backoff.ms`` and tries again; a partition whose leader changed
is moved to another fetcher by the replica manager as the new state arrives.
Everything runs on the broker's loop: the fetchers are one more caller of the
partitions' owner, never a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from samsa.broker.replication.partition import Partition
from samsa.client.connection import BrokerConnection
from samsa.client.security import ClientSecurity
from samsa.errors import BrokerNotAvailableError, ErrorCode, KafkaStorageError, SamsaError
from samsa.protocol.api_keys import ApiKey
from samsa.records.batch import batch_size_at
from samsa.storage.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from samsa.types import TopicPartition

log = logging.getLogger(__name__)

_STOP_TIMEOUT_S = 5.0
"""How long :meth:`ReplicaFetcher.stop` waits for the loop to end."""

FETCH_VERSION = 12  # replica id and topic names; truncation goes through OffsetForLeaderEpoch
LIST_OFFSETS_VERSION = 7
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
EARLIEST_TIMESTAMP = -2
_TRUNCATION_ROUNDS = 8


@dataclass(frozen=True, slots=True)
class FetcherConfig:
    """Kafka's ``replica.fetch.*`` settings."""

    wait_max_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 1_048_576
    response_max_bytes: int = 10_485_760
    backoff_ms: int = 1000
    socket_timeout_ms: int = 30_000
    security: ClientSecurity = field(default_factory=ClientSecurity)
    """How to connect to leaders (the inter-broker listener's TLS and SASL)."""


Endpoint = tuple[str, int]


@dataclass(slots=True)
class _Following:
    partition: Partition
    epoch: int
    """The leader epoch this fetcher follows the partition in."""
    truncated: bool = False


def whole_batches(data: bytes) -> memoryview:
    """The leading whole batches of ``data`` (a fetch may end in the middle of one)."""
    end = 0
    while (size := batch_size_at(data, end)) is not None and end + size <= len(data):
        end += size
    return memoryview(data)[:end]


def truncation_point(
    end_offset_for_epoch: Callable[[int], tuple[int, int]],
    log_end_offset: int,
    high_watermark: int,
    leader_epoch: int,
    leader_end_offset: int,
) -> tuple[int, int | None]:
    """Where a follower cuts its log after the leader answered OffsetForLeaderEpoch with
    ``(leader_epoch, leader_end_offset)``, and the epoch to ask about next (None: done).

    Kafka's rules (``AbstractFetcherThread``): a leader that knows no epoch at all
    (end offset -1) leaves the follower only what was committed, its high watermark;
    if the follower had the leader's epoch, it keeps what both wrote in it, up to the
    earlier of their two end offsets; if it never had that epoch, it cuts to where its
    own largest epoch below ends and asks about that one.
    """
    if leader_end_offset == UNDEFINED_EPOCH_OFFSET:
        return min(high_watermark, log_end_offset), None
    own_epoch, own_end = end_offset_for_epoch(leader_epoch)
    if own_epoch == leader_epoch:
        return min(leader_end_offset, own_end, log_end_offset), None
    if own_epoch == UNDEFINED_EPOCH:
        return min(leader_end_offset, log_end_offset), None
    return min(own_end, log_end_offset), own_epoch


class ReplicaFetcher:
    """Fetches the partitions this broker follows on one leader broker (one task)."""

    def __init__(
        self,
        leader_id: int,
        local_id: int,
        endpoint_of: Callable[[int], Endpoint | None],
        config: FetcherConfig,
        flush: Callable[[Partition], Awaitable[None]],
    ) -> None:
        self.leader_id = leader_id
        self.local_id = local_id
        self._endpoint_of = endpoint_of
        self.config = config
        self._flush = flush
        self.partitions: dict[TopicPartition, _Following] = {}
        self._work = asyncio.Event()
        self._connection: BrokerConnection | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def add(self, partition: Partition) -> None:
        self.partitions[partition.tp] = _Following(partition, partition.leader_epoch)
        self._work.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"replica-fetcher-{self.local_id}-from-{self.leader_id}"
            )

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    def reconnect(self) -> None:
        """The leader's address changed: the next fetch opens a new connection."""
        connection, self._connection = self._connection, None
        if connection is not None:
            asyncio.get_running_loop().create_task(connection.close())

    async def stop(self) -> None:
        """End the loop and close its connection (a request in flight fails at once).

        The loop also ends by itself on its next turn: Python 3.11's ``wait_for`` can
        lose a cancellation that races with its own timeout, and a fetcher that then
        carried on kept a broker from stopping. The wait here is bounded all the same.
        """
        self._stopping = True
        task, self._task = self._task, None
        connection, self._connection = self._connection, None
        if task is not None:
            task.cancel()
        if connection is not None:
            await connection.close()
        if task is None:
            return
        done, _ = await asyncio.wait({task}, timeout=_STOP_TIMEOUT_S)
        if not done:
            log.warning("the fetcher from broker %d did not stop within %.0f s; leaving it",
                        self.leader_id, _STOP_TIMEOUT_S)  # fmt: skip
        elif not task.cancelled():
            task.exception()  # retrieved: _run logs what it does not handle

    # -- the loop -------------------------------------------------------------------------
    async def _run(self) -> None:
        backoff_s = self.config.backoff_ms / 1000
        while not self._stopping:
            if not self.partitions:
                self._work.clear()
                await self._work.wait()
                continue
            try:
                connection = await self._connect()
                if any(not f.truncated for f in self.partitions.values()):
                    await self._truncate(connection)
                if any(f.truncated for f in self.partitions.values()):
                    await self._fetch(connection)
                else:
                    await self._back_off()
            except asyncio.CancelledError:
                raise
            except (SamsaError, OSError) as exc:
                log.info("fetching from broker %d: %s; retrying in %.1f s", self.leader_id, exc,
                         backoff_s)  # fmt: skip
                self.reconnect()
                await self._back_off()
            except Exception:
                log.exception("fetching from broker %d failed; retrying", self.leader_id)
                self.reconnect()
                await self._back_off()

    async def _back_off(self) -> None:
        """Wait ``replica.fetch.backoff.ms``, or less if a partition is added meanwhile (a
        new state to follow: its truncation need not wait for the pause to end)."""
        self._work.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._work.wait(), self.config.backoff_ms / 1000)

    async def _connect(self) -> BrokerConnection:
        connection = self._connection
        if connection is not None and connection.usable:
            return connection
        endpoint = self._endpoint_of(self.leader_id)
        if endpoint is None:
            raise BrokerNotAvailableError(f"broker {self.leader_id} is not registered")
        connection = BrokerConnection(
            endpoint[0],
            endpoint[1],
            node_id=self.leader_id,
            client_id=f"samsa-replica-fetcher-{self.local_id}",
            request_timeout_ms=self.config.socket_timeout_ms,
            security=self.config.security,
        )
        self._connection = await connection.open()
        if self._stopping:  # stopped while connecting
            self._connection = None
            await connection.close()
            raise asyncio.CancelledError
        return connection

    def _current(self, tp: TopicPartition, following: _Following) -> bool:
        """Whether ``following`` is still what this fetcher does for ``tp``."""
        return (
            self.partitions.get(tp) is following
            and following.partition.leader_epoch == following.epoch
            and following.partition.leader_id == self.leader_id
        )

    # -- truncation -----------------------------------------------------------------------
    async def _truncate(self, connection: BrokerConnection) -> None:
        pending = {tp: f for tp, f in self.partitions.items() if not f.truncated}
        asking = {tp: f.partition.log.latest_epoch for tp, f in pending.items()}
        for _ in range(_TRUNCATION_ROUNDS):
            if not asking:
                return
            answers = await self._end_offsets(connection, pending, asking)
            asking = {}
            for tp, (code, leader_epoch, end_offset) in answers.items():
                following = pending[tp]
                if not self._current(tp, following):
                    continue
                if code:
                    log.info("%s: OffsetForLeaderEpoch from %d: %s", tp, self.leader_id,
                             ErrorCode(code).name)  # fmt: skip
                    continue  # a newer state will come (or the next round asks again)
                again = self._apply_end_offset(following, leader_epoch, end_offset)
                if again is not None:
                    asking[tp] = again
                else:
                    following.truncated = True

    async def _end_offsets(
        self,
        connection: BrokerConnection,
        pending: dict[TopicPartition, _Following],
        asking: dict[TopicPartition, int],
    ) -> dict[TopicPartition, tuple[int, int, int]]:
        answers: dict[TopicPartition, tuple[int, int, int]] = {}
        empty = [tp for tp, epoch in asking.items() if epoch == UNDEFINED_EPOCH]
        for tp in empty:
            # A log that holds no epoch asks nothing: it keeps only what the leader
            # committed (its high watermark), as Kafka does without epoch information.
            answers[tp] = (ErrorCode.NONE, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        by_topic: dict[str, list[dict[str, int]]] = {}
        for tp, epoch in asking.items():
            if epoch != UNDEFINED_EPOCH:
                by_topic.setdefault(tp.topic, []).append(
                    {
                        "partition": tp.partition,
                        "current_leader_epoch": pending[tp].epoch,
                        "leader_epoch": epoch,
                    }
                )
        if by_topic:
            response = await connection.request(
                ApiKey.OFFSET_FOR_LEADER_EPOCH,
                {
                    "replica_id": self.local_id,
                    "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
                },
                version=OFFSET_FOR_LEADER_EPOCH_VERSION,
            )
            for topic in response.topics:
                for p in topic.partitions:
                    tp = TopicPartition(topic.topic, p.partition)
                    if tp in asking:
                        answers[tp] = (int(p.error_code), int(p.leader_epoch), int(p.end_offset))
        return answers

    def _apply_end_offset(
        self, following: _Following, leader_epoch: int, end_offset: int
    ) -> int | None:
        """Truncate by the leader's answer; the epoch to ask about next, or None when done."""
        partition = following.partition
        partition_log = partition.log
        target, again = truncation_point(
            partition_log.end_offset_for_epoch,
            partition_log.log_end_offset,
            partition_log.high_watermark,
            leader_epoch,
            end_offset,
        )
        if target < partition_log.log_end_offset:
            log.info("%s: truncating from %d to %d to follow broker %d in epoch %d",
                     partition.tp, partition_log.log_end_offset, target, self.leader_id,
                     following.epoch)  # fmt: skip
            partition_log.truncate_to(target)
        return again

    # -- fetching -------------------------------------------------------------------------
    async def _fetch(self, connection: BrokerConnection) -> None:
        sent = {tp: f for tp, f in self.partitions.items() if f.truncated}
        by_topic: dict[str, list[dict[str, int]]] = {}
        for tp, following in sent.items():
            partition_log = following.partition.log
            by_topic.setdefault(tp.topic, []).append(
                {
                    "partition": tp.partition,
                    "current_leader_epoch": following.epoch,
                    "fetch_offset": partition_log.log_end_offset,
                    "last_fetched_epoch": -1,
                    "log_start_offset": partition_log.log_start_offset,
                    "partition_max_bytes": self.config.max_bytes,
                }
            )
        config = self.config
        body = {
            "replica_id": self.local_id,
            "max_wait": config.wait_max_ms,
            "min_bytes": config.min_bytes,
            "max_bytes": config.response_max_bytes,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        response = await connection.request(
            ApiKey.FETCH,
            body,
            version=FETCH_VERSION,
            timeout_ms=config.wait_max_ms + config.socket_timeout_ms,
        )
        failed = False
        for topic in response.responses:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition_index)
                sent_for = sent.get(tp)
                if sent_for is None or not self._current(tp, sent_for):
                    continue
                following = sent_for
                code = int(p.error_code)
                if code == ErrorCode.NONE:
                    await self._append(following, p)
                elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    await self._reset_out_of_range(connection, following)
                else:
                    failed = True
                    log.info("%s: fetch from broker %d: %s", tp, self.leader_id,
                             ErrorCode(code).name)  # fmt: skip
        if failed:
            # Leadership moved (or is moving): wait for the new state, without spinning.
            await self._back_off()

    async def _append(self, following: _Following, data: object) -> None:
        partition = following.partition
        partition_log = partition.log
        records = getattr(data, "records", None) or b""
        batches = whole_batches(records)
        leader_high_watermark = int(getattr(data, "high_watermark", -1))
        try:
            partition.append_as_follower(batches, leader_high_watermark)
        except (KafkaStorageError, OSError) as exc:
            log.error("%s: follower append failed: %s", partition.tp, exc)
            return
        except SamsaError as exc:
            # Batches that do not follow the log end: the log diverged, truncate again.
            log.warning("%s: follower append refused (%s); truncating again", partition.tp, exc)
            following.truncated = False
            return
        leader_log_start = int(getattr(data, "log_start_offset", -1))
        if leader_log_start > partition_log.log_start_offset:
            target = min(leader_log_start, partition_log.high_watermark)
            if target > partition_log.log_start_offset:
                partition_log.delete_records_before(target)
        if len(batches):
            await self._flush(partition)

    async def _reset_out_of_range(
        self, connection: BrokerConnection, following: _Following
    ) -> None:
        """The follower's log end is outside the leader's log: start again at its log start
        if the follower is behind it, else truncate again."""
        partition = following.partition
        tp = partition.tp
        response = await connection.request(
            ApiKey.LIST_OFFSETS,
            {
                "replica_id": self.local_id,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": tp.topic,
                        "partitions": [
                            {
                                "partition_index": tp.partition,
                                "current_leader_epoch": following.epoch,
                                "timestamp": EARLIEST_TIMESTAMP,
                            }
                        ],
                    }
                ],
            },
            version=LIST_OFFSETS_VERSION,
        )
        earliest = -1
        for topic in response.topics:
            for p in topic.partitions:
                if not p.error_code:
                    earliest = int(p.offset)
        if not self._current(tp, following) or earliest < 0:
            return
        partition_log = partition.log
        if partition_log.log_end_offset < earliest:
            log.warning("%s: log end %d is before broker %d's log start %d: starting there",
                        tp, partition_log.log_end_offset, self.leader_id, earliest)  # fmt: skip
            partition_log.truncate_fully_and_start_at(earliest)
        else:
            following.truncated = False


class ReplicaFetcherManager:
    """Assigns each followed partition to the fetcher of its leader."""

    def __init__(
        self,
        local_id: int,
        endpoint_of: Callable[[int], Endpoint | None],
        config: FetcherConfig,
        flush: Callable[[Partition], Awaitable[None]],
    ) -> None:
        self.local_id = local_id
        self._endpoint_of = endpoint_of
        self.config = config
        self._flush = flush
        self._fetchers: dict[int, ReplicaFetcher] = {}
        self._leader_of: dict[TopicPartition, int] = {}

    def follow(self, partition: Partition) -> None:
        self.unfollow(partition.tp)
        leader = partition.leader_id
        fetcher = self._fetchers.get(leader)
        if fetcher is None:
            fetcher = ReplicaFetcher(
                leader, self.local_id, self._endpoint_of, self.config, self._flush
            )
            self._fetchers[leader] = fetcher
        fetcher.add(partition)
        self._leader_of[partition.tp] = leader

    def unfollow(self, tp: TopicPartition) -> None:
        leader = self._leader_of.pop(tp, None)
        if leader is not None:
            self._fetchers[leader].remove(tp)

    def following(self) -> dict[TopicPartition, int]:
        """Each followed partition and the broker it fetches from."""
        return dict(self._leader_of)

    def brokers_changed(self, changed: set[int]) -> None:
        """These brokers re-registered (perhaps at another address): reconnect to them."""
        for broker in changed:
            fetcher = self._fetchers.get(broker)
            if fetcher is not None:
                fetcher.reconnect()

    async def shutdown(self) -> None:
        for fetcher in self._fetchers.values():
            await fetcher.stop()
        self._fetchers.clear()
        self._leader_of.clear()
