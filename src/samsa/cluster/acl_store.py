"""Where ACLs are kept: a file in the data dirs on a single node, Kafka's znodes in a cluster.

Both stores apply changes one resource pattern at a time — "given the entries
stored now, here are the new ones" — and hand every pattern they change (or
learn was changed) to the authorizer's cache (:class:`AclCache`).

:class:`LocalAclStore` keeps every ACL in ``samsa-acls.json`` in every data
directory, written atomically (a temporary file renamed over the old one) with
a sequence number: at start the highest sequence wins, so the order of
``log.dirs`` does not matter. A file that cannot be read stops start-up with a
message naming it — an authorizer that silently forgot its DENY rules would
open what they closed.

:class:`ZkAclStore` keeps them where Kafka's ``AclAuthorizer`` does
(:mod:`samsa.cluster.zk_data`): a znode per resource pattern, written
conditionally on the version read (a broker that lost a race reads again, so
two brokers adding ACLs to one resource at once both land), then a sequential
change notification. Every broker watches both change stores and re-reads the
resources the new notifications name; after a lost ZooKeeper session it
reads every ACL again. Deviation: old change notifications are not purged
(Kafka removes them after 15 minutes).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from samsa.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    kafka_name,
    parse_name,
)
from samsa.cluster import zk_data
from samsa.cluster.events import EventQueue
from samsa.cluster.kafka_zk import KafkaZk
from samsa.cluster.zk_client import BadVersionError, NodeExistsError, NoNodeError
from samsa.errors import KafkaStorageError
from samsa.storage.data_dir_file import DataDirFile

log = logging.getLogger(__name__)

ACLS_FILE = "samsa-acls.json"

Entries = frozenset[AccessControlEntry]
Change = Callable[[Entries], Entries]


class AclCache(Protocol):
    """What a store keeps current: the authorizer's ACLs in memory."""

    def set_acls(self, pattern: ResourcePattern, entries: Entries) -> None: ...

    def replace_all(self, acls: Mapping[ResourcePattern, Entries]) -> None: ...


class LocalAclStore:
    """Every ACL in one JSON file per data directory (one writer: the broker's loop)."""

    def __init__(self, log_dirs: tuple[Path, ...]) -> None:
        self.log_dirs = log_dirs
        self._file = DataDirFile(log_dirs, ACLS_FILE, "every ACL")
        self._acls: dict[ResourcePattern, Entries] = {}

    async def start(self, cache: AclCache) -> None:
        await asyncio.to_thread(self._load)
        cache.replace_all(self._acls)
        if self._acls:
            log.info("loaded the ACLs of %d resource patterns", len(self._acls))

    def _load(self) -> None:
        self._acls = self._file.load(lambda raw: _decode(raw["acls"])) or {}

    async def alter(
        self, changes: Mapping[ResourcePattern, Change]
    ) -> dict[ResourcePattern, Entries]:
        acls = dict(self._acls)
        changed: dict[ResourcePattern, Entries] = {}
        for pattern, change in changes.items():
            entries = change(acls.get(pattern, frozenset()))
            changed[pattern] = entries
            if entries:
                acls[pattern] = entries
            else:
                acls.pop(pattern, None)
        sequence, data = self._file.encode_next({"acls": _encode(acls)})
        try:
            await asyncio.to_thread(self._file.save, sequence, data)
        except OSError as exc:
            raise KafkaStorageError(f"storing the ACLs failed: {exc}") from exc
        self._acls = acls
        return changed


def _encode(acls: Mapping[ResourcePattern, Entries]) -> list[dict[str, str]]:
    return [
        {"resourceType": kafka_name(p.resource_type), "name": p.name,
         "patternType": kafka_name(p.pattern_type), "principal": e.principal,
         "permissionType": kafka_name(e.permission_type), "operation": kafka_name(e.operation),
         "host": e.host}
        for p in sorted(acls) for e in sorted(acls[p])
    ]  # fmt: skip


def _decode(items: Any) -> dict[ResourcePattern, Entries]:
    found: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for item in items:
        pattern = ResourcePattern(
            parse_name(ResourceType, item["resourceType"]),
            str(item["name"]),
            parse_name(PatternType, item["patternType"]),
        )
        found.setdefault(pattern, set()).add(
            AccessControlEntry(
                str(item["principal"]),
                str(item["host"]),
                parse_name(AclOperation, item["operation"]),
                parse_name(AclPermissionType, item["permissionType"]),
            )
        )
    return {pattern: frozenset(entries) for pattern, entries in found.items()}


class ZkAclStore:
    """ACLs in Kafka's znodes, kept current on every broker by change notifications."""

    def __init__(self, zk: KafkaZk) -> None:
        self.zk = zk
        self._cache: AclCache | None = None
        self._seen: dict[PatternType, int] = {PatternType.LITERAL: -1, PatternType.PREFIXED: -1}
        self._events: EventQueue[PatternType | None] = EventQueue("zk-acls", self._handle)
        self._session_lost = False

    async def start(self, cache: AclCache) -> None:
        """Read every ACL (watching the change stores), then follow changes."""
        self._cache = cache
        await self.zk.create_acl_paths()
        await self._read_all()
        self.zk.client.add_state_listener(self._on_session_state)
        self._events.start()

    async def stop(self) -> None:
        await self._events.stop()

    async def wait_idle(self) -> None:
        """Return once every change notification seen so far is applied (tests)."""
        await self._events.wait_idle()

    def _on_session_state(self, state: str) -> None:
        if state == "LOST":
            self._session_lost = True
        elif state == "CONNECTED" and self._session_lost:
            self._session_lost = False
            self._events.put(None)  # read everything again

    async def _read_all(self) -> None:
        assert self._cache is not None
        for pattern_type in self._seen:
            children = await self.zk.get_acl_changes(pattern_type, watch=self._watch(pattern_type))
            self._seen[pattern_type] = max((_sequence(c) for c in children), default=-1)
        self._cache.replace_all(await self.zk.get_all_acls())

    def _watch(self, pattern_type: PatternType) -> Callable[[], None]:
        return lambda: self._events.put(pattern_type)

    async def _handle(self, event: PatternType | None) -> None:
        if event is None:
            await self._read_all()
            return
        assert self._cache is not None
        children = await self.zk.get_acl_changes(event, watch=self._watch(event))
        for child in children:
            sequence = _sequence(child)
            if sequence <= self._seen[event]:
                continue
            pattern = await self.zk.get_acl_change(event, child)
            if pattern is not None:
                entries, _ = await self.zk.get_acls(pattern)
                self._cache.set_acls(pattern, entries)
            self._seen[event] = sequence

    async def alter(
        self, changes: Mapping[ResourcePattern, Change]
    ) -> dict[ResourcePattern, Entries]:
        changed: dict[ResourcePattern, Entries] = {}
        for pattern, change in changes.items():
            while True:
                entries, version = await self.zk.get_acls(pattern)
                updated = change(entries)
                if updated == entries:
                    break
                try:
                    await self.zk.write_acls(pattern, updated, version)
                    break
                except (BadVersionError, NodeExistsError, NoNodeError):
                    continue  # another broker changed it first: apply the change to theirs
            changed[pattern] = updated
            if updated != entries:
                await self.zk.notify_acl_change(pattern)
        return changed


def _sequence(child: str) -> int:
    digits = child.removeprefix(zk_data.ACL_CHANGE_PREFIX)
    return int(digits) if digits.isdigit() else -1
