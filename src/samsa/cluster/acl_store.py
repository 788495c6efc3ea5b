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
change notification. Every broker follows both change stores
(:mod:`samsa.cluster.change_notifications`: literal patterns in
``/kafka-acl-changes``, the others in ``/kafka-acl-extended-changes``), re-reads
the resources the new notifications name, and deletes the notifications it has
seen once they are 15 minutes old, as Kafka does; after a lost ZooKeeper session
it reads every ACL again.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
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
from samsa.cluster.change_notifications import CHANGE_EXPIRY_MS, ChangeNotificationListener
from samsa.cluster.kafka_zk import KafkaZk
from samsa.cluster.zk_client import BadVersionError, NodeExistsError, NoNodeError
from samsa.cluster.zk_data import ZkDataError
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

    def __init__(self, zk: KafkaZk, change_expiry_ms: int = CHANGE_EXPIRY_MS) -> None:
        self.zk = zk
        self._cache: AclCache | None = None
        # What the cache holds, per pattern type: each change store's listener reloads
        # and changes only its own type, so one's reload never undoes the other's news.
        self._acls: dict[ResourcePattern, Entries] = {}
        self._listeners: list[ChangeNotificationListener[ResourcePattern]] = []
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            listener = ChangeNotificationListener(
                zk, zk_data.acl_change_root(pattern_type), zk_data.ACL_CHANGE_PREFIX,
                functools.partial(_decode_change, literal=pattern_type == PatternType.LITERAL),
                expiry_ms=change_expiry_ms,
            )  # fmt: skip
            listener.subscribe(functools.partial(self._reload, pattern_type), self._changed)
            self._listeners.append(listener)

    async def start(self, cache: AclCache) -> None:
        """Read every ACL, then follow both change stores."""
        self._cache = cache
        await self.zk.create_acl_paths()
        for listener in self._listeners:
            await listener.start()

    async def stop(self) -> None:
        for listener in self._listeners:
            await listener.stop()

    async def wait_idle(self) -> None:
        """Return once every change notification made so far is applied."""
        for listener in self._listeners:
            await listener.catch_up()

    async def _reload(self, pattern_type: PatternType) -> None:
        assert self._cache is not None
        fresh = await self.zk.get_all_acls([pattern_type])
        kept = {p: e for p, e in self._acls.items() if p.pattern_type != pattern_type}
        self._acls = kept | fresh
        self._cache.replace_all(self._acls)

    async def _changed(self, patterns: Sequence[ResourcePattern]) -> None:
        assert self._cache is not None
        for pattern in dict.fromkeys(patterns):
            try:
                entries, _ = await self.zk.get_acls(pattern)
            except ZkDataError as exc:
                log.error("ignoring the ACLs of %s: %s", pattern, exc)
                continue
            self._set(pattern, entries)

    def _set(self, pattern: ResourcePattern, entries: Entries) -> None:
        if entries:
            self._acls[pattern] = entries
        else:
            self._acls.pop(pattern, None)
        if self._cache is not None:
            self._cache.set_acls(pattern, entries)

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
                self._set(pattern, updated)  # the caller's cache takes ``changed`` too
        return changed


def _decode_change(data: bytes, _path: str, literal: bool) -> ResourcePattern:
    return zk_data.decode_acl_change(data, literal)
