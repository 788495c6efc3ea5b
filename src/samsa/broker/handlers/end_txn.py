"""AddOffsetsToTxn (key 25), versions 0–4, and EndTxn (key 26), versions 0–5: a
transaction takes a group's offsets partition in, and ends (commit or abort, markers
written by the coordinator).

Typed handlers (:func:`samsa.broker.typed_api.serve`) of AddOffsetsToTxn v4 and EndTxn v5.
PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH below version 2, and
TRANSACTION_ABORTABLE as INVALID_TXN_STATE below version 4, as Kafka does
(:func:`~samsa.broker.handlers.transactions.for_version`). Transaction version 1 only:
EndTxn 5 answers producer id and epoch -1, as Kafka does for such clients.

With the authorizer on, both need WRITE on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), AddOffsetsToTxn also READ on the group
(GROUP_AUTHORIZATION_FAILED). The decisions are
:class:`~samsa.coordinator.transaction.coordinator.TransactionCoordinator`'s.
"""

from __future__ import annotations

from kio.schema.add_offsets_to_txn.v4.request import AddOffsetsToTxnRequest
from kio.schema.add_offsets_to_txn.v4.response import AddOffsetsToTxnResponse
from kio.schema.end_txn.v5.request import EndTxnRequest
from kio.schema.end_txn.v5.response import EndTxnResponse
from kio.schema.types import ProducerId
from kio.static.primitive import i16

from samsa.acl import AclOperation, ResourceType
from samsa.broker.api import NO_THROTTLE, kio_error
from samsa.broker.handlers.transactions import for_version
from samsa.broker.handlers.txn_services import TxnServices
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.security.authorizer import authorize
from samsa.broker.typed_api import TypedApi
from samsa.errors import ErrorCode
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import RequestHeader

ADD_OFFSETS_TO_TXN = TypedApi(
    ApiKey.ADD_OFFSETS_TO_TXN, (0, 4), AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
)
END_TXN = TypedApi(ApiKey.END_TXN, (0, 5), EndTxnRequest, EndTxnResponse)


async def add_offsets_to_txn(
    broker: TxnServices, header: RequestHeader, request: AddOffsetsToTxnRequest
) -> AddOffsetsToTxnResponse:
    if not authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        error = ErrorCode.GROUP_AUTHORIZATION_FAILED
    else:
        await broker.topics.ensure_offsets_topic()  # its partition gets this txn's marker
        error = await broker.txn_coordinator.add_offsets(
            request.transactional_id, request.producer_id, request.producer_epoch,
            request.group_id,
        )  # fmt: skip
        error = for_version(error, header.api_version, fenced_since=2, abortable_since=4)
    return AddOffsetsToTxnResponse(throttle_time=NO_THROTTLE, error_code=kio_error(error))


async def end_txn(
    broker: TxnServices, header: RequestHeader, request: EndTxnRequest
) -> EndTxnResponse:
    if not authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        error = await broker.txn_coordinator.end_txn(
            request.transactional_id, request.producer_id, request.producer_epoch,
            request.committed,
        )  # fmt: skip
        error = for_version(error, header.api_version, fenced_since=2, abortable_since=4)
    return EndTxnResponse(throttle_time=NO_THROTTLE, error_code=kio_error(error),
                          producer_id=ProducerId(-1), producer_epoch=i16(-1))  # fmt: skip


def register(registry: ApiRegistry, broker: TxnServices) -> None:
    ADD_OFFSETS_TO_TXN.serve(registry, add_offsets_to_txn, broker)
    END_TXN.serve(registry, end_txn, broker)
