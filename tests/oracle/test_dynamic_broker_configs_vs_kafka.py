"""Dynamic broker configs against Kafka 4.3.1 itself: every broker key Kafka describes is
altered (validate-only) on both brokers, for the broker's own id and for the cluster-wide
default, and both must answer alike — the same error code and the same message. The keys,
and whether each may change, come from Kafka's DescribeConfigs, not from samsa's tables."""

from __future__ import annotations

import re
from typing import Any

import pytest
from tests.rawclient import exchange

from samsa.testing import BrokerProcess
from samsa.testing.kafka import KafkaCluster

DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
BROKER = 4
SET, DELETE, APPEND = 0, 1, 2
INVALID_REQUEST = 42

SAMPLES = {1: "true", 2: "x", 3: "7", 4: "7", 5: "7", 6: "0.5", 7: "a,b", 8: "x.Y", 9: "secret"}
"""A value of each DescribeConfigs ``config_type``, for keys Kafka describes without one."""

NAMED_SAMPLES = {"max.connections.per.ip.overrides": "127.0.0.1:5"}
"""A value for the keys a type's sample does not fit."""

DIFFERENT = {
    "min.insync.replicas": "Kafka 4 refuses a broker-level value while eligible leader "
    "replicas (KIP-966) are on; samsa has no ELR, so a broker-level value is as Kafka 3's",
    "ssl.engine.factory.class": "Kafka loads the Java class named; samsa has none to load",
}
"""Keys samsa answers differently on purpose, and why."""


def _kafka_broker_configs(kafka: KafkaCluster) -> list[Any]:
    node = str(kafka.nodes[0].node_id)
    answer = exchange(kafka.bootstrap, DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": BROKER, "resource_name": node,
                       "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False,
    })  # fmt: skip
    [result] = answer.results
    assert result.error_code == 0
    return list(result.configs)


def _alter(bootstrap: str, name: str, configs: list[tuple[str, int, str | None]]) -> Any:
    answer = exchange(bootstrap, INCREMENTAL_ALTER_CONFIGS, 1, {
        "validate_only": True,
        "resources": [{"resource_type": BROKER, "resource_name": name, "configs": [
            {"name": key, "config_operation": op, "value": value}
            for key, op, value in configs]}],
    })  # fmt: skip
    [result] = answer.responses
    # samsa's messages begin with the error's name ("[INVALID_REQUEST] …"): set it aside.
    message = re.sub(r"^\[[A-Z_]+\] ", "", result.error_message or "") or None
    return int(result.error_code), message


def _both(
    kafka: KafkaCluster, samsa: BrokerProcess, default: bool, configs: list[Any]
) -> tuple[Any, Any]:
    node = "" if default else str(kafka.nodes[0].node_id)
    mine = "" if default else "0"
    return _alter(kafka.bootstrap, node, configs), _alter(samsa.bootstrap, mine, configs)


@pytest.mark.parametrize("default", [False, True], ids=["broker", "cluster-default"])
def test_every_broker_key_kafka_describes_is_taken_or_refused_as_kafka_does(
    kafka: KafkaCluster, samsa: BrokerProcess, default: bool
) -> None:
    configs = _kafka_broker_configs(kafka)
    assert len(configs) > 300
    differences = []
    for config in configs:
        if config.name in DIFFERENT:
            continue
        value = config.value or NAMED_SAMPLES.get(config.name) or SAMPLES[config.config_type]
        kafka_answer, samsa_answer = _both(kafka, samsa, default, [(config.name, SET, value)])
        if kafka_answer != samsa_answer:
            differences.append((config.name, value, kafka_answer, samsa_answer))
    assert differences == [], "\n".join(map(str, differences))


CASES = [
    [("sasl.kerberos.min.time.before.relogin", SET, "120000")],
    [("num.partitions", SET, "3"), ("node.id", SET, "3")],
    [("log.retention.hours", SET, "3")],
    [("custom.key.of.a.plugin", SET, "3")],
    [("custom.key.of.a.plugin", APPEND, "3")],
    [("num.io.threads", SET, "0")],
    [("num.io.threads", SET, "many")],
    [("sasl.kerberos.ticket.renew.jitter", SET, "often")],
    [("ssl.keystore.location", SET, "/keys/broker.jks")],
    [("listener.name.plaintext.ssl.keystore.location", SET, "/keys/broker.jks")],
    [("listener.name.plaintext.max.connections", SET, "100")],
    [("num.partitions", DELETE, None)],
    [("cordoned.log.dirs", SET, "elsewhere")],
    [("message.max.bytes", APPEND, "5")],
    [("log.cleanup.policy", APPEND, "compact")],
    [("log.cleaner.threads", SET, "2"), ("num.network.threads", SET, "4")],
]


@pytest.mark.parametrize("default", [False, True], ids=["broker", "cluster-default"])
@pytest.mark.parametrize("configs", CASES, ids=[c[0][0] + f"-op{c[0][1]}" for c in CASES])
def test_an_alteration_is_answered_as_kafka_answers_it(
    kafka: KafkaCluster, samsa: BrokerProcess, default: bool, configs: list[Any]
) -> None:
    kafka_answer, samsa_answer = _both(kafka, samsa, default, configs)
    assert samsa_answer == kafka_answer


@pytest.mark.parametrize("value", ["x", "host-a:5,host-b"])
def test_connection_overrides_that_do_not_parse_are_refused_as_kafka_refuses_them(
    kafka: KafkaCluster, samsa: BrokerProcess, value: str
) -> None:
    # Kafka's message quotes a Java exception; the code and the message's start are compared.
    configs = [("max.connections.per.ip.overrides", SET, value)]
    (kafka_code, kafka_message), (samsa_code, samsa_message) = _both(kafka, samsa, False, configs)
    start = "Error parsing configuration property 'max.connections.per.ip.overrides': "
    assert (samsa_code, kafka_code) == (INVALID_REQUEST, INVALID_REQUEST)
    assert kafka_message.startswith(start) and samsa_message.startswith(start)
