"""Following a store of sequential change notifications (Kafka's
``ZkNodeChangeNotificationListener``).

A broker that changes something other brokers cache (an entity's config, a
resource's ACLs) writes it, then creates a sequential znode under a change root
(``/config/changes/config_change_<seq>``, ``/kafka-acl-changes/acl_changes_<seq>``,
``/kafka-acl-extended-changes/acl_changes_<seq>``) naming what changed. A
:class:`ChangeNotificationListener` follows one root for every subscriber of the
broker:

- at start (and after a lost ZooKeeper session) it reads the notifications, takes
  the newest as seen and has every subscriber *reload* all it caches, so a change
  made after that reload has a newer notification;
- when a notification is added it reads those newer than the last seen, decodes
  what each names (one that cannot be read is logged and skipped) and hands them,
  in order, to every subscriber's *changed*; they are seen once every subscriber
  has taken them (a subscriber that fails gets them again after a pause);
- it deletes the notifications it has seen once they are over ``expiry_ms`` old
  (Kafka's 15 minutes: long enough for every broker to have read them), so they
  do not pile up in ZooKeeper. Every broker purges; one already gone is skipped.

Subscribers' callbacks run one at a time on one task (an :class:`EventQueue`), so
what they cache has one writer. Owned by the broker's event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from samsa.cluster import zk_data
from samsa.cluster.events import EventQueue
from samsa.cluster.kafka_zk import KafkaZk
from samsa.cluster.zk_data import ZkDataError

log = logging.getLogger(__name__)

T = TypeVar("T")

CHANGE_EXPIRY_MS = 15 * 60 * 1000
"""How long a change notification is kept once seen (Kafka's 15 minutes)."""

Decode = Callable[[bytes, str], T]
"""A notification's data and path → what it names (ZkDataError if it is not the format)."""


@dataclass(frozen=True, slots=True)
class _Subscriber(Generic[T]):
    reload: Callable[[], Awaitable[None]]
    changed: Callable[[Sequence[T]], Awaitable[None]]


class ChangeNotificationListener(Generic[T]):
    """The notifications under ``root`` named ``<prefix><seq>``, for every subscriber."""

    def __init__(
        self,
        zk: KafkaZk,
        root: str,
        prefix: str,
        decode: Decode[T],
        *,
        expiry_ms: int = CHANGE_EXPIRY_MS,
    ) -> None:
        self.zk, self.root, self.prefix = zk, root, prefix
        self.expiry_ms = expiry_ms
        self._decode = decode
        self._subscribers: list[_Subscriber[T]] = []
        self._last_seen = -1
        self._session_lost = False
        self._events: EventQueue[str] = EventQueue(f"changes{root}", self._handle)

    def subscribe(
        self,
        reload: Callable[[], Awaitable[None]],
        changed: Callable[[Sequence[T]], Awaitable[None]],
    ) -> None:
        """``reload()`` reads everything afresh; ``changed(names)`` re-reads what the new
        notifications name. Subscribe before :meth:`start`."""
        self._subscribers.append(_Subscriber(reload, changed))

    async def start(self) -> None:
        """Read the notifications, have every subscriber reload, then follow new ones."""
        await self.zk.client.ensure_path(self.root)
        self.zk.client.add_state_listener(self._on_session_state)
        self._events.put("reload")
        self._events.start()
        await self._events.wait_idle()

    async def stop(self) -> None:
        await self._events.stop()

    async def catch_up(self) -> None:
        """Return once every notification made before this call is handed over (a broker
        that announced a change applies it before it answers the request)."""
        self._events.put("changes")
        await self._events.wait_idle()

    def _on_session_state(self, state: str) -> None:
        if state == "LOST":
            self._session_lost = True
        elif state == "CONNECTED":
            self._events.put("reload" if self._session_lost else "changes")
            self._session_lost = False

    def _changed(self) -> None:
        self._events.put("changes")

    def _sequence(self, name: str) -> int | None:
        return zk_data.change_sequence(name, self.prefix)

    async def _handle(self, event: str) -> None:
        names = await self.zk.get_change_notifications(self.root, watch=self._changed)
        sequences = [s for s in map(self._sequence, names) if s is not None]
        if event == "reload":
            # Notifications first: a change made after the reload has a newer one.
            for subscriber in self._subscribers:
                await subscriber.reload()
            self._last_seen = max(sequences, default=-1)
        else:
            newest = max((s for s in sequences if s > self._last_seen), default=None)
            if newest is None:
                return
            changes: list[T] = []
            for name in names:
                sequence = self._sequence(name)
                if sequence is not None and sequence > self._last_seen:
                    found = await self._read(name)
                    if found is not None:
                        changes.append(found)
            if changes:
                for subscriber in self._subscribers:
                    await subscriber.changed(changes)
            self._last_seen = newest
        seen = [n for n in names if (s := self._sequence(n)) is not None and s <= self._last_seen]
        await self.zk.purge_change_notifications(self.root, seen, self.expiry_ms)

    async def _read(self, name: str) -> T | None:
        path = f"{self.root}/{name}"
        data = await self.zk.get_change_notification(self.root, name)
        if data is None:
            return None  # purged by another broker: it was read long ago
        try:
            return self._decode(data, path)
        except ZkDataError as exc:
            log.error("ignoring %s: %s", path, exc)
            return None


def config_changes(
    zk: KafkaZk, expiry_ms: int = CHANGE_EXPIRY_MS
) -> ChangeNotificationListener[str]:
    """``/config/changes``: the entity paths (``users/<user>``…) whose config changed."""
    return ChangeNotificationListener(
        zk, zk_data.CONFIG_CHANGES, zk_data.CONFIG_CHANGE_PREFIX, zk_data.decode_config_change,
        expiry_ms=expiry_ms,
    )  # fmt: skip
