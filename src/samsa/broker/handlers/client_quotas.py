"""DescribeClientQuotas (key 48) and AlterClientQuotas (key 49), versions 0–1.

Entities are a ``user``, a ``client-id`` or both; a null name is the default
entity. Keys: ``producer_byte_rate`` and ``consumer_byte_rate`` (whole bytes
per second) and ``request_percentage`` (percent of one thread), each positive.
An entry with another entity type or key, a key named twice, or a bad value is
answered INVALID_REQUEST on its own and the others are applied; with
``validate_only`` nothing is. Describe filters by exact name, default, or any
name per type, ``strict`` leaving out entities with parts the filter does not
name; a bad filter is INVALID_REQUEST for the whole request.

With the authorizer on, Describe needs DESCRIBE_CONFIGS on the cluster (the whole
request is CLUSTER_AUTHORIZATION_FAILED otherwise) and Alter needs ALTER_CONFIGS on the
cluster (every entry CLUSTER_AUTHORIZATION_FAILED, nothing applied), as Kafka's.

Deviation: the ``ip`` entity (connection creation rates) is not supported:
INVALID_REQUEST, as for any unknown entity type.
"""

from __future__ import annotations

from typing import Any, Protocol

from samsa.acl import AclOperation
from samsa.broker.api import error_fields, respond
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.quota.entity import (
    FilterComponent,
    QuotaEntity,
    check_filter,
    matches,
    parse_quota_value,
)
from samsa.broker.quota.manager import ClientQuotas
from samsa.broker.quota.store import QuotaStore
from samsa.broker.security.authorizer import authorize_cluster
from samsa.errors import ErrorCode, InvalidRequestError, KafkaError
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import RequestHeader


class QuotaServices(Protocol):
    @property
    def client_quotas(self) -> ClientQuotas: ...

    @property
    def quota_store(self) -> QuotaStore: ...


def _changes(entry: Any) -> tuple[QuotaEntity, dict[str, float | None]]:
    entity = QuotaEntity.from_components((e.entity_type, e.entity_name) for e in entry.entity)
    ops: dict[str, float | None] = {}
    for op in entry.ops:
        if op.key in ops:
            raise InvalidRequestError(f"Duplicate quota key {op.key} in the entry")
        if op.remove:
            parse_quota_value(op.key, 1.0)  # the key must be a quota's, whatever the value
            ops[op.key] = None
        else:
            ops[op.key] = parse_quota_value(op.key, float(op.value))
    return entity, ops


def register(registry: ApiRegistry, broker: QuotaServices) -> None:
    async def describe(header: RequestHeader, body: Any) -> Any:
        if not authorize_cluster(AclOperation.DESCRIBE_CONFIGS):
            return respond(header, {
                "throttle_time": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": "not authorized to describe client quotas", "entries": None,
            })  # fmt: skip
        components = [
            FilterComponent(c.entity_type, c.match_type, c.match) for c in body.components
        ]
        try:
            check_filter(components)
        except KafkaError as exc:
            return respond(header, {"throttle_time": 0, **error_fields(exc), "entries": None})
        entries = [
            {
                "entity": [
                    {"entity_type": kind, "entity_name": name} for kind, name in entity.components()
                ],
                "values": [{"key": k, "value": v} for k, v in sorted(values.items())],
            }
            for entity, values in sorted(
                broker.client_quotas.entities.items(), key=lambda item: item[0].path
            )
            if matches(entity, components, body.strict)
        ]
        return respond(
            header,
            {"throttle_time": 0, "error_code": ErrorCode.NONE, "error_message": None,
             "entries": entries},
        )  # fmt: skip

    async def alter(header: RequestHeader, body: Any) -> Any:
        results: list[dict[str, Any]] = []
        changes: dict[QuotaEntity, dict[str, float | None]] = {}
        allowed = authorize_cluster(AclOperation.ALTER_CONFIGS)
        for entry in body.entries:
            result: dict[str, Any] = {
                "entity": [
                    {"entity_type": e.entity_type, "entity_name": e.entity_name}
                    for e in entry.entity
                ],
                "error_code": ErrorCode.NONE,
                "error_message": None,
            }
            if not allowed:
                result["error_code"] = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                result["error_message"] = "not authorized to alter client quotas"
                results.append(result)
                continue
            try:
                entity, ops = _changes(entry)
                if entity in changes:
                    raise InvalidRequestError(f"Duplicate quota entity {entity.path}")
                changes[entity] = ops
            except KafkaError as exc:
                result.update(error_fields(exc))
            results.append(result)
        if changes and not body.validate_only:
            try:
                await broker.quota_store.alter(changes)
            except KafkaError as exc:
                for result in results:
                    if result["error_code"] == ErrorCode.NONE:
                        result.update(error_fields(exc))
        return respond(header, {"throttle_time": 0, "entries": results})

    registry.add(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1, describe)
    registry.add(ApiKey.ALTER_CLIENT_QUOTAS, 0, 1, alter)
