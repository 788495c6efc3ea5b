"""The blocking producer: :class:`AsyncProducer` on a private event-loop thread.

``send()`` does on the caller's thread what needs no loop — serializing,
sizing, waiting for ``buffer.memory`` (up to ``max.block.ms``) — and hands the
record to the loop without waiting for it, so a tight send() loop costs no
thread round trip per record. Everything else runs the async core's method
and waits for it.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Mapping
from typing import Any

from samsa.client.config import ClientConfig
from samsa.client.portal import LoopThread, blocking
from samsa.client.producer.core import AsyncProducer, Headers
from samsa.client.producer.future import RecordFuture
from samsa.client.producer.types import (
    BatchDeliveryCallback,
    BatchMetadata,
    DeliveryCallback,
    RecordMetadata,
)
from samsa.records.builder import EncodedRecords
from samsa.types import TopicPartition

__all__ = ["Producer"]


class Producer:
    """Kafka producer, blocking flavour: ``producer.send(topic, value).result()``.

    Use as a context manager or call :meth:`close` (which delivers what was sent).
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        core = AsyncProducer(config)  # checks the config before a thread exists
        self._portal = LoopThread(f"samsa-{core.client_id}")
        self._core = core
        self._portal.call(core.start())

    @property
    def config(self) -> ClientConfig:
        return self._core.config

    @property
    def client_id(self) -> str:
        return self._core.client_id

    @property
    def producer_identity(self) -> tuple[int, int] | None:
        """(producer id, epoch), or None before the broker gave one (see AsyncProducer)."""
        return self._core.producer_identity

    def send(
        self,
        topic: str,
        value: Any = None,
        *,
        key: Any = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> concurrent.futures.Future[RecordMetadata]:
        """Accept a record for sending; return a future of its RecordMetadata.

        Blocks only while ``buffer.memory`` is full (up to ``max.block.ms``, then
        BufferExhaustedError). ``on_delivery(metadata, error)`` runs on the producer's
        thread when the record is delivered or fails.
        """
        core = self._core
        record = core.prepare(
            topic, value, key=key, headers=headers, partition=partition, timestamp=timestamp
        )
        # On the loop's own thread (a callback) waiting would stop the loop that frees memory.
        core.reserve_blocking(record, wait=not self._portal.in_loop_thread)
        future = RecordFuture()
        core.send_threadsafe(record, future, on_delivery)
        return future

    def send_batch(
        self,
        topic: str,
        partition: int,
        encoded: EncodedRecords,
        *,
        on_delivery: BatchDeliveryCallback | None = None,
    ) -> concurrent.futures.Future[BatchMetadata]:
        """Accept a batch of records encoded elsewhere for ``partition`` of ``topic``; return
        a future of its BatchMetadata (see :meth:`AsyncProducer.send_batch`).

        Blocks only while ``buffer.memory`` is full; the batch goes after the records
        send() accepted before it.
        """
        core = self._core
        tp = TopicPartition(topic, partition)
        core.check_encoded(tp, encoded)
        core.reserve_batch_blocking(encoded, wait=not self._portal.in_loop_thread)
        future: concurrent.futures.Future[BatchMetadata] = concurrent.futures.Future()
        core.send_batch_threadsafe(tp, encoded, future, on_delivery)
        return future

    def close(self, timeout: float | None = None) -> None:
        """Deliver what was sent (up to ``timeout`` seconds), close, stop the thread."""
        if self._portal.stopped:
            return  # closed already
        try:
            self._portal.call(self._core.close(timeout))
        finally:
            self._portal.stop()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    flush = blocking(AsyncProducer.flush)
    partitions_for = blocking(AsyncProducer.partitions_for)
    init_transactions = blocking(AsyncProducer.init_transactions)
    begin_transaction = blocking(AsyncProducer.begin_transaction)
    send_offsets_to_transaction = blocking(AsyncProducer.send_offsets_to_transaction)
    commit_transaction = blocking(AsyncProducer.commit_transaction)
    abort_transaction = blocking(AsyncProducer.abort_transaction)
