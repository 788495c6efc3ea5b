"""SCRAM credentials: what the broker keeps of each user's password (never the password).

Credentials are set and removed with AlterUserScramCredentials (the client sends
the salt and the salted password; the broker derives ``StoredKey`` and
``ServerKey``) and read by the SCRAM authenticator. Each user has at most one
credential per mechanism, in Kafka's text form (:mod:`samsa.security.scram`).

Single node (:class:`LocalScramCredentials`): ``samsa-scram-credentials.json`` in
every data directory, written atomically with a sequence number; at start the
highest sequence wins. A file that cannot be read stops start-up naming it —
starting without the credentials would lock every SCRAM user out.

Cluster (:class:`ZkScramCredentials`): Kafka's place, the ``SCRAM-SHA-256`` and
``SCRAM-SHA-512`` keys of ``/config/users/<user>`` (the user's quotas share that
znode: each writer keeps the other's keys, writing at the version it read),
announced by a ``/config/changes`` notification. Every broker keeps every user's
credentials in memory, read at start and kept current by those notifications
(Kafka's ``CredentialCache``): a login reads no znode, so logins go on while
ZooKeeper is slow or unreachable, and a credential set or deleted through one
broker takes effect on another once that broker has seen the notification (the
broker that made the change has, before it answers). Describing credentials
reads ZooKeeper, as an administrator expects the stored state.

A user without a credential is answered a made-up salt (so a client cannot tell it
is unknown before its proof fails), keyed by a secret kept beside the credentials:
in the credentials file, or in ``/samsa/scram_unknown_user_salt_key``.

Owned by the broker's event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from samsa.broker.quota.entity import desanitize, sanitize
from samsa.cluster.change_notifications import ChangeNotificationListener
from samsa.cluster.kafka_zk import KafkaZk
from samsa.errors import KafkaStorageError
from samsa.security.scram import ScramCredential, ScramError, ScramMechanism
from samsa.storage.data_dir_file import DataDirFile

__all__ = [
    "CREDENTIALS_FILE",
    "CredentialChange",
    "LocalScramCredentials",
    "ScramCredentials",
    "ZkScramCredentials",
]

CREDENTIALS_FILE = "samsa-scram-credentials.json"
UNKNOWN_USER_SALT_KEY_PATH = "/samsa/scram_unknown_user_salt_key"
"""samsa's own znode: the cluster's key for made-up salts, the same on every broker."""


@dataclass(frozen=True, slots=True)
class CredentialChange:
    """One upsertion (``credential`` set) or deletion (``credential`` None)."""

    user: str
    mechanism: ScramMechanism
    credential: ScramCredential | None


class ScramCredentials(Protocol):
    """Where the broker finds and keeps SCRAM credentials."""

    async def lookup(self, mechanism: ScramMechanism, user: str) -> ScramCredential | None:
        """The user's credential for ``mechanism``, or None."""
        ...

    async def describe(self, users: Sequence[str] | None) -> dict[str, dict[ScramMechanism, int]]:
        """Mechanism → iterations of each of ``users`` that has a credential (all users when
        None)."""
        ...

    async def alter(self, changes: Sequence[CredentialChange]) -> None:
        """Apply every change at once (KafkaStorageError when they cannot be stored)."""
        ...

    async def unknown_user_salt_key(self) -> bytes:
        """The secret that keys the salt made up for a user without a credential: kept
        with the credentials, so the made-up salt is as stable as a real one."""
        ...


class LocalScramCredentials:
    """A single node's credentials, kept in its data directories."""

    def __init__(self, log_dirs: Sequence[Path]) -> None:
        self._file = DataDirFile(
            log_dirs, CREDENTIALS_FILE,
            "every user's SCRAM credentials (set them again from another data directory's copy)",
        )  # fmt: skip
        self._users: dict[str, dict[str, str]] = {}
        self._salt_key = secrets.token_bytes(32)
        self._lock = asyncio.Lock()

    def load(self) -> None:
        """Read the stored credentials (blocking: run it off the event loop at start-up).
        Credentials stored without a salt key (before samsa kept one) are stored again with
        one at once."""
        stored = self._file.load(lambda raw: (_users(raw["users"]), _salt_key(raw)))
        users, salt_key = stored or ({}, None)
        self._users = users
        if salt_key is not None:
            self._salt_key = salt_key
        elif users:
            self._file.save(*self._file.encode_next(self._document(users)))

    def _document(self, users: Mapping[str, Mapping[str, str]]) -> dict[str, object]:
        return {"users": users, "unknown_user_salt_key": base64.b64encode(self._salt_key).decode()}

    async def unknown_user_salt_key(self) -> bytes:
        return self._salt_key

    async def lookup(self, mechanism: ScramMechanism, user: str) -> ScramCredential | None:
        text = self._users.get(user, {}).get(mechanism.mechanism_name)
        if text is None:
            return None
        try:
            return ScramCredential.from_text(text)
        except ScramError:
            return None

    async def describe(self, users: Sequence[str] | None) -> dict[str, dict[ScramMechanism, int]]:
        names = sorted(self._users) if users is None else users
        found: dict[str, dict[ScramMechanism, int]] = {}
        for name in names:
            for mechanism_name, text in self._users.get(name, {}).items():
                try:
                    credential = ScramCredential.from_text(text)
                except ScramError:
                    continue
                found.setdefault(name, {})[ScramMechanism.named(mechanism_name)] = (
                    credential.iterations
                )
        return found

    async def alter(self, changes: Sequence[CredentialChange]) -> None:
        async with self._lock:
            users = {name: dict(creds) for name, creds in self._users.items()}
            for change in changes:
                mine = users.setdefault(change.user, {})
                if change.credential is None:
                    mine.pop(change.mechanism.mechanism_name, None)
                else:
                    mine[change.mechanism.mechanism_name] = change.credential.to_text()
                if not mine:
                    del users[change.user]
            sequence, data = self._file.encode_next(self._document(users))
            try:
                await asyncio.to_thread(self._file.save, sequence, data)
            except OSError as exc:
                raise KafkaStorageError(f"storing SCRAM credentials failed: {exc}") from exc
            self._users = users


class ZkScramCredentials:
    """A cluster's credentials, in ZooKeeper's ``/config/users/<user>`` znodes, cached in
    memory and kept current by ``changes``, whose task is the cache's one writer."""

    def __init__(self, zk: KafkaZk, changes: ChangeNotificationListener[str]) -> None:
        self._zk = zk
        self._changes = changes
        self._lock = asyncio.Lock()
        self._salt_key: bytes | None = None
        self._cache: dict[str, dict[str, str]] = {}
        """User → mechanism name → credential text, of every user with a credential."""
        changes.subscribe(self._reload, self._users_changed)

    async def _reload(self) -> None:
        await self.unknown_user_salt_key()  # read now: no login waits on ZooKeeper
        self._cache = {}
        for path, config in (await self._zk.get_entity_configs()).items():
            user = _user_of(path)
            if user is not None:
                self._cache_user(user, config)

    async def _users_changed(self, entity_paths: Sequence[str]) -> None:
        for path in dict.fromkeys(entity_paths):
            user = _user_of(path)
            if user is not None:
                self._cache_user(user, await self._zk.get_entity_config(path))

    def _cache_user(self, user: str, config: Mapping[str, str]) -> None:
        mine = {m.mechanism_name: config[m.mechanism_name] for m in ScramMechanism
                if m.mechanism_name in config}  # fmt: skip
        if mine:
            self._cache[user] = mine
        else:
            self._cache.pop(user, None)

    async def unknown_user_salt_key(self) -> bytes:
        if self._salt_key is None:
            self._salt_key = await self._zk.get_or_create_secret(
                UNKNOWN_USER_SALT_KEY_PATH, secrets.token_bytes(32)
            )
        return self._salt_key

    async def lookup(self, mechanism: ScramMechanism, user: str) -> ScramCredential | None:
        text = self._cache.get(user, {}).get(mechanism.mechanism_name)
        if text is None:
            return None
        try:
            return ScramCredential.from_text(text)
        except ScramError:
            return None

    async def describe(self, users: Sequence[str] | None) -> dict[str, dict[ScramMechanism, int]]:
        if users is None:
            configs = {
                user: config
                for path, config in (await self._zk.get_entity_configs()).items()
                if (user := _user_of(path)) is not None
            }
        else:
            configs = {u: await self._zk.get_entity_config(f"users/{sanitize(u)}") for u in users}
        found: dict[str, dict[ScramMechanism, int]] = {}
        for user, config in sorted(configs.items()):
            for mechanism in ScramMechanism:
                text = config.get(mechanism.mechanism_name)
                if text is None:
                    continue
                try:
                    found.setdefault(user, {})[mechanism] = ScramCredential.from_text(
                        text
                    ).iterations
                except ScramError:
                    continue
        return found

    async def alter(self, changes: Sequence[CredentialChange]) -> None:
        by_user: dict[str, list[CredentialChange]] = {}
        for change in changes:
            by_user.setdefault(change.user, []).append(change)
        async with self._lock:
            for user, mine in by_user.items():
                await self._zk.update_entity_config(
                    f"users/{sanitize(user)}", functools.partial(_changed, changes=mine)
                )
        # Cached the way every broker caches it, through the notifications — and before
        # the answer, so the user's next login here uses it.
        await self._changes.catch_up()


def _user_of(entity_path: str) -> str | None:
    """The user an entity path ``users/<user>`` names (None: a client or user-client)."""
    if not entity_path.startswith("users/") or "/clients/" in entity_path:
        return None
    return desanitize(entity_path.removeprefix("users/"))


def _changed(config: dict[str, str], changes: Sequence[CredentialChange]) -> dict[str, str]:
    """A user's entity config with its SCRAM keys changed (its quota keys left as they are)."""
    for change in changes:
        if change.credential is None:
            config.pop(change.mechanism.mechanism_name, None)
        else:
            config[change.mechanism.mechanism_name] = change.credential.to_text()
    return config


def _salt_key(raw: Mapping[str, object]) -> bytes | None:
    text = raw.get("unknown_user_salt_key")
    if text is None:
        return None
    if not isinstance(text, str):
        raise TypeError("unknown_user_salt_key is not a string")
    return base64.b64decode(text, validate=True)


def _users(value: object) -> dict[str, dict[str, str]]:
    if not isinstance(value, Mapping):
        raise TypeError("users is not an object")
    users: dict[str, dict[str, str]] = {}
    for name, creds in value.items():
        if not isinstance(creds, Mapping):
            raise TypeError(f"the credentials of {name!r} are not an object")
        users[str(name)] = {str(k): str(v) for k, v in creds.items()}
    return users
