"""DescribeTransactions (key 65), version 0, and ListTransactions (key 66), versions 0–1:
the transactional ids a coordinator knows, their state, producer and partitions.

Typed handlers (:func:`samsa.broker.typed_api.serve`) of DescribeTransactions v0 and
ListTransactions v1 (v1 added the ``duration_filter``; -1 when a v0 request lacks it).
An id in error is described with Kafka's defaults for the other fields (zeros, no
state, start time 0).

With the authorizer on, DescribeTransactions needs DESCRIBE on each id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and shows only the topics the caller may
DESCRIBE; ListTransactions lists the ids the caller may DESCRIBE.
"""

from __future__ import annotations

import datetime
from typing import cast

from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.describe_transactions.v0.response import (
    DescribeTransactionsResponse,
    TopicData,
    TransactionState,
)
from kio.schema.list_transactions.v1.request import ListTransactionsRequest
from kio.schema.list_transactions.v1.response import ListTransactionsResponse
from kio.schema.list_transactions.v1.response import TransactionState as ListedTransaction
from kio.schema.types import ProducerId, TopicName, TransactionalId
from kio.static.primitive import TZAware, i16, i32, i32Timedelta

from samsa.acl import AclOperation, ResourceType
from samsa.broker.api import NO_THROTTLE, kio_error
from samsa.broker.handlers.txn_services import TxnServices
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.security.authorizer import authorize
from samsa.broker.typed_api import TypedApi
from samsa.coordinator.transaction.coordinator import TransactionDescription
from samsa.errors import ErrorCode
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import RequestHeader

DESCRIBE_TRANSACTIONS = TypedApi(
    ApiKey.DESCRIBE_TRANSACTIONS, (0, 0), DescribeTransactionsRequest, DescribeTransactionsResponse
)
LIST_TRANSACTIONS = TypedApi(
    ApiKey.LIST_TRANSACTIONS, (0, 1), ListTransactionsRequest, ListTransactionsResponse
)
DESCRIBE = AclOperation.DESCRIBE
TRANSACTIONAL_ID = ResourceType.TRANSACTIONAL_ID


def _instant(timestamp_ms: int) -> TZAware:
    """A timestamp field that must be on the wire even when it is -1 (no transaction yet).

    kio types the field as whole seconds from the epoch on, and its writer sends
    milliseconds: a start time keeps its milliseconds and -1 stays -1, as Kafka sends them
    (the cast tells mypy what the writer accepts, not what ``TZAware`` checks)."""
    return cast(TZAware, datetime.datetime.fromtimestamp(timestamp_ms / 1000, tz=datetime.UTC))


def _failed(transactional_id: str, error: ErrorCode) -> TransactionState:
    return TransactionState(
        error_code=kio_error(error), transactional_id=TransactionalId(transactional_id),
        transaction_state="", transaction_timeout=i32Timedelta.parse(datetime.timedelta(0)),
        transaction_start_time=_instant(0), producer_id=ProducerId(0), producer_epoch=i16(0),
        topics=(),
    )  # fmt: skip


def _described(d: TransactionDescription) -> TransactionState:
    if d.error:
        return _failed(d.transactional_id, d.error)
    topics: dict[str, list[i32]] = {}
    for tp in d.partitions:
        if authorize(DESCRIBE, ResourceType.TOPIC, tp.topic):
            topics.setdefault(tp.topic, []).append(i32(tp.partition))
    return TransactionState(
        error_code=kio_error(d.error),
        transactional_id=TransactionalId(d.transactional_id),
        transaction_state=d.state,
        transaction_timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=d.timeout_ms)),
        transaction_start_time=_instant(d.start_timestamp),
        producer_id=ProducerId(d.producer_id),
        producer_epoch=i16(d.producer_epoch),
        topics=tuple(
            TopicData(topic=TopicName(name), partitions=tuple(ids)) for name, ids in topics.items()
        ),
    )


async def describe_transactions(
    broker: TxnServices, header: RequestHeader, request: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    ids = request.transactional_ids
    states = [_failed(i, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
              for i in ids if not authorize(DESCRIBE, TRANSACTIONAL_ID, i)]  # fmt: skip
    allowed = [i for i in ids if authorize(DESCRIBE, TRANSACTIONAL_ID, i)]
    if allowed:
        states += map(_described, broker.txn_coordinator.describe_transactions(allowed))
    return DescribeTransactionsResponse(throttle_time=NO_THROTTLE, transaction_states=tuple(states))


async def list_transactions(
    broker: TxnServices, header: RequestHeader, request: ListTransactionsRequest
) -> ListTransactionsResponse:
    unknown, listed = broker.txn_coordinator.list_transactions(
        request.state_filters, request.producer_id_filters, request.duration_filter
    )
    return ListTransactionsResponse(
        throttle_time=NO_THROTTLE,
        error_code=kio_error(ErrorCode.NONE),
        unknown_state_filters=tuple(unknown),
        transaction_states=tuple(
            ListedTransaction(
                transactional_id=TransactionalId(t.transactional_id),
                producer_id=ProducerId(t.producer_id),
                transaction_state=t.state,
            )
            for t in listed
            if authorize(DESCRIBE, TRANSACTIONAL_ID, t.transactional_id)
        ),
    )


def register(registry: ApiRegistry, broker: TxnServices) -> None:
    DESCRIBE_TRANSACTIONS.serve(registry, describe_transactions, broker)
    LIST_TRANSACTIONS.serve(registry, list_transactions, broker)
