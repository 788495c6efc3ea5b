"""InitProducerId (key 22), versions 0–5, for idempotent producers.

A request without a transactional id gets a fresh producer id at epoch 0. With
a producer id and epoch (v3+, KIP-360) an idempotent producer that lost track
of its sequences gets the same id with the epoch bumped (a fresh id when the
epoch would overflow). Transactional ids are answered COORDINATOR_NOT_AVAILABLE
until the transaction coordinator exists.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.broker.handlers import respond
from samsa.protocol.codec import RequestHeader

if TYPE_CHECKING:
    from samsa.broker.server import Broker

API_KEY = 22
COORDINATOR_NOT_AVAILABLE = 15
MAX_EPOCH = 32767


def register(broker: Broker) -> None:
    async def handle(header: RequestHeader, body: Any) -> Any:
        if body.transactional_id is not None:
            return respond(
                header,
                {"error_code": COORDINATOR_NOT_AVAILABLE, "producer_id": -1, "producer_epoch": -1},
            )
        producer_id = getattr(body, "producer_id", -1)
        epoch = getattr(body, "producer_epoch", -1)
        if producer_id >= 0 and 0 <= epoch < MAX_EPOCH - 1:
            new_id, new_epoch = producer_id, epoch + 1
        else:
            new_id, new_epoch = broker.metadata.allocate_producer_id(), 0
        return respond(
            header,
            {"throttle_time": 0, "error_code": 0, "producer_id": new_id,
             "producer_epoch": new_epoch},
        )  # fmt: skip

    broker.registry.add(API_KEY, 0, 5, handle)
