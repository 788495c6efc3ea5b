"""A cluster with two listeners tells each client the addresses of the listener it came on.

Brokers 1, 2 and 3 listen on INTERNAL (PLAINTEXT, the inter-broker listener); brokers 1
and 2 also on EXTERNAL (SASL_PLAINTEXT, advertised as ``localhost``). A client sent to
the other listener's addresses cannot talk there (a PLAINTEXT client on a SASL port, or
the reverse), so producing and consuming through each listener shows it was told its own.
Broker 3 has no EXTERNAL listener, and is the controller: EXTERNAL clients are not told
of it, as Kafka does, and are named a controller they can reach.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from tests.rawclient import exchange, read_response, request_frame

from samsa.errors import ErrorCode
from samsa.testing.cluster import LocalCluster
from samsa.testing.zookeeper import ZooKeeperServer, free_port

METADATA, FIND_COORDINATOR, SASL_HANDSHAKE, SASL_AUTHENTICATE, DESCRIBE_CLUSTER = 3, 10, 17, 36, 60
USER, PASSWORD = "outsider", "outsider-secret"
JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{USER}="{PASSWORD}";'
EXTERNAL_BROKERS = (1, 2)


@dataclass
class TwoListeners:
    cluster: LocalCluster
    external_ports: dict[int, int]

    def internal(self, broker: int) -> str:
        return f"127.0.0.1:{self.cluster.brokers[broker].port}"

    def external(self, broker: int) -> str:
        return f"localhost:{self.external_ports[broker]}"

    def client_config(self, listener: str, broker: int = 1) -> dict[str, Any]:
        if listener == "INTERNAL":
            return {"bootstrap.servers": self.internal(broker)}
        return {
            "bootstrap.servers": self.external(broker),
            "broker.address.family": "v4",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": USER,
            "sasl.password": PASSWORD,
        }


@pytest.fixture(scope="module")
def two_listeners(
    tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperServer
) -> Iterator[TwoListeners]:
    external = {broker: free_port() for broker in EXTERNAL_BROKERS}

    def settings_of(broker_id: int, port: int) -> list[str]:
        settings = [
            "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
            "inter.broker.listener.name=INTERNAL",
        ]
        if broker_id not in external:
            return [*settings, f"listeners=INTERNAL://127.0.0.1:{port}"]
        return [
            *settings,
            f"listeners=INTERNAL://127.0.0.1:{port},EXTERNAL://127.0.0.1:{external[broker_id]}",
            f"advertised.listeners=INTERNAL://127.0.0.1:{port},"
            f"EXTERNAL://localhost:{external[broker_id]}",
            "sasl.enabled.mechanisms=PLAIN",
            f"listener.name.external.plain.sasl.jaas.config={JAAS}",
        ]

    cluster = LocalCluster(
        Path(tmp_path_factory.mktemp("listeners")), 3,
        ("group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000"),
        zookeeper_connect=f"{zookeeper.connect}/listeners-cluster", settings_of=settings_of,
    )  # fmt: skip
    cluster.start(controller=3)
    try:
        yield TwoListeners(cluster, external)
    finally:
        cluster.close()


def sasl_exchange(address: str, api_key: int, version: int, values: dict[str, Any]) -> Any:
    """One request on a SASL_PLAINTEXT listener, after a PLAIN login."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection(("127.0.0.1" if host == "localhost" else host, int(port)),
                                  timeout=30) as sock:  # fmt: skip
        sock.sendall(request_frame(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}))
        assert read_response(sock, SASL_HANDSHAKE, 1).error_code == ErrorCode.NONE
        token = f"\0{USER}\0{PASSWORD}".encode()
        sock.sendall(request_frame(SASL_AUTHENTICATE, 2, {"auth_bytes": token}))
        assert read_response(sock, SASL_AUTHENTICATE, 2).error_code == ErrorCode.NONE
        sock.sendall(request_frame(api_key, version, values))
        return read_response(sock, api_key, version)


def coordinator_of(setup: TwoListeners, group: str) -> int:
    """The broker coordinating ``group``, asked on INTERNAL (-1 while it has none)."""
    response = exchange(setup.internal(1), FIND_COORDINATOR, 4,
                        {"key_type": 0, "coordinator_keys": [group]})  # fmt: skip
    coordinator = response.coordinators[0]
    return int(coordinator.node_id) if coordinator.error_code == ErrorCode.NONE else -1


def wait_for_coordinator(setup: TwoListeners, group: str) -> int:
    """The broker coordinating ``group``, once it has one (the offsets topic is created by
    the first FindCoordinator and leads only after its election)."""
    found: list[int] = []

    def elected() -> bool:
        found.append(coordinator_of(setup, group))
        return found[-1] >= 0

    setup.cluster.wait_until(elected, f"{group} has a coordinator", 30)
    return found[-1]


def group_coordinated_by(setup: TwoListeners, brokers: tuple[int, ...]) -> str:
    """A group id whose coordinator is one of ``brokers``."""
    for i in range(200):
        if wait_for_coordinator(setup, f"group-{i}") in brokers:
            return f"group-{i}"
    raise AssertionError(f"no group coordinated by {brokers}")


def consume(
    cluster: LocalCluster, consumer: confluent_kafka.Consumer, count: int, what: str
) -> list[bytes]:
    values: list[bytes] = []

    def more() -> bool:
        values.extend(m.value() for m in consumer.consume(count, 1.0) if m.error() is None)
        return len(values) >= count

    cluster.wait_until(more, what, 30)
    return values


def create_topic(setup: TwoListeners, topic: NewTopic) -> None:
    admin = AdminClient(setup.client_config("INTERNAL"))
    admin.create_topics([topic])[topic.topic].result(30)


def test_brokers_register_every_listener_in_zookeeper(two_listeners: TwoListeners) -> None:
    first = two_listeners.cluster._read_json("/brokers/ids/1")
    assert first is not None
    assert first["endpoints"] == [
        f"INTERNAL://{two_listeners.internal(1)}",
        f"EXTERNAL://{two_listeners.external(1)}",
    ]
    assert first["listener_security_protocol_map"] == {
        "INTERNAL": "PLAINTEXT",
        "EXTERNAL": "SASL_PLAINTEXT",
    }
    third = two_listeners.cluster._read_json("/brokers/ids/3")
    assert third is not None
    assert third["endpoints"] == [f"INTERNAL://{two_listeners.internal(3)}"]


def test_metadata_names_the_addresses_of_the_listener_the_client_came_on(
    two_listeners: TwoListeners,
) -> None:
    inside = confluent_kafka.Producer(two_listeners.client_config("INTERNAL", 2))
    brokers = inside.list_topics(timeout=30).brokers
    assert {b: f"{m.host}:{m.port}" for b, m in brokers.items()} == {
        b: two_listeners.internal(b) for b in (1, 2, 3)
    }
    outside = confluent_kafka.Producer(two_listeners.client_config("EXTERNAL", 2))
    brokers = outside.list_topics(timeout=30).brokers
    assert {b: f"{m.host}:{m.port}" for b, m in brokers.items()} == {
        b: two_listeners.external(b) for b in EXTERNAL_BROKERS
    }


def test_describe_cluster_names_the_addresses_of_the_listener_the_client_came_on(
    two_listeners: TwoListeners,
) -> None:
    for listener, expected in (
        ("INTERNAL", {b: two_listeners.internal(b) for b in (1, 2, 3)}),
        ("EXTERNAL", {b: two_listeners.external(b) for b in EXTERNAL_BROKERS}),
    ):
        admin = AdminClient(two_listeners.client_config(listener))
        described = admin.describe_cluster().result(30)
        assert {n.id: f"{n.host}:{n.port}" for n in described.nodes} == expected, listener
        assert described.controller is not None and described.controller.id in expected


@pytest.mark.parametrize("listener", ["INTERNAL", "EXTERNAL"])
def test_clients_produce_and_consume_through_their_listener(
    two_listeners: TwoListeners, listener: str
) -> None:
    topic = f"through-{listener.lower()}"
    # The EXTERNAL clients' partitions and group are on the brokers they can reach.
    create_topic(two_listeners, NewTopic(topic, 2, replica_assignment=[[1, 2], [2, 1]]))
    group = (
        group_coordinated_by(two_listeners, EXTERNAL_BROKERS)
        if listener == "EXTERNAL"
        else "internal-readers"
    )
    config = two_listeners.client_config(listener)
    producer = confluent_kafka.Producer({**config, "acks": "all"})
    for i in range(20):
        producer.produce(topic, f"{listener}-{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer({**config, "group.id": group,
                                         "auto.offset.reset": "earliest",
                                         "session.timeout.ms": 6000})  # fmt: skip
    consumer.subscribe([topic])
    try:
        values = consume(
            two_listeners.cluster, consumer, 20, f"the 20 records read through {listener}"
        )
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert sorted(values) == sorted(f"{listener}-{i}".encode() for i in range(20))


def test_a_broker_without_the_listener_is_left_out_of_that_listeners_answers(
    two_listeners: TwoListeners,
) -> None:
    create_topic(two_listeners, NewTopic("led-by-three", 1, replica_assignment=[[3, 1]]))
    request = {"topics": [{"name": "led-by-three"}], "allow_auto_topic_creation": False}

    def led_by_three() -> bool:
        inside = exchange(two_listeners.internal(1), METADATA, 12, request).topics[0]
        return [(p.error_code, p.leader_id) for p in inside.partitions] == [(ErrorCode.NONE, 3)]

    two_listeners.cluster.wait_until(led_by_three, "broker 1 names broker 3 the leader", 30)
    outside = two_listeners.external(1)
    response = sasl_exchange(outside, METADATA, 12, request)
    assert sorted(int(b.node_id) for b in response.brokers) == [1, 2]
    partition = response.topics[0].partitions[0]
    assert (partition.error_code, partition.leader_id) == (ErrorCode.LISTENER_NOT_FOUND, -1)
    assert list(partition.replica_nodes) == [3, 1]
    # Before v6 clients know no LISTENER_NOT_FOUND: the leader is not available.
    old = sasl_exchange(outside, METADATA, 5, request).topics[0].partitions[0]
    assert (old.error_code, old.leader_id) == (ErrorCode.LEADER_NOT_AVAILABLE, -1)

    assert response.controller_id == 1  # the controller (3) is not on EXTERNAL
    described = sasl_exchange(outside, DESCRIBE_CLUSTER, 1, {"endpoint_type": 1})
    assert sorted(int(b.broker_id) for b in described.brokers) == [1, 2]
    assert described.controller_id == 1
    inside = exchange(two_listeners.internal(1), DESCRIBE_CLUSTER, 1, {"endpoint_type": 1})
    assert inside.controller_id == 3

    group = group_coordinated_by(two_listeners, (3,))
    found = sasl_exchange(outside, FIND_COORDINATOR, 4,
                          {"key_type": 0, "coordinator_keys": [group]}).coordinators[0]  # fmt: skip
    assert (found.error_code, found.node_id) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)
    assert wait_for_coordinator(two_listeners, group) == 3
