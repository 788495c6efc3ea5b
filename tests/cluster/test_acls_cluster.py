"""ACLs in a cluster: kept in ZooKeeper where Kafka keeps them, enforced by every broker.

One three-broker cluster serves the module: the authorizer on, and
``allow.everyone.if.no.acl.found`` so that ``User:ANONYMOUS`` (every connection
until clients authenticate) may manage ACLs; an ACL created through one broker
must be applied by the others from ZooKeeper's change notifications.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from tests.acls import ANONYMOUS, AUTHORIZER, create_acl, delete_acl
from tests.rawclient import exchange

from samsa.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from samsa.errors import ErrorCode
from samsa.testing.cluster import LocalCluster
from samsa.testing.waiting import wait_until
from samsa.testing.zookeeper import ZooKeeperServer

METADATA, CREATE_TOPICS = 3, 19
WAIT_S = 30.0


@pytest.fixture(scope="module")
def acl_cluster(
    tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperServer
) -> Iterator[LocalCluster]:
    local = LocalCluster(
        Path(tmp_path_factory.mktemp("acl-cluster")),
        3,
        (AUTHORIZER, "allow.everyone.if.no.acl.found=true"),
        zookeeper_connect=f"{zookeeper.connect}/acl-cluster",
    )
    local.start()
    try:
        response = exchange(_address(local, 1), CREATE_TOPICS, 7, {"topics": [{
            "name": "ledger", "num_partitions": 1, "replication_factor": 3,
            "assignments": [], "configs": []}], "timeout": 30_000})  # fmt: skip
        assert response.topics[0].error_code == ErrorCode.NONE
        yield local
    finally:
        local.close()


def _address(cluster: LocalCluster, broker_id: int) -> str:
    return f"127.0.0.1:{cluster.brokers[broker_id].port}"


def _metadata_error(cluster: LocalCluster, broker_id: int, topic: str) -> int:
    response = exchange(_address(cluster, broker_id), METADATA, 12, {
        "topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
    })  # fmt: skip
    return int(response.topics[0].error_code)


def _wait_for_error(cluster: LocalCluster, broker_id: int, topic: str, code: int) -> None:
    wait_until(
        lambda: _metadata_error(cluster, broker_id, topic) == code,
        f"broker {broker_id} to answer {code}",
        timeout=WAIT_S,
    )


DENY_DESCRIBE = {"permission": AclPermissionType.DENY, "pattern_type": PatternType.PREFIXED}


def test_an_acl_created_through_one_broker_is_enforced_by_another(
    acl_cluster: LocalCluster,
) -> None:
    assert create_acl(_address(acl_cluster, 1), ResourceType.TOPIC, "led",
                      AclOperation.DESCRIBE, **DENY_DESCRIBE) == ErrorCode.NONE  # fmt: skip
    try:
        _wait_for_error(acl_cluster, 2, "ledger", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    finally:
        delete_acl(_address(acl_cluster, 1), ResourceType.TOPIC, "led", AclOperation.DESCRIBE,
                   **DENY_DESCRIBE)  # fmt: skip


def test_an_acl_deleted_through_one_broker_stops_applying_on_another(
    acl_cluster: LocalCluster,
) -> None:
    create_acl(_address(acl_cluster, 1), ResourceType.TOPIC, "led", AclOperation.DESCRIBE,
               **DENY_DESCRIBE)  # fmt: skip
    # The deleting broker matches the filter against the ACLs it has loaded: it must have
    # seen the new one first (each broker learns it through its own ZooKeeper watch).
    _wait_for_error(acl_cluster, 2, "ledger", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    _wait_for_error(acl_cluster, 3, "ledger", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    assert delete_acl(_address(acl_cluster, 2), ResourceType.TOPIC, "led",
                      AclOperation.DESCRIBE, **DENY_DESCRIBE) == 1  # fmt: skip
    _wait_for_error(acl_cluster, 3, "ledger", ErrorCode.NONE)


@pytest.fixture(scope="module")
def zk(acl_cluster: LocalCluster) -> Iterator[KazooClient]:
    """A ZooKeeper client in the cluster's chroot, to read what the brokers wrote."""
    client = KazooClient(hosts=acl_cluster.zookeeper_connect, timeout=10.0)
    client.start(timeout=10.0)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def _json(zk: KazooClient, path: str) -> object:
    return json.loads(zk.get(path)[0])


def test_acls_are_kept_in_kafkas_znodes(acl_cluster: LocalCluster, zk: KazooClient) -> None:
    bootstrap = _address(acl_cluster, 2)
    create_acl(bootstrap, ResourceType.GROUP, "billing", AclOperation.READ)
    create_acl(bootstrap, ResourceType.TRANSACTIONAL_ID, "tx-", AclOperation.WRITE,
               pattern_type=PatternType.PREFIXED)  # fmt: skip
    try:
        assert _json(zk, "/kafka-acl/Group/billing") == {"version": 1, "acls": [
            {"principal": ANONYMOUS, "permissionType": "Allow", "operation": "Read",
             "host": "*"}]}  # fmt: skip
        assert _json(zk, "/kafka-acl-extended/prefixed/TransactionalId/tx-") == {
            "version": 1,
            "acls": [{"principal": ANONYMOUS, "permissionType": "Allow", "operation": "Write",
                      "host": "*"}],
        }  # fmt: skip
    finally:
        delete_acl(bootstrap, ResourceType.GROUP, "billing", AclOperation.READ)
        delete_acl(bootstrap, ResourceType.TRANSACTIONAL_ID, "tx-", AclOperation.WRITE,
                   pattern_type=PatternType.PREFIXED)  # fmt: skip


def test_a_change_is_announced_under_kafkas_change_paths(
    acl_cluster: LocalCluster, zk: KazooClient
) -> None:
    bootstrap = _address(acl_cluster, 3)
    create_acl(bootstrap, ResourceType.TOPIC, "announced", AclOperation.READ)
    try:
        children = zk.get_children("/kafka-acl-changes")
        notes = {zk.get(f"/kafka-acl-changes/{c}")[0] for c in children}
        assert b"TOPIC:announced" in notes
        assert all(c.startswith("acl_changes_") for c in children)
    finally:
        delete_acl(bootstrap, ResourceType.TOPIC, "announced", AclOperation.READ)


def test_acls_added_to_one_resource_through_two_brokers_at_once_are_all_kept(
    acl_cluster: LocalCluster, zk: KazooClient
) -> None:
    principals = [f"User:writer-{i}" for i in range(6)]

    def add(i: int) -> int:
        broker_id = 1 + i % 2
        return create_acl(_address(acl_cluster, broker_id), ResourceType.TOPIC, "contended",
                          AclOperation.WRITE, principal=principals[i])  # fmt: skip

    with ThreadPoolExecutor(len(principals)) as pool:
        assert list(pool.map(add, range(len(principals)))) == [ErrorCode.NONE] * len(principals)
    try:
        stored = _json(zk, "/kafka-acl/Topic/contended")
        assert isinstance(stored, dict)
        assert sorted(a["principal"] for a in stored["acls"]) == sorted(principals)
    finally:
        for principal in principals:
            delete_acl(_address(acl_cluster, 3), ResourceType.TOPIC, "contended",
                       AclOperation.WRITE, principal=principal)  # fmt: skip


def test_a_broker_started_after_an_acl_was_created_enforces_it(acl_cluster: LocalCluster) -> None:
    acl_cluster.stop(3)
    assert create_acl(_address(acl_cluster, 1), ResourceType.TOPIC, "led",
                      AclOperation.DESCRIBE, **DENY_DESCRIBE) == ErrorCode.NONE  # fmt: skip
    try:
        acl_cluster.start_broker(3)
        assert _metadata_error(acl_cluster, 3, "ledger") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    finally:
        delete_acl(_address(acl_cluster, 1), ResourceType.TOPIC, "led", AclOperation.DESCRIBE,
                   **DENY_DESCRIBE)  # fmt: skip
