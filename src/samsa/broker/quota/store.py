"""Where client quota configs live: the data dir of a single node, or ZooKeeper.

- :class:`LocalQuotaStore`: in the dynamic config file of the data dirs
  (:class:`~samsa.broker.dynamic_config.DynamicBrokerConfig`), by entity path.
- :class:`ZkQuotaStore`: Kafka's znodes, ``/config/users/<user>``,
  ``/config/clients/<id>`` and ``/config/users/<user>/clients/<id>``, each
  change announced by a ``/config/changes/config_change_<seq>`` notification.
  Every broker reads all entities at start, follows the notifications (the
  broker's one :func:`~samsa.cluster.change_notifications.config_changes`
  listener, which SCRAM credentials share) and re-reads the entity each new one
  names, so a quota set through any broker applies on all of them.

Both apply an alteration to the broker's :class:`ClientQuotas` once it is stored.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from typing import Protocol

from samsa.broker.dynamic_config import DynamicBrokerConfig
from samsa.broker.quota.entity import QuotaEntity, parse_stored, stored_value
from samsa.broker.quota.manager import ClientQuotas
from samsa.cluster.change_notifications import ChangeNotificationListener
from samsa.cluster.kafka_zk import KafkaZk

log = logging.getLogger(__name__)

QuotaChanges = Mapping[QuotaEntity, Mapping[str, float | None]]
"""Per entity: each key's new value, or None to remove it."""


class QuotaStore(Protocol):
    async def alter(self, changes: QuotaChanges) -> None:
        """Apply the changes (already checked) and have them take effect."""
        ...


def _apply(current: Mapping[str, str], ops: Mapping[str, float | None]) -> dict[str, str]:
    updated = dict(current)
    for key, value in ops.items():
        if value is None:
            updated.pop(key, None)
        else:
            updated[key] = stored_value(key, value)
    return updated


def _entities(stored: Mapping[str, Mapping[str, str]]) -> dict[QuotaEntity, dict[str, float]]:
    found: dict[QuotaEntity, dict[str, float]] = {}
    for path, values in stored.items():
        try:
            entity = QuotaEntity.from_path(path)
        except ValueError:
            log.error("ignoring the quota config of %r: not a user or client entity", path)
            continue
        quotas = parse_stored(values)
        if quotas:
            found[entity] = quotas
    return found


class LocalQuotaStore:
    """Client quotas of a single node, kept with its dynamic configs."""

    def __init__(self, dynamic: DynamicBrokerConfig, quotas: ClientQuotas) -> None:
        self._dynamic = dynamic
        self._quotas = quotas

    def load(self) -> None:
        """Apply what the data dirs hold (after ``DynamicBrokerConfig.load``)."""
        self._quotas.update(_entities(self._dynamic.client_quotas))

    async def alter(self, changes: QuotaChanges) -> None:
        stored = {path: dict(v) for path, v in self._dynamic.client_quotas.items()}
        for entity, ops in changes.items():
            stored[entity.path] = _apply(stored.get(entity.path, {}), ops)
        await self._dynamic.update_client_quotas(stored)
        self._quotas.update(_entities(self._dynamic.client_quotas))


class ZkQuotaStore:
    """Client quotas of a cluster, in ZooKeeper; kept current by ``changes``, whose task is
    the one writer of the view."""

    def __init__(
        self, zk: KafkaZk, changes: ChangeNotificationListener[str], quotas: ClientQuotas
    ) -> None:
        self._zk = zk
        self._changes = changes
        self._quotas = quotas
        self._stored: dict[str, dict[str, str]] = {}
        changes.subscribe(self._reload, self._changed)

    async def _reload(self) -> None:
        self._stored = await self._zk.get_entity_configs()
        self._quotas.update(_entities(self._stored))

    async def _changed(self, entity_paths: Sequence[str]) -> None:
        quota_paths = [
            p for p in dict.fromkeys(entity_paths) if p.startswith(("users/", "clients/"))
        ]
        if not quota_paths:
            return
        for entity_path in quota_paths:
            config = await self._zk.get_entity_config(entity_path)
            if config:
                self._stored[entity_path] = config
            else:
                self._stored.pop(entity_path, None)
        self._quotas.update(_entities(self._stored))
        log.info("client quotas changed: %s", ", ".join(quota_paths))

    async def alter(self, changes: QuotaChanges) -> None:
        for entity, ops in changes.items():
            await self._zk.update_entity_config(entity.path, functools.partial(_apply, ops=ops))
        # Applied the way every broker applies it, through the notifications — and before
        # the answer, so the client's next request here sees it.
        await self._changes.catch_up()
