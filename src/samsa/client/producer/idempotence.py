"""The idempotent producer's state: producer id and epoch, sequences per partition.

With ``enable.idempotence`` (the default) every batch carries the producer id,
epoch and the sequence number of its first record; the broker keeps the last
sequences of each producer per partition and drops a resent batch it already
has (answering with the original offsets). Sequences are given when a batch is
first drained and kept by every retry of it, so a retry is recognised.

Ordering with up to five requests in flight: a batch being retried is sent
again only when no other batch of its partition is in flight, so retries go
out in sequence order.

When the broker's view and ours part (a batch failed or expired after taking a
sequence, or the broker answers OUT_OF_ORDER_SEQUENCE_NUMBER or
UNKNOWN_PRODUCER_ID for the batch it should expect next) the epoch is bumped
as Kafka's producer does for idempotent producers (KIP-360): once nothing is in
flight, epoch + 1 and every partition's sequence starts again at 0 — the broker
accepts a new epoch that starts at 0. At the epoch limit a new producer id is
requested instead.
"""

from __future__ import annotations

from samsa.client.producer.accumulator import ProducerBatch
from samsa.types import TopicPartition

__all__ = ["MAX_EPOCH", "IdempotenceState"]

MAX_EPOCH = 32767
_SEQUENCE_MASK = 0x7FFFFFFF  # sequences wrap to 0 after Integer.MAX_VALUE, as in Kafka


class IdempotenceState:
    """Producer id, epoch and sequences (owned by the producer's event loop)."""

    def __init__(self) -> None:
        self.producer_id = -1
        self.epoch = -1
        self.bump_requested = False
        self._next_sequence: dict[TopicPartition, int] = {}
        self._last_acked: dict[TopicPartition, int] = {}
        self._in_flight: dict[TopicPartition, int] = {}

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def in_flight(self) -> int:
        """Batches sent and not yet answered, all partitions together."""
        return sum(self._in_flight.values())

    def set_producer_id(self, producer_id: int, epoch: int) -> None:
        """Take a new id (or epoch) from InitProducerId; every sequence restarts at 0."""
        self.producer_id, self.epoch = producer_id, epoch
        self._reset()

    def bump_epoch(self) -> bool:
        """Bump the epoch locally; False when it is exhausted (a new id must be requested)."""
        self.bump_requested = False
        if self.producer_id < 0 or self.epoch >= MAX_EPOCH:
            self.producer_id, self.epoch = -1, -1
            self._reset()
            return False
        self.epoch += 1
        self._reset()
        return True

    def _reset(self) -> None:
        self._next_sequence.clear()
        self._last_acked.clear()

    def can_send(self, batch: ProducerBatch) -> bool:
        """Whether ``batch`` may be drained now without risking the partition's order."""
        if self.bump_requested or not self.has_producer_id:
            return False
        # A retry waits until nothing else of its partition is in flight.
        return not (self._is_current(batch) and self._in_flight.get(batch.tp, 0))

    def _is_current(self, batch: ProducerBatch) -> bool:
        return (
            batch.base_sequence >= 0
            and batch.producer_id == self.producer_id
            and batch.producer_epoch == self.epoch
        )

    def assign(self, batch: ProducerBatch) -> None:
        """Give ``batch`` this producer's id, epoch and next sequence (kept on retries)."""
        if not self._is_current(batch):
            sequence = self._next_sequence.get(batch.tp, 0)
            batch.set_producer_state(self.producer_id, self.epoch, sequence)
            self._next_sequence[batch.tp] = (sequence + batch.record_count) & _SEQUENCE_MASK
        self._in_flight[batch.tp] = self._in_flight.get(batch.tp, 0) + 1

    def answered(self, batch: ProducerBatch) -> None:
        """The request carrying ``batch`` came back (or failed)."""
        count = self._in_flight.get(batch.tp, 0) - 1
        if count > 0:
            self._in_flight[batch.tp] = count
        else:
            self._in_flight.pop(batch.tp, None)

    def acknowledged(self, batch: ProducerBatch) -> None:
        """``batch`` was written (or found a duplicate of itself)."""
        if self._is_current(batch):
            self._last_acked[batch.tp] = batch.last_sequence

    def is_next_expected(self, batch: ProducerBatch) -> bool:
        """Whether the broker should have accepted ``batch``: it follows the last acked one."""
        expected = (self._last_acked.get(batch.tp, -1) + 1) & _SEQUENCE_MASK
        return self._is_current(batch) and batch.base_sequence == expected

    def lost(self, batch: ProducerBatch) -> None:
        """A batch that took a sequence failed for good: later ones would be out of order."""
        if self._is_current(batch):
            self.bump_requested = True
