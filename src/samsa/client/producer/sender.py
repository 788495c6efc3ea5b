"""The producer's sender: one task that turns ready batches into Produce requests.

Each round it drains, for every broker leading a partition with a sendable
batch and with fewer than ``max.in.flight.requests.per.connection`` requests
outstanding, one batch per partition into a single Produce request, and sends
it as a task of its own so requests to all brokers overlap. Answers complete
the batches' futures; retriable errors put a batch back in its queue (with
backoff, up to ``retries`` and ``delivery.timeout.ms``) and refresh metadata
when the leader moved or the topic is new; other errors fail the batch.

With idempotence it first obtains a producer id (InitProducerId), gives each
batch its sequence (:mod:`samsa.client.producer.idempotence`) and bumps the
epoch when sequences and broker disagree.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from samsa.client.cluster import Cluster
from samsa.client.config import ClientConfig
from samsa.client.connection import BrokerConnection
from samsa.client.errors import ClientClosedError, ClientTimeoutError, error_for
from samsa.client.producer.accumulator import ProducerBatch, RecordAccumulator
from samsa.client.producer.idempotence import IdempotenceState
from samsa.client.producer.transactions import (
    PRODUCE_MAX_VERSION,
    TransactionManager,
    TxnState,
)
from samsa.errors import ErrorCode, KafkaError, SamsaError
from samsa.protocol.api_keys import ApiKey

__all__ = ["Sender"]

log = logging.getLogger(__name__)

IDLE_POLL_S = 0.05
_SEQUENCE_ERRORS = frozenset(
    {ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID}
)
_FAILED_TXN = (TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR)


class Sender:
    """The background task of one producer (owned by the producer's event loop)."""

    def __init__(
        self,
        *,
        cluster: Cluster,
        accumulator: RecordAccumulator,
        idempotence: IdempotenceState | None,
        transactions: TransactionManager | None = None,
        config: ClientConfig,
        before_round: Callable[[float], float],
    ) -> None:
        self.cluster = cluster
        self.accumulator = accumulator
        self.idempotence = idempotence
        self.transactions = transactions
        self.transactional_id: str | None = config["transactional.id"]
        self.acks: int = config["acks"]
        self.request_timeout_ms: int = config["request.timeout.ms"]
        self.max_in_flight: int = config["max.in.flight.requests.per.connection"]
        self.max_request_size: int = config["max.request.size"]
        self.retries: int = config["retries"]
        self.transaction_timeout_ms: int = config["transaction.timeout.ms"]
        self.delivery_timeout_s: float = config["delivery.timeout.ms"] / 1000
        self._before_round = before_round  # the producer places records that awaited metadata
        self.running = True
        self.fatal_error: SamsaError | None = None
        """Set when the producer cannot go on (no producer id can be had); sends fail with it."""
        self.progress = asyncio.Event()
        """Set whenever a batch completes or fails (flush waits on it)."""
        self._wakeup = asyncio.Event()
        self._in_flight: dict[int, int] = {}  # node → produce requests outstanding
        self._requests: set[asyncio.Task[None]] = set()
        self._init_task: asyncio.Task[None] | None = None
        self._init_attempts = 0

    def wakeup(self) -> None:
        self._wakeup.set()

    @property
    def requests_in_flight(self) -> int:
        return len(self._requests)

    async def run(self) -> None:
        """Send until stopped and every batch has completed (or been failed)."""
        while self.running or self.accumulator.incomplete:
            try:
                delay = self._run_once(time.monotonic())
            except Exception:  # a bug here must not silently stop every delivery
                log.exception("producer sender round failed; retrying")
                delay = 0.1
            if not self._wakeup.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._wakeup.wait()
            self._wakeup.clear()

    async def stop(self, abort: BaseException | None = None) -> None:
        """Stop sending; with ``abort`` fail what is queued and cancel requests in flight."""
        self.running = False
        if abort is not None:
            for batch in self.accumulator.remove_queued():
                self._fail(batch, abort)
            for task in list(self._requests):
                task.cancel()
            if self._requests:
                await asyncio.gather(*self._requests, return_exceptions=True)
            for batch in list(self.accumulator.incomplete.values()):
                self._fail(batch, abort)
        if self._init_task is not None:
            self._init_task.cancel()
        self.wakeup()

    # -- one round -------------------------------------------------------------------------

    def _run_once(self, now: float) -> float:
        delay = self._before_round(now)
        idempotence = self.idempotence
        if idempotence is not None and not self._producer_id_ready(idempotence):
            delay = min(delay, 0.5)
        accumulator = self.accumulator
        for batch in accumulator.expired(now):
            self._fail(batch, self._expiry_error(batch, now, None))
        nodes, ready_delay, unknown_leader = accumulator.ready(self.cluster, now)
        if unknown_leader:
            self.cluster.request_update()
        # Only brokers whose connection is open now: a request is written the moment its
        # batches are drained, so requests (and sequences) reach a broker in drain order.
        connections = {}
        for node in nodes:
            if self._in_flight.get(node, 0) < self.max_in_flight:
                connection = self.cluster.ready_connection(node, self.wakeup)
                if connection is not None:
                    connections[node] = connection
        can_send = idempotence.can_send if idempotence is not None else _always
        transactions = self.transactions
        if transactions is not None:
            if transactions.error is not None and transactions.state in _FAILED_TXN:
                self.abort_unsent(transactions.error)  # the transaction can only abort now
            transactions.sender_round()
            can_send = self._can_send_transactional
        drained = accumulator.drain(
            self.cluster, set(connections), self.max_request_size, now, can_send
        )
        if nodes - drained.keys():
            # Ready batches that cannot go yet (no connection, requests or a producer id
            # or partitions pending): the event that frees them wakes this task. Poll
            # slowly meanwhile instead of spinning.
            ready_delay = max(ready_delay, IDLE_POLL_S)
        for node, batches in drained.items():
            for batch in batches:
                batch.in_flight = True
                batch.last_attempt = now
                if idempotence is not None:
                    idempotence.assign(batch)
            self._in_flight[node] = self._in_flight.get(node, 0) + 1
            self._send(connections[node], batches)
        return min(delay, ready_delay)

    def _can_send_transactional(self, batch: ProducerBatch) -> bool:
        assert self.idempotence is not None and self.transactions is not None
        return self.transactions.can_send(batch.tp) and self.idempotence.can_send(batch)

    def _producer_id_ready(self, idempotence: IdempotenceState) -> bool:
        if self.transactions is not None:
            # init_transactions() gets the id; epochs move through the coordinator.
            return idempotence.has_producer_id
        bump_now = idempotence.bump_requested and idempotence.in_flight == 0
        if bump_now and idempotence.bump_epoch():
            log.info(
                    "%s: bumped producer epoch to %d (producer id %d) after a sequence error",
                    self.cluster.client_id, idempotence.epoch, idempotence.producer_id,
                )  # fmt: skip
        if idempotence.has_producer_id:
            return True
        if self._init_task is None or self._init_task.done():
            self._init_task = asyncio.get_running_loop().create_task(
                self._init_producer_id(idempotence)
            )
        return False

    async def _init_producer_id(self, idempotence: IdempotenceState) -> None:
        try:
            if self._init_attempts:
                await asyncio.sleep(self.cluster.retry_backoff.delay_ms(self._init_attempts) / 1000)
            response = await self.cluster.send(
                None,
                ApiKey.INIT_PRODUCER_ID,
                {
                    "transactional_id": None,
                    "transaction_timeout": self.transaction_timeout_ms,
                    "producer_id": -1,
                    "producer_epoch": -1,
                },
            )
            code = int(response.error_code)
            if code:
                raise error_for(code, "InitProducerId")
            idempotence.set_producer_id(int(response.producer_id), int(response.producer_epoch))
            self._init_attempts = 0
        except KafkaError as exc:
            self._init_attempts += 1
            if not exc.retriable:
                self.fatal_error = exc
                log.error("%s: no producer id: %s", self.cluster.client_id, exc)
                for batch in self.accumulator.remove_queued():
                    self._fail(batch, exc)
            else:
                log.info("%s: InitProducerId failed (retrying): %s", self.cluster.client_id, exc)
        except ClientClosedError:
            pass  # closing
        finally:
            self.wakeup()

    # -- requests --------------------------------------------------------------------------

    def _send(self, connection: BrokerConnection, batches: list[ProducerBatch]) -> None:
        """Write one Produce request now; a task awaits its answer."""
        node = connection.node_id
        topics: dict[str, list[dict[str, Any]]] = {}
        for batch in batches:
            topics.setdefault(batch.tp.topic, []).append(
                {"index": batch.tp.partition, "records": batch.encode()}
            )
        body = {
            "transactional_id": self.transactional_id,
            "acks": self.acks,
            "timeout": self.request_timeout_ms,
            "topic_data": [{"name": t, "partition_data": parts} for t, parts in topics.items()],
        }
        try:
            version = connection.version(ApiKey.PRODUCE)
            if self.transactions is not None:  # Produce 12 means transaction version 2
                version = min(version, PRODUCE_MAX_VERSION)
            future = connection.send(
                ApiKey.PRODUCE, body, version=version, expect_response=self.acks != 0
            )
        except (KafkaError, ClientClosedError) as exc:
            self._answered(node, batches)
            for batch in batches:
                self._failed_attempt(batch, exc, time.monotonic())
            return
        task = asyncio.get_running_loop().create_task(self._produce(connection, batches, future))
        self._requests.add(task)
        task.add_done_callback(self._requests.discard)

    async def _produce(
        self,
        connection: BrokerConnection,
        batches: list[ProducerBatch],
        future: asyncio.Future[Any] | None,
    ) -> None:
        node = connection.node_id
        try:
            if future is None:
                await connection.drain()  # acks=0: no answer, but wait for the socket
                response = None
            else:
                response = await connection.wait(future)
        except (KafkaError, ClientClosedError) as exc:
            self._answered(node, batches)
            for batch in batches:
                self._failed_attempt(batch, exc, time.monotonic())
            return
        except asyncio.CancelledError:
            self._answered(node, batches)
            raise
        self._answered(node, batches)
        if response is None:  # acks=0
            for batch in batches:
                self._complete(batch, -1, None)
            return
        answers = {
            (topic.name, int(p.index)): p
            for topic in response.responses
            for p in topic.partition_responses
        }
        now = time.monotonic()
        for batch in batches:
            answer = answers.get(batch.tp)
            if answer is None:
                error = error_for(
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    f"the Produce response has no answer for {batch.tp}",
                )
                self._failed_attempt(batch, error, now)
                continue
            code = int(answer.error_code)
            if code in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                self._complete(batch, int(answer.base_offset), answer.log_append_time)
            else:
                message = getattr(answer, "error_message", None)
                self._failed_attempt(batch, error_for(code, f"{batch.tp}: {message or ''}"), now)

    def _answered(self, node: int, batches: list[ProducerBatch]) -> None:
        self._in_flight[node] = self._in_flight.get(node, 1) - 1
        if self.idempotence is not None:
            for batch in batches:
                self.idempotence.answered(batch)
        self.wakeup()

    def _failed_attempt(self, batch: ProducerBatch, error: BaseException, now: float) -> None:
        idempotence = self.idempotence
        batch.in_flight = False
        if (
            isinstance(error, KafkaError)
            and error.code == ErrorCode.MESSAGE_TOO_LARGE
            and self.running
            and self.accumulator.split(batch)
        ):
            # The topic's max.message.bytes is below the batch: its halves keep its
            # sequences, so the batches after it (refused meanwhile as out of order
            # when in flight) follow them again.
            log.info("%s: %r refused as too large (%s): split in two",
                     self.cluster.client_id, batch, error)  # fmt: skip
            return
        if isinstance(error, KafkaError):
            retriable = error.retriable
            if idempotence is not None and error.code in _SEQUENCE_ERRORS:
                # The broker lost or never had the producer's state for the batch it should
                # expect next: a new epoch restarts the sequences. Otherwise an earlier batch
                # is missing and this one follows it again.
                if idempotence.is_next_expected(batch):
                    idempotence.bump_requested = True
                # A transaction cannot skip records: it aborts, and the epoch moves on then
                # — unless the records before this batch are still to be sent (the halves
                # of a batch split as too large): then it follows them.
                retriable = self.transactions is None or (
                    error.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
                    and self.accumulator.has_pending_before(batch)
                )
            if error.invalid_metadata:
                self.cluster.request_update()
        else:
            retriable = False
        expired = now - batch.created >= self.delivery_timeout_s
        if retriable and not expired and self.running and batch.attempts < self.retries:
            log.debug("%s: retrying %r after %s", self.cluster.client_id, batch, error)
            self.accumulator.reenqueue(batch, now)
        elif retriable and expired:
            self._fail(batch, self._expiry_error(batch, now, error))
        else:
            self._fail(batch, error)

    def _expiry_error(
        self, batch: ProducerBatch, now: float, last: BaseException | None
    ) -> ClientTimeoutError:
        error = ClientTimeoutError(
            f"expiring {batch.record_count} record(s) for {batch.tp}: "
            f"{(now - batch.created) * 1000:.0f} ms have passed since the batch was created "
            f"(delivery.timeout.ms={self.delivery_timeout_s * 1000:.0f})"
            + (f"; last error: {last}" if last is not None else "")
        )
        error.__cause__ = last
        return error

    def _complete(self, batch: ProducerBatch, base_offset: int, log_append_time: Any) -> None:
        if self.idempotence is not None:
            self.idempotence.acknowledged(batch)
        batch.in_flight = False
        self.accumulator.finished(batch)
        batch.complete(base_offset, log_append_time)
        self.progress.set()

    def abort_unsent(self, error: BaseException) -> None:
        """Fail every batch not yet sent (an aborted transaction's)."""
        for batch in self.accumulator.remove_queued():
            self._fail(batch, error)

    def _fail(self, batch: ProducerBatch, error: BaseException) -> None:
        if self.idempotence is not None:
            self.idempotence.lost(batch)
        if self.transactions is not None:
            self.transactions.batch_failed(error)
        batch.in_flight = False
        self.accumulator.finished(batch)
        batch.fail(error)
        self.progress.set()


def _always(_batch: ProducerBatch) -> bool:
    return True
