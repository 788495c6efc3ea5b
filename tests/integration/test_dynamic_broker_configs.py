"""Dynamic broker configs (KIP-226) against a real broker process.

AlterConfigs and IncrementalAlterConfigs on BROKER resources — this broker's
id, and ``""`` for the cluster-wide default — change the keys samsa applies
live; DescribeConfigs reports each value's source; the changes are kept in
the data directory and outlive a restart. Driven by confluent-kafka's
AdminClient and samsa's own Admin; records that probe ``message.max.bytes``
go through a raw Produce request.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from tests.conftest import make_batch
from tests.rawclient import exchange

from samsa import Admin
from samsa.client.admin import ConfigResource as SamsaConfigResource
from samsa.client.admin import ConfigSource as SamsaConfigSource
from samsa.testing import BrokerProcess, start_broker
from samsa.testing.waiting import wait_until

QUIET = {"log_level": 3}
TIMEOUT_S = 10
RETENTION_CHECK_INTERVAL_MS = 200
PRODUCE = 0
MESSAGE_TOO_LARGE = 10
INVALID_REQUEST = 42
WEEK_MS = 604_800_000


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of its own (its dynamic configs are its own), running retention often."""
    process = start_broker(
        tmp_path / "data", [f"log.retention.check.interval.ms={RETENTION_CHECK_INTERVAL_MS}"]
    )
    try:
        yield process
    finally:
        process.stop()


def _admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})


def _samsa_admin(broker: BrokerProcess) -> Admin:
    return Admin({"bootstrap.servers": broker.bootstrap, "default.api.timeout.ms": 10_000})


def _set(broker: BrokerProcess, *entries: tuple[str, str | None, Any]) -> None:
    """IncrementalAlterConfigs of BROKER "0" through confluent-kafka."""
    resource = ConfigResource(
        "broker",
        "0",
        incremental_configs=[ConfigEntry(k, v, incremental_operation=op) for k, v, op in entries],
    )
    admin = _admin(broker)
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)


def _set_default(broker: BrokerProcess, changes: dict[str, str | None]) -> None:
    """IncrementalAlterConfigs of BROKER "" (confluent-kafka cannot name it): samsa's Admin."""
    with _samsa_admin(broker) as admin:
        admin.alter_configs({SamsaConfigResource.broker(""): changes})


def _describe(broker: BrokerProcess, kind: str, name: str) -> dict[str, Any]:
    admin = _admin(broker)
    resource = ConfigResource(kind, name)
    result: dict[str, Any] = admin.describe_configs([resource])[resource].result(TIMEOUT_S)
    return result


def _create_topic(broker: BrokerProcess, **configs: str) -> str:
    name = f"dyn-{uuid.uuid4().hex[:10]}"
    admin = _admin(broker)
    admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(TIMEOUT_S)
    return name


def _produce_one_batch(broker: BrokerProcess, topic: str, value_size: int) -> int:
    """The error code of producing one record of ``value_size`` bytes."""
    batch = make_batch([b"v" * value_size], timestamp=int(time.time() * 1000), keys=[b"k"])
    response = exchange(broker.bootstrap, PRODUCE, 9, {
        "transactional_id": None, "acks": -1, "timeout": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": bytes(batch)}]}],
    })  # fmt: skip
    return int(response.responses[0].partition_responses[0].error_code.value)


def _produce(broker: BrokerProcess, topic: str, count: int) -> None:
    """``count`` records of 100 bytes, each in its own batch."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, **QUIET})
    for i in range(count):
        producer.produce(topic, b"v" * 100, key=f"k{i}".encode())
        assert producer.flush(TIMEOUT_S) == 0


def _segments(broker: BrokerProcess, topic: str) -> list[str]:
    return sorted(p.name for p in (broker.data_dir / f"{topic}-0").glob("*.log"))


def test_a_dynamic_retention_deletes_old_segments_of_topics_without_an_override(
    broker: BrokerProcess,
) -> None:
    plain = _create_topic(broker, **{"segment.bytes": "1024"})
    kept = _create_topic(broker, **{"segment.bytes": "1024", "retention.ms": str(WEEK_MS)})
    _produce(broker, plain, 30)
    _produce(broker, kept, 30)
    kept_segments = _segments(broker, kept)
    assert len(_segments(broker, plain)) >= 4 and len(kept_segments) >= 4
    _set(broker, ("log.retention.ms", "1000", AlterConfigOpType.SET))
    wait_until(
        lambda: len(_segments(broker, plain)) == 1,
        "the dynamic retention to delete the old segments",
        timeout=TIMEOUT_S,
    )
    assert _segments(broker, kept) == kept_segments  # its own retention.ms still applies


def test_message_max_bytes_set_for_the_cluster_default_refuses_larger_batches(
    broker: BrokerProcess,
) -> None:
    topic = _create_topic(broker)
    assert _produce_one_batch(broker, topic, 3000) == 0
    _set_default(broker, {"message.max.bytes": "2000"})
    assert _produce_one_batch(broker, topic, 3000) == MESSAGE_TOO_LARGE
    assert _produce_one_batch(broker, topic, 1000) == 0


def test_this_brokers_value_wins_over_the_cluster_default_until_it_is_deleted(
    broker: BrokerProcess,
) -> None:
    topic = _create_topic(broker)
    _set_default(broker, {"message.max.bytes": "2000"})
    _set(broker, ("message.max.bytes", "100000", AlterConfigOpType.SET))
    assert _produce_one_batch(broker, topic, 3000) == 0
    _set(broker, ("message.max.bytes", None, AlterConfigOpType.DELETE))
    assert _produce_one_batch(broker, topic, 3000) == MESSAGE_TOO_LARGE


def test_describe_configs_reports_each_dynamic_layer_as_the_source(
    broker: BrokerProcess,
) -> None:
    topic = _create_topic(broker)
    _set_default(broker, {"log.retention.ms": "7200000"})
    _set(broker, ("log.segment.bytes", "2000000", AlterConfigOpType.SET))
    configs = _describe(broker, "broker", "0")
    retention, segment = configs["log.retention.ms"], configs["log.segment.bytes"]
    assert (retention.value, retention.source) == (
        "7200000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
    )
    assert (segment.value, segment.source) == ("2000000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert not segment.is_read_only and configs["num.partitions"].is_read_only
    with _samsa_admin(broker) as admin:
        mine = SamsaConfigResource.broker(0)
        described = admin.describe_configs([mine], include_synonyms=True)[mine]
        default = SamsaConfigResource.broker("")
        [entry] = admin.describe_configs([default])[default].values()
    assert [(s.value, s.source) for s in described["log.segment.bytes"].synonyms] == [
        ("2000000", SamsaConfigSource.DYNAMIC_BROKER_CONFIG),
        (str(1024**3), SamsaConfigSource.DEFAULT_CONFIG),
    ]
    assert (entry.name, entry.source) == (
        "log.retention.ms",
        SamsaConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    topic_retention = _describe(broker, "topic", topic)["retention.ms"]
    assert (topic_retention.value, topic_retention.source) == (
        "7200000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
    )


def test_dynamic_broker_configs_survive_a_restart(broker: BrokerProcess) -> None:
    topic = _create_topic(broker)
    _set_default(broker, {"message.max.bytes": "2000"})
    _set(broker, ("log.retention.ms", "7200000", AlterConfigOpType.SET))
    broker.restart()
    assert _produce_one_batch(broker, topic, 3000) == MESSAGE_TOO_LARGE
    configs = _describe(broker, "broker", "0")
    assert configs["message.max.bytes"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    retention = configs["log.retention.ms"]
    assert (retention.value, retention.source) == (
        "7200000",
        ConfigSource.DYNAMIC_BROKER_CONFIG.value,
    )


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_alter_configs_replaces_the_whole_dynamic_set_of_the_broker(
    broker: BrokerProcess,
) -> None:
    _set(
        broker,
        ("log.retention.ms", "7200000", AlterConfigOpType.SET),
        ("log.segment.bytes", "2000000", AlterConfigOpType.SET),
    )
    admin = _admin(broker)
    resource = ConfigResource("broker", "0", set_config={"log.retention.ms": "3600000"})
    admin.alter_configs([resource])[resource].result(TIMEOUT_S)
    configs = _describe(broker, "broker", "0")
    assert configs["log.retention.ms"].value == "3600000"
    segment = configs["log.segment.bytes"]
    assert (segment.value, segment.source) == (str(1024**3), ConfigSource.DEFAULT_CONFIG.value)


def test_an_invalid_value_is_invalid_request_and_changes_nothing(broker: BrokerProcess) -> None:
    with pytest.raises(KafkaException) as raised:
        _set(broker, ("log.segment.bytes", "ten", AlterConfigOpType.SET))
    assert raised.value.args[0].code() == INVALID_REQUEST
    assert "log.segment.bytes" in raised.value.args[0].str()
    assert _describe(broker, "broker", "0")["log.segment.bytes"].value == str(1024**3)


def test_a_validate_only_change_is_checked_but_not_made(broker: BrokerProcess) -> None:
    resource = ConfigResource(
        "broker",
        "0",
        incremental_configs=[
            ConfigEntry("log.segment.bytes", "2000000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin = _admin(broker)
    admin.incremental_alter_configs([resource], validate_only=True)[resource].result(TIMEOUT_S)
    segment = _describe(broker, "broker", "0")["log.segment.bytes"]
    assert (segment.value, segment.source) == (str(1024**3), ConfigSource.DEFAULT_CONFIG.value)


def test_samsa_admin_sets_the_cluster_default_and_reads_it_back(broker: BrokerProcess) -> None:
    with _samsa_admin(broker) as admin:
        default = SamsaConfigResource.broker("")
        admin.alter_configs({default: {"log.cleanup.policy": "compact,delete"}})
        [entry] = admin.describe_configs([default])[default].values()
        assert (entry.name, entry.value) == ("log.cleanup.policy", "compact,delete")
        assert entry.source is SamsaConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        mine = SamsaConfigResource.broker(0)
        policy = admin.describe_configs([mine])[mine]["log.cleanup.policy"]
        assert policy.value == "compact,delete"
        admin.alter_configs({default: {"log.cleanup.policy": None}})
        assert admin.describe_configs([default])[default] == {}


def test_a_malformed_dynamic_config_file_stops_start_up_naming_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "samsa-dynamic-configs.json").write_text("{not json")
    result = subprocess.run(
        [sys.executable, "-m", "samsa", "serve", "--override", f"log.dirs={data}",
         "--override", "listeners=PLAINTEXT://127.0.0.1:0"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=30, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "samsa-dynamic-configs.json is malformed" in result.stdout
    assert "Traceback" not in result.stdout


def test_a_stored_key_that_cannot_change_is_skipped_and_the_rest_applies(
    broker: BrokerProcess,
) -> None:
    topic = _create_topic(broker)
    _set_default(broker, {"message.max.bytes": "2000"})
    broker.stop()
    path = broker.data_dir / "samsa-dynamic-configs.json"
    stored = json.loads(path.read_text())
    stored["default"]["num.partitions"] = "7"
    path.write_text(json.dumps(stored))
    broker.start()
    assert _produce_one_batch(broker, topic, 3000) == MESSAGE_TOO_LARGE
    assert _describe(broker, "broker", "0")["num.partitions"].value == "1"
    assert "ignoring the stored dynamic config" in broker.log_path.read_text()


# -- every key Kafka takes dynamically --------------------------------------------------------


def test_a_kerberos_relogin_time_is_taken_for_the_broker_and_kept_across_a_restart(
    broker: BrokerProcess,
) -> None:
    _set(broker, ("sasl.kerberos.min.time.before.relogin", "120000", AlterConfigOpType.SET))
    broker.restart()
    relogin = _describe(broker, "broker", "0")["sasl.kerberos.min.time.before.relogin"]
    assert (relogin.value, relogin.source) == ("120000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert not relogin.is_read_only


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_alter_configs_takes_kept_keys_and_a_custom_one_as_kafka_does(
    broker: BrokerProcess,
) -> None:
    resource = ConfigResource("broker", "0", set_config={
        "sasl.kerberos.min.time.before.relogin": "90000", "num.io.threads": "16",
        "leader.replication.throttled.rate": "1000000", "custom.plugin.setting": "on",
    })  # fmt: skip
    admin = _admin(broker)
    admin.alter_configs([resource])[resource].result(TIMEOUT_S)
    configs = _describe(broker, "broker", "0")
    assert configs["num.io.threads"].value == "16"
    assert configs["leader.replication.throttled.rate"].value == "1000000"
    stored = json.loads((broker.data_dir / "samsa-dynamic-configs.json").read_text())
    assert stored["broker"]["custom.plugin.setting"] == "on"


def test_the_cluster_default_takes_cluster_wide_keys_and_refuses_per_broker_ones(
    broker: BrokerProcess,
) -> None:
    _set_default(broker, {"log.cleaner.threads": "2", "num.replica.fetchers": "4"})
    configs = _describe(broker, "broker", "0")
    threads, fetchers = configs["log.cleaner.threads"], configs["num.replica.fetchers"]
    assert (threads.value, threads.source) == (
        "2",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
    )
    assert fetchers.value == "4"
    answer = exchange(broker.bootstrap, 44, 1, {"validate_only": False, "resources": [{
        "resource_type": 4, "resource_name": "", "configs": [{
            "name": "sasl.kerberos.min.time.before.relogin", "config_operation": 0,
            "value": "120000"}]}]})  # fmt: skip
    [result] = answer.responses
    assert result.error_code == INVALID_REQUEST
    assert result.error_message.endswith(
        "Cannot update these configs at default cluster level, broker id must be specified: "
        "[sasl.kerberos.min.time.before.relogin]"
    )


def test_a_value_out_of_range_is_refused_in_kafkas_words(broker: BrokerProcess) -> None:
    with pytest.raises(KafkaException) as raised:
        _set(broker, ("num.io.threads", "0", AlterConfigOpType.SET))
    assert raised.value.args[0].code() == INVALID_REQUEST
    assert (
        raised.value.args[0]
        .str()
        .endswith("Invalid value 0 for configuration num.io.threads: Value must be at least 1")
    )


def test_a_dynamic_max_connections_per_ip_applies_to_new_connections(
    broker: BrokerProcess,
) -> None:
    host, port = broker.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as held:
        _set(broker, ("max.connections.per.ip", "1", AlterConfigOpType.SET))
        assert held.fileno() >= 0
        with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as refused:
            assert refused.recv(1) == b""  # closed by the broker at once
