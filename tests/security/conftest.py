"""A broker with all four security protocols, and the certificates its tests make."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.security.certs import Pki, make_pki

from samsa.client import Admin
from samsa.client.admin import ScramUpsertion
from samsa.testing.broker import BrokerProcess

PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret"}
SCRAM_USERS = {"bob": "bob-secret", "carol": "carol-secret"}
_ADDRESSES = re.compile(r"ready on (.+?) \(cluster")


@dataclass
class SecureBroker:
    process: BrokerProcess
    pki: Pki
    ports: dict[str, int]

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


def jaas(users: dict[str, str]) -> str:
    entries = " ".join(f'user_{name}="{password}"' for name, password in users.items())
    return f"org.apache.kafka.common.security.plain.PlainLoginModule required {entries};"


def secure_overrides(pki: Pki, *extra: str) -> list[str]:
    return [
        "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,"
        "SASL_SSL://127.0.0.1:0",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={pki.broker_keystore}",
        f"ssl.truststore.location={pki.ca}",
        "ssl.client.auth=requested",
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas(PLAIN_USERS)}",
        f"listener.name.sasl_ssl.plain.sasl.jaas.config={jaas(PLAIN_USERS)}",
        "num.partitions=1",
        "group.initial.rebalance.delay.ms=0",
        *extra,
    ]


def start_secure(data_dir: Path, pki: Pki, *extra: str) -> SecureBroker:
    process = BrokerProcess(data_dir, secure_overrides(pki, *extra)).start()
    return SecureBroker(process, pki, ports_of(process))


def ports_of(process: BrokerProcess) -> dict[str, int]:
    deadline = time.monotonic() + 10
    while True:
        matches = _ADDRESSES.findall(process.log_path.read_text(errors="replace"))
        if matches or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    addresses = [a.strip() for a in matches[-1].split(",")]
    names = ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
    return {name: int(a.rpartition(":")[2]) for name, a in zip(names, addresses, strict=True)}


def add_scram_users(bootstrap: str, users: dict[str, str]) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.alter_user_scram_credentials(
            [
                ScramUpsertion(user, mechanism, password, iterations=8192)
                for user, password in users.items()
                for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512")
            ]
        )


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[SecureBroker]:
    broker = start_secure(tmp_path_factory.mktemp("secure") / "data", pki)
    add_scram_users(broker.address("PLAINTEXT"), SCRAM_USERS)
    try:
        yield broker
    finally:
        broker.process.stop()
