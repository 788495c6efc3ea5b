"""One transactional id's metadata and the states its transaction moves through.

Kafka's states and their ids (the ``transaction_status`` byte of
``__transaction_state``)::

    Empty(0) ──AddPartitions/AddOffsets──▶ Ongoing(1) ──EndTxn commit──▶ PrepareCommit(2)
      ▲                                      │  │                             │ markers written
      │ InitProducerId (epoch bump)          │  └─EndTxn abort / fence──▶ PrepareAbort(3)
      │                                      │                                │ markers written
    CompleteCommit(4) / CompleteAbort(5) ◀───┴── (from Prepare*) ◀────────────┘
    Empty / Complete* ──transactional.id.expiration.ms──▶ Dead(6) (tombstone)

PrepareEpochFence(7) exists in Kafka's numbering for the moment an Ongoing
transaction is fenced; it is never written to the log, and here never held
either: fencing writes PrepareAbort with the bumped epoch at once.

This module holds the data and the pure decisions (which transition a request
asks for, whether a producer id and epoch are current);
:mod:`samsa.coordinator.transaction.coordinator` writes the transitions and
drives the markers.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field, replace

from samsa.coordinator.transaction.records import TransactionLogValue
from samsa.errors import InvalidTxnStateError
from samsa.types import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767  # Short.MAX_VALUE


class TransactionState(enum.IntEnum):
    """Kafka's transaction states; the value is the id stored in the log."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions show ("PrepareCommit")."""
        return _NAMES[self]

    @classmethod
    def from_kafka_name(cls, name: str) -> TransactionState | None:
        return _BY_NAME.get(name)


_NAMES = {
    TransactionState.EMPTY: "Empty",
    TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit",
    TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit",
    TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead",
    TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}

_S = TransactionState
# Kafka's valid previous states of each state (TransactionState.validPreviousStates).
_VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}
COMPLETED = frozenset({_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})
PREPARING = frozenset({_S.PREPARE_COMMIT, _S.PREPARE_ABORT})
EXPIRABLE = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})


def epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps the last epoch for fencing: a producer may not be handed 32767."""
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True, slots=True)
class Transit:
    """The metadata a transition leads to: written to the log first, then applied."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    start_timestamp: int
    last_update_timestamp: int


@dataclass(eq=False, slots=True)
class TransactionMetadata:
    """A transactional id's producer and transaction; one writer, the broker's loop.

    ``last_producer_id`` is the id used before the last rotation (an exhausted epoch)
    and ``last_producer_epoch`` the epoch before the last bump that kept the id —
    both let a retried InitProducerId get its answer again. ``pending_state`` is the
    state of a transition being written; while it is set every other transition is
    refused with CONCURRENT_TRANSACTIONS, as in Kafka. ``completion`` is resolved
    when a PrepareCommit/PrepareAbort transaction reaches Complete*.
    """

    transactional_id: str
    producer_id: int
    last_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int = 60_000
    state: TransactionState = TransactionState.EMPTY
    partitions: frozenset[TopicPartition] = frozenset()
    start_timestamp: int = -1
    last_update_timestamp: int = -1
    pending_state: TransactionState | None = None
    failed_epoch_fence: bool = False
    completion: asyncio.Future[None] | None = field(default=None, repr=False)

    def snapshot(self) -> Transit:
        return Transit(
            self.producer_id, self.last_producer_id, self.producer_epoch,
            self.last_producer_epoch, self.timeout_ms, self.state, self.partitions,
            self.start_timestamp, self.last_update_timestamp,
        )  # fmt: skip

    def transit(self, state: TransactionState, **changes: object) -> Transit:
        """The metadata after moving to ``state`` with ``changes``; refuses illegal moves."""
        if self.state not in _VALID_PREVIOUS[state]:
            raise InvalidTxnStateError(
                f"transactional id {self.transactional_id}: {self.state.kafka_name} cannot "
                f"become {state.kafka_name}"
            )
        return replace(self.snapshot(), state=state, **changes)  # type: ignore[arg-type]

    def apply(self, transit: Transit) -> None:
        self.producer_id = transit.producer_id
        self.last_producer_id = transit.last_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.timeout_ms = transit.timeout_ms
        self.state = transit.state
        self.partitions = transit.partitions
        self.start_timestamp = transit.start_timestamp
        self.last_update_timestamp = transit.last_update_timestamp

    # -- decisions -------------------------------------------------------------------
    def expected_producer_valid(self, producer_id: int, epoch: int) -> bool:
        """Whether an InitProducerId naming ``producer_id``/``epoch`` (KIP-360) may proceed.

        Kafka's rule: the metadata was just created (no epoch yet), or the id is the
        current one (the epoch is checked when bumping), or it is the id before a
        rotation and the request's epoch was the exhausted one (a retry whose answer
        was lost).
        """
        return (
            self.producer_epoch == NO_PRODUCER_EPOCH
            or producer_id == self.producer_id
            or (producer_id == self.last_producer_id and epoch_exhausted(epoch))
        )

    def bump_epoch(self, timeout_ms: int, expected_epoch: int | None, now: int) -> Transit | None:
        """InitProducerId on an idle id: the next epoch; None means the producer is fenced.

        Without an expected epoch the epoch is bumped and the last one forgotten
        (fencing whoever used it). With one: equal to the current epoch (or none yet)
        bumps and remembers it; equal to the last epoch is a retry and gets the
        current epoch back; anything else is fenced.
        """
        if expected_epoch is None:
            epoch, last_epoch = self.producer_epoch + 1, NO_PRODUCER_EPOCH
        elif self.producer_epoch in {NO_PRODUCER_EPOCH, expected_epoch}:
            epoch, last_epoch = self.producer_epoch + 1, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            return None
        return self.transit(
            TransactionState.EMPTY, producer_epoch=epoch, last_producer_epoch=last_epoch,
            timeout_ms=timeout_ms, partitions=frozenset(), start_timestamp=-1,
            last_update_timestamp=now,
        )  # fmt: skip

    def rotate_producer_id(
        self, new_producer_id: int, timeout_ms: int, remember_epoch: bool, now: int
    ) -> Transit:
        """InitProducerId when the epoch is exhausted: a new producer id at epoch 0."""
        return self.transit(
            TransactionState.EMPTY, producer_id=new_producer_id,
            last_producer_id=self.producer_id, producer_epoch=0,
            last_producer_epoch=self.producer_epoch if remember_epoch else NO_PRODUCER_EPOCH,
            timeout_ms=timeout_ms, partitions=frozenset(), start_timestamp=-1,
            last_update_timestamp=now,
        )  # fmt: skip

    def add_partitions(self, partitions: frozenset[TopicPartition], now: int) -> Transit:
        """Ongoing with ``partitions`` added; a new transaction starts now."""
        starting = self.state is not TransactionState.ONGOING
        return self.transit(
            TransactionState.ONGOING,
            partitions=self.partitions | partitions,
            start_timestamp=now if starting else self.start_timestamp,
            last_update_timestamp=now,
        )

    def prepare_end(self, commit: bool, now: int, fence: bool = False) -> Transit:
        """PrepareCommit/PrepareAbort; a fencing abort also bumps the epoch (never past 32767)."""
        if not commit and fence:
            # After a failed fence the bumped epoch was never handed out: do not bump twice.
            bumped = (
                self.producer_epoch
                if self.failed_epoch_fence or self.producer_epoch >= MAX_EPOCH
                else self.producer_epoch + 1
            )
            return self.transit(
                TransactionState.PREPARE_ABORT, producer_epoch=bumped,
                last_producer_epoch=NO_PRODUCER_EPOCH, last_update_timestamp=now,
            )  # fmt: skip
        state = TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT
        return self.transit(state, last_update_timestamp=now)

    def complete(self, now: int) -> Transit:
        """CompleteCommit/CompleteAbort once every marker is written."""
        state = (
            TransactionState.COMPLETE_COMMIT
            if self.state is TransactionState.PREPARE_COMMIT
            else TransactionState.COMPLETE_ABORT
        )
        return self.transit(state, partitions=frozenset(), last_update_timestamp=now)

    # -- the log's form ------------------------------------------------------------------
    def log_value(self, transit: Transit) -> TransactionLogValue:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(transit.partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        partitions = (
            None
            if transit.state is TransactionState.EMPTY
            else tuple((topic, tuple(ids)) for topic, ids in by_topic.items())
        )
        return TransactionLogValue(
            producer_id=transit.producer_id,
            producer_epoch=transit.producer_epoch,
            transaction_timeout_ms=transit.timeout_ms,
            transaction_status=int(transit.state),
            transaction_partitions=partitions,
            last_update_timestamp_ms=transit.last_update_timestamp,
            start_timestamp_ms=transit.start_timestamp,
            previous_producer_id=transit.last_producer_id,
        )

    @classmethod
    def from_log_value(
        cls, transactional_id: str, value: TransactionLogValue
    ) -> TransactionMetadata:
        """The metadata a loaded record describes (Kafka does not store the last epoch)."""
        try:
            state = TransactionState(value.transaction_status)
        except ValueError as exc:
            raise InvalidTxnStateError(
                f"transactional id {transactional_id}: unknown state {value.transaction_status}"
            ) from exc
        partitions = frozenset(
            TopicPartition(topic, partition)
            for topic, ids in value.transaction_partitions or ()
            for partition in ids
        )
        return cls(
            transactional_id,
            value.producer_id,
            last_producer_id=value.previous_producer_id,
            producer_epoch=value.producer_epoch,
            timeout_ms=value.transaction_timeout_ms,
            state=state,
            partitions=partitions if state is not TransactionState.EMPTY else frozenset(),
            start_timestamp=value.start_timestamp_ms,
            last_update_timestamp=value.last_update_timestamp_ms,
        )
