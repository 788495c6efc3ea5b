"""Change notifications in a real ZooKeeper: every kind a broker writes — client quotas and
SCRAM credentials in ``/config/changes``, literal and prefixed ACLs in
``/kafka-acl-changes`` and ``/kafka-acl-extended-changes`` — is deleted once seen and past
its expiry (Kafka's 15 minutes, made short here), and nothing it announced is lost."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import pytest

from samsa import acl
from samsa.broker.quota.entity import QuotaEntity
from samsa.broker.quota.manager import ClientQuotas
from samsa.broker.quota.store import ZkQuotaStore
from samsa.broker.security.scram_credentials import CredentialChange, ZkScramCredentials
from samsa.cluster import zk_data
from samsa.cluster.acl_store import ZkAclStore
from samsa.cluster.change_notifications import config_changes
from samsa.cluster.kafka_zk import KafkaZk
from samsa.cluster.zk_client import ZkClient
from samsa.security.scram import ScramCredential, ScramMechanism

EXPIRY_MS = 200
WAIT_S = 30.0
SHA256 = ScramMechanism.SCRAM_SHA_256
READ = acl.AccessControlEntry(
    "User:reader", "*", acl.AclOperation.READ, acl.AclPermissionType.ALLOW
)


class Acls:
    """The authorizer's side of an ACL store: what it was told."""

    def __init__(self) -> None:
        self.acls: dict[acl.ResourcePattern, frozenset[acl.AccessControlEntry]] = {}

    def set_acls(
        self, pattern: acl.ResourcePattern, entries: frozenset[acl.AccessControlEntry]
    ) -> None:
        if entries:
            self.acls[pattern] = entries
        else:
            self.acls.pop(pattern, None)

    def replace_all(
        self, acls: Mapping[acl.ResourcePattern, frozenset[acl.AccessControlEntry]]
    ) -> None:
        self.acls = dict(acls)


@dataclass
class Kind:
    """One kind of change a broker announces: where its notices go, how to make the
    ``i``-th change, and whether the changes ``0…n-1`` are all in force."""

    root: str
    prefix: str
    change: Callable[[int], Awaitable[None]]
    applied: Callable[[int], Awaitable[bool]]
    stop: Callable[[], Awaitable[None]]


async def quotas(zk: KafkaZk) -> Kind:
    changes = config_changes(zk, EXPIRY_MS)
    client_quotas = ClientQuotas()
    store = ZkQuotaStore(zk, changes, client_quotas)
    await changes.start()

    async def change(i: int) -> None:
        await store.alter({QuotaEntity(client_id=f"c{i}"): {"producer_byte_rate": float(i + 1)}})

    async def applied(n: int) -> bool:
        return client_quotas.entities == {
            QuotaEntity(client_id=f"c{i}"): {"producer_byte_rate": float(i + 1)} for i in range(n)
        }

    return Kind(zk_data.CONFIG_CHANGES, zk_data.CONFIG_CHANGE_PREFIX, change, applied, changes.stop)


async def scram(zk: KafkaZk) -> Kind:
    changes = config_changes(zk, EXPIRY_MS)
    credentials = ZkScramCredentials(zk, changes)
    await changes.start()

    def made(i: int) -> ScramCredential:
        return ScramCredential.from_password(SHA256, f"pw{i}", 4096, salt=i.to_bytes(32))

    async def change(i: int) -> None:
        await credentials.alter([CredentialChange(f"u{i}", SHA256, made(i))])

    async def applied(n: int) -> bool:
        return all([await credentials.lookup(SHA256, f"u{i}") == made(i) for i in range(n)])

    return Kind(zk_data.CONFIG_CHANGES, zk_data.CONFIG_CHANGE_PREFIX, change, applied, changes.stop)


def acls(pattern_type: acl.PatternType) -> Callable[[KafkaZk], Awaitable[Kind]]:
    async def start(zk: KafkaZk) -> Kind:
        store, cache = ZkAclStore(zk, change_expiry_ms=EXPIRY_MS), Acls()
        await store.start(cache)

        def pattern(i: int) -> acl.ResourcePattern:
            return acl.ResourcePattern(acl.ResourceType.TOPIC, f"t{i}", pattern_type)

        async def change(i: int) -> None:
            changed = await store.alter({pattern(i): lambda entries: entries | {READ}})
            for changed_pattern, entries in changed.items():  # as the authorizer does
                cache.set_acls(changed_pattern, entries)

        async def applied(n: int) -> bool:
            return cache.acls == {pattern(i): frozenset({READ}) for i in range(n)}

        root = zk_data.acl_change_root(pattern_type)
        return Kind(root, zk_data.ACL_CHANGE_PREFIX, change, applied, store.stop)

    return start


KINDS = {
    "client quotas": quotas,
    "scram credentials": scram,
    "literal acls": acls(acl.PatternType.LITERAL),
    "prefixed acls": acls(acl.PatternType.PREFIXED),
}


@pytest.mark.parametrize("kind", KINDS)
def test_change_notifications_seen_and_past_their_expiry_are_deleted_and_nothing_is_lost(
    zk_connect: str, kind: str
) -> None:
    async def scenario() -> None:
        client = ZkClient(zk_connect)
        await client.start()
        zk = KafkaZk(client)
        await zk.create_top_level_paths()
        await zk.create_acl_paths()
        # A second broker reads what the first one announces.
        first, second = await KINDS[kind](zk), await KINDS[kind](zk)
        try:
            await first.change(0)
            first_notice = (await zk.get_change_notifications(first.root))[0]
            # Purging happens as later notices are processed: change on until the first
            # notice is gone (once it is past its expiry).
            made = 1
            deadline = time.monotonic() + WAIT_S
            while first_notice in await zk.get_change_notifications(first.root):
                assert time.monotonic() < deadline, f"{first_notice} never purged"
                await first.change(made)
                made += 1
            for broker in (first, second):
                while not await broker.applied(made):
                    assert time.monotonic() < deadline, f"not all {made} changes applied"
                    await asyncio.sleep(0.05)
        finally:
            await first.stop()
            await second.stop()
            await client.close()

    asyncio.run(scenario())
