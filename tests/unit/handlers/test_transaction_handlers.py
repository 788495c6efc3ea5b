"""InitProducerId, AddOffsetsToTxn, EndTxn, DescribeTransactions and ListTransactions
handlers called directly, without a socket: a real transaction coordinator whose state goes to real
``__transaction_state`` logs in a tmp dir, markers taken as written."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from kio.index import load_request_schema
from kio.schema.add_offsets_to_txn.v4.request import AddOffsetsToTxnRequest
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.end_txn.v5.request import EndTxnRequest
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest
from kio.schema.list_transactions.v1.request import ListTransactionsRequest
from kio.schema.types import GroupId, ProducerId, TransactionalId
from kio.static.primitive import i16, i32Timedelta
from tests.conftest import ManualClock, ManualTimer
from tests.unit.handlers.group_broker import header, on_the_wire

from samsa.broker.handlers.describe_transactions import describe_transactions, list_transactions
from samsa.broker.handlers.end_txn import add_offsets_to_txn, end_txn
from samsa.broker.handlers.producer_id import init_producer_id
from samsa.broker.handlers.producer_id import register as register_producer_id
from samsa.broker.network.registry import ApiRegistry
from samsa.coordinator.transaction.coordinator import TransactionCoordinator
from samsa.errors import ErrorCode
from samsa.protocol.api_keys import ApiKey
from samsa.storage import Log, LogConfig
from samsa.storage.log_loader import load_log
from samsa.storage.validator import AppendOrigin
from samsa.types import TopicPartition

T = TypeVar("T")
TXN = TransactionalId("txn")
TP = TopicPartition("orders", 0)


class Broker:
    """What the transaction handlers use of a broker."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.logs: dict[TopicPartition, Log] = {}
        self.markers: list[tuple[TopicPartition, int, bool]] = []
        self.clock = clock = ManualClock()
        self.next_producer_id = 1000
        self.txn_coordinator = TransactionCoordinator(
            3, self._append, clock, self._write_marker, self._allocate, timer=ManualTimer(clock)
        )
        self.topics = self

    async def ensure_offsets_topic(self) -> None:
        pass

    async def ensure_transaction_topic(self) -> None:
        pass

    def allocate_producer_id(self) -> int:
        return self._allocate()

    def _allocate(self) -> int:
        self.next_producer_id += 1
        return self.next_producer_id

    async def _append(self, tp: TopicPartition, records: bytes) -> None:
        if tp not in self.logs:
            self.logs[tp] = load_log(self.tmp / f"{tp.topic}-{tp.partition}", LogConfig())
        self.logs[tp].append_as_leader(bytearray(records), origin=AppendOrigin.COORDINATOR)

    async def _write_marker(
        self, tp: TopicPartition, producer_id: int, epoch: int, commit: bool, coordinator_epoch: int
    ) -> int:
        self.markers.append((tp, producer_id, commit))
        return ErrorCode.NONE

    async def ongoing(self) -> tuple[int, int]:
        """A producer of ``txn`` with a transaction open on ``TP``: its id and epoch."""
        init = await self.txn_coordinator.init_producer_id(TXN, 60_000)
        assert init.error == ErrorCode.NONE
        added = await self.txn_coordinator.add_partitions(
            TXN, init.producer_id, init.producer_epoch, [TP]
        )
        assert added == ErrorCode.NONE
        return init.producer_id, init.producer_epoch


def run(scenario: Callable[[Broker], Awaitable[T]], tmp_path: Path) -> T:
    async def main() -> T:
        broker = Broker(tmp_path)
        broker.txn_coordinator.start()
        try:
            return await scenario(broker)
        finally:
            await broker.txn_coordinator.shutdown(grace_s=1)

    return asyncio.run(main())


def end(producer_id: int, epoch: int, *, committed: bool = True) -> EndTxnRequest:
    return EndTxnRequest(transactional_id=TXN, producer_id=ProducerId(producer_id),
                         producer_epoch=i16(epoch), committed=committed)  # fmt: skip


def test_end_txn_commits_and_writes_the_markers(tmp_path: Path) -> None:
    async def scenario(broker: Broker) -> tuple[KioErrorCode, int]:
        producer_id, epoch = await broker.ongoing()
        response = await end_txn(broker, header(ApiKey.END_TXN, 5), end(producer_id, epoch))
        return response.error_code, len(broker.markers)

    assert run(scenario, tmp_path) == (KioErrorCode.none, 1)


def test_a_fenced_producer_is_told_in_the_code_its_version_knows(tmp_path: Path) -> None:
    async def scenario(broker: Broker) -> list[int]:
        producer_id, epoch = await broker.ongoing()
        stale = end(producer_id, epoch - 1)
        answers = []
        for version in (5, 1):
            response = await end_txn(broker, header(ApiKey.END_TXN, version), stale)
            answers.append(on_the_wire(ApiKey.END_TXN, version, response).error_code.value)
        return answers

    assert run(scenario, tmp_path) == [ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH]


def test_add_offsets_to_txn_takes_the_groups_partition_in(tmp_path: Path) -> None:
    async def scenario(broker: Broker) -> tuple[KioErrorCode, list[str]]:
        producer_id, epoch = await broker.ongoing()
        request = AddOffsetsToTxnRequest(
            transactional_id=TXN, producer_id=ProducerId(producer_id), producer_epoch=i16(epoch),
            group_id=GroupId("g"),
        )  # fmt: skip
        added = await add_offsets_to_txn(broker, header(ApiKey.ADD_OFFSETS_TO_TXN, 4), request)
        described = await describe_transactions(
            broker, header(ApiKey.DESCRIBE_TRANSACTIONS, 0),
            DescribeTransactionsRequest(transactional_ids=(TXN,)),
        )  # fmt: skip
        [state] = described.transaction_states
        return added.error_code, sorted(t.topic for t in state.topics)

    assert run(scenario, tmp_path) == (KioErrorCode.none, ["__consumer_offsets", "orders"])


def test_an_ongoing_transaction_is_described_and_listed(tmp_path: Path) -> None:
    async def scenario(broker: Broker) -> tuple[object, object]:
        await broker.ongoing()
        described = await describe_transactions(
            broker, header(ApiKey.DESCRIBE_TRANSACTIONS, 0),
            DescribeTransactionsRequest(transactional_ids=(TXN, TransactionalId("nobody"))),
        )  # fmt: skip
        listed = await list_transactions(
            broker, header(ApiKey.LIST_TRANSACTIONS, 1), ListTransactionsRequest()
        )
        return (
            [(s.transactional_id, s.error_code, s.transaction_state, s.producer_id)
             for s in described.transaction_states],
            [(t.transactional_id, t.producer_id, t.transaction_state)
             for t in listed.transaction_states],
        )  # fmt: skip

    described, listed = run(scenario, tmp_path)
    assert described == [
        ("txn", KioErrorCode.none, "Ongoing", 1001),
        ("nobody", KioErrorCode.transactional_id_not_found, "", 0),
    ]
    assert listed == [("txn", 1001, "Ongoing")]


def init(
    transactional_id: str | None, producer_id: int = -1, epoch: int = -1
) -> InitProducerIdRequest:
    return InitProducerIdRequest(
        transactional_id=None if transactional_id is None else TransactionalId(transactional_id),
        transaction_timeout=i32Timedelta.parse(datetime.timedelta(seconds=60)),
        producer_id=ProducerId(producer_id), producer_epoch=i16(epoch),
    )  # fmt: skip


def test_an_idempotent_producer_gets_a_fresh_id_and_then_a_bumped_epoch(tmp_path: Path) -> None:
    async def scenario(broker: Broker) -> list[tuple[int, int]]:
        h = header(ApiKey.INIT_PRODUCER_ID, 5)
        fresh = await init_producer_id(broker, h, init(None))
        bumped = await init_producer_id(broker, h, init(None, fresh.producer_id, 0))
        return [
            (fresh.producer_id, fresh.producer_epoch),
            (bumped.producer_id, bumped.producer_epoch),
        ]

    assert run(scenario, tmp_path) == [(1001, 0), (1001, 1)]


def test_a_v0_init_producer_id_is_up_converted_without_a_producer_to_bump(tmp_path: Path) -> None:
    async def scenario(broker: Broker) -> tuple[int, int]:
        registry = ApiRegistry()
        register_producer_id(registry, broker)
        handle = registry.handler_for(ApiKey.INIT_PRODUCER_ID, 0)
        assert handle is not None
        v0 = load_request_schema(ApiKey.INIT_PRODUCER_ID, 0)(
            transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60)
        )
        answer = on_the_wire(
            ApiKey.INIT_PRODUCER_ID, 0, await handle(header(ApiKey.INIT_PRODUCER_ID, 0), v0)
        )
        return answer.producer_id, answer.producer_epoch

    assert run(scenario, tmp_path) == (1001, 0)


def test_a_transactional_producer_is_initialised_by_the_coordinator(tmp_path: Path) -> None:
    async def scenario(broker: Broker) -> list[tuple[KioErrorCode, int, int]]:
        h = header(ApiKey.INIT_PRODUCER_ID, 5)
        first = await init_producer_id(broker, h, init("txn"))
        second = await init_producer_id(broker, h, init("txn"))
        return [(r.error_code, r.producer_id, r.producer_epoch) for r in (first, second)]

    assert run(scenario, tmp_path) == [(KioErrorCode.none, 1001, 0), (KioErrorCode.none, 1001, 1)]


def test_a_transaction_is_described_with_its_start_time_to_the_millisecond(
    tmp_path: Path,
) -> None:
    async def scenario(broker: Broker) -> tuple[int, int]:
        broker.clock.advance(371)
        await broker.ongoing()
        described = await describe_transactions(
            broker, header(ApiKey.DESCRIBE_TRANSACTIONS, 0),
            DescribeTransactionsRequest(transactional_ids=(TXN,)),
        )  # fmt: skip
        answer = on_the_wire(ApiKey.DESCRIBE_TRANSACTIONS, 0, described)
        [state] = answer.transaction_states
        return round(state.transaction_start_time.timestamp() * 1000), broker.clock()

    started, now = run(scenario, tmp_path)
    assert started == now
