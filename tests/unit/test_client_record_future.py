"""The blocking producer's RecordFuture behaves as a concurrent.futures.Future in every way
a caller can see, whether it is completed before or after the caller first touches it."""

from __future__ import annotations

import concurrent.futures
import threading
import time

import pytest

from samsa.client.producer.future import RecordFuture
from samsa.client.producer.types import RecordMetadata

METADATA = RecordMetadata("t", 0, 42, 1_700_000_000_000)


def _complete_later(future: RecordFuture, delay_s: float = 0.05) -> threading.Thread:
    thread = threading.Thread(target=lambda: (time.sleep(delay_s), future.set_result(METADATA)))
    thread.start()
    return thread


def test_is_a_concurrent_future() -> None:
    assert isinstance(RecordFuture(), concurrent.futures.Future)


def test_result_set_before_anyone_looked_is_returned_at_once() -> None:
    future = RecordFuture()
    future.set_result(METADATA)
    assert future.done() and not future.cancelled() and not future.running()
    assert future.result(0) == METADATA
    assert future.exception(0) is None


def test_result_waits_for_a_completion_from_another_thread() -> None:
    future = RecordFuture()
    thread = _complete_later(future)
    assert future.result(5) == METADATA
    thread.join()


def test_result_times_out_while_pending() -> None:
    with pytest.raises(concurrent.futures.TimeoutError):
        RecordFuture().result(0.01)


def test_exception_is_raised_by_result() -> None:
    future = RecordFuture()
    future.set_exception(ValueError("boom"))
    with pytest.raises(ValueError, match="boom"):
        future.result(0)
    assert isinstance(future.exception(0), ValueError)


def test_callbacks_run_once_whether_added_before_or_after_completion() -> None:
    calls: list[str] = []
    future = RecordFuture()
    future.add_done_callback(lambda f: calls.append("before"))
    future.set_result(METADATA)
    future.add_done_callback(lambda f: calls.append("after"))
    assert calls == ["before", "after"]


def test_cancelled_future_stays_cancelled() -> None:
    future = RecordFuture()
    assert future.cancel()
    with pytest.raises(concurrent.futures.InvalidStateError):
        future.set_result(METADATA)
    assert future.cancelled()
    with pytest.raises(concurrent.futures.CancelledError):
        future.result(0)


def test_completing_twice_is_refused() -> None:
    future = RecordFuture()
    future.set_result(METADATA)
    with pytest.raises(concurrent.futures.InvalidStateError):
        future.set_exception(ValueError())


def test_wait_and_as_completed_see_completions() -> None:
    futures = [RecordFuture() for _ in range(3)]
    futures[0].set_result(METADATA)
    threads = [_complete_later(f, 0.02 * i) for i, f in enumerate(futures[1:], 1)]
    done, pending = concurrent.futures.wait(futures, timeout=5)
    assert len(done) == 3 and not pending
    assert len(list(concurrent.futures.as_completed(futures, timeout=5))) == 3
    for thread in threads:
        thread.join()


def test_many_threads_waiting_are_all_woken() -> None:
    future = RecordFuture()
    results: list[RecordMetadata] = []
    waiters = [threading.Thread(target=lambda: results.append(future.result(5)))
               for _ in range(8)]  # fmt: skip
    for waiter in waiters:
        waiter.start()
    time.sleep(0.02)
    future.set_result(METADATA)
    for waiter in waiters:
        waiter.join()
    assert results == [METADATA] * 8
