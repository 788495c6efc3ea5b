"""The blocking consumer: :class:`AsyncConsumer` on a private event-loop thread.

Fetching and heartbeats run on the loop thread all the time, so a slow
application loses nothing but ``max.poll.interval.ms``. Rebalance listener
callbacks are the exception to "everything runs on the loop": Java runs them
inside ``poll()`` on the application's thread, where they may call the
consumer (commit the revoked partitions, seek the assigned ones). Here too:
``poll()``, ``unsubscribe()`` and ``close()`` wait on a queue while the loop
works, and the listener's calls arrive on that queue and run on the calling
thread; the consumer's other blocking methods work from inside them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import re
import threading
from collections.abc import Callable, Collection, Coroutine, Iterable, Mapping
from typing import Any, TypeVar

from samsa.client.admin.types import OffsetAndMetadata
from samsa.client.config import ClientConfig
from samsa.client.consumer.core import AsyncConsumer, CommitCallback
from samsa.client.consumer.fetcher import BatchDecoder
from samsa.client.consumer.types import ConsumerRecord, RebalanceListener
from samsa.client.portal import LoopThread, blocking
from samsa.client.producer.types import ConsumerGroupMetadata
from samsa.types import TopicPartition

__all__ = ["Consumer"]

R = TypeVar("R")
_DONE = object()


class _ThreadListener:
    """Runs a listener's methods on the thread waiting in the consumer (see the module)."""

    def __init__(self, consumer: Consumer, listener: RebalanceListener) -> None:
        self._consumer = consumer
        self._listener = listener

    def _call(self, name: str, partitions: Collection[TopicPartition]) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._consumer._calls.put((getattr(self._listener, name), partitions, future))
        return future

    def on_partitions_revoked(self, partitions: Collection[TopicPartition]) -> Any:
        return self._call("on_partitions_revoked", partitions)

    def on_partitions_assigned(self, partitions: Collection[TopicPartition]) -> Any:
        return self._call("on_partitions_assigned", partitions)

    def on_partitions_lost(self, partitions: Collection[TopicPartition]) -> Any:
        return self._call("on_partitions_lost", partitions)


class Consumer:
    """Kafka consumer, blocking flavour: ``for record in consumer.poll(1.0): ...``.

    Use as a context manager or call :meth:`close`. Not thread-safe (as Java's): one
    thread uses it, callbacks included.
    """

    def __init__(
        self, config: Mapping[str, Any], *, batch_decoder: BatchDecoder | None = None
    ) -> None:
        # checks the config before a thread exists
        core = AsyncConsumer(config, batch_decoder=batch_decoder)
        self._portal = LoopThread(f"samsa-{core.client_id}")
        self._core = core
        self._calls: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._waiting_thread: threading.Thread | None = None
        self._portal.call(core.start())

    @property
    def config(self) -> ClientConfig:
        return self._core.config

    @property
    def client_id(self) -> str:
        return self._core.client_id

    def _run_with_callbacks(self, coroutine: Coroutine[Any, Any, R]) -> R:
        """Run ``coroutine`` on the loop; meanwhile run listener calls on this thread."""
        if self._waiting_thread is threading.current_thread():
            return self._portal.call(coroutine)  # nested, from inside a listener
        future = self._portal.submit(coroutine)
        future.add_done_callback(lambda _f: self._calls.put(_DONE))
        self._waiting_thread = threading.current_thread()
        try:
            while True:
                item = self._calls.get()
                if item is _DONE:
                    if future.done():
                        return future.result()
                    continue  # a marker of an earlier call that was interrupted
                self._run_listener_call(*item)
        except BaseException:
            future.cancel()
            raise
        finally:
            self._waiting_thread = None

    def _run_listener_call(
        self,
        method: Callable[[Collection[TopicPartition]], object],
        partitions: Collection[TopicPartition],
        done: asyncio.Future[None],
    ) -> None:
        error: BaseException | None = None
        try:
            method(partitions)
        except Exception as exc:
            error = exc

        def finish() -> None:
            if done.done():
                return
            if error is not None:
                done.set_exception(error)
            else:
                done.set_result(None)

        self._portal.call_soon(finish)

    # -- subscription ----------------------------------------------------------------------

    def subscribe(
        self,
        topics: Iterable[str] | None = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
        listener: RebalanceListener | None = None,
    ) -> None:
        """Join the group with these topics or the topics matching ``pattern``; the
        listener's methods run on the thread that calls poll()."""
        wrapped = _ThreadListener(self, listener) if listener is not None else None
        self._portal.call(_call(self._core.subscribe, topics, pattern=pattern, listener=wrapped))

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._portal.call(_call(self._core.assign, list(partitions)))

    def unsubscribe(self) -> None:
        self._run_with_callbacks(self._core.unsubscribe())

    def poll(self, timeout: float = 0.0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records fetched since the last poll (up to ``max_records``), waiting up to
        ``timeout`` seconds for some."""
        return self._run_with_callbacks(self._core.poll(timeout, max_records))

    def poll_decoded(self, timeout: float = 0.0, max_batches: int | None = None) -> list[Any]:
        """What the ``batch_decoder`` made of the batches fetched since the last poll (up
        to ``max_batches``), waiting up to ``timeout`` seconds for some."""
        return self._run_with_callbacks(self._core.poll_decoded(timeout, max_batches))

    def close(self, timeout: float | None = None) -> None:
        """Commit (with auto-commit), leave the group, stop the loop thread. Closing a
        closed consumer does nothing."""
        if self._portal.stopped:
            return
        try:
            self._run_with_callbacks(self._core.close(timeout))
        finally:
            self._portal.stop()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None,
        callback: CommitCallback | None = None,
    ) -> concurrent.futures.Future[None]:
        """Commit without waiting; ``callback(offsets, error)`` runs on the consumer's
        loop thread (keep it short; it must not call blocking consumer methods)."""

        async def start() -> asyncio.Task[None]:
            return self._core.commit_async(offsets, callback)

        task = self._portal.call(start())

        async def wait() -> None:
            await task

        return self._portal.submit(wait())

    # -- plain calls on the loop -----------------------------------------------------------

    def _sync(self, method: Callable[..., R], *args: Any) -> R:
        return self._portal.call(_call(method, *args))

    def subscription(self) -> set[str]:
        return self._sync(self._core.subscription)

    def assignment(self) -> set[TopicPartition]:
        return self._sync(self._core.assignment)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._sync(self._core.seek, partition, offset)

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        self._sync(self._core.seek_to_beginning, None if partitions is None else list(partitions))

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        self._sync(self._core.seek_to_end, None if partitions is None else list(partitions))

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        self._sync(self._core.pause, list(partitions))

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self._sync(self._core.resume, list(partitions))

    def paused(self) -> set[TopicPartition]:
        return self._sync(self._core.paused)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This member's group, generation and ids, for ``send_offsets_to_transaction``."""
        return self._sync(self._core.group_metadata)

    position = blocking(AsyncConsumer.position)
    committed = blocking(AsyncConsumer.committed)
    commit = blocking(AsyncConsumer.commit)
    beginning_offsets = blocking(AsyncConsumer.beginning_offsets)
    end_offsets = blocking(AsyncConsumer.end_offsets)
    offsets_for_times = blocking(AsyncConsumer.offsets_for_times)
    list_topics = blocking(AsyncConsumer.list_topics)
    partitions_for = blocking(AsyncConsumer.partitions_for)


async def _call(method: Callable[..., R], *args: Any, **kwargs: Any) -> R:
    """A plain (non-async) core method run on the loop thread."""
    return method(*args, **kwargs)
