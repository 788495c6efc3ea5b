"""The JSON samsa keeps in ZooKeeper: Kafka's formats, read back, and never a crash on odd bytes."""

from __future__ import annotations

import contextlib
import json
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from samsa.cluster import zk_data
from samsa.cluster.zk_data import (
    BrokerRegistration,
    Endpoint,
    LeaderAndIsr,
    ProducerIdBlock,
    TopicAssignment,
    ZkDataError,
)
from samsa.types import TopicPartition

TP = TopicPartition("orders", 2)


def test_a_broker_registration_reads_back_with_its_endpoints_and_rack() -> None:
    registration = BrokerRegistration(
        3,
        (Endpoint("PLAINTEXT", "127.0.0.1", 9094), Endpoint("INTERNAL", "10.0.0.3", 19094)),
        rack="rack-b",
    )
    assert zk_data.decode_broker(3, zk_data.encode_broker(registration)) == registration


def test_a_broker_registration_carries_kafkas_top_level_host_and_port() -> None:
    registration = BrokerRegistration(1, (Endpoint("PLAINTEXT", "localhost", 9092),))
    written = json.loads(zk_data.encode_broker(registration))
    assert (written["version"], written["host"], written["port"]) == (5, "localhost", 9092)
    assert written["endpoints"] == ["PLAINTEXT://localhost:9092"]
    assert written["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}


def test_a_broker_registration_written_by_kafka_is_read() -> None:
    kafka_written = (
        b'{"listener_security_protocol_map":{"CLIENT":"SSL","REPLICATION":"PLAINTEXT"},'
        b'"endpoints":["CLIENT://host1:9092","REPLICATION://host1:9093"],"jmx_port":9999,'
        b'"features":{},"host":null,"timestamp":"2233345666","port":-1,"version":5,"rack":"dc1"}'
    )
    registration = zk_data.decode_broker(7, kafka_written)
    assert registration.endpoints == (
        Endpoint("CLIENT", "host1", 9092, "SSL"),
        Endpoint("REPLICATION", "host1", 9093, "PLAINTEXT"),
    )
    assert registration.rack == "dc1"


def test_a_version_1_broker_registration_has_one_plaintext_endpoint() -> None:
    data = b'{"version":1,"host":"localhost","port":9092,"jmx_port":-1,"timestamp":"1"}'
    assert zk_data.decode_broker(1, data).endpoints == (Endpoint("PLAINTEXT", "localhost", 9092),)


def test_a_topic_assignment_reads_back_with_its_id_and_replicas() -> None:
    assignment = TopicAssignment("orders", uuid.uuid4(), {0: (1, 2, 3), 1: (2, 3, 1)})
    assert zk_data.decode_topic("orders", zk_data.encode_topic(assignment)) == assignment


def test_a_topic_id_is_written_as_kafka_writes_uuids() -> None:
    topic_id = uuid.UUID("0f5c2f4e-1b1b-4f6a-9a1e-3f2d6c7b8a90")
    written = json.loads(zk_data.encode_topic(TopicAssignment("t", topic_id, {0: (1,)})))
    assert written["topic_id"] == "D1wvThsbT2qaHj8tbHuKkA"  # base64, URL-safe, no padding
    assert written["partitions"] == {"0": [1]}


def test_a_partition_state_reads_back_with_the_znode_version() -> None:
    state = LeaderAndIsr(leader=2, leader_epoch=5, isr=(2, 3), controller_epoch=4)
    data = zk_data.encode_leader_and_isr(state)
    assert json.loads(data) == {
        "version": 1,
        "leader": 2,
        "leader_epoch": 5,
        "isr": [2, 3],
        "controller_epoch": 4,
    }
    assert zk_data.decode_leader_and_isr(TP, data, 9) == LeaderAndIsr(2, 5, (2, 3), 4, 9)


def test_paths_follow_kafkas_layout() -> None:
    assert zk_data.partition_state_path(TP) == "/brokers/topics/orders/partitions/2/state"
    assert zk_data.broker_path(4) == "/brokers/ids/4"
    assert zk_data.topic_config_path("orders") == "/config/topics/orders"
    assert zk_data.delete_topic_path("orders") == "/admin/delete_topics/orders"


def test_controller_cluster_id_config_and_producer_ids_read_back() -> None:
    assert zk_data.decode_controller(zk_data.encode_controller(3)) == 3
    assert zk_data.decode_controller_epoch(zk_data.encode_controller_epoch(12)) == 12
    assert zk_data.decode_cluster_id(zk_data.encode_cluster_id("abc")) == "abc"
    config = {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert zk_data.decode_config(zk_data.encode_config(config), "x") == config
    block = ProducerIdBlock(2, 1000, 1999)
    assert zk_data.decode_producer_id_block(zk_data.encode_producer_id_block(block)) == block


@pytest.mark.parametrize(
    "data",
    [None, b"", b"\xff\xfe", b"[]", b"{}", b'{"partitions":{"x":[1]}}', b'{"isr":"1"}'],
)
def test_bytes_that_are_not_the_format_raise_zk_data_error(data: bytes | None) -> None:
    for decode in (
        lambda d: zk_data.decode_topic("t", d),
        lambda d: zk_data.decode_leader_and_isr(TP, d, 0),
        lambda d: zk_data.decode_broker(1, d),
        zk_data.decode_controller,
        zk_data.decode_cluster_id,
        zk_data.decode_producer_id_block,
    ):
        with pytest.raises(ZkDataError):
            decode(data)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(st.one_of(st.binary(max_size=64), JSON.map(lambda v: json.dumps(v).encode())))
def test_no_bytes_make_a_decoder_raise_anything_but_zk_data_error(data: bytes) -> None:
    for decode in (
        lambda d: zk_data.decode_topic("t", d),
        lambda d: zk_data.decode_leader_and_isr(TP, d, 0),
        lambda d: zk_data.decode_broker(1, d),
        lambda d: zk_data.decode_config(d, "x"),
        zk_data.decode_controller,
        zk_data.decode_controller_epoch,
        zk_data.decode_cluster_id,
        zk_data.decode_producer_id_block,
    ):
        with contextlib.suppress(ZkDataError):
            decode(data)


def test_a_broker_registration_reads_back_with_the_replicas_it_lost() -> None:
    registration = BrokerRegistration(
        2,
        (Endpoint("PLAINTEXT", "127.0.0.1", 9093),),
        lost_replicas=frozenset({TopicPartition("keep", 0), TopicPartition("keep", 3), TP}),
    )
    encoded = zk_data.encode_broker(registration)
    assert json.loads(encoded)["lost_replicas"] == {"keep": [0, 3], "orders": [2]}
    assert zk_data.decode_broker(2, encoded) == registration
    assert "lost_replicas" not in json.loads(
        zk_data.encode_broker(BrokerRegistration(2, registration.endpoints))
    )
