"""SCRAM logins in a cluster come from each broker's cache of the credentials, kept current
by the ``/config/changes`` notifications: a credential set, changed or deleted through one
broker takes effect on the other once it has seen the notification, and logins go on while
a broker cannot reach ZooKeeper. Broker 2 reaches ZooKeeper through a proxy the tests cut."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pytest
from tests.scram_users import delete_credential, scram_login, set_credential
from tests.security.test_cluster_security import sasl_port

from samsa.errors import ErrorCode
from samsa.testing.cluster import LocalCluster
from samsa.testing.netproxy import LinkProxy
from samsa.testing.zookeeper import ZooKeeperServer

SHA512 = "SCRAM-SHA-512"
FAILED = ErrorCode.SASL_AUTHENTICATION_FAILED


@dataclass
class ScramPair:
    cluster: LocalCluster
    zookeeper_link: LinkProxy
    """Broker 2's way to ZooKeeper."""

    def admin(self, broker_id: int) -> str:
        """The plaintext address requests that change credentials go to."""
        return f"127.0.0.1:{self.cluster.brokers[broker_id].port}"

    def sasl(self, broker_id: int) -> str:
        return f"127.0.0.1:{sasl_port(self.cluster, broker_id)}"

    def login(self, broker_id: int, user: str, password: str) -> int:
        return scram_login(self.sasl(broker_id), SHA512, user, password)

    def wait_for_login(self, broker_id: int, user: str, password: str, code: int) -> None:
        self.cluster.wait_until(
            lambda: self.login(broker_id, user, password) == code,
            f"broker {broker_id} answers {code} to {user}'s login",
            30,
        )


@pytest.fixture(scope="module")
def pair(
    tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperServer
) -> Iterator[ScramPair]:
    chroot = f"/scram-{uuid.uuid4().hex[:8]}"
    link = LinkProxy(("127.0.0.1", zookeeper.port), name="broker 2 to ZooKeeper")

    def settings_of(broker_id: int, port: int) -> Sequence[str]:
        settings = [
            f"listeners=PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:0",
            "inter.broker.listener.name=PLAINTEXT",
            "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
        ]
        if broker_id == 2:
            settings.append(f"zookeeper.connect=127.0.0.1:{link.port}{chroot}")
        return settings

    # Long sessions: broker 2 keeps its session through the tests' short cuts.
    cluster = LocalCluster(
        tmp_path_factory.mktemp("scram-cluster"), 2, zookeeper_connect=zookeeper.connect + chroot,
        session_timeout_ms=30_000, settings_of=settings_of,
    )  # fmt: skip
    cluster.start()
    try:
        yield ScramPair(cluster, link)
    finally:
        cluster.close()
        link.close()


def _user() -> str:
    return f"user-{uuid.uuid4().hex[:8]}"


def test_a_credential_set_through_one_broker_logs_in_on_the_other_once_it_has_seen_it(
    pair: ScramPair,
) -> None:
    user = _user()
    set_credential(pair.admin(1), user, SHA512, "first")
    # The broker that stored it has applied it before it answered.
    assert pair.login(1, user, "first") == ErrorCode.NONE
    pair.wait_for_login(2, user, "first", ErrorCode.NONE)


def test_a_changed_password_replaces_the_old_one_on_every_broker(pair: ScramPair) -> None:
    user = _user()
    set_credential(pair.admin(1), user, SHA512, "old")
    pair.wait_for_login(2, user, "old", ErrorCode.NONE)

    set_credential(pair.admin(2), user, SHA512, "new")
    assert pair.login(2, user, "new") == ErrorCode.NONE
    assert pair.login(2, user, "old") == FAILED
    pair.wait_for_login(1, user, "new", ErrorCode.NONE)
    assert pair.login(1, user, "old") == FAILED


def test_a_deleted_credential_stops_working_on_every_broker(pair: ScramPair) -> None:
    user = _user()
    set_credential(pair.admin(1), user, SHA512, "secret")
    pair.wait_for_login(2, user, "secret", ErrorCode.NONE)

    delete_credential(pair.admin(2), user, SHA512)
    assert pair.login(2, user, "secret") == FAILED
    pair.wait_for_login(1, user, "secret", FAILED)


def test_logins_go_on_while_a_broker_cannot_reach_zookeeper_and_it_catches_up_after(
    pair: ScramPair,
) -> None:
    user, later = _user(), _user()
    set_credential(pair.admin(1), user, SHA512, "secret")
    pair.wait_for_login(2, user, "secret", ErrorCode.NONE)

    pair.zookeeper_link.cut()
    try:
        assert pair.login(2, user, "secret") == ErrorCode.NONE
        assert pair.login(2, user, "wrong") == FAILED
        set_credential(pair.admin(1), later, SHA512, "later")  # unseen by broker 2 for now
    finally:
        pair.zookeeper_link.heal()
    pair.wait_for_login(2, later, "later", ErrorCode.NONE)
