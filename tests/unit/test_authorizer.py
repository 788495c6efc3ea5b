"""The authorizer's decisions and ACL changes, over a real store in a temporary data dir."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from samsa.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from samsa.broker.security.authorizer import Authorizer
from samsa.cluster import zk_data
from samsa.cluster.acl_store import ACLS_FILE, LocalAclStore
from samsa.errors import InvalidRequestError, KafkaStorageError

ALICE, BOB = "User:alice", "User:bob"
HOST = "127.0.0.1"
READ, WRITE, DESCRIBE = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED


def acl(
    name: str,
    operation: AclOperation = READ,
    permission: AclPermissionType = ALLOW,
    *,
    principal: str = ALICE,
    host: str = "*",
    pattern_type: PatternType = LITERAL,
    resource_type: ResourceType = TOPIC,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name, pattern_type),
        AccessControlEntry(principal, host, operation, permission),
    )


def authorizer_with(
    tmp_path: Path,
    *bindings: AclBinding,
    super_users: frozenset[str] = frozenset(),
    allow_if_none: bool = False,
) -> Authorizer:
    store = LocalAclStore((tmp_path,))
    authorizer = Authorizer(super_users, allow_if_none, store)

    async def setup() -> None:
        await store.start(authorizer)
        assert await authorizer.create_acls(list(bindings)) == [None] * len(bindings)

    asyncio.run(setup())
    return authorizer


def test_an_allow_acl_lets_its_principal_do_its_operation(tmp_path: Path) -> None:
    authorizer = authorizer_with(tmp_path, acl("orders"))
    assert authorizer.authorize(ALICE, HOST, READ, TOPIC, "orders")


def test_a_principal_without_an_acl_on_a_resource_that_has_acls_is_denied(tmp_path: Path) -> None:
    authorizer = authorizer_with(tmp_path, acl("orders"), allow_if_none=True)
    assert not authorizer.authorize(BOB, HOST, READ, TOPIC, "orders")


def test_an_allow_of_one_operation_does_not_allow_another(tmp_path: Path) -> None:
    authorizer = authorizer_with(tmp_path, acl("orders", READ))
    assert not authorizer.authorize(ALICE, HOST, WRITE, TOPIC, "orders")


def test_no_acl_on_a_resource_denies_by_default(tmp_path: Path) -> None:
    authorizer = authorizer_with(tmp_path, acl("orders"))
    assert not authorizer.authorize(ALICE, HOST, READ, TOPIC, "payments")


def test_allow_everyone_if_no_acl_found_allows_a_resource_no_acl_names(tmp_path: Path) -> None:
    authorizer = authorizer_with(tmp_path, acl("orders"), allow_if_none=True)
    assert authorizer.authorize(BOB, HOST, WRITE, TOPIC, "payments")


def test_a_super_user_is_allowed_despite_a_deny(tmp_path: Path) -> None:
    authorizer = authorizer_with(
        tmp_path, acl("orders", READ, DENY), super_users=frozenset({ALICE})
    )
    assert authorizer.authorize(ALICE, HOST, READ, TOPIC, "orders")


def test_a_prefixed_deny_beats_a_literal_allow(tmp_path: Path) -> None:
    authorizer = authorizer_with(
        tmp_path, acl("orders-eu"), acl("orders-", READ, DENY, pattern_type=PREFIXED)
    )
    assert not authorizer.authorize(ALICE, HOST, READ, TOPIC, "orders-eu")


def test_a_prefixed_allow_covers_every_name_with_the_prefix(tmp_path: Path) -> None:
    authorizer = authorizer_with(tmp_path, acl("orders-", pattern_type=PREFIXED))
    assert authorizer.authorize(ALICE, HOST, READ, TOPIC, "orders-us")
    assert not authorizer.authorize(ALICE, HOST, READ, TOPIC, "order")


def test_the_wildcard_resource_covers_every_topic(tmp_path: Path) -> None:
    authorizer = authorizer_with(tmp_path, acl("*"))
    assert authorizer.authorize(ALICE, HOST, READ, TOPIC, "anything")


def test_the_wildcard_principal_covers_every_user(tmp_path: Path) -> None:
    authorizer = authorizer_with(tmp_path, acl("orders", principal="User:*"))
    assert authorizer.authorize(BOB, HOST, READ, TOPIC, "orders")


def test_a_deny_for_the_clients_host_beats_an_allow_for_every_host(tmp_path: Path) -> None:
    authorizer = authorizer_with(tmp_path, acl("orders"), acl("orders", READ, DENY, host=HOST))
    assert not authorizer.authorize(ALICE, HOST, READ, TOPIC, "orders")
    assert authorizer.authorize(ALICE, "10.0.0.9", READ, TOPIC, "orders")


def test_an_acl_for_another_host_does_not_apply(tmp_path: Path) -> None:
    authorizer = authorizer_with(tmp_path, acl("orders", host="10.0.0.9"))
    assert not authorizer.authorize(ALICE, HOST, READ, TOPIC, "orders")


@pytest.mark.parametrize(
    "granted", [AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER]
)
def test_read_write_delete_and_alter_imply_describe(tmp_path: Path, granted: AclOperation) -> None:
    authorizer = authorizer_with(tmp_path, acl("orders", granted))
    assert authorizer.authorize(ALICE, HOST, DESCRIBE, TOPIC, "orders")


def test_alter_configs_implies_describe_configs(tmp_path: Path) -> None:
    authorizer = authorizer_with(tmp_path, acl("orders", AclOperation.ALTER_CONFIGS))
    assert authorizer.authorize(ALICE, HOST, AclOperation.DESCRIBE_CONFIGS, TOPIC, "orders")


def test_a_deny_of_read_does_not_deny_describe(tmp_path: Path) -> None:
    authorizer = authorizer_with(tmp_path, acl("orders", DESCRIBE), acl("orders", READ, DENY))
    assert authorizer.authorize(ALICE, HOST, DESCRIBE, TOPIC, "orders")


def test_all_allows_every_operation(tmp_path: Path) -> None:
    authorizer = authorizer_with(tmp_path, acl("orders", AclOperation.ALL))
    assert authorizer.authorize(ALICE, HOST, AclOperation.DELETE, TOPIC, "orders")


def test_an_acl_on_a_group_does_not_apply_to_a_topic_of_that_name(tmp_path: Path) -> None:
    authorizer = authorizer_with(tmp_path, acl("orders", resource_type=GROUP))
    assert not authorizer.authorize(ALICE, HOST, READ, TOPIC, "orders")


def test_authorized_operations_lists_what_the_acls_allow(tmp_path: Path) -> None:
    authorizer = authorizer_with(tmp_path, acl("orders", WRITE))
    assert authorizer.authorized_operations(ALICE, HOST, TOPIC, "orders") == {WRITE, DESCRIBE}


def test_write_on_some_topic_is_write_on_the_resource_type(tmp_path: Path) -> None:
    authorizer = authorizer_with(tmp_path, acl("orders", WRITE))
    assert authorizer.authorize_any(ALICE, HOST, WRITE, TOPIC)
    assert not authorizer.authorize_any(BOB, HOST, WRITE, TOPIC)


def test_an_allow_wholly_denied_by_a_prefix_is_not_write_on_the_resource_type(
    tmp_path: Path,
) -> None:
    authorizer = authorizer_with(
        tmp_path, acl("orders", WRITE), acl("ord", WRITE, DENY, pattern_type=PREFIXED)
    )
    assert not authorizer.authorize_any(ALICE, HOST, WRITE, TOPIC)


def test_a_match_filter_selects_every_pattern_that_applies_to_a_name(tmp_path: Path) -> None:
    bindings = [acl("orders"), acl("*"), acl("ord", pattern_type=PREFIXED), acl("payments")]
    authorizer = authorizer_with(tmp_path, *bindings)
    found = authorizer.bindings(AclBindingFilter(TOPIC, "orders", PatternType.MATCH))
    assert found == sorted(bindings[:3])


def test_a_filter_by_principal_selects_only_that_principals_acls(tmp_path: Path) -> None:
    authorizer = authorizer_with(tmp_path, acl("orders"), acl("orders", principal=BOB))
    assert authorizer.bindings(AclBindingFilter(principal=BOB)) == [acl("orders", principal=BOB)]


def test_delete_removes_what_the_filter_selects_and_answers_it(tmp_path: Path) -> None:
    authorizer = authorizer_with(tmp_path, acl("orders"), acl("orders", WRITE))
    removed = asyncio.run(authorizer.delete_acls([AclBindingFilter(operation=WRITE)]))
    assert removed == [[acl("orders", WRITE)]]
    assert authorizer.bindings() == [acl("orders")]


def test_acls_are_read_back_from_the_data_dir(tmp_path: Path) -> None:
    authorizer_with(tmp_path, acl("orders"), acl("app-", WRITE, DENY, pattern_type=PREFIXED))
    reloaded = authorizer_with(tmp_path)
    assert reloaded.bindings() == sorted(
        [acl("orders"), acl("app-", WRITE, DENY, pattern_type=PREFIXED)]
    )
    assert json.loads((tmp_path / ACLS_FILE).read_text())["version"] == 1


@pytest.mark.parametrize(
    "binding",
    [
        acl("token-1", DESCRIBE, resource_type=ResourceType.DELEGATION_TOKEN),
        acl("other-cluster", AclOperation.ALTER, resource_type=ResourceType.CLUSTER),
        acl(""),
        acl("orders", AclOperation.ANY),
        acl("orders", pattern_type=PatternType.MATCH),
        acl("orders", principal="alice"),
    ],
)
def test_an_invalid_acl_is_refused_with_invalid_request(
    tmp_path: Path, binding: AclBinding
) -> None:
    authorizer = authorizer_with(tmp_path)
    (result,) = asyncio.run(authorizer.create_acls([binding]))
    assert isinstance(result, InvalidRequestError)
    assert authorizer.bindings() == []


def test_a_resource_znode_holds_kafkas_acl_json() -> None:
    entry = AccessControlEntry(ALICE, "*", READ, ALLOW)
    assert json.loads(zk_data.encode_acls([entry])) == {
        "version": 1,
        "acls": [{"principal": ALICE, "permissionType": "Allow", "operation": "Read", "host": "*"}],
    }
    assert zk_data.decode_acls(zk_data.encode_acls([entry]), "test") == {entry}


def test_acl_znodes_use_kafkas_paths() -> None:
    assert zk_data.acl_path(ResourcePattern(TOPIC, "orders")) == "/kafka-acl/Topic/orders"
    assert (
        zk_data.acl_path(ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx-", PREFIXED))
        == "/kafka-acl-extended/prefixed/TransactionalId/tx-"
    )


@pytest.mark.parametrize("pattern_type", [LITERAL, PREFIXED])
def test_an_acl_change_notification_names_the_resource(pattern_type: PatternType) -> None:
    pattern = ResourcePattern(GROUP, "app", pattern_type)
    encoded = zk_data.encode_acl_change(pattern)
    assert zk_data.decode_acl_change(encoded, literal=pattern_type == LITERAL) == pattern


def test_an_acl_that_cannot_be_stored_is_refused_and_not_applied(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    authorizer = authorizer_with(data_dir)
    data_dir.rmdir()
    data_dir.write_text("a file where the data dir was")  # every write there fails
    (result,) = asyncio.run(authorizer.create_acls([acl("orders")]))
    assert isinstance(result, KafkaStorageError)
    assert authorizer.bindings() == []
