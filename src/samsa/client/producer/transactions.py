"""The transactional producer's state machine (Kafka's transaction protocol, version 1).

A producer with ``transactional.id`` finds its transaction coordinator
(FindCoordinator key type 1) and gets its producer id and epoch from it
(InitProducerId), which fences any earlier producer with the same id. Then,
per transaction: each partition is added (AddPartitionsToTxn) before its first
batch is sent, consumed offsets are added (AddOffsetsToTxn) and committed to the
group coordinator (TxnOffsetCommit), and EndTxn commits or aborts; the
coordinator writes the markers. States follow Kafka's ``TransactionManager``::

    UNINITIALIZED → READY ⇄ IN_TRANSACTION → COMMITTING / ABORTING → READY
                             ↘ ABORTABLE_ERROR → (abort) → READY
    any → FATAL_ERROR (fenced, not authorized): the producer must be closed

An abortable error (a batch of the transaction failed) makes commit raise; the
application aborts and carries on. A fatal one makes every later call raise.
Requests use the versions Kafka's producer uses for transaction version 1:
AddPartitionsToTxn up to 3, EndTxn up to 4, TxnOffsetCommit up to 4, Produce up
to 11.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from samsa.client.cluster import COORDINATOR_ERRORS, Cluster, CoordinatorType
from samsa.client.errors import (
    ClientTimeoutError,
    IllegalStateError,
    TransactionAbortedError,
    error_for,
)
from samsa.client.producer.idempotence import IdempotenceState
from samsa.client.producer.types import ConsumerGroupMetadata
from samsa.errors import ErrorCode, KafkaError
from samsa.protocol.api_keys import ApiKey
from samsa.types import TopicPartition

__all__ = ["TransactionManager", "TxnState"]

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_VERSIONS: dict[int, int] = {
    ApiKey.ADD_PARTITIONS_TO_TXN: 3,
    ApiKey.END_TXN: 4,
    ApiKey.TXN_OFFSET_COMMIT: 4,
}
PRODUCE_MAX_VERSION = 11
FATAL_CODES = frozenset(
    {
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ErrorCode.PRODUCER_FENCED,
    }
)
CONCURRENT_BACKOFF_S = 0.02  # Kafka retries AddPartitions quickly while a previous EndTxn ends


class TxnState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    READY = "ready"
    IN_TRANSACTION = "in transaction"
    COMMITTING = "committing"
    ABORTING = "aborting"
    ABORTABLE_ERROR = "abortable error"
    FATAL_ERROR = "fatal error"


class TransactionManager:
    """Transaction state of one producer (owned by the producer's event loop)."""

    def __init__(
        self,
        *,
        transactional_id: str,
        transaction_timeout_ms: int,
        cluster: Cluster,
        idempotence: IdempotenceState,
        max_block_ms: int,
        wakeup: Callable[[], None],
    ) -> None:
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.cluster = cluster
        self.idempotence = idempotence
        self.max_block_ms = max_block_ms
        self.state = TxnState.UNINITIALIZED
        self.error: KafkaError | None = None
        self.partitions: set[TopicPartition] = set()  # added to the ongoing transaction
        self.pending: set[TopicPartition] = set()  # to add before their batches go
        self.started = False  # something was added: EndTxn is needed
        self._wakeup = wakeup
        self._adding: asyncio.Task[None] | None = None

    # -- checks ----------------------------------------------------------------------------

    def _require(self, *states: TxnState, action: str) -> None:
        if self.state is TxnState.FATAL_ERROR:
            assert self.error is not None
            raise self.error
        if self.state not in states:
            raise IllegalStateError(
                f"cannot {action}: the producer's transaction state is {self.state.value}"
                + (f" (after: {self.error})" if self.error is not None else "")
            )

    def check_send(self) -> None:
        """send() is allowed inside a transaction only (Kafka's rule)."""
        if self.state is TxnState.ABORTABLE_ERROR:
            assert self.error is not None
            raise self.error
        self._require(TxnState.IN_TRANSACTION, action="send outside a transaction")

    def can_send(self, tp: TopicPartition) -> bool:
        return tp in self.partitions and self.state in (
            TxnState.IN_TRANSACTION, TxnState.COMMITTING, TxnState.ABORTING
        )  # fmt: skip

    def add_partition(self, tp: TopicPartition) -> None:
        if tp not in self.partitions:
            self.pending.add(tp)

    def batch_failed(self, error: BaseException) -> None:
        """A batch of the transaction failed: the transaction can only be aborted."""
        if isinstance(error, KafkaError) and error.code in FATAL_CODES:
            self._fatal(error)
        elif self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING):
            self.state = TxnState.ABORTABLE_ERROR
            self.error = (
                error
                if isinstance(error, KafkaError)
                else error_for(ErrorCode.TRANSACTION_ABORTABLE, str(error))
            )

    def _fatal(self, error: KafkaError) -> None:
        log.error("transactional producer %r: %s", self.transactional_id, error)
        self.state, self.error = TxnState.FATAL_ERROR, error

    # -- requests --------------------------------------------------------------------------

    async def _to_coordinator(self, api_key: int, body: Mapping[str, Any], what: str,
                              error_of: Callable[[Any], int]) -> Any:  # fmt: skip
        """One request to the transaction coordinator, retried until max.block.ms."""

        async def attempt() -> Any:
            cluster = self.cluster
            node = await cluster.coordinator(self.transactional_id, CoordinatorType.TRANSACTION)
            connection = await cluster.connection(node)
            version = connection.version(api_key)
            version = min(version, MAX_VERSIONS.get(api_key, version))
            try:
                response = await connection.request(api_key, body, version=version)
            except KafkaError as exc:
                if exc.code == ErrorCode.NETWORK_EXCEPTION:
                    cluster.invalidate_coordinator(self.transactional_id, 1)
                raise
            code = error_of(response)
            if code in COORDINATOR_ERRORS:
                cluster.invalidate_coordinator(self.transactional_id, 1)
            if code:
                raise error_for(code, f"{what} for transactional id {self.transactional_id!r}")
            return response

        return await self._retrying(attempt, what)

    async def _retrying(self, attempt: Callable[[], Awaitable[T]], what: str) -> T:
        try:
            return await self.cluster.retrying(attempt, timeout_ms=self.max_block_ms, what=what)
        except KafkaError as exc:
            if exc.code in FATAL_CODES:
                self._fatal(exc)
            raise

    async def init(self) -> None:
        """InitProducerId from the coordinator: fences earlier producers of this id."""
        self._require(TxnState.UNINITIALIZED, TxnState.READY, action="init_transactions")
        idempotence = self.idempotence
        response = await self._to_coordinator(
            ApiKey.INIT_PRODUCER_ID,
            {
                "transactional_id": self.transactional_id,
                "transaction_timeout": self.transaction_timeout_ms,
                "producer_id": idempotence.producer_id,
                "producer_epoch": idempotence.epoch,
            },
            "InitProducerId",
            lambda r: int(r.error_code),
        )
        idempotence.set_producer_id(int(response.producer_id), int(response.producer_epoch))
        idempotence.bump_requested = False
        self.state, self.error = TxnState.READY, None
        self._wakeup()

    def begin(self) -> None:
        self._require(TxnState.READY, action="begin_transaction")
        self.state = TxnState.IN_TRANSACTION
        self.partitions.clear()
        self.pending.clear()
        self.started = False

    def sender_round(self) -> None:
        """Start adding pending partitions (one AddPartitionsToTxn at a time)."""
        idle = self._adding is None or self._adding.done()
        adding_allowed = self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING)
        if self.pending and idle and adding_allowed:
            self._adding = asyncio.get_running_loop().create_task(self._add_partitions())

    async def _add_partitions(self) -> None:
        tps = sorted(self.pending)
        topics: dict[str, list[int]] = {}
        for tp in tps:
            topics.setdefault(tp.topic, []).append(tp.partition)
        body = {
            "v3_and_below_transactional_id": self.transactional_id,
            "v3_and_below_producer_id": self.idempotence.producer_id,
            "v3_and_below_producer_epoch": self.idempotence.epoch,
            "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }

        def first_error(response: Any) -> int:
            codes = {
                int(p.partition_error_code)
                for t in response.results_by_topic_v3_and_below
                for p in t.results_by_partition
            }
            codes.discard(ErrorCode.NONE)
            # Partitions of a failed request answer OPERATION_NOT_ATTEMPTED; the real cause
            # is the other code.
            not_attempted = ErrorCode.OPERATION_NOT_ATTEMPTED
            return min(codes - {not_attempted}, default=not_attempted if codes else ErrorCode.NONE)

        try:
            while True:
                try:
                    await self._to_coordinator(
                        ApiKey.ADD_PARTITIONS_TO_TXN, body, "AddPartitionsToTxn", first_error
                    )
                    break
                except KafkaError as exc:
                    if exc.code != ErrorCode.CONCURRENT_TRANSACTIONS:
                        raise
                    await asyncio.sleep(CONCURRENT_BACKOFF_S)  # the last EndTxn is finishing
            self.partitions.update(tps)
            self.pending.difference_update(tps)
            self.started = True
        except (KafkaError, ClientTimeoutError) as exc:
            if self.state is not TxnState.FATAL_ERROR:
                error = (
                    exc
                    if isinstance(exc, KafkaError)
                    else error_for(ErrorCode.REQUEST_TIMED_OUT, str(exc))
                )
                self.state, self.error = TxnState.ABORTABLE_ERROR, error
        finally:
            self._wakeup()

    async def send_offsets(
        self, offsets: Mapping[TopicPartition, int], group: ConsumerGroupMetadata
    ) -> None:
        """Add the group's offsets to the transaction (committed with it)."""
        self._require(TxnState.IN_TRANSACTION, action="send_offsets_to_transaction")
        idempotence = self.idempotence
        await self._to_coordinator(
            ApiKey.ADD_OFFSETS_TO_TXN,
            {"transactional_id": self.transactional_id, "producer_id": idempotence.producer_id,
             "producer_epoch": idempotence.epoch, "group_id": group.group_id},
            "AddOffsetsToTxn",
            lambda r: int(r.error_code),
        )  # fmt: skip
        self.started = True
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, offset in sorted(offsets.items()):
            topics.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "committed_offset": offset,
                 "committed_leader_epoch": -1, "committed_metadata": ""}
            )  # fmt: skip
        body = {
            "transactional_id": self.transactional_id,
            "group_id": group.group_id,
            "producer_id": idempotence.producer_id,
            "producer_epoch": idempotence.epoch,
            "generation_id": group.generation_id,
            "member_id": group.member_id,
            "group_instance_id": group.group_instance_id,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }

        async def attempt() -> None:
            cluster = self.cluster
            node = await cluster.coordinator(group.group_id, CoordinatorType.GROUP)
            connection = await cluster.connection(node)
            version = min(
                connection.version(ApiKey.TXN_OFFSET_COMMIT), MAX_VERSIONS[ApiKey.TXN_OFFSET_COMMIT]
            )
            response = await connection.request(ApiKey.TXN_OFFSET_COMMIT, body, version=version)
            codes = [int(p.error_code) for t in response.topics for p in t.partitions]
            code = next((c for c in codes if c), 0)
            if code in COORDINATOR_ERRORS:
                cluster.invalidate_coordinator(group.group_id, CoordinatorType.GROUP)
            if code:
                raise error_for(code, f"TxnOffsetCommit for group {group.group_id!r}")

        await self._retrying(attempt, "TxnOffsetCommit")

    async def end(self, commit: bool, flush: Callable[[], Awaitable[None]],
                  abort_unsent: Callable[[BaseException], None]) -> None:  # fmt: skip
        """Commit (after every batch is delivered) or abort the ongoing transaction."""
        if commit:
            self._require(TxnState.IN_TRANSACTION, action="commit_transaction")
            self.state = TxnState.COMMITTING
            await flush()
            if self.state is not TxnState.COMMITTING:  # a batch failed: abort instead
                assert self.error is not None
                raise self.error
        else:
            self._require(TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR,
                          action="abort_transaction")  # fmt: skip
            self.state = TxnState.ABORTING
            abort_unsent(
                TransactionAbortedError("the transaction was aborted before this was sent")
            )
            await flush()  # batches already in flight come back first
        if self.started:
            idempotence = self.idempotence
            await self._to_coordinator(
                ApiKey.END_TXN,
                {"transactional_id": self.transactional_id,
                 "producer_id": idempotence.producer_id, "producer_epoch": idempotence.epoch,
                 "committed": commit},
                "EndTxn",
                lambda r: int(r.error_code),
            )  # fmt: skip
        self.state, self.error = TxnState.READY, None
        self.partitions.clear()
        self.pending.clear()
        if self.idempotence.bump_requested:
            # Sequences went astray in the aborted transaction: a new epoch (KIP-360).
            self.idempotence.bump_requested = False
            await self.init()
        log.debug("transaction of %r %s at %.3f", self.transactional_id,
                  "committed" if commit else "aborted", time.monotonic())  # fmt: skip
