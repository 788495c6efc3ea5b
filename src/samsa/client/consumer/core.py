"""The asyncio consumer: ``records = await consumer.poll(1.0)``.

:class:`AsyncConsumer` ties together the subscription state, the fetcher
(background prefetch) and, with a ``group.id``, the group coordinator
(membership, heartbeats, commits). ``poll()`` does what Java's does, in order:
group work (rejoin when needed, auto-commit when due), positions for partitions
that lack one (the committed offset, else ``auto.offset.reset``), then returns
buffered records — waiting for the fetcher until ``timeout`` when there are none.

Positions follow what ``poll()`` returned: after a poll, a partition's position
is the offset after its last returned record, and a commit without explicit
offsets commits those positions ("consumed, not necessarily processed" — commit
after processing, or use auto-commit, which commits at the next poll).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Self

from samsa.client.admin.types import OffsetAndMetadata
from samsa.client.cluster import Cluster
from samsa.client.config import ClientConfig, consumer_config
from samsa.client.consumer.coordinator import ConsumerCoordinator
from samsa.client.consumer.fetcher import EARLIEST, LATEST, BatchDecoder, Fetcher
from samsa.client.consumer.subscription import SubscriptionMode, SubscriptionState
from samsa.client.consumer.types import ConsumerRecord, RebalanceListener
from samsa.client.errors import ClientClosedError, IllegalStateError, error_for
from samsa.client.producer.types import ConsumerGroupMetadata
from samsa.errors import ErrorCode, KafkaError
from samsa.protocol.api_keys import ApiKey
from samsa.types import TopicPartition

__all__ = ["AsyncConsumer", "CommitCallback", "NoOffsetForPartitionError"]

log = logging.getLogger(__name__)

_consumer_ids = itertools.count(1)

CommitCallback = Callable[[dict[TopicPartition, OffsetAndMetadata], BaseException | None], object]
"""``callback(offsets, error)`` of ``commit_async``; ``error`` is None on success."""


class NoOffsetForPartitionError(IllegalStateError):
    """Raised by ``poll()``/``position()`` when a partition has no committed offset and
    ``auto.offset.reset`` is ``none``: seek it, or pick earliest/latest."""


class AsyncConsumer:
    """Kafka consumer, asyncio flavour (see the module docstring).

    Use ``async with AsyncConsumer(config)`` or :meth:`start` and :meth:`close`.
    """

    def __init__(
        self, config: Mapping[str, Any], *, batch_decoder: BatchDecoder | None = None
    ) -> None:
        """``batch_decoder``: hand out each fetched batch as the decoder makes it (with
        :meth:`poll_decoded`) instead of records (see the fetcher's docstring)."""
        self.config: ClientConfig = consumer_config(config)
        config = self.config
        self.client_id: str = config["client.id"] or f"samsa-consumer-{next(_consumer_ids)}"
        self.group_id: str | None = config["group.id"]
        if self.group_id is not None and not self.group_id:
            raise error_for(
                ErrorCode.INVALID_GROUP_ID,
                "group.id must not be empty: set a name, or None for no group",
            )
        self._cluster = Cluster(
            config,
            client_id=self.client_id,
            allow_auto_topic_creation=config["allow.auto.create.topics"],
        )
        self._subscriptions = SubscriptionState(config["auto.offset.reset"])
        self._fetcher = Fetcher(
            self._cluster,
            config,
            self._subscriptions,
            key_deserializer=config["key.deserializer"],
            value_deserializer=config["value.deserializer"],
            batch_decoder=batch_decoder,
        )
        self._coordinator: ConsumerCoordinator | None = None
        if self.group_id is not None:
            self._coordinator = ConsumerCoordinator(
                self._cluster,
                config,
                self._subscriptions,
                on_assignment_change=self._fetcher.wakeup,
            )
        elif config["enable.auto.commit"] and "enable.auto.commit" in config.explicit:
            raise error_for(
                # INVALID_REQUEST stands in for Java's InvalidConfigurationException
                ErrorCode.INVALID_REQUEST,
                "enable.auto.commit=true needs a group.id to commit to",
            )
        self.max_poll_records: int = config["max.poll.records"]
        self.api_timeout_ms: int = config["default.api.timeout.ms"]
        self._committed_task: asyncio.Task[None] | None = None
        self._started = False
        self._closing = False
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Start background metadata refreshes and the fetcher (nothing is awaited)."""
        if self._started:
            return
        self._check_open()
        self._started = True
        self._cluster.start_background()
        self._fetcher.start()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError(f"consumer {self.client_id} was closed")

    async def close(self, timeout: float | None = None) -> None:
        """Commit (with auto-commit), leave the group, close connections. ``timeout``
        seconds bound the group work (None: ``default.api.timeout.ms``)."""
        if self._closed or self._closing:
            return
        self._closing = True  # the listener may still commit from on_partitions_revoked
        try:
            if self._coordinator is not None and self._started:
                limit = self.api_timeout_ms / 1000 if timeout is None else timeout
                try:
                    async with asyncio.timeout(limit):
                        await self._coordinator.close()
                except TimeoutError:
                    log.warning("%s: closing the group membership timed out", self.client_id)
        finally:
            self._closed = True
            if self._committed_task is not None:
                self._committed_task.cancel()
            await self._fetcher.close()
            await self._cluster.close()

    # -- subscription ----------------------------------------------------------------------

    def subscribe(
        self,
        topics: Iterable[str] | None = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
        listener: RebalanceListener | None = None,
    ) -> None:
        """Join the group with these topics (or the topics matching ``pattern``, a regular
        expression matched against whole names); the group assigns the partitions."""
        self._check_open()
        if self.group_id is None:
            raise IllegalStateError(
                "subscribe() needs a group.id: set one, or assign() partitions yourself"
            )
        if (topics is None) == (pattern is None):
            raise ValueError("subscribe() takes topics or a pattern (exactly one of them)")
        if isinstance(topics, str):
            topics = [topics]
        cluster = self._cluster
        if pattern is not None:
            compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
            self._subscriptions.subscribe_pattern(compiled, listener)
            cluster.track_all_topics = True
        else:
            assert topics is not None
            self._subscriptions.subscribe(topics, listener)
            cluster.track_all_topics = False
            cluster.tracked_topics.update(self._subscriptions.topics)
        cluster.request_update()

    def subscription(self) -> set[str]:
        """The subscribed topics (for a pattern: those it matches now)."""
        return set(self._subscriptions.topics) if self._subscriptions.auto_assigned else set()

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read these partitions, without group management (commits still go to
        ``group.id`` when one is set)."""
        self._check_open()
        partitions = [TopicPartition(*tp) for tp in partitions]
        self._subscriptions.assign_from_user(partitions)
        self._cluster.tracked_topics.update(tp.topic for tp in partitions)
        if any(self._cluster.leader_for(tp) is None for tp in partitions):
            self._cluster.request_update()
        self._fetcher.wakeup()

    async def unsubscribe(self) -> None:
        """Leave the group (revoking partitions, committing with auto-commit) or drop the
        assigned partitions."""
        self._check_open()
        if self._coordinator is not None and self._subscriptions.auto_assigned:
            await self._coordinator.leave_group("the consumer unsubscribed")
        self._subscriptions.unsubscribe()
        self._cluster.track_all_topics = False
        self._fetcher.wakeup()

    def assignment(self) -> set[TopicPartition]:
        return set(self._subscriptions.assignment)

    # -- poll ------------------------------------------------------------------------------

    async def poll(
        self, timeout: float = 0.0, max_records: int | None = None
    ) -> list[ConsumerRecord]:
        """Records fetched since the last poll, up to ``max_records`` (``max.poll.records``);
        waits up to ``timeout`` seconds for some. Returns [] when none arrived in time."""
        if self._fetcher.batch_decoder is not None:
            raise IllegalStateError("a consumer with a batch_decoder is polled by poll_decoded()")
        records: list[ConsumerRecord] = await self._poll(timeout, max_records)
        return records

    async def poll_decoded(self, timeout: float = 0.0, max_batches: int | None = None) -> list[Any]:
        """What the ``batch_decoder`` made of the batches fetched since the last poll, up
        to ``max_batches`` (``max.poll.records``); waits up to ``timeout`` seconds."""
        if self._fetcher.batch_decoder is None:
            raise IllegalStateError("poll_decoded() needs a consumer built with a batch_decoder")
        return await self._poll(timeout, max_batches)

    async def _poll(self, timeout: float, max_records: int | None) -> list[Any]:
        self._check_open()
        if self._subscriptions.mode is SubscriptionMode.NONE:
            raise IllegalStateError("poll() needs subscribe() or assign() first")
        await self.start()
        limit = max_records or self.max_poll_records
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout, 0.0)
        fetcher = self._fetcher
        coordinator = self._coordinator
        while True:
            if self._cluster.authentication_error is not None:
                raise self._cluster.authentication_error
            if coordinator is not None:
                await coordinator.poll(deadline)
            await self._update_positions(deadline)
            records = fetcher.drain(limit)
            if records:
                return records
            remaining = deadline - loop.time()
            if remaining <= 0:
                return []
            waits: list[asyncio.Future[Any]] = [loop.create_task(fetcher.data.wait())]
            if coordinator is not None:
                waits.append(loop.create_task(coordinator.attention.wait()))
            if self._committed_task is not None and not self._committed_task.done():
                waits.append(self._committed_task)
            try:
                await asyncio.wait(waits, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in waits:
                    if task is not self._committed_task:
                        task.cancel()
            if not fetcher.has_data() and loop.time() >= deadline:
                return []

    async def _update_positions(self, deadline: float) -> None:
        """Start looking up the committed offsets of partitions without a position (the
        fetcher resets those without one to ``auto.offset.reset``); wait until
        ``deadline`` at most."""
        task = self._committed_task
        if task is not None and task.done():
            self._committed_task = None
            task.result()  # raises NoOffsetForPartitionError, or a fatal lookup error
        subscriptions = self._subscriptions
        missing = [
            tp for tp in subscriptions.missing_positions() if subscriptions.state(tp).reset is None
        ]
        if not missing:
            return
        if self._committed_task is None:
            self._committed_task = asyncio.get_running_loop().create_task(
                self._apply_committed(missing)
            )
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining > 0:
            await asyncio.wait([self._committed_task], timeout=remaining)
        task = self._committed_task
        if task is not None and task.done():
            self._committed_task = None
            task.result()

    async def _apply_committed(self, partitions: list[TopicPartition]) -> None:
        committed: Mapping[TopicPartition, OffsetAndMetadata | None] = {}
        if self._coordinator is not None:
            try:
                committed = await self._coordinator.fetch_committed(
                    partitions, timeout_ms=self.api_timeout_ms
                )
            except KafkaError as exc:
                if not exc.retriable and not isinstance(exc, TimeoutError):
                    raise
                log.info("%s: committed offsets lookup failed (will retry): %s",
                         self.client_id, exc)  # fmt: skip
                return
        subscriptions = self._subscriptions
        to_reset = []
        for tp in partitions:
            state = subscriptions.assignment.get(tp)
            if state is None or state.position is not None or state.reset is not None:
                continue  # reassigned, sought or reset meanwhile
            found = committed.get(tp)
            if found is not None:
                state.position = found.offset
                state.leader_epoch = found.leader_epoch
            else:
                to_reset.append(tp)
        if to_reset:
            strategy = subscriptions.default_reset
            if strategy == "none":
                raise NoOffsetForPartitionError(
                    "no committed offset for "
                    + ", ".join(map(str, to_reset))
                    + " and auto.offset.reset is none: seek() them, or set auto.offset.reset "
                    "to earliest or latest"
                )
            subscriptions.request_reset(to_reset, strategy)
        subscriptions.epoch += 1
        self._fetcher.wakeup()

    # -- positions -------------------------------------------------------------------------

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Fetch ``partition`` from ``offset`` at the next poll."""
        self._check_open()
        self._subscriptions.seek(TopicPartition(*partition), offset)
        self._fetcher.wakeup()

    def _partitions(self, partitions: Iterable[TopicPartition] | None) -> list[TopicPartition]:
        if partitions is None:
            return list(self._subscriptions.assignment)
        return [TopicPartition(*tp) for tp in partitions]

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Start these partitions (all assigned: None) at their first offset."""
        self._check_open()
        self._subscriptions.request_reset(self._partitions(partitions), "earliest")
        self._fetcher.wakeup()

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Start these partitions (all assigned: None) at their end (the LSO when
        ``read_committed``)."""
        self._check_open()
        self._subscriptions.request_reset(self._partitions(partitions), "latest")
        self._fetcher.wakeup()

    async def position(self, partition: TopicPartition, timeout: float | None = None) -> int:
        """The offset the next record of ``partition`` will have (looked up if needed)."""
        self._check_open()
        await self.start()
        tp = TopicPartition(*partition)
        state = self._subscriptions.state(tp)
        loop = asyncio.get_running_loop()
        limit = self.api_timeout_ms / 1000 if timeout is None else timeout
        deadline = loop.time() + limit
        while state.position is None:
            if state.reset is None:
                await self._update_positions(deadline)
            if state.position is None and state.reset is not None:
                spec = EARLIEST if state.reset == "earliest" else LATEST
                found = await self._fetcher.list_offsets(
                    {tp: spec}, timeout_ms=max(int((deadline - loop.time()) * 1000), 0)
                )
                if state.position is None and state.reset is not None:
                    state.position, _timestamp, state.leader_epoch = found[tp]
                    state.reset = None
            if state.position is None and loop.time() >= deadline:
                raise error_for(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"the position of {tp} was not found within {limit} s",
                )
            state = self._subscriptions.state(tp)
        return state.position

    async def committed(
        self, partitions: Iterable[TopicPartition], timeout: float | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets of ``partitions`` (None: nothing committed)."""
        coordinator = self._require_group("committed()")
        await self.start()
        return await coordinator.fetch_committed(
            [TopicPartition(*tp) for tp in partitions], timeout_ms=self._timeout_ms(timeout)
        )

    def _timeout_ms(self, timeout: float | None) -> int:
        return self.api_timeout_ms if timeout is None else int(timeout * 1000)

    def _require_group(self, what: str) -> ConsumerCoordinator:
        self._check_open()
        if self._coordinator is None:
            raise IllegalStateError(f"{what} needs a group.id in the consumer's config")
        return self._coordinator

    def _offsets(
        self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        assert self._coordinator is not None
        if offsets is None:
            return self._coordinator.consumed()
        out = {}
        for tp, value in offsets.items():
            if isinstance(value, OffsetAndMetadata):
                out[TopicPartition(*tp)] = value
            elif isinstance(value, int) and value >= 0:
                out[TopicPartition(*tp)] = OffsetAndMetadata(value)
            else:
                raise ValueError(f"offset to commit for {tp} must be an int >= 0, not {value!r}")
        return out

    async def commit(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None,
        timeout: float | None = None,
    ) -> None:
        """Commit ``offsets`` (default: the positions of every assigned partition) and wait.
        An offset is the next record to read: the last processed offset + 1."""
        coordinator = self._require_group("commit()")
        await self.start()
        await coordinator.commit(self._offsets(offsets), timeout_ms=self._timeout_ms(timeout))

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None,
        callback: CommitCallback | None = None,
    ) -> asyncio.Task[None]:
        """Commit without waiting; ``callback(offsets, error)`` runs when done (on the
        consumer's loop: keep it short). Failures without a callback are logged."""
        coordinator = self._require_group("commit_async()")
        return coordinator.commit_in_background(self._offsets(offsets), callback)

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop returning (and fetching) records of these partitions until resume()."""
        self._subscriptions.pause(self._partitions(partitions))
        self._fetcher.update_data_flag()

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self._subscriptions.resume(self._partitions(partitions))
        self._fetcher.update_data_flag()
        self._fetcher.wakeup()

    def paused(self) -> set[TopicPartition]:
        return self._subscriptions.paused()

    # -- offsets and metadata --------------------------------------------------------------

    async def _list_offsets(
        self, specs: Mapping[TopicPartition, int], timeout: float | None
    ) -> dict[TopicPartition, tuple[int, int, int]]:
        self._check_open()
        await self.start()
        return await self._fetcher.list_offsets(
            {TopicPartition(*tp): spec for tp, spec in specs.items()},
            timeout_ms=self._timeout_ms(timeout),
        )

    async def beginning_offsets(
        self, partitions: Iterable[TopicPartition], timeout: float | None = None
    ) -> dict[TopicPartition, int]:
        """The first offset of each partition."""
        found = await self._list_offsets({tp: EARLIEST for tp in partitions}, timeout)
        return {tp: offset for tp, (offset, _ts, _epoch) in found.items()}

    async def end_offsets(
        self, partitions: Iterable[TopicPartition], timeout: float | None = None
    ) -> dict[TopicPartition, int]:
        """The offset after the last record (the last stable offset with read_committed)."""
        found = await self._list_offsets({tp: LATEST for tp in partitions}, timeout)
        return {tp: offset for tp, (offset, _ts, _epoch) in found.items()}

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout: float | None = None
    ) -> dict[TopicPartition, tuple[int, int] | None]:
        """(offset, timestamp) of the first record at or after each timestamp (epoch ms);
        None when there is no such record."""
        for tp, ts in timestamps.items():
            if not isinstance(ts, int) or ts < 0:
                raise ValueError(f"timestamp for {tp} must be an int >= 0 (ms), not {ts!r}")
        found = await self._list_offsets(timestamps, timeout)
        return {
            tp: None if offset < 0 else (offset, ts) for tp, (offset, ts, _epoch) in found.items()
        }

    async def list_topics(self, timeout: float | None = None) -> dict[str, list[int]]:
        """Every topic the cluster has, with its partition numbers."""
        self._check_open()
        cluster = self._cluster

        async def attempt() -> Any:
            return await cluster.send(
                None, ApiKey.METADATA, {"topics": None, "allow_auto_topic_creation": False}
            )

        response = await cluster.retrying(
            attempt, timeout_ms=self._timeout_ms(timeout), what="Metadata"
        )
        return {
            t.name: sorted(int(p.partition_index) for p in t.partitions)
            for t in response.topics
            if int(t.error_code) == ErrorCode.NONE
        }

    async def partitions_for(self, topic: str, timeout: float | None = None) -> list[int] | None:
        """The partition numbers of ``topic``; None if it does not exist."""
        self._check_open()
        started = time.monotonic()
        limit = self._timeout_ms(timeout) / 1000
        while True:
            await self._cluster.refresh([topic])
            partitions = self._cluster.partitions_for(topic)
            if partitions is not None:
                return [p.partition for p in partitions]
            if topic in self._cluster.topic_errors or time.monotonic() - started > limit:
                return None
            await asyncio.sleep(self._cluster.retry_backoff.initial_ms / 1000)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This member's group, generation and ids, for a transactional producer's
        ``send_offsets_to_transaction`` (so the group fences offsets of a replaced member)."""
        coordinator = self._require_group("group_metadata()")
        generation = coordinator.generation
        return ConsumerGroupMetadata(
            coordinator.group_id,
            generation.generation_id,
            generation.member_id,
            coordinator.instance_id,
        )
