"""The transaction coordinator's state machine, driven directly on a real event loop.

Transitions go to real ``__transaction_state`` partition logs, so reloading from
them is tested too; markers go to a fake that records them (and can be held back
to catch the coordinator mid-transaction). Timers are real but short.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from samsa.coordinator.group.records import partition_for
from samsa.coordinator.transaction.coordinator import (
    TRANSACTION_STATE_TOPIC,
    TransactionConfig,
    TransactionCoordinator,
)
from samsa.coordinator.transaction.records import (
    TransactionLogValue,
    decode_transaction_log_key,
    decode_transaction_log_value,
    encode_transaction_log_key,
    encode_transaction_log_value,
)
from samsa.coordinator.transaction.state import (
    TransactionState,
)
from samsa.errors import ErrorCode
from samsa.records import RecordBatchBuilder, iter_records, read_batch
from samsa.storage import Log, LogConfig
from samsa.storage.log_loader import load_log
from samsa.storage.validator import AppendOrigin
from samsa.testing.clock import ManualClock, ManualTimer
from samsa.testing.waiting import wait_until_async
from samsa.types import TopicPartition

T = TypeVar("T")
PARTITIONS = 3
TIMEOUT_MS = 60_000
HANG_S = 30  # a real-time deadline that only detects a hang
ORDERS_0 = TopicPartition("orders", 0)
ORDERS_1 = TopicPartition("orders", 1)
PAYMENTS_0 = TopicPartition("payments", 0)


@dataclass(frozen=True, slots=True)
class Marker:
    tp: TopicPartition
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int


class FakeMarkers:
    """Records every marker; ``hold()`` makes writes wait until ``release()``."""

    def __init__(self) -> None:
        self.written: list[Marker] = []
        self.errors: dict[TopicPartition, list[int]] = {}
        self._gate = asyncio.Event()
        self._gate.set()
        self.waiting = 0

    def hold(self) -> None:
        self._gate.clear()

    def release(self) -> None:
        self._gate.set()

    async def __call__(
        self, tp: TopicPartition, producer_id: int, epoch: int, commit: bool, coordinator_epoch: int
    ) -> int:
        self.waiting += 1
        try:
            await self._gate.wait()
        finally:
            self.waiting -= 1
        queued = self.errors.get(tp)
        if queued:
            return queued.pop(0)
        self.written.append(Marker(tp, producer_id, epoch, commit, coordinator_epoch))
        return ErrorCode.NONE


class Harness:
    def __init__(self, tmp: Path, clock: ManualClock, **config: Any) -> None:
        self.tmp = tmp
        self.clock = clock
        self.timer = ManualTimer(clock)
        self.config = TransactionConfig(**{"marker_retry_backoff_ms": 5, **config})
        self.logs: dict[TopicPartition, Log] = {}
        self.markers = FakeMarkers()
        self.next_producer_id = 1000
        self.coordinator = self.new_coordinator()

    def allocate_producer_id(self) -> int:
        self.next_producer_id += 1
        return self.next_producer_id

    def new_coordinator(self) -> TransactionCoordinator:
        return TransactionCoordinator(
            PARTITIONS, self.append, self.clock, self.markers, self.allocate_producer_id,
            config=self.config, timer=self.timer,
        )  # fmt: skip

    def log_for(self, tp: TopicPartition) -> Log:
        if tp not in self.logs:
            self.logs[tp] = load_log(self.tmp / f"{tp.topic}-{tp.partition}", LogConfig())
        return self.logs[tp]

    async def append(self, tp: TopicPartition, records: bytes) -> None:
        assert tp.topic == TRANSACTION_STATE_TOPIC
        self.log_for(tp).append_as_leader(bytearray(records), origin=AppendOrigin.COORDINATOR)

    def states_written(self, transactional_id: str) -> list[str]:
        """The states written for ``transactional_id``, in log order ("tombstone" for none)."""
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, partition_for(transactional_id, PARTITIONS))
        if tp not in self.logs:
            return []
        data = self.logs[tp].read(0, 1 << 24).region.read()
        out, position = [], 0
        while position < len(data):
            batch = read_batch(data, position)
            for record in iter_records(batch):
                assert record.key is not None
                if decode_transaction_log_key(record.key) != transactional_id:
                    continue
                if record.value is None:
                    out.append("tombstone")
                else:
                    status = decode_transaction_log_value(record.value).transaction_status
                    out.append(TransactionState(status).kafka_name)
            position += batch.size
        return out

    def reload(self) -> TransactionCoordinator:
        fresh = self.new_coordinator()
        fresh.load(self.logs[tp] for tp in sorted(self.logs))
        return fresh


def run(make: Callable[[Harness], Awaitable[T]], tmp_path: Path, **config: Any) -> T:
    async def main() -> T:
        harness = Harness(tmp_path, ManualClock(), **config)
        harness.coordinator.start()
        try:
            return await make(harness)
        finally:
            harness.markers.release()
            await harness.coordinator.shutdown(grace_s=1)

    return asyncio.run(main())


async def settle(turns: int = 20) -> None:
    """Let every task that can run do so (event-loop turns; the clock does not move)."""
    for _ in range(turns):
        await asyncio.sleep(0)


def state_of(c: TransactionCoordinator, transactional_id: str) -> str:
    (described,) = c.describe_transactions([transactional_id])
    return described.state


async def begin(c: TransactionCoordinator, *partitions: TopicPartition) -> tuple[int, int]:
    init = await c.init_producer_id("txn", TIMEOUT_MS)
    assert init.error == ErrorCode.NONE, init
    assert (
        await c.add_partitions("txn", init.producer_id, init.producer_epoch, partitions)
        == ErrorCode.NONE
    )
    return init.producer_id, init.producer_epoch


# -- commit and abort -------------------------------------------------------------------


def test_commit_writes_a_commit_marker_to_every_partition_then_completes(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        pid, epoch = await begin(c, ORDERS_0, ORDERS_1)
        assert (pid, epoch) == (1001, 0)
        assert await c.add_partitions("txn", pid, epoch, [PAYMENTS_0]) == ErrorCode.NONE
        assert state_of(c, "txn") == "Ongoing"
        assert await c.end_txn("txn", pid, epoch, commit=True) == ErrorCode.NONE
        assert sorted(h.markers.written, key=lambda m: m.tp) == [
            Marker(ORDERS_0, pid, epoch, True, 0),
            Marker(ORDERS_1, pid, epoch, True, 0),
            Marker(PAYMENTS_0, pid, epoch, True, 0),
        ]
        assert state_of(c, "txn") == "CompleteCommit"
        assert h.states_written("txn") == [
            "Empty", "Ongoing", "Ongoing", "PrepareCommit", "CompleteCommit",
        ]  # fmt: skip

    run(scenario, tmp_path)


def test_abort_writes_abort_markers(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        pid, epoch = await begin(c, ORDERS_0)
        assert await c.end_txn("txn", pid, epoch, commit=False) == ErrorCode.NONE
        assert h.markers.written == [Marker(ORDERS_0, pid, epoch, False, 0)]
        assert state_of(c, "txn") == "CompleteAbort"
        # The next transaction starts from CompleteAbort with the same epoch.
        assert await c.add_partitions("txn", pid, epoch, [ORDERS_1]) == ErrorCode.NONE
        (described,) = c.describe_transactions(["txn"])
        assert described.partitions == (ORDERS_1,) and described.producer_epoch == epoch

    run(scenario, tmp_path)


def test_retried_end_txn_answers_none_for_the_same_outcome_only(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        pid, epoch = await begin(c, ORDERS_0)
        assert await c.end_txn("txn", pid, epoch, commit=True) == ErrorCode.NONE
        assert await c.end_txn("txn", pid, epoch, commit=True) == ErrorCode.NONE
        assert await c.end_txn("txn", pid, epoch, commit=False) == ErrorCode.INVALID_TXN_STATE
        assert len(h.markers.written) == 1

    run(scenario, tmp_path)


def test_end_txn_without_a_transaction_is_an_invalid_state(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        init = await c.init_producer_id("txn", TIMEOUT_MS)
        assert await c.end_txn("txn", init.producer_id, init.producer_epoch, True) == (
            ErrorCode.INVALID_TXN_STATE
        )

    run(scenario, tmp_path)


def test_transaction_without_partitions_completes_without_markers(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        pid, epoch = await begin(c)
        assert state_of(c, "txn") == "Ongoing"
        assert await c.end_txn("txn", pid, epoch, commit=True) == ErrorCode.NONE
        assert h.markers.written == []
        assert state_of(c, "txn") == "CompleteCommit"

    run(scenario, tmp_path)


def test_marker_errors_are_retried_and_a_deleted_partition_is_given_up(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        pid, epoch = await begin(c, ORDERS_0, PAYMENTS_0)
        h.markers.errors[ORDERS_0] = [  # retried
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            ErrorCode.NOT_ENOUGH_REPLICAS,
        ]
        h.markers.errors[PAYMENTS_0] = [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]  # deleted: given up
        ending = asyncio.create_task(c.end_txn("txn", pid, epoch, commit=True))
        await wait_until_async(
            lambda: len(h.markers.errors[ORDERS_0]) == 1,
            "the marker write to fail once",
            timeout=HANG_S,
            interval=0.005,
        )
        h.timer.advance(4)  # the first retry waits the backoff, 5 ms
        await settle()
        assert h.markers.errors[ORDERS_0] == [ErrorCode.NOT_ENOUGH_REPLICAS]
        h.timer.advance(1)
        await wait_until_async(
            lambda: not h.markers.errors[ORDERS_0],
            "the marker write to succeed",
            timeout=HANG_S,
            interval=0.005,
        )
        h.timer.advance(9)  # the second waits twice as long
        await settle()
        assert not ending.done() and h.markers.written == []
        h.timer.advance(1)
        assert await ending == ErrorCode.NONE
        assert [m.tp for m in h.markers.written] == [ORDERS_0]
        assert state_of(c, "txn") == "CompleteCommit"

    run(scenario, tmp_path)


# -- errors of AddPartitionsToTxn and InitProducerId -------------------------------------


def test_add_partitions_checks_the_producer(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        assert (
            await c.add_partitions("nobody", 1, 0, [ORDERS_0])
            == ErrorCode.INVALID_PRODUCER_ID_MAPPING
        )
        pid, epoch = await begin(c)
        assert await c.add_partitions("txn", pid + 1, epoch, [ORDERS_0]) == (
            ErrorCode.INVALID_PRODUCER_ID_MAPPING
        )
        assert (
            await c.add_partitions("txn", pid, epoch + 1, [ORDERS_0]) == ErrorCode.PRODUCER_FENCED
        )
        assert await c.add_partitions("", pid, epoch, [ORDERS_0]) == ErrorCode.INVALID_REQUEST

    run(scenario, tmp_path)


def test_init_refuses_a_timeout_beyond_the_maximum(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        assert (
            await c.init_producer_id("txn", 1001)
        ).error == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        assert (await c.init_producer_id("txn", 0)).error == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        assert (await c.init_producer_id("txn", 1000)).error == ErrorCode.NONE
        assert (await c.init_producer_id("", 1000)).error == ErrorCode.INVALID_REQUEST

    run(scenario, tmp_path, max_timeout_ms=1000)


def test_init_again_bumps_the_epoch_and_fences_the_old_one(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        first = await c.init_producer_id("txn", TIMEOUT_MS)
        second = await c.init_producer_id("txn", TIMEOUT_MS)
        assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)
        assert (
            await c.add_partitions("txn", first.producer_id, 0, [ORDERS_0])
            == ErrorCode.PRODUCER_FENCED
        )

    run(scenario, tmp_path)


def test_second_init_fences_and_aborts_the_ongoing_transaction(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        pid, epoch = await begin(c, ORDERS_0, ORDERS_1)
        second = await c.init_producer_id("txn", TIMEOUT_MS)
        assert second.error == ErrorCode.NONE
        # Fencing bumped to 1 (written with PrepareAbort); the new producer got 2.
        assert (second.producer_id, second.producer_epoch) == (pid, epoch + 2)
        assert sorted(h.markers.written, key=lambda m: m.tp) == [
            Marker(ORDERS_0, pid, epoch + 1, False, 0),
            Marker(ORDERS_1, pid, epoch + 1, False, 0),
        ]
        assert h.states_written("txn")[-3:] == ["PrepareAbort", "CompleteAbort", "Empty"]
        assert await c.add_partitions("txn", pid, epoch, [ORDERS_0]) == ErrorCode.PRODUCER_FENCED
        assert await c.end_txn("txn", pid, epoch, commit=True) == ErrorCode.PRODUCER_FENCED
        assert c.check_offset_commit("txn", pid, epoch, "g") == ErrorCode.INVALID_PRODUCER_EPOCH

    run(scenario, tmp_path)


async def exhausted(h: Harness, producer_id: int) -> TransactionCoordinator:
    """A coordinator that finds "txn" at epoch 32766 in the log, as after 32766 restarts."""
    value = TransactionLogValue(
        producer_id, 32766, TIMEOUT_MS, TransactionState.COMPLETE_COMMIT, (), h.clock(), h.clock()
    )
    builder = RecordBatchBuilder()
    builder.append(encode_transaction_log_value(value), key=encode_transaction_log_key("txn"))
    await h.append(h.coordinator.partition_of("txn"), builder.build())
    return h.reload()


def test_exhausted_epoch_gets_a_new_producer_id(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = await exhausted(h, 500)
        rotated = await c.init_producer_id("txn", TIMEOUT_MS)
        assert (rotated.error, rotated.producer_id, rotated.producer_epoch) == (
            ErrorCode.NONE,
            1001,
            0,
        )

    run(scenario, tmp_path)


def test_kip360_retry_of_a_rotation_gets_the_same_answer(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = await exhausted(h, 500)
        rotated = await c.init_producer_id("txn", TIMEOUT_MS, 500, 32766)
        assert (rotated.producer_id, rotated.producer_epoch) == (1001, 0)
        # The answer was lost: the producer asks again with its old id and epoch.
        retried = await c.init_producer_id("txn", TIMEOUT_MS, 500, 32766)
        assert (retried.error, retried.producer_id, retried.producer_epoch) == (
            ErrorCode.NONE,
            1001,
            0,
        )
        # Anyone else naming the old id is fenced.
        assert (
            await c.init_producer_id("txn", TIMEOUT_MS, 500, 3)
        ).error == ErrorCode.PRODUCER_FENCED

    run(scenario, tmp_path)


def test_kip360_recovery_bumps_the_epoch_and_a_retry_gets_it_again(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        first = await c.init_producer_id("txn", TIMEOUT_MS)
        bumped = await c.init_producer_id("txn", TIMEOUT_MS, first.producer_id, 0)
        assert (bumped.producer_id, bumped.producer_epoch) == (first.producer_id, 1)
        retry = await c.init_producer_id("txn", TIMEOUT_MS, first.producer_id, 0)
        assert retry.producer_epoch == 1
        assert (
            await c.init_producer_id("txn", TIMEOUT_MS, 999, 0)
        ).error == ErrorCode.PRODUCER_FENCED
        assert (await c.init_producer_id("txn", TIMEOUT_MS, first.producer_id, -1)).error == (
            ErrorCode.INVALID_REQUEST
        )

    run(scenario, tmp_path)


# -- while markers are in flight ----------------------------------------------------------


def test_requests_meet_concurrent_transactions_while_markers_are_written(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        pid, epoch = await begin(c, ORDERS_0)
        h.markers.hold()
        ending = asyncio.create_task(c.end_txn("txn", pid, epoch, commit=True))
        await wait_until_async(
            lambda: h.markers.waiting == 1, "one marker waiting", timeout=HANG_S, interval=0.005
        )
        assert state_of(c, "txn") == "PrepareCommit"
        assert not ending.done()
        assert (
            await c.add_partitions("txn", pid, epoch, [ORDERS_1])
            == ErrorCode.CONCURRENT_TRANSACTIONS
        )
        assert await c.end_txn("txn", pid, epoch, commit=True) == ErrorCode.CONCURRENT_TRANSACTIONS
        assert await c.end_txn("txn", pid, epoch, commit=False) == ErrorCode.INVALID_TXN_STATE
        assert (
            await c.init_producer_id("txn", TIMEOUT_MS)
        ).error == ErrorCode.CONCURRENT_TRANSACTIONS
        assert c.verify_partitions("txn", pid, epoch, [ORDERS_0]) == {
            ORDERS_0: ErrorCode.CONCURRENT_TRANSACTIONS
        }
        h.markers.release()
        assert await ending == ErrorCode.NONE
        assert state_of(c, "txn") == "CompleteCommit"
        assert await c.add_partitions("txn", pid, epoch, [ORDERS_1]) == ErrorCode.NONE

    run(scenario, tmp_path)


# -- timeouts --------------------------------------------------------------------------------


def test_timed_out_transaction_is_aborted_with_an_epoch_bump(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        pid, epoch = await begin(c, ORDERS_0)
        h.timer.advance(10)  # the timeout check runs
        await wait_until_async(
            lambda: h.timer.pending() == 2,
            "both periodic checks to wait again",
            timeout=HANG_S,
            interval=0.005,
        )  # both periodic checks wait again
        assert state_of(c, "txn") == "Ongoing"  # not yet: the transaction is 10 ms old
        h.timer.advance(TIMEOUT_MS - 10 + 1)
        await wait_until_async(
            lambda: state_of(c, "txn") == "CompleteAbort",
            "the transaction to be aborted",
            timeout=HANG_S,
            interval=0.005,
        )
        assert h.markers.written == [Marker(ORDERS_0, pid, epoch + 1, False, 0)]
        (described,) = c.describe_transactions(["txn"])
        assert described.producer_epoch == epoch + 1
        assert await c.end_txn("txn", pid, epoch, commit=True) == ErrorCode.PRODUCER_FENCED
        again = await c.init_producer_id("txn", TIMEOUT_MS)
        assert (again.producer_id, again.producer_epoch) == (pid, epoch + 2)

    run(scenario, tmp_path, abort_timed_out_interval_ms=10)


# -- reload ------------------------------------------------------------------------------------


def test_reload_mid_prepare_commit_completes_the_commit_after_start(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        pid, epoch = await begin(c, ORDERS_0, ORDERS_1)
        h.markers.hold()
        ending = asyncio.create_task(c.end_txn("txn", pid, epoch, commit=True))
        await wait_until_async(
            lambda: h.markers.waiting == 2, "two markers waiting", timeout=HANG_S, interval=0.005
        )
        await c.shutdown(grace_s=0)  # a crash after PrepareCommit, before any marker
        assert await ending == ErrorCode.NONE  # the outcome was durable
        assert h.states_written("txn")[-1] == "PrepareCommit"
        assert h.markers.written == []
        h.markers.release()
        fresh = h.reload()
        assert state_of(fresh, "txn") == "PrepareCommit"
        fresh.start()
        try:
            await wait_until_async(
                lambda: state_of(fresh, "txn") == "CompleteCommit",
                "the reloaded transaction to commit",
                timeout=HANG_S,
                interval=0.005,
            )
            assert sorted(h.markers.written, key=lambda m: m.tp) == [
                Marker(ORDERS_0, pid, epoch, True, 0),
                Marker(ORDERS_1, pid, epoch, True, 0),
            ]
            assert h.states_written("txn")[-1] == "CompleteCommit"
        finally:
            await fresh.shutdown(grace_s=1)

    run(scenario, tmp_path)


def test_reload_keeps_an_ongoing_transaction_that_can_then_commit(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        pid, epoch = await begin(h.coordinator, ORDERS_0)
        fresh = h.reload()
        fresh.start()
        try:
            (described,) = fresh.describe_transactions(["txn"])
            assert (described.state, described.producer_id, described.producer_epoch) == (
                "Ongoing", pid, epoch,
            )  # fmt: skip
            assert described.partitions == (ORDERS_0,)
            assert await fresh.end_txn("txn", pid, epoch, commit=True) == ErrorCode.NONE
            assert h.markers.written == [Marker(ORDERS_0, pid, epoch, True, 0)]
        finally:
            await fresh.shutdown(grace_s=1)

    run(scenario, tmp_path)


def test_reload_remembers_the_epoch_so_old_producers_stay_fenced(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        await c.init_producer_id("txn", TIMEOUT_MS)
        await c.init_producer_id("txn", TIMEOUT_MS)
        fresh = h.reload()
        third = await fresh.init_producer_id("txn", TIMEOUT_MS)
        assert third.producer_epoch == 2
        assert h.next_producer_id == 1001  # no new producer id was needed

    run(scenario, tmp_path)


# -- offsets, verification, admin ---------------------------------------------------------------


def test_add_offsets_adds_the_groups_offsets_partition(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        pid, epoch = await begin(c, ORDERS_0)
        assert c.check_offset_commit("txn", pid, epoch, "group") == ErrorCode.INVALID_TXN_STATE
        assert await c.add_offsets("txn", pid, epoch, "group") == ErrorCode.NONE
        offsets_tp = TopicPartition("__consumer_offsets", partition_for("group", 50))
        (described,) = c.describe_transactions(["txn"])
        assert set(described.partitions) == {ORDERS_0, offsets_tp}
        assert c.check_offset_commit("txn", pid, epoch, "group") == ErrorCode.NONE
        assert c.check_offset_commit("txn", pid + 1, epoch, "group") == (
            ErrorCode.INVALID_PRODUCER_ID_MAPPING
        )
        assert await c.end_txn("txn", pid, epoch, commit=True) == ErrorCode.NONE
        assert offsets_tp in {m.tp for m in h.markers.written}

    run(scenario, tmp_path)


def test_verify_only_answers_per_partition_and_changes_nothing(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        pid, epoch = await begin(c, ORDERS_0)
        assert c.verify_partitions("txn", pid, epoch, [ORDERS_0, ORDERS_1]) == {
            ORDERS_0: ErrorCode.NONE,
            ORDERS_1: ErrorCode.TRANSACTION_ABORTABLE,
        }
        fenced = c.verify_partitions("txn", pid, epoch + 1, [ORDERS_0])
        assert fenced == {ORDERS_0: ErrorCode.PRODUCER_FENCED}
        assert c.verify_partitions("other", pid, epoch, [ORDERS_0]) == {
            ORDERS_0: ErrorCode.INVALID_PRODUCER_ID_MAPPING
        }
        (described,) = c.describe_transactions(["txn"])
        assert described.partitions == (ORDERS_0,)

    run(scenario, tmp_path)


def test_list_and_describe_transactions(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        pid, epoch = await begin(c, ORDERS_0, PAYMENTS_0)
        idle = await c.init_producer_id("idle", 1234)
        unknown, listed = c.list_transactions()
        assert unknown == []
        assert {(t.transactional_id, t.producer_id, t.state) for t in listed} == {
            ("txn", pid, "Ongoing"),
            ("idle", idle.producer_id, "Empty"),
        }
        unknown, listed = c.list_transactions(["Ongoing", "Bogus"])
        assert unknown == ["Bogus"] and [t.transactional_id for t in listed] == ["txn"]
        _, listed = c.list_transactions(producer_id_filters=[idle.producer_id])
        assert [t.transactional_id for t in listed] == ["idle"]
        h.clock.advance(5000)
        _, listed = c.list_transactions(["Ongoing"], duration_filter_ms=4000)
        assert [t.transactional_id for t in listed] == ["txn"]
        _, listed = c.list_transactions(["Ongoing"], duration_filter_ms=6000)
        assert listed == []
        described, missing, empty = c.describe_transactions(["txn", "missing", ""])
        assert (described.error, described.state, described.producer_id) == (
            ErrorCode.NONE,
            "Ongoing",
            pid,
        )
        assert (described.producer_epoch, described.timeout_ms) == (epoch, TIMEOUT_MS)
        assert described.start_timestamp == h.clock() - 5000
        assert described.partitions == (ORDERS_0, PAYMENTS_0)
        assert missing.error == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        assert empty.error == ErrorCode.INVALID_REQUEST

    run(scenario, tmp_path)


def test_idle_transactional_ids_expire_with_a_tombstone(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        await begin(c, ORDERS_0)
        await c.init_producer_id("idle", TIMEOUT_MS)
        h.clock.advance(10_001)
        assert await c.expire_transactional_ids() == 1  # the open transaction stays
        assert c.describe_transactions(["idle"])[0].error == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        assert h.states_written("idle") == ["Empty", "tombstone"]
        assert state_of(h.reload(), "txn") == "Ongoing"
        assert (
            h.reload().describe_transactions(["idle"])[0].error
            == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        )
        assert (await c.init_producer_id("idle", TIMEOUT_MS)).producer_epoch == 0

    run(scenario, tmp_path, transactional_id_expiration_ms=10_000)


def test_transaction_state_topic_name() -> None:
    assert TRANSACTION_STATE_TOPIC == "__transaction_state"
