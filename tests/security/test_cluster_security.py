"""Brokers of a cluster reach each other over an authenticated, encrypted listener."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from tests.scram_users import scram_login
from tests.security.certs import Pki

from samsa.client import Admin
from samsa.client.admin import ScramUpsertion
from samsa.client.admin.quotas import ClientQuotaAlteration
from samsa.errors import ErrorCode
from samsa.testing.cluster import LocalCluster

INTER_BROKER_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="broker" password="broker-secret" user_broker="broker-secret";'
)


def running_cluster(
    tmp_path: Path, zk_connect: str, settings_of: Callable[[int, int], Sequence[str]]
) -> Iterator[LocalCluster]:
    """Three brokers, each with ``settings_of(broker_id, port)``; stopped afterwards."""
    cluster = LocalCluster(
        tmp_path, 3, ("group.initial.rebalance.delay.ms=0",), zookeeper_connect=zk_connect,
        session_timeout_ms=6000, settings_of=settings_of,
    )  # fmt: skip
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def sasl_ssl_cluster(tmp_path: Path, zk_connect: str, pki: Pki) -> Iterator[LocalCluster]:
    def settings_of(_broker_id: int, port: int) -> Sequence[str]:
        return [
            f"listeners=PLAINTEXT://127.0.0.1:{port},INTERNAL://127.0.0.1:0",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
            "inter.broker.listener.name=INTERNAL",
            f"ssl.keystore.location={pki.broker_keystore}",
            f"ssl.truststore.location={pki.ca}",
            "sasl.enabled.mechanisms=PLAIN",
            "sasl.mechanism.inter.broker.protocol=PLAIN",
            f"listener.name.internal.plain.sasl.jaas.config={INTER_BROKER_JAAS}",
        ]

    yield from running_cluster(tmp_path, zk_connect, settings_of)


def test_followers_replicate_over_a_sasl_ssl_inter_broker_listener(
    sasl_ssl_cluster: LocalCluster,
) -> None:
    admin = AdminClient({"bootstrap.servers": sasl_ssl_cluster.bootstrap})
    admin.create_topics([NewTopic("replicated", 1, 3)])["replicated"].result(30)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": sasl_ssl_cluster.bootstrap, "acks": "all"}
    )
    for i in range(50):
        producer.produce("replicated", f"v{i}".encode())
    assert producer.flush(60) == 0
    sasl_ssl_cluster.wait_until(
        lambda: all(
            len(sasl_ssl_cluster.replica_records(b, "replicated", 0)) == 50 for b in (1, 2, 3)
        ),
        "every replica holds the 50 records",
        60,
    )
    for broker_id in (1, 2, 3):
        values = [v for _, v in sasl_ssl_cluster.replica_records(broker_id, "replicated", 0)]
        assert values == [f"v{i}".encode() for i in range(50)]
    log = "".join(b.log_path.read_text() for b in sasl_ssl_cluster.brokers.values())
    assert "failed authentication" not in log


@pytest.fixture
def sasl_cluster(tmp_path: Path, zk_connect: str) -> Iterator[LocalCluster]:
    def settings_of(_broker_id: int, port: int) -> Sequence[str]:
        return [
            f"listeners=PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:0",
            "inter.broker.listener.name=PLAINTEXT",
            "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
        ]

    yield from running_cluster(tmp_path, zk_connect, settings_of)


def sasl_port(cluster: LocalCluster, broker_id: int) -> int:
    text = cluster.brokers[broker_id].log_path.read_text()
    addresses = text.rsplit("ready on ", 1)[1].split(" (cluster", 1)[0].split(",")
    return int(addresses[1].strip().rpartition(":")[2])


def test_a_scram_credential_set_through_one_broker_logs_in_on_another_beside_its_quota(
    sasl_cluster: LocalCluster,
) -> None:
    first = f"127.0.0.1:{sasl_cluster.brokers[1].port}"
    with Admin({"bootstrap.servers": first}) as admin:
        admin.alter_user_scram_credentials([ScramUpsertion("dana", "SCRAM-SHA-512", "dana-pw")])
        admin.alter_client_quotas(
            [ClientQuotaAlteration({"user": "dana"}, {"producer_byte_rate": 1_000_000.0})]
        )
    # Broker 2 logs users in from its cache, current once it has seen the change notification.
    sasl_cluster.wait_until(
        lambda: scram_login(f"127.0.0.1:{sasl_port(sasl_cluster, 2)}", "SCRAM-SHA-512",
                            "dana", "dana-pw") == ErrorCode.NONE,
        "broker 2 logs dana in", 30,
    )  # fmt: skip
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": f"127.0.0.1:{sasl_port(sasl_cluster, 2)}",
         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
         "sasl.username": "dana", "sasl.password": "dana-pw"}
    )  # fmt: skip
    producer.produce("dana-topic", b"v")
    assert producer.flush(30) == 0
    with Admin({"bootstrap.servers": f"127.0.0.1:{sasl_cluster.brokers[3].port}"}) as admin:
        assert admin.describe_user_scram_credentials(["dana"]) == {"dana": {"SCRAM-SHA-512": 4096}}
    zk_config = sasl_cluster._read_json("/config/users/dana")
    assert zk_config is not None and isinstance(zk_config["config"], dict)
    assert set(zk_config["config"]) == {"SCRAM-SHA-512", "producer_byte_rate"}
    assert "dana-pw" not in json.dumps(zk_config)
