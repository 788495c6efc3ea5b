"""Splitting a batch the broker refused as too large: the halves keep the records, their
order, their futures, the memory they hold and, with idempotence, their sequences."""

from __future__ import annotations

from concurrent.futures import Future

from samsa.client.cluster import Backoff
from samsa.client.producer.accumulator import BufferMemory, RecordAccumulator
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
