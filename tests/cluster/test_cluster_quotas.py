"""Client quotas in a cluster: kept in ZooKeeper under Kafka's paths, applied by every
broker through the ``/config/changes`` notifications."""

from __future__ import annotations

import functools
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from kazoo.client import KazooClient
from tests.cluster.conftest import wait_until_served
from tests.integration.test_client_quotas import produce_throttle_ms
from tests.rawclient import exchange
from tests.scram_users import set_credential

from samsa import Admin
from samsa.client.admin import ClientQuotaAlteration, ClientQuotaFilterComponent, NewTopic
from samsa.errors import ErrorCode
from samsa.testing.cluster import LocalCluster
from samsa.testing.zookeeper import ZooKeeperServer

TIMEOUT_S = 30
ALTER_CLIENT_QUOTAS = 49


@pytest.fixture(scope="module")
def pair(
    tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperServer
) -> Iterator[LocalCluster]:
    """Brokers 1 and 2 on a ZooKeeper chroot of their own."""
    connect = f"{zookeeper.connect}/quotas-{uuid.uuid4().hex[:8]}"
    local = LocalCluster(tmp_path_factory.mktemp("quota-cluster"), 2, zookeeper_connect=connect)
    local.start()
    try:
        yield local
    finally:
        local.close()


def _admin(bootstrap: str) -> Admin:
    return Admin({"bootstrap.servers": bootstrap, "default.api.timeout.ms": 20_000})


def _address(cluster: LocalCluster, broker_id: int) -> str:
    return f"127.0.0.1:{cluster.brokers[broker_id].port}"


def test_a_quota_set_through_one_broker_throttles_a_client_of_another(
    pair: LocalCluster,
) -> None:
    topic, client = f"quota-{uuid.uuid4().hex[:8]}", f"client-{uuid.uuid4().hex[:8]}"
    with _admin(_address(pair, 1)) as admin:
        admin.create_topics([NewTopic(topic, replica_assignment={0: [2]})])
        wait_until_served(pair, 2, topic)
        assert produce_throttle_ms(_address(pair, 2), topic, client, 20_000) == 0
        admin.alter_client_quotas(
            [ClientQuotaAlteration({"client-id": client}, {"producer_byte_rate": 1000})]
        )

    # Broker 2 learns it from the change notification: each attempt is a fresh client
    # rate, so a first request of 20 kB at 1 kB/s is throttled once the quota is there.
    deadline = time.monotonic() + TIMEOUT_S
    while produce_throttle_ms(_address(pair, 2), topic, client, 20_000) == 0:
        assert time.monotonic() < deadline, "broker 2 never applied the quota"
        time.sleep(0.1)


def test_quotas_are_kept_in_kafkas_znodes_and_described_by_every_broker(
    pair: LocalCluster,
) -> None:
    user = f"user {uuid.uuid4().hex[:6]}"  # a space: URL-encoded in the path, as Kafka does
    with _admin(_address(pair, 1)) as admin:
        admin.alter_client_quotas(
            [ClientQuotaAlteration({"user": user, "client-id": None}, {"consumer_byte_rate": 4096})]
        )

    zk = KazooClient(hosts=pair.zookeeper_connect, timeout=10.0)
    zk.start(timeout=10.0)
    try:
        path = f"/config/users/{user.replace(' ', '%20')}/clients/<default>"
        data, _ = zk.get(path)
        changes = sorted(zk.get_children("/config/changes"))
        last, _ = zk.get(f"/config/changes/{changes[-1]}")
    finally:
        zk.stop()
        zk.close()
    assert json.loads(data) == {"version": 1, "config": {"consumer_byte_rate": "4096"}}
    assert changes[-1].startswith("config_change_")
    entity_path = f"users/{user.replace(' ', '%20')}/clients/<default>"
    assert json.loads(last) == {"version": 2, "entity_path": entity_path}

    wanted = {(("client-id", None), ("user", user)): {"consumer_byte_rate": 4096.0}}
    exact = ClientQuotaFilterComponent.of_entity("user", user)
    deadline = time.monotonic() + TIMEOUT_S
    with _admin(_address(pair, 2)) as admin:
        while admin.describe_client_quotas([exact]) != wanted:
            assert time.monotonic() < deadline, "broker 2 never described the quota"
            time.sleep(0.1)


QUOTA_KEYS = ["producer_byte_rate", "consumer_byte_rate", "request_percentage"]
MECHANISMS = ["SCRAM-SHA-256", "SCRAM-SHA-512"]
USERS_AT_ONCE = 3


def _set_quota(address: str, user: str, key: str, value: float) -> None:
    entity = [{"entity_type": "user", "entity_name": user}]
    ops = [{"key": key, "value": value, "remove": False}]
    body = {"entries": [{"entity": entity, "ops": ops}], "validate_only": False}
    response = exchange(address, ALTER_CLIENT_QUOTAS, 1, body)
    assert int(response.entries[0].error_code) == ErrorCode.NONE, response


def _alter_at_once(pair: LocalCluster, users: list[str]) -> None:
    """Set three quotas and two SCRAM credentials of each of ``users``, every change from
    its own client, the changes of each user alternately through brokers 1 and 2, all
    released together."""
    changes: list[Callable[[], None]] = []
    for user in users:
        for i, key in enumerate(QUOTA_KEYS):
            address = _address(pair, 1 + i % 2)
            changes.append(functools.partial(_set_quota, address, user, key, 50.0 + i))
        for i, mechanism in enumerate(MECHANISMS):
            address = _address(pair, 2 - i % 2)
            changes.append(functools.partial(set_credential, address, user, mechanism, "pw"))
    start = threading.Barrier(len(changes))

    def released(change: Callable[[], None]) -> None:
        start.wait(TIMEOUT_S)
        change()

    with ThreadPoolExecutor(len(changes)) as pool:
        for future in [pool.submit(released, change) for change in changes]:
            future.result(TIMEOUT_S)


def test_quotas_and_credentials_of_users_altered_at_once_through_two_brokers_all_stay(
    pair: LocalCluster,
) -> None:
    # A user's quotas and SCRAM credentials share /config/users/<user>: each change
    # rewrites that znode, so a change made from a stale read would undo another's.
    for round_ in range(3):
        users = [f"shared-{round_}-{n}-{uuid.uuid4().hex[:6]}" for n in range(USERS_AT_ONCE)]
        _alter_at_once(pair, users)
        for user in users:
            stored = pair._read_json(f"/config/users/{user}")
            assert stored is not None and isinstance(stored["config"], dict)
            assert sorted(stored["config"]) == sorted(QUOTA_KEYS + MECHANISMS), user
            wanted = {(("user", user),): {k: 50.0 + i for i, k in enumerate(QUOTA_KEYS)}}
            exact = ClientQuotaFilterComponent.of_entity("user", user)
            deadline = time.monotonic() + TIMEOUT_S
            for broker_id in (1, 2):
                with _admin(_address(pair, broker_id)) as admin:
                    # Each broker learns of the other's changes from the notifications.
                    while (described := admin.describe_client_quotas([exact])) != wanted:
                        assert time.monotonic() < deadline, f"quotas lost: {described}"
                        time.sleep(0.1)
                    described_credentials = admin.describe_user_scram_credentials([user])
                    assert described_credentials == {user: dict.fromkeys(MECHANISMS, 4096)}
