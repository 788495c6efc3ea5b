"""Admin APIs against a real broker process: CreatePartitions, DeleteRecords,
DescribeCluster, DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

Driven by confluent-kafka (librdkafka) and kafka-python admin clients; a few
checks that no client exposes (documentation, config types, endpoint types,
the broker-logger resource) send kio-encoded requests on a raw socket.
"""

from __future__ import annotations

import functools
import io
import socket
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaPythonTopicPartition
from kafka.admin import ConfigResource as KafkaPythonConfigResource
from kafka.admin import KafkaAdminClient
from kafka.errors import (
    InvalidPartitionsError,
    OffsetOutOfRangeError,
)
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from samsa.protocol.build import build
from samsa.testing import BrokerProcess, start_broker
from samsa.testing.waiting import wait_until

QUIET = {"log_level": 3}
TIMEOUT_S = 10
WEEK_MS = 604_800_000
RETENTION_CHECK_INTERVAL_MS = 200

OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_PARTITIONS = 37
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
INVALID_REQUEST = 42
POLICY_VIOLATION = 44
MISMATCHED_ENDPOINT_TYPE = 114

DELETE_RECORDS, DESCRIBE_CONFIGS, CREATE_PARTITIONS, DESCRIBE_CLUSTER = 21, 32, 37, 60
TOPIC_RESOURCE, BROKER_RESOURCE, BROKER_LOGGER_RESOURCE = 2, 4, 8


# -- helpers ----------------------------------------------------------------------------------


@pytest.fixture
def topic() -> str:
    return f"admin-{uuid.uuid4().hex[:10]}"


@pytest.fixture(autouse=True)
def _fresh_admin_clients() -> Iterator[None]:
    """Admin clients live for one test, so none outlives (and keeps dialling) its broker."""
    yield
    _admin_for.cache_clear()


@pytest.fixture(scope="module")
def tuned_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker that runs retention every 200 ms and has a broker-level ``log.roll.hours``."""
    broker = start_broker(
        tmp_path_factory.mktemp("tuned") / "data",
        [f"log.retention.check.interval.ms={RETENTION_CHECK_INTERVAL_MS}", "log.roll.hours=24"],
    )
    try:
        yield broker
    finally:
        broker.stop()


def _admin(broker: BrokerProcess) -> AdminClient:
    # One client per broker address: its futures fail if the client is collected first.
    return _admin_for(broker.bootstrap)


@functools.cache
def _admin_for(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, **QUIET})


def _create_topic(broker: BrokerProcess, name: str, partitions: int = 1, **configs: str) -> None:
    futures = _admin(broker).create_topics([NewTopic(name, partitions, 1, config=configs)])
    futures[name].result(TIMEOUT_S)


def _produce(broker: BrokerProcess, name: str, count: int, partition: int = 0) -> None:
    """``count`` records of 100 bytes, each in its own batch (one request per record)."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, **QUIET})
    for i in range(count):
        producer.produce(name, b"v" * 100, key=f"k{i}".encode(), partition=partition)
        assert producer.flush(TIMEOUT_S) == 0


def _watermarks(broker: BrokerProcess, name: str, partition: int = 0) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "wm", **QUIET})
    try:
        low, high = consumer.get_watermark_offsets(
            TopicPartition(name, partition), timeout=TIMEOUT_S, cached=False
        )
        return low, high
    finally:
        consumer.close()


def _describe(broker: BrokerProcess, resource: ConfigResource) -> dict[str, Any]:
    result: dict[str, Any] = _admin(broker).describe_configs([resource])[resource].result(TIMEOUT_S)
    return result


def _incremental(broker: BrokerProcess, name: str, *entries: tuple[str, str | None, Any]) -> None:
    resource = ConfigResource(
        "topic",
        name,
        incremental_configs=[ConfigEntry(k, v, incremental_operation=op) for k, v, op in entries],
    )
    _admin(broker).incremental_alter_configs([resource])[resource].result(TIMEOUT_S)


def _delete_records(broker: BrokerProcess, name: str, offset: int) -> Any:
    """The future of deleting the records of partition 0 of ``name`` below ``offset``."""
    futures = _admin(broker).delete_records([TopicPartition(name, 0, offset)])
    return next(iter(futures.values()))


def _read_from_zero(broker: BrokerProcess, name: str, reset: str, wanted: int) -> list[Message]:
    """The first ``wanted`` messages (records or errors) a consumer reads from offset 0."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"reset-{reset}",
            "auto.offset.reset": reset,
            "enable.auto.commit": False,
            **QUIET,
        }
    )
    messages: list[Message] = []
    try:
        consumer.assign([TopicPartition(name, 0, 0)])
        deadline = time.monotonic() + TIMEOUT_S
        while len(messages) < wanted and time.monotonic() < deadline:
            messages += consumer.consume(wanted - len(messages), 0.5)
    finally:
        consumer.close()
    return messages


def _kafka_error(call: Callable[[], object]) -> KafkaError:
    with pytest.raises(KafkaException) as caught:
        call()
    error: KafkaError = caught.value.args[0]
    return error


def _segment_files(broker: BrokerProcess, name: str, partition: int = 0) -> list[str]:
    return sorted(p.name for p in (broker.data_dir / f"{name}-{partition}").glob("*.log"))


def _call(broker: BrokerProcess, api_key: int, version: int, values: dict[str, Any]) -> Any:
    """Send one kio-encoded request on a fresh connection; the decoded response."""
    request_class = load_request_schema(api_key, version)
    response_class = load_response_schema(api_key, version)
    body = io.BytesIO()
    entity_writer(request_class)(body, build(request_class, values))
    client_id = b"admin-test"
    header = struct.pack(">hhih", api_key, version, 1, len(client_id)) + client_id
    if request_class.__flexible__:
        header += b"\0"
    payload = header + body.getvalue()
    with socket.create_connection((broker.host, broker.port), timeout=TIMEOUT_S) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", _receive(sock, 4))[0]
        frame = _receive(sock, size)
    assert struct.unpack(">i", frame[:4])[0] == 1
    header_size = 5 if response_class.__header_schema__.__flexible__ else 4
    body, _ = entity_reader(response_class)(frame, header_size)
    return body


def _describe_raw(
    broker: BrokerProcess,
    version: int,
    resource_type: int,
    name: str,
    keys: list[str] | None = None,
    *,
    synonyms: bool = False,
    documentation: bool = False,
) -> Any:
    """The one result of a DescribeConfigs request at ``version`` for one resource."""
    resource = {"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}
    request = {
        "resources": [resource],
        "include_synonyms": synonyms,
        "include_documentation": documentation,
    }
    [result] = _call(broker, DESCRIBE_CONFIGS, version, request).results
    return result


def _receive(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return data


# -- CreatePartitions -------------------------------------------------------------------------


def test_create_partitions_grows_topic_and_new_partitions_take_records(
    samsa_broker: BrokerProcess, topic: str
) -> None:
    _create_topic(samsa_broker, topic, 1)
    futures = _admin(samsa_broker).create_partitions([NewPartitions(topic, 3)])
    futures[topic].result(TIMEOUT_S)
    metadata = _admin(samsa_broker).list_topics(topic, timeout=TIMEOUT_S)
    assert sorted(metadata.topics[topic].partitions) == [0, 1, 2]
    _produce(samsa_broker, topic, 4, partition=2)
    assert _watermarks(samsa_broker, topic, 2) == (0, 4)


def test_kafka_python_create_partitions_grows_topic(
    samsa_broker: BrokerProcess, topic: str
) -> None:
    _create_topic(samsa_broker, topic, 2)
    admin = KafkaAdminClient(bootstrap_servers=samsa_broker.bootstrap)
    try:
        admin.create_partitions({topic: 5})
        described = admin.describe_topics([topic])
    finally:
        admin.close()
    assert len(described[0]["partitions"]) == 5


def test_create_partitions_to_the_same_count_is_invalid_partitions(
    samsa_broker: BrokerProcess, topic: str
) -> None:
    _create_topic(samsa_broker, topic, 2)
    future = _admin(samsa_broker).create_partitions([NewPartitions(topic, 2)])[topic]
    assert _kafka_error(lambda: future.result(TIMEOUT_S)).code() == INVALID_PARTITIONS


def test_create_partitions_to_a_smaller_count_is_invalid_partitions(
    samsa_broker: BrokerProcess, topic: str
) -> None:
    _create_topic(samsa_broker, topic, 3)
    admin = KafkaAdminClient(bootstrap_servers=samsa_broker.bootstrap)
    try:
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({topic: 1})
    finally:
        admin.close()


def test_create_partitions_validate_only_leaves_the_topic_unchanged(
    samsa_broker: BrokerProcess, topic: str
) -> None:
    _create_topic(samsa_broker, topic, 1)
    futures = _admin(samsa_broker).create_partitions([NewPartitions(topic, 4)], validate_only=True)
    futures[topic].result(TIMEOUT_S)
    metadata = _admin(samsa_broker).list_topics(topic, timeout=TIMEOUT_S)
    assert list(metadata.topics[topic].partitions) == [0]


def test_create_partitions_assigned_to_another_broker_is_invalid_replica_assignment(
    samsa_broker: BrokerProcess, topic: str
) -> None:
    _create_topic(samsa_broker, topic, 1)
    new = NewPartitions(topic, 3, replica_assignment=[[0], [7]])
    future = _admin(samsa_broker).create_partitions([new])[topic]
    error = _kafka_error(lambda: future.result(TIMEOUT_S))
    assert error.code() == INVALID_REPLICA_ASSIGNMENT
    assert "7" in error.str()


def test_create_partitions_assigned_to_this_broker_succeeds(
    samsa_broker: BrokerProcess, topic: str
) -> None:
    _create_topic(samsa_broker, topic, 1)
    new = NewPartitions(topic, 3, replica_assignment=[[0], [0]])
    _admin(samsa_broker).create_partitions([new])[topic].result(TIMEOUT_S)
    metadata = _admin(samsa_broker).list_topics(topic, timeout=TIMEOUT_S)
    assert sorted(metadata.topics[topic].partitions) == [0, 1, 2]


def test_create_partitions_of_an_unknown_topic_is_unknown_topic_or_partition(
    samsa_broker: BrokerProcess, topic: str
) -> None:
    response = _call(
        samsa_broker,
        CREATE_PARTITIONS,
        3,
        {"topics": [{"name": topic, "count": 2, "assignments": None}], "timeout": 5000},
    )
    assert [r.error_code.value for r in response.results] == [UNKNOWN_TOPIC_OR_PARTITION]


def test_create_partitions_over_ten_thousand_per_request_is_policy_violation(
    samsa_broker: BrokerProcess, topic: str
) -> None:
    _create_topic(samsa_broker, topic, 1)
    response = _call(
        samsa_broker,
        CREATE_PARTITIONS,
        3,
        {"topics": [{"name": topic, "count": 10_002, "assignments": None}], "timeout": 5000},
    )
    assert [r.error_code.value for r in response.results] == [POLICY_VIOLATION]
    metadata = _admin(samsa_broker).list_topics(topic, timeout=TIMEOUT_S)
    assert list(metadata.topics[topic].partitions) == [0]


# -- DeleteRecords ----------------------------------------------------------------------------


def test_delete_records_moves_the_low_watermark(samsa_broker: BrokerProcess, topic: str) -> None:
    _create_topic(samsa_broker, topic)
    _produce(samsa_broker, topic, 10)
    assert _delete_records(samsa_broker, topic, 6).result(TIMEOUT_S).low_watermark == 6
    assert _watermarks(samsa_broker, topic) == (6, 10)


def test_delete_records_to_minus_one_deletes_up_to_the_high_watermark(
    samsa_broker: BrokerProcess, topic: str
) -> None:
    _create_topic(samsa_broker, topic)
    _produce(samsa_broker, topic, 5)
    assert _delete_records(samsa_broker, topic, OFFSET_END).result(TIMEOUT_S).low_watermark == 5
    assert _watermarks(samsa_broker, topic) == (5, 5)


def test_kafka_python_delete_records_reports_the_low_watermark(
    samsa_broker: BrokerProcess, topic: str
) -> None:
    _create_topic(samsa_broker, topic)
    _produce(samsa_broker, topic, 8)
    admin = KafkaAdminClient(bootstrap_servers=samsa_broker.bootstrap)
    try:
        result = admin.delete_records({KafkaPythonTopicPartition(topic, 0): 3})
    finally:
        admin.close()
    assert result[KafkaPythonTopicPartition(topic, 0)]["low_watermark"] == 3
    assert _watermarks(samsa_broker, topic) == (3, 8)


def test_delete_records_beyond_the_high_watermark_is_offset_out_of_range(
    samsa_broker: BrokerProcess, topic: str
) -> None:
    _create_topic(samsa_broker, topic)
    _produce(samsa_broker, topic, 3)
    future = _delete_records(samsa_broker, topic, 4)
    assert _kafka_error(lambda: future.result(TIMEOUT_S)).code() == OFFSET_OUT_OF_RANGE
    assert _watermarks(samsa_broker, topic) == (0, 3)


def test_delete_records_of_an_unknown_partition_is_unknown_topic_or_partition(
    samsa_broker: BrokerProcess, topic: str
) -> None:
    _create_topic(samsa_broker, topic)
    request = {
        "topics": [{"name": topic, "partitions": [{"partition_index": 5, "offset": 0}]}],
        "timeout": 5000,
    }
    response = _call(samsa_broker, DELETE_RECORDS, 2, request)
    partition = response.topics[0].partitions[0]
    assert (partition.error_code.value, partition.low_watermark) == (
        UNKNOWN_TOPIC_OR_PARTITION,
        -1,
    )


def test_delete_records_on_a_compacted_topic_is_policy_violation(
    samsa_broker: BrokerProcess, topic: str
) -> None:
    _create_topic(samsa_broker, topic, **{"cleanup.policy": "compact"})
    _produce(samsa_broker, topic, 3)
    future = _delete_records(samsa_broker, topic, 2)
    assert _kafka_error(lambda: future.result(TIMEOUT_S)).code() == POLICY_VIOLATION


def test_fetch_below_the_low_watermark_is_offset_out_of_range(
    samsa_broker: BrokerProcess, topic: str
) -> None:
    _create_topic(samsa_broker, topic)
    _produce(samsa_broker, topic, 10)
    _delete_records(samsa_broker, topic, 4).result(TIMEOUT_S)
    tp = KafkaPythonTopicPartition(topic, 0)
    consumer = KafkaConsumer(
        bootstrap_servers=samsa_broker.bootstrap,
        auto_offset_reset="none",
        enable_auto_commit=False,
        request_timeout_ms=TIMEOUT_S * 1000,
    )
    try:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.monotonic() + TIMEOUT_S
        with pytest.raises(OffsetOutOfRangeError):
            while time.monotonic() < deadline:
                consumer.poll(timeout_ms=200)
    finally:
        consumer.close()


def test_auto_offset_reset_earliest_resumes_at_the_low_watermark(
    samsa_broker: BrokerProcess, topic: str
) -> None:
    _create_topic(samsa_broker, topic)
    _produce(samsa_broker, topic, 10)
    _delete_records(samsa_broker, topic, 7).result(TIMEOUT_S)
    messages = _read_from_zero(samsa_broker, topic, "earliest", 3)
    assert [m.error() for m in messages] == [None] * 3
    offsets = [m.offset() for m in messages]
    assert offsets == [7, 8, 9]


def test_auto_offset_reset_error_reports_the_out_of_range_offset(
    samsa_broker: BrokerProcess, topic: str
) -> None:
    _create_topic(samsa_broker, topic)
    _produce(samsa_broker, topic, 5)
    _delete_records(samsa_broker, topic, 3).result(TIMEOUT_S)
    [message] = _read_from_zero(samsa_broker, topic, "error", 1)
    error = message.error()
    assert error is not None, "a record below the low watermark was read"
    assert error.code() == KafkaError._AUTO_OFFSET_RESET
    assert "out of range" in error.str().lower()


# -- DescribeCluster --------------------------------------------------------------------------


def test_kafka_python_describe_cluster_lists_this_broker_as_controller(
    samsa_broker: BrokerProcess,
) -> None:
    admin = KafkaAdminClient(bootstrap_servers=samsa_broker.bootstrap)
    try:
        cluster = admin.describe_cluster()
    finally:
        admin.close()
    assert cluster["controller_id"] == 0
    assert cluster["cluster_id"] == _admin(samsa_broker).list_topics(timeout=5).cluster_id
    assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [
        (0, samsa_broker.host, samsa_broker.port)
    ]
    assert "DESCRIBE" in cluster["authorized_operations"]


def test_confluent_describe_cluster_lists_this_broker(samsa_broker: BrokerProcess) -> None:
    cluster = _admin(samsa_broker).describe_cluster(request_timeout=TIMEOUT_S).result(TIMEOUT_S)
    assert cluster.controller.id == 0
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [
        (0, samsa_broker.host, samsa_broker.port)
    ]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_cluster_answers_every_version(samsa_broker: BrokerProcess, version: int) -> None:
    response = _call(
        samsa_broker,
        DESCRIBE_CLUSTER,
        version,
        {"include_cluster_authorized_operations": False, "endpoint_type": 1},
    )
    assert response.error_code.value == 0
    assert response.controller_id == 0
    assert [(b.broker_id, b.port) for b in response.brokers] == [(0, samsa_broker.port)]
    assert response.cluster_authorized_operations == -(2**31)
    if version >= 1:
        assert response.endpoint_type == 1


def test_describe_cluster_for_controller_endpoints_is_mismatched_endpoint_type(
    samsa_broker: BrokerProcess,
) -> None:
    response = _call(
        samsa_broker,
        DESCRIBE_CLUSTER,
        1,
        {"include_cluster_authorized_operations": False, "endpoint_type": 2},
    )
    assert response.error_code.value == MISMATCHED_ENDPOINT_TYPE


# -- DescribeConfigs --------------------------------------------------------------------------


def test_describe_configs_shows_retention_default_from_default_config(
    samsa_broker: BrokerProcess, topic: str
) -> None:
    _create_topic(samsa_broker, topic)
    configs = _describe(samsa_broker, ConfigResource("topic", topic))
    retention = configs["retention.ms"]
    assert retention.value == str(WEEK_MS)
    assert retention.source == ConfigSource.DEFAULT_CONFIG.value
    assert not retention.is_read_only and not retention.is_sensitive
    assert configs["cleanup.policy"].value == "delete"
    assert configs["preallocate"].value == "false"


def test_incremental_set_shows_dynamic_topic_config_and_survives_restart(
    tmp_path: Path, topic: str
) -> None:
    with start_broker(tmp_path / "data") as broker:
        _create_topic(broker, topic)
        _incremental(broker, topic, ("retention.ms", "1000", AlterConfigOpType.SET))
        retention = _describe(broker, ConfigResource("topic", topic))["retention.ms"]
        assert (retention.value, retention.source) == (
            "1000",
            ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
        )
        broker.restart()
        retention = _describe(broker, ConfigResource("topic", topic))["retention.ms"]
        assert (retention.value, retention.source) == (
            "1000",
            ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
        )


def test_describe_configs_synonyms_list_the_override_then_the_broker_default(
    samsa_broker: BrokerProcess, topic: str
) -> None:
    _create_topic(samsa_broker, topic, **{"segment.bytes": "2097152"})
    result = _describe_raw(
        samsa_broker, 4, TOPIC_RESOURCE, topic, ["segment.bytes"], synonyms=True, documentation=True
    )
    [entry] = result.configs
    assert (entry.name, entry.value, entry.config_source) == ("segment.bytes", "2097152", 1)
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
        ("segment.bytes", "2097152", 1),
        ("log.segment.bytes", "1073741824", 5),
    ]
    assert entry.config_type == 3  # INT
    assert entry.documentation


def test_describe_configs_of_an_unknown_topic_is_unknown_topic_or_partition(
    samsa_broker: BrokerProcess, topic: str
) -> None:
    future = _admin(samsa_broker).describe_configs([ConfigResource("topic", topic)])
    error = _kafka_error(lambda: next(iter(future.values())).result(TIMEOUT_S))
    assert error.code() == UNKNOWN_TOPIC_OR_PARTITION


def test_topic_default_from_broker_properties_is_static_broker_config(
    tuned_broker: BrokerProcess, topic: str
) -> None:
    _create_topic(tuned_broker, topic)
    segment_ms = _describe(tuned_broker, ConfigResource("topic", topic))["segment.ms"]
    assert segment_ms.value == str(24 * 3600_000)
    assert segment_ms.source == ConfigSource.STATIC_BROKER_CONFIG.value


def test_broker_configs_show_their_sources_and_only_dynamic_ones_are_writable(
    tuned_broker: BrokerProcess,
) -> None:
    configs = _describe(tuned_broker, ConfigResource("broker", "0"))
    interval = configs["log.retention.check.interval.ms"]
    assert interval.value == str(RETENTION_CHECK_INTERVAL_MS)
    assert interval.source == ConfigSource.STATIC_BROKER_CONFIG.value
    partitions = configs["num.partitions"]
    assert (partitions.value, partitions.source) == ("1", ConfigSource.DEFAULT_CONFIG.value)
    assert interval.is_read_only and partitions.is_read_only
    assert not configs["log.retention.ms"].is_read_only


def test_describe_configs_of_another_broker_id_is_invalid_request(
    samsa_broker: BrokerProcess,
) -> None:
    result = _describe_raw(samsa_broker, 1, BROKER_RESOURCE, "5")
    assert result.error_code.value == INVALID_REQUEST


def test_describe_configs_of_the_cluster_default_broker_resource_is_empty_until_one_is_set(
    samsa_broker: BrokerProcess,
) -> None:
    # Kafka answers BROKER "" with the cluster-wide dynamic defaults: none are set here.
    result = _describe_raw(samsa_broker, 1, BROKER_RESOURCE, "")
    assert (result.error_code.value, result.configs) == (0, ())


def test_describe_configs_of_broker_logger_is_invalid_request(
    samsa_broker: BrokerProcess,
) -> None:
    result = _describe_raw(samsa_broker, 4, BROKER_LOGGER_RESOURCE, "0")
    assert result.error_code.value == INVALID_REQUEST
    assert "BROKER_LOGGER" in (result.error_message or "")


# -- AlterConfigs and IncrementalAlterConfigs -------------------------------------------------


def test_incremental_alter_with_a_bad_value_is_invalid_config_naming_the_key(
    samsa_broker: BrokerProcess, topic: str
) -> None:
    _create_topic(samsa_broker, topic)
    error = _kafka_error(
        lambda: _incremental(samsa_broker, topic, ("retention.ms", "soon", AlterConfigOpType.SET))
    )
    assert error.code() == INVALID_CONFIG
    assert "retention.ms" in error.str()


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_alter_configs_with_a_bad_value_is_invalid_config_naming_the_key(
    samsa_broker: BrokerProcess, topic: str
) -> None:
    _create_topic(samsa_broker, topic)
    resource = ConfigResource("topic", topic, set_config={"segment.bytes": "tiny"})
    future = _admin(samsa_broker).alter_configs([resource])[resource]
    error = _kafka_error(lambda: future.result(TIMEOUT_S))
    assert error.code() == INVALID_CONFIG
    assert "segment.bytes" in error.str()


def test_an_unknown_config_key_is_invalid_config(samsa_broker: BrokerProcess, topic: str) -> None:
    _create_topic(samsa_broker, topic)
    admin = KafkaAdminClient(bootstrap_servers=samsa_broker.bootstrap)
    try:
        resource = KafkaPythonConfigResource("TOPIC", topic, {"retention.forever": "1"})
        result = admin.alter_configs([resource], raise_on_unknown=False)
    finally:
        admin.close()
    outcome = result["topic"][topic]
    assert "InvalidConfigurationError" in outcome or "INVALID_CONFIG" in outcome
    assert "retention.forever" in outcome


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_alter_configs_replaces_every_override(samsa_broker: BrokerProcess, topic: str) -> None:
    _create_topic(samsa_broker, topic, **{"retention.ms": "5000", "segment.bytes": "2097152"})
    resource = ConfigResource("topic", topic, set_config={"retention.bytes": "123456"})
    _admin(samsa_broker).alter_configs([resource])[resource].result(TIMEOUT_S)
    configs = _describe(samsa_broker, ConfigResource("topic", topic))
    dynamic = {
        name: entry.value
        for name, entry in configs.items()
        if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    }
    assert dynamic == {"retention.bytes": "123456"}
    assert configs["retention.ms"].value == str(WEEK_MS)


def test_incremental_append_and_subtract_edit_list_configs(
    samsa_broker: BrokerProcess, topic: str
) -> None:
    _create_topic(samsa_broker, topic)
    _incremental(samsa_broker, topic, ("cleanup.policy", "compact", AlterConfigOpType.APPEND))
    assert _describe(samsa_broker, ConfigResource("topic", topic))["cleanup.policy"].value == (
        "delete,compact"
    )
    _incremental(samsa_broker, topic, ("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT))
    assert _describe(samsa_broker, ConfigResource("topic", topic))["cleanup.policy"].value == (
        "compact"
    )


def test_incremental_append_to_a_scalar_config_is_invalid_config(
    samsa_broker: BrokerProcess, topic: str
) -> None:
    _create_topic(samsa_broker, topic)
    error = _kafka_error(
        lambda: _incremental(samsa_broker, topic, ("retention.ms", "5", AlterConfigOpType.APPEND))
    )
    assert error.code() == INVALID_CONFIG


def test_incremental_delete_returns_a_key_to_its_default(
    samsa_broker: BrokerProcess, topic: str
) -> None:
    _create_topic(samsa_broker, topic, **{"retention.ms": "5000"})
    _incremental(samsa_broker, topic, ("retention.ms", None, AlterConfigOpType.DELETE))
    retention = _describe(samsa_broker, ConfigResource("topic", topic))["retention.ms"]
    assert (retention.value, retention.source) == (str(WEEK_MS), ConfigSource.DEFAULT_CONFIG.value)


def test_validate_only_alteration_changes_nothing(samsa_broker: BrokerProcess, topic: str) -> None:
    _create_topic(samsa_broker, topic)
    resource = ConfigResource(
        "topic",
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    futures = _admin(samsa_broker).incremental_alter_configs([resource], validate_only=True)
    futures[resource].result(TIMEOUT_S)
    retention = _describe(samsa_broker, ConfigResource("topic", topic))["retention.ms"]
    assert retention.value == str(WEEK_MS)


def test_altering_a_static_broker_config_is_invalid_request(samsa_broker: BrokerProcess) -> None:
    resource = ConfigResource(
        "broker",
        "0",
        incremental_configs=[
            ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    future = _admin(samsa_broker).incremental_alter_configs([resource])[resource]
    error = _kafka_error(lambda: future.result(TIMEOUT_S))
    assert error.code() == INVALID_REQUEST
    assert "Cannot update these configs dynamically: [num.partitions]" in error.str()


# -- config changes reach the live logs -------------------------------------------------------


def test_smaller_segment_bytes_rolls_more_segments(samsa_broker: BrokerProcess, topic: str) -> None:
    _create_topic(samsa_broker, topic)
    _produce(samsa_broker, topic, 5)
    assert len(_segment_files(samsa_broker, topic)) == 1
    _incremental(samsa_broker, topic, ("segment.bytes", "1024", AlterConfigOpType.SET))
    _produce(samsa_broker, topic, 30)
    assert len(_segment_files(samsa_broker, topic)) >= 4


def test_short_retention_deletes_old_segments_and_moves_the_low_watermark(
    tuned_broker: BrokerProcess, topic: str
) -> None:
    _create_topic(tuned_broker, topic, **{"segment.bytes": "1024"})
    _produce(tuned_broker, topic, 30)
    before = _segment_files(tuned_broker, topic)
    assert len(before) >= 4
    time.sleep(3 * RETENTION_CHECK_INTERVAL_MS / 1000)
    assert _segment_files(tuned_broker, topic) == before  # a week of retention keeps them
    _incremental(tuned_broker, topic, ("retention.ms", "1000", AlterConfigOpType.SET))
    wait_until(
        lambda: len(_segment_files(tuned_broker, topic)) == 1,
        "the old segments to be deleted",
        timeout=TIMEOUT_S,
    )
    low, high = _watermarks(tuned_broker, topic)
    assert high == 30
    assert low == int(_segment_files(tuned_broker, topic)[0].removesuffix(".log")) > 0
