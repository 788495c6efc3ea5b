"""InitProducerId (key 22), versions 0–5, for idempotent and transactional producers.

A request without a transactional id gets a fresh producer id at epoch 0. With
a producer id and epoch (v3+, KIP-360) an idempotent producer that lost track
of its sequences gets the same id with the epoch bumped (a fresh id when the
epoch would overflow). A request with a transactional id goes to the
transaction coordinator, which bumps the id's epoch (fencing earlier producers,
aborting their open transaction) and creates ``__transaction_state`` first if
needed. PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH below version 4,
which introduced it. With the authorizer on, a transactional id needs WRITE on it
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer needs
IDEMPOTENT_WRITE on the cluster or WRITE on some topic (CLUSTER_AUTHORIZATION_FAILED),
as Kafka's.

A typed handler (:func:`samsa.broker.typed_api.serve`) of InitProducerId v5: before v3 the
request has no producer id and epoch, read as -1 (the newest schema's defaults).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from kio.schema.init_producer_id.v5.request import InitProducerIdRequest
from kio.schema.init_producer_id.v5.response import InitProducerIdResponse
from kio.schema.types import ProducerId
from kio.static.primitive import i16

from samsa.acl import AclOperation, ResourceType
from samsa.broker.api import NO_THROTTLE, kio_error
from samsa.broker.handlers.transactions import for_version
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.security.authorizer import authorize, authorize_any, authorize_cluster
from samsa.broker.typed_api import TypedApi
from samsa.coordinator.transaction.coordinator import TransactionCoordinator
from samsa.errors import ErrorCode
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import duration_ms
from samsa.protocol.codec import RequestHeader

INIT_PRODUCER_ID = TypedApi(
    ApiKey.INIT_PRODUCER_ID, (0, 5), InitProducerIdRequest, InitProducerIdResponse
)
MAX_EPOCH = 32767


class TransactionStateTopic(Protocol):
    async def ensure_transaction_topic(self) -> None: ...


class ProducerIdServices(Protocol):
    """The part of the broker InitProducerId uses."""

    @property
    def allocate_producer_id(self) -> Callable[[], int]: ...

    @property
    def txn_coordinator(self) -> TransactionCoordinator: ...

    @property
    def topics(self) -> TransactionStateTopic: ...


def _answer(error: ErrorCode, producer_id: int, epoch: int) -> InitProducerIdResponse:
    return InitProducerIdResponse(
        throttle_time=NO_THROTTLE,
        error_code=kio_error(error),
        producer_id=ProducerId(producer_id),
        producer_epoch=i16(epoch),
    )


async def init_producer_id(
    broker: ProducerIdServices, header: RequestHeader, request: InitProducerIdRequest
) -> InitProducerIdResponse:
    transactional_id = request.transactional_id
    producer_id, epoch = request.producer_id, request.producer_epoch
    if refused := _refused(transactional_id):
        return _answer(refused, -1, -1)
    if transactional_id is not None:
        if transactional_id:  # an empty id is refused without creating anything
            await broker.topics.ensure_transaction_topic()
        result = await broker.txn_coordinator.init_producer_id(
            transactional_id, duration_ms(request.transaction_timeout), producer_id, epoch
        )
        error = for_version(result.error, header.api_version, fenced_since=4)
        return _answer(error, result.producer_id, result.producer_epoch)
    if producer_id >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        return _answer(ErrorCode.NONE, producer_id, epoch + 1)
    return _answer(ErrorCode.NONE, broker.allocate_producer_id(), 0)


def register(registry: ApiRegistry, broker: ProducerIdServices) -> None:
    INIT_PRODUCER_ID.serve(registry, init_producer_id, broker)


def _refused(transactional_id: str | None) -> ErrorCode:
    if transactional_id is not None:
        if authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return ErrorCode.NONE
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if authorize_cluster(AclOperation.IDEMPOTENT_WRITE) or authorize_any(
        AclOperation.WRITE, ResourceType.TOPIC
    ):
        return ErrorCode.NONE
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
