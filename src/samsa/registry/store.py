"""The ``_schemas`` topic as the registry's write-ahead log (Confluent's KafkaStore).

The registry reaches its topic as any Kafka client would, through samsa's own
asyncio clients connected to the broker it runs in: a producer (``acks=all``,
idempotent) for writes and one reader, a consumer of the topic's single partition
from its beginning, that applies every record to the state in topic order.

A write returns once the reader has applied it (read-your-writes): the caller
produces, learns the record's offset, and waits for the reader to pass it. At
start the reader first catches up to the end offset it finds, so the registry
answers nothing before it has rebuilt its state. The topic is created at first
start: one partition, ``cleanup.policy=compact`` (Confluent's settings).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from samsa.client import AsyncAdmin, AsyncConsumer, AsyncProducer
from samsa.client.admin.types import NewTopic
from samsa.errors import SamsaError, TopicAlreadyExistsError
from samsa.registry.errors import STORE_ERROR, STORE_TIMEOUT, RegistryError
from samsa.types import TopicPartition

log = logging.getLogger(__name__)

Apply = Callable[[bytes | None, bytes | None], None]


class SchemaTopic:
    """Writes records to the topic and applies what it reads back, in order."""

    def __init__(
        self,
        client_config: Mapping[str, Any],
        topic: str,
        apply: Apply,
        *,
        replication_factor: int = 3,
        timeout_s: float = 30.0,
    ) -> None:
        self.topic = topic
        self._tp = TopicPartition(topic, 0)
        self._client_config = dict(client_config)
        self._apply = apply
        self._replication_factor = replication_factor
        self.timeout_s = timeout_s
        self._producer: AsyncProducer | None = None
        self._consumer: AsyncConsumer | None = None
        self._reader: asyncio.Task[None] | None = None
        self.next_offset = 0
        """The offset after the last record applied."""
        self._progress = asyncio.Condition()

    async def start(self) -> None:
        """Create the topic if need be, then read it to its end before returning."""
        await self._create_topic()
        self._consumer = AsyncConsumer(
            {
                **self._client_config,
                "group.id": None,
                "enable.auto.commit": False,
                "fetch.max.wait.ms": 500,
                "client.id": "schema-registry-reader",
            }
        )
        await self._consumer.start()
        self._consumer.assign([self._tp])
        self._consumer.seek_to_beginning([self._tp])
        end = (await self._consumer.end_offsets([self._tp], timeout=self.timeout_s))[self._tp]
        self._producer = AsyncProducer(
            {
                **self._client_config,
                "acks": "all",
                "linger.ms": 0,  # one record per write, waited for: nothing to batch
                "client.id": "schema-registry-writer",
            }
        )
        await self._producer.start()
        self._reader = asyncio.get_running_loop().create_task(self._read())
        await self.wait_applied(end)
        log.info("schema registry: read %s to offset %d", self.topic, end)

    async def _create_topic(self) -> None:
        """One compacted partition with ``replication_factor`` replicas, fewer when fewer
        brokers are alive (as Confluent's store does: one broker gets one replica)."""
        admin = AsyncAdmin({**self._client_config, "client.id": "schema-registry-admin"})
        try:
            brokers = len((await admin.describe_cluster()).nodes)
            replicas = max(min(self._replication_factor, brokers), 1)
            if replicas < self._replication_factor:
                log.warning(
                    "schema registry: %s gets %d replicas (%d brokers alive, %d wanted)",
                    self.topic, replicas, brokers, self._replication_factor,
                )  # fmt: skip
            await admin.create_topics(
                [NewTopic(self.topic, 1, replicas, {"cleanup.policy": "compact"})]
            )
        except TopicAlreadyExistsError:
            pass
        finally:
            await admin.close()

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        if self._producer is not None:
            await self._producer.close(timeout=5)
        if self._consumer is not None:
            await self._consumer.close(timeout=5)

    async def _read(self) -> None:
        assert self._consumer is not None
        while True:
            try:
                found = await self._consumer.poll(timeout=1.0, max_records=1000)
            except SamsaError as exc:
                log.warning("schema registry: reading %s failed (retrying): %s", self.topic, exc)
                await asyncio.sleep(1.0)
                continue
            for record in found:
                try:
                    self._apply(record.key, record.value)
                except Exception:
                    # A defect in applying one record: skipping it keeps the registry
                    # answering (and its writers from waiting forever); the log shows it.
                    log.exception("schema registry: record %d of %s not applied",
                                  record.offset, self.topic)  # fmt: skip
                self.next_offset = record.offset + 1
            with contextlib.suppress(SamsaError):
                # Past records compaction removed, and the end of an empty topic.
                self.next_offset = max(self.next_offset, await self._consumer.position(self._tp))
            async with self._progress:
                self._progress.notify_all()

    async def wait_applied(self, end_offset: int) -> None:
        """Wait until the reader has applied every record before ``end_offset``."""
        try:
            async with asyncio.timeout(self.timeout_s), self._progress:
                await self._progress.wait_for(lambda: self.next_offset >= end_offset)
        except TimeoutError:
            raise RegistryError(
                500, STORE_TIMEOUT, f"timed out reading {self.topic} to offset {end_offset}"
            ) from None

    async def write(self, *items: tuple[bytes, bytes | None]) -> None:
        """Append records (key, value or None for a tombstone) and wait until they are applied."""
        assert self._producer is not None
        last = -1
        try:
            async with asyncio.timeout(self.timeout_s):
                futures = [
                    await self._producer.send(self.topic, value, key=key, partition=0)
                    for key, value in items
                ]
                for future in futures:
                    last = max(last, (await future).offset)
        except TimeoutError:
            raise RegistryError(500, STORE_TIMEOUT, f"timed out writing to {self.topic}") from None
        except SamsaError as exc:
            raise RegistryError(
                500, STORE_ERROR, f"writing to {self.topic} failed: {exc}"
            ) from None
        await self.wait_applied(last + 1)
