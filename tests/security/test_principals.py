"""The principal a connection authenticated as is the one ACLs are checked against:
SASL users (PLAIN and SCRAM) and mutual-TLS certificate subjects."""

from __future__ import annotations

from collections.abc import Iterator

import confluent_kafka
import pytest
from tests.security.certs import Pki
from tests.security.conftest import SCRAM_USERS, SecureBroker, add_scram_users, start_secure

from samsa.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePattern,
    ResourceType,
)
from samsa.client import Admin


@pytest.fixture(scope="module")
def authorizing_broker(
    tmp_path_factory: pytest.TempPathFactory, pki: Pki
) -> Iterator[SecureBroker]:
    broker = start_secure(
        tmp_path_factory.mktemp("principals") / "data",
        pki,
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
        "super.users=User:admin;User:ANONYMOUS",
        "ssl.principal.mapping.rules=RULE:^CN=([a-z]+),OU=eng,O=samsa$/$1/L,DEFAULT",
    )
    add_scram_users(broker.address("PLAINTEXT"), SCRAM_USERS)
    allow = [
        ("User:alice", ResourceType.TOPIC, "alice-topic"),
        ("User:bob", ResourceType.TOPIC, "bob-topic"),
        ("User:frank", ResourceType.TOPIC, "frank-topic"),
    ]
    with Admin({"bootstrap.servers": broker.address("PLAINTEXT")}) as admin:
        admin.create_acls(
            AclBinding(
                ResourcePattern(kind, name),
                AccessControlEntry(principal, "*", operation, AclPermissionType.ALLOW),
            )
            for principal, kind, name in allow
            for operation in (AclOperation.WRITE, AclOperation.CREATE)
        )
    try:
        yield broker
    finally:
        broker.process.stop()


def produce(config: dict[str, str], topic: str) -> str | None:
    """The error name of producing one record to ``topic`` (None when delivered)."""
    errors: list[str] = []
    producer = confluent_kafka.Producer({**config, "message.timeout.ms": 20_000})
    producer.produce(topic, b"v", on_delivery=lambda e, _m: errors.append(e.name() if e else ""))
    producer.flush(30)
    return errors[0] or None


def sasl(broker: SecureBroker, mechanism: str, user: str, password: str) -> dict[str, str]:
    return {
        "bootstrap.servers": broker.address("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def test_a_plain_user_writes_where_its_acl_allows_and_nowhere_else(
    authorizing_broker: SecureBroker,
) -> None:
    alice = sasl(authorizing_broker, "PLAIN", "alice", "alice-secret")
    assert produce(alice, "alice-topic") is None
    assert produce(alice, "bob-topic") == "TOPIC_AUTHORIZATION_FAILED"


def test_a_scram_user_writes_where_its_acl_allows_and_nowhere_else(
    authorizing_broker: SecureBroker,
) -> None:
    bob = sasl(authorizing_broker, "SCRAM-SHA-512", "bob", SCRAM_USERS["bob"])
    assert produce(bob, "bob-topic") is None
    assert produce(bob, "alice-topic") == "TOPIC_AUTHORIZATION_FAILED"


def test_a_certificate_subject_mapped_by_the_rules_is_the_principal(
    authorizing_broker: SecureBroker,
) -> None:
    pki = authorizing_broker.pki
    cert, key = pki.client("frank")
    frank = {
        "bootstrap.servers": authorizing_broker.address("SSL"),
        "security.protocol": "SSL",
        "ssl.ca.location": str(pki.ca),
        "ssl.certificate.location": str(cert),
        "ssl.key.location": str(key),
    }
    assert produce(frank, "frank-topic") is None
    assert produce(frank, "alice-topic") == "TOPIC_AUTHORIZATION_FAILED"
    # Without a certificate the connection is User:ANONYMOUS, a super user here.
    anonymous = {k: v for k, v in frank.items() if not k.startswith("ssl.c") and "key" not in k}
    assert produce({**anonymous, "ssl.ca.location": str(pki.ca)}, "alice-topic") is None


def test_the_super_user_of_a_sasl_listener_may_do_anything(
    authorizing_broker: SecureBroker,
) -> None:
    admin = sasl(authorizing_broker, "PLAIN", "admin", "admin-secret")
    assert produce(admin, "any-topic") is None
