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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from samsa.acl import AclOperation, ResourceType
from samsa.broker.api import respond
from samsa.broker.handlers.transactions import for_version
from samsa.broker.metadata.topic_manager import TopicManager
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.security.authorizer import authorize, authorize_any, authorize_cluster
from samsa.coordinator.transaction.coordinator import TransactionCoordinator
from samsa.errors import ErrorCode
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import duration_ms
from samsa.protocol.codec import RequestHeader

MAX_EPOCH = 32767


def register(
    registry: ApiRegistry,
    *,
    allocate_producer_id: Callable[[], int],
    txn_coordinator: TransactionCoordinator,
    topics: TopicManager,
) -> None:
    async def handle(header: RequestHeader, body: Any) -> Any:
        producer_id = getattr(body, "producer_id", -1)
        epoch = getattr(body, "producer_epoch", -1)
        if refused := _refused(body.transactional_id):
            return respond(header, {"throttle_time": 0, "error_code": refused, "producer_id": -1,
                                    "producer_epoch": -1})  # fmt: skip
        if body.transactional_id is not None:
            if body.transactional_id:  # an empty id is refused without creating anything
                await topics.ensure_transaction_topic()
            result = await txn_coordinator.init_producer_id(
                body.transactional_id, duration_ms(body.transaction_timeout), producer_id, epoch
            )
            error = for_version(result.error, header.api_version, fenced_since=4)
            return respond(
                header,
                {"throttle_time": 0, "error_code": error, "producer_id": result.producer_id,
                 "producer_epoch": result.producer_epoch},
            )  # fmt: skip
        if producer_id >= 0 and 0 <= epoch < MAX_EPOCH - 1:
            new_id, new_epoch = producer_id, epoch + 1
        else:
            new_id, new_epoch = allocate_producer_id(), 0
        return respond(
            header,
            {"throttle_time": 0, "error_code": ErrorCode.NONE, "producer_id": new_id,
             "producer_epoch": new_epoch},
        )  # fmt: skip

    registry.add(ApiKey.INIT_PRODUCER_ID, 0, 5, handle)


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
