"""Client quotas through the admin client: AlterClientQuotas and DescribeClientQuotas.

An entity is a mapping of entity type (``"user"``, ``"client-id"``) to a name,
None naming the default entity — as Java's ``ClientQuotaEntity``. Any broker
answers: the quotas are the cluster's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from samsa.client.admin.base import AdminBase, finish, item_error
from samsa.client.errors import error_for
from samsa.errors import KafkaError
from samsa.protocol.api_keys import ApiKey

__all__ = ["ClientQuotaAlteration", "ClientQuotaFilterComponent", "QuotaAdmin"]


QuotaEntity = tuple[tuple[str, str | None], ...]
"""``(("user", "alice"), ("client-id", None))``: sorted pairs, usable as a dict key."""


def quota_entity(entity: Mapping[str, str | None]) -> QuotaEntity:
    return tuple(sorted(entity.items()))


@dataclass(frozen=True, slots=True)
class ClientQuotaAlteration:
    """Changes to one entity's quotas: each key's new value, or None to remove it."""

    entity: Mapping[str, str | None]
    ops: Mapping[str, float | None]


@dataclass(frozen=True, slots=True)
class ClientQuotaFilterComponent:
    """Match one entity type: by ``name`` (``match_type`` 0), its default (1), or any (2)."""

    entity_type: str
    match_type: int = 0
    name: str | None = None

    @classmethod
    def of_entity(cls, entity_type: str, name: str) -> ClientQuotaFilterComponent:
        return cls(entity_type, 0, name)

    @classmethod
    def of_default_entity(cls, entity_type: str) -> ClientQuotaFilterComponent:
        return cls(entity_type, 1, None)

    @classmethod
    def of_entity_type(cls, entity_type: str) -> ClientQuotaFilterComponent:
        return cls(entity_type, 2, None)


class QuotaAdmin(AdminBase):
    """Client quota operations of the admin client."""

    async def alter_client_quotas(
        self,
        alterations: Iterable[ClientQuotaAlteration],
        *,
        validate_only: bool = False,
        raise_on_error: bool = True,
        timeout_ms: int | None = None,
    ) -> dict[QuotaEntity, KafkaError | None]:
        """Apply each alteration; each entity's error (None: done)."""
        entries = [
            {
                "entity": [
                    {"entity_type": kind, "entity_name": name}
                    for kind, name in a.entity.items()
                ],
                "ops": [
                    {"key": key, "value": 0.0 if value is None else float(value),
                     "remove": value is None}
                    for key, value in a.ops.items()
                ],
            }
            for a in alterations
        ]  # fmt: skip
        body = {"entries": entries, "validate_only": validate_only}

        async def attempt() -> Any:
            return await self._cluster.send(None, ApiKey.ALTER_CLIENT_QUOTAS, body)

        response = await self._retrying(attempt, "alter client quotas", timeout_ms)
        results: dict[QuotaEntity, KafkaError | None] = {}
        for entry in response.entries:
            entity = quota_entity({e.entity_type: e.entity_name for e in entry.entity})
            results[entity] = item_error(
                int(entry.error_code), f"client quota {dict(entity)}", entry.error_message
            )
        return finish(results, raise_on_error)

    async def describe_client_quotas(
        self,
        components: Iterable[ClientQuotaFilterComponent] = (),
        *,
        strict: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[QuotaEntity, dict[str, float]]:
        """The quotas of every entity the filter matches (no components: every entity)."""
        body = {
            "components": [
                {"entity_type": c.entity_type, "match_type": c.match_type, "match": c.name}
                for c in components
            ],
            "strict": strict,
        }

        async def attempt() -> Any:
            return await self._cluster.send(None, ApiKey.DESCRIBE_CLIENT_QUOTAS, body)

        response = await self._retrying(attempt, "describe client quotas", timeout_ms)
        if response.error_code:
            raise error_for(int(response.error_code), f"describe client quotas: "
                            f"{response.error_message}")  # fmt: skip
        return {
            quota_entity({e.entity_type: e.entity_name for e in entry.entity}): {
                v.key: float(v.value) for v in entry.values
            }
            for entry in response.entries or ()
        }
