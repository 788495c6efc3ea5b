"""Where client quota configs live: the data dir of a single node, or ZooKeeper.

- :class:`LocalQuotaStore`: in the dynamic config file of the data dirs
  (:class:`~samsa.broker.dynamic_config.DynamicBrokerConfig`), by entity path.
- :class:`ZkQuotaStore`: Kafka's znodes, ``/config/users/<user>``,
  ``/config/clients/<id>`` and ``/config/users/<user>/clients/<id>``, each
  change announced by a ``/config/changes/config_change_<seq>`` notification.
  Every broker reads all entities at start, watches the notifications, and
  re-reads the entity each new one names, so a quota set through any broker
  applies on all of them. A broker only reads notifications newer than the
  last it saw, and deletes those it has seen once they are 15 minutes old
  (as Kafka does), so they do not pile up in ZooKeeper.

Both apply an alteration to the broker's :class:`ClientQuotas` once it is stored.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from typing import Protocol

from samsa.broker.dynamic_config import DynamicBrokerConfig
from samsa.broker.quota.entity import QuotaEntity, parse_stored, stored_value
from samsa.broker.quota.manager import ClientQuotas
from samsa.cluster import zk_data
from samsa.cluster.events import EventQueue
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


CHANGE_EXPIRY_MS = 15 * 60 * 1000
"""How long a ``/config/changes`` notification is kept (Kafka's 15 minutes)."""


class ZkQuotaStore:
    """Client quotas of a cluster, in ZooKeeper; one owner of the view (the event task)."""

    def __init__(
        self, zk: KafkaZk, quotas: ClientQuotas, change_expiry_ms: int = CHANGE_EXPIRY_MS
    ) -> None:
        self._zk = zk
        self._quotas = quotas
        self._change_expiry_ms = change_expiry_ms
        self._stored: dict[str, dict[str, str]] = {}
        self._last_seen = -1
        self._events: EventQueue[str] = EventQueue("client-quotas", self._handle)

    async def start(self) -> None:
        """Read every entity, then follow the change notifications."""
        await self._read_all()
        self._zk.client.add_state_listener(self._on_session_state)
        self._events.start()

    def _on_session_state(self, state: str) -> None:
        # A new session has none of the old one's watches: look at the notifications
        # again (those made meanwhile are newer than the last one seen).
        if state == "CONNECTED":
            self._events.put("changes")

    async def stop(self) -> None:
        await self._events.stop()

    async def _read_all(self) -> None:
        # Notifications first: a change made after this read has a newer one.
        changes = await self._zk.get_config_changes(watch=self._changed)
        sequences = [s for s in map(zk_data.config_change_sequence, changes) if s is not None]
        self._last_seen = max(sequences, default=-1)
        self._stored = await self._zk.get_entity_configs()
        self._quotas.update(_entities(self._stored))

    def _changed(self) -> None:
        self._events.put("changes")

    async def _handle(self, _event: str) -> None:
        changes = await self._zk.get_config_changes(watch=self._changed)
        entity_paths: list[str] = []
        for name in changes:
            sequence = zk_data.config_change_sequence(name)
            if sequence is None or sequence <= self._last_seen:
                continue
            entity_path = await self._zk.get_config_change(name)
            self._last_seen = sequence
            if entity_path is not None and entity_path.startswith(("users/", "clients/")):
                entity_paths.append(entity_path)
        seen = [
            name
            for name in changes
            if (sequence := zk_data.config_change_sequence(name)) is not None
            and sequence <= self._last_seen
        ]
        await self._zk.purge_config_changes(seen, self._change_expiry_ms)
        if not entity_paths:
            return
        for entity_path in dict.fromkeys(entity_paths):
            config = await self._zk.get_entity_config(entity_path)
            if config:
                self._stored[entity_path] = config
            else:
                self._stored.pop(entity_path, None)
        self._quotas.update(_entities(self._stored))
        log.info("client quotas changed: %s", ", ".join(dict.fromkeys(entity_paths)))

    async def alter(self, changes: QuotaChanges) -> None:
        for entity, ops in changes.items():
            await self._zk.update_entity_config(entity.path, functools.partial(_apply, ops=ops))
        # Applied the way every broker applies it, through the notifications — and before
        # the answer, so the client's next request here sees it.
        self._events.put("changes")
        await self._events.wait_idle()
