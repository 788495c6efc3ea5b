"""Partitions this broker leads: appends, reads and the waits of delayed fetches.

Single node: this broker leads every partition, the ISR is itself, and the high
watermark follows the log end offset as soon as an append returns. A delayed
fetch (Kafka's purgatory) registers a future on the partitions it reads; an
append resolves them, a timeout ends the wait — no polling.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from samsa.cluster.local import LocalMetadataStore, TopicInfo
from samsa.errors import KafkaError, for_code
from samsa.storage import AppendInfo, Log, LogConfig, LogManager
from samsa.storage.validator import AppendOrigin
from samsa.types import TopicPartition

log = logging.getLogger(__name__)

UnknownTopicOrPartitionError = for_code(3)
NotEnoughReplicasError = for_code(19)


@dataclass(eq=False)
class Partition:
    """One partition's log with its leadership state."""

    tp: TopicPartition
    log: Log
    leader_epoch: int = 0
    waiters: set[asyncio.Future[None]] = field(default_factory=set)

    def wake_waiters(self) -> None:
        for waiter in self.waiters:
            if not waiter.done():
                waiter.set_result(None)
        self.waiters.clear()


class ReplicaManager:
    """Creates partitions from the topic table and serves appends and reads on them."""

    def __init__(self, log_manager: LogManager, metadata: LocalMetadataStore, defaults: LogConfig):
        self.log_manager = log_manager
        self.metadata = metadata
        self.defaults = defaults
        self._partitions: dict[TopicPartition, Partition] = {}

    def topic_config(self, topic: str) -> LogConfig:
        info = self.metadata.get(topic)
        if info is None or not info.configs:
            return self.defaults
        return self.defaults.with_overrides(info.configs)

    def load(self) -> None:
        """Open the partitions of every known topic (the log manager has loaded the logs)."""
        for info in self.metadata.topics().values():
            self.ensure_partitions(info)
        known = set(self._partitions)
        for tp in list(self.log_manager.all_logs()):
            if tp not in known:
                log.warning("deleting log %s: its topic is not in the topic table", tp)
                self.log_manager.delete_log(tp)

    def ensure_partitions(self, info: TopicInfo) -> None:
        config = self.topic_config(info.name)
        for index in range(info.partitions):
            tp = TopicPartition(info.name, index)
            if tp not in self._partitions:
                partition_log = self.log_manager.get_or_create_log(tp, config)
                self._partitions[tp] = Partition(tp, partition_log)

    def remove_topic(self, topic: str) -> None:
        for tp in [tp for tp in self._partitions if tp.topic == topic]:
            partition = self._partitions.pop(tp)
            partition.wake_waiters()
            self.log_manager.delete_log(tp)

    def apply_config(self, topic: str) -> None:
        config = self.topic_config(topic)
        for tp in self._partitions:
            if tp.topic == topic:
                self.log_manager.update_config(tp, config)

    def partition(self, tp: TopicPartition) -> Partition:
        found = self._partitions.get(tp)
        if found is None:
            raise UnknownTopicOrPartitionError(f"this server does not host {tp}")
        return found

    def get(self, tp: TopicPartition) -> Partition | None:
        return self._partitions.get(tp)

    # -- appends ----------------------------------------------------------------------
    async def append(
        self,
        tp: TopicPartition,
        records: bytes | bytearray | memoryview,
        *,
        required_acks: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> AppendInfo:
        """Append to a partition as its leader; raises the Kafka error the batch deserves."""
        partition = self.partition(tp)
        partition_log = partition.log
        if required_acks == -1 and partition_log.config.min_insync_replicas > 1:
            raise NotEnoughReplicasError(
                f"{tp} has 1 in-sync replica; min.insync.replicas is "
                f"{partition_log.config.min_insync_replicas}"
            )
        info = partition_log.append_as_leader(
            records, leader_epoch=partition.leader_epoch, origin=origin
        )
        partition_log.update_high_watermark(partition_log.log_end_offset)
        partition.wake_waiters()
        await self.log_manager.maybe_flush(partition_log)
        return info

    # -- delayed fetch ------------------------------------------------------------------
    async def wait_for_data(self, tps: Iterable[TopicPartition], timeout_s: float) -> None:
        """Return when any of ``tps`` is appended to, or after ``timeout_s``."""
        if timeout_s <= 0:
            return
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        partitions = [p for tp in tps if (p := self._partitions.get(tp)) is not None]
        for partition in partitions:
            partition.waiters.add(waiter)
        try:
            await asyncio.wait_for(waiter, timeout_s)
        except TimeoutError:
            pass
        finally:
            for partition in partitions:
                partition.waiters.discard(waiter)

    def shutdown(self) -> None:
        for partition in self._partitions.values():
            partition.wake_waiters()


def error_code_of(exc: BaseException) -> int:
    """The Kafka error code to answer for an exception raised while serving a request."""
    if isinstance(exc, KafkaError):
        return exc.code
    return -1
