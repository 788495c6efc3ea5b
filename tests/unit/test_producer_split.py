"""Splitting a batch the broker refused as too large: the halves keep the records, their
order, their futures, the memory they hold and, with idempotence, their sequences."""

from __future__ import annotations

from concurrent.futures import Future

from samsa.client.cluster import Backoff, Cluster
from samsa.client.config import producer_config
from samsa.client.errors import error_for
from samsa.client.producer.accumulator import BufferMemory, RecordAccumulator
from samsa.client.producer.idempotence import IdempotenceState
from samsa.client.producer.sender import Sender
from samsa.client.producer.transactions import TransactionManager
from samsa.errors import ErrorCode
from samsa.records import CompressionType, iter_records, read_batch
from samsa.types import TopicPartition

TP = TopicPartition("t", 0)


def _accumulator() -> RecordAccumulator:
    return RecordAccumulator(
        batch_size=1 << 20, linger_ms=0, compression=CompressionType.NONE,
        memory=BufferMemory(1 << 24), retry_backoff=Backoff(100, 1000),
        delivery_timeout_ms=120_000,
    )  # fmt: skip


def _fill(accumulator: RecordAccumulator, count: int) -> list[Future[object]]:
    futures: list[Future[object]] = []
    for i in range(count):
        future: Future[object] = Future()
        accumulator.append(TP, timestamp=1000 + i, key=b"k%d" % i, value=b"v%d" % i,
                           headers=[("h", b"%d" % i)], future=future, callback=None,
                           reserved=100, now=0.0)  # fmt: skip
        futures.append(future)
    return futures


def test_halves_keep_the_records_futures_memory_and_sequences_in_order() -> None:
    accumulator = _accumulator()
    futures = _fill(accumulator, 5)
    (batch,) = accumulator.batches[TP]
    batch.set_producer_state(7, 2, 40)
    batch.attempts, batch.last_attempt = 1, 12.5
    halves = batch.halves()
    assert halves is not None
    first, second = halves
    assert (first.record_count, second.record_count) == (2, 3)
    assert (first.base_sequence, second.base_sequence) == (40, 42)
    assert {(h.producer_id, h.producer_epoch) for h in halves} == {(7, 2)}
    assert first.reserved + second.reserved == batch.reserved == 500
    assert (first.attempts, first.last_attempt, first.created) == (1, 12.5, batch.created)
    records = [r for half in halves for r in iter_records(read_batch(half.encode(), 0))]
    assert [(r.key, r.value, r.timestamp, r.headers) for r in records] == [
        (b"k%d" % i, b"v%d" % i, 1000 + i, (("h", b"%d" % i),)) for i in range(5)
    ]
    first.complete(100, -1)
    second.complete(102, -1)
    assert [f.result(0).offset for f in futures] == [100, 101, 102, 103, 104]


def test_a_split_puts_the_halves_first_in_the_queue_and_a_single_record_is_not_split() -> None:
    accumulator = _accumulator()
    _fill(accumulator, 4)
    (batch,) = accumulator.batches[TP]
    batch.closed = True
    _fill(accumulator, 1)  # a batch queued behind it
    accumulator.batches[TP].popleft()  # drained: in flight
    assert accumulator.split(batch)
    queue = list(accumulator.batches[TP])
    assert [b.record_count for b in queue] == [2, 2, 1]
    assert all(b.id in accumulator.incomplete for b in queue)
    assert batch.id not in accumulator.incomplete
    alone = queue[-1]
    accumulator.batches[TP].pop()
    assert not accumulator.split(alone)


def _transactional_sender() -> tuple[Sender, RecordAccumulator]:
    config = producer_config({"bootstrap.servers": "127.0.0.1:9", "transactional.id": "t"})
    cluster = Cluster(config, client_id="split-test", allow_auto_topic_creation=True)
    accumulator = _accumulator()
    idempotence = IdempotenceState()
    idempotence.set_producer_id(7, 0)
    transactions = TransactionManager(
        transactional_id="t", transaction_timeout_ms=60_000, cluster=cluster,
        idempotence=idempotence, max_block_ms=1000, wakeup=lambda: None,
    )  # fmt: skip
    sender = Sender(cluster=cluster, accumulator=accumulator, idempotence=idempotence,
                    transactions=transactions, config=config,
                    before_round=lambda now: 0.0)  # fmt: skip
    return sender, accumulator


def test_in_a_transaction_a_batch_refused_as_out_of_order_behind_pending_halves_is_retried() -> (
    None
):
    sender, accumulator = _transactional_sender()
    futures = _fill(accumulator, 4)
    first = accumulator.batches[TP].popleft()
    first.set_producer_state(7, 0, 0)
    _fill(accumulator, 2)
    second = accumulator.batches[TP].popleft()
    second.set_producer_state(7, 0, 4)
    assert accumulator.split(first)  # refused as too large: its halves wait in the queue
    out_of_order = error_for(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, "t-0: 4, 0 expected")
    sender._failed_attempt(second, out_of_order, 0.0)
    assert [b.base_sequence for b in accumulator.batches[TP]] == [0, 2, 4]
    assert not any(f.done() for f in futures)
    # With nothing pending before it, the same refusal ends the batch: the transaction
    # cannot skip records.
    for half in list(accumulator.batches[TP])[:2]:
        accumulator.batches[TP].remove(half)
        half.complete(0, -1)
        accumulator.finished(half)
    sender._failed_attempt(second, out_of_order, 0.0)
    assert second.done
