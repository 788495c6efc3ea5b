"""``samsa configs`` on topics, brokers and broker loggers, run as a user runs it
(``python -m samsa`` against a real broker), its lines compared with kafka-configs.sh's
format and its effect read back with confluent-kafka's admin client."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from samsa.testing import BrokerProcess

pytestmark = pytest.mark.timeout(120)

COMMAND_TIMEOUT_S = 30


def configs(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "samsa", "configs", "--bootstrap-server", broker.bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )


def ok(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, f"{result.args}: exit {result.returncode}\n{result.stderr}"
    return result.stdout.splitlines()


def refused(result: subprocess.CompletedProcess[str], code: int = 1) -> str:
    assert result.returncode == code, f"{result.args}: exit {result.returncode}\n{result.stdout}"
    assert "Traceback" not in result.stderr
    return result.stderr


def new_topic(broker: BrokerProcess) -> str:
    name = f"configs-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=20)
    return name


def topic_configs(broker: BrokerProcess, topic: str) -> dict[str, str]:
    """The topic's configs as another client sees them."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(timeout=20)
    return {name: entry.value for name, entry in entries.items()}


def test_add_config_sets_topic_configs_that_describe_lists_as_kafka_configs_does(
    samsa_broker: BrokerProcess,
) -> None:
    topic = new_topic(samsa_broker)

    added = "retention.ms=3600000,cleanup.policy=[compact,delete]"
    done = ok(configs(samsa_broker, "--alter", "--entity-type", "topics", "--entity-name",
                      topic, "--add-config", added))  # fmt: skip

    assert done == [f"Completed updating config for topic {topic}."]
    seen = topic_configs(samsa_broker, topic)
    assert seen["retention.ms"] == "3600000"
    assert seen["cleanup.policy"] == "compact,delete"
    assert ok(configs(samsa_broker, "--describe", "--topic", topic)) == [
        f"Dynamic configs for topic {topic} are:",
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "cleanup.policy=compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}",
        "  retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "retention.ms=3600000, DEFAULT_CONFIG:log.retention.hours=168}",
    ]


def test_delete_config_puts_a_topic_config_back_to_its_default(
    samsa_broker: BrokerProcess,
) -> None:
    topic = new_topic(samsa_broker)
    ok(configs(samsa_broker, "--alter", "--topic", topic, "--add-config", "retention.ms=60000"))

    done = ok(configs(samsa_broker, "--alter", "--topic", topic, "--delete-config",
                      "retention.ms"))  # fmt: skip

    assert done == [f"Completed updating config for topic {topic}."]
    assert topic_configs(samsa_broker, topic)["retention.ms"] == "604800000"
    assert ok(configs(samsa_broker, "--describe", "--topic", topic)) == [
        f"Dynamic configs for topic {topic} are:"
    ]


def test_describe_all_lists_every_topic_config_with_its_default(
    samsa_broker: BrokerProcess,
) -> None:
    topic = new_topic(samsa_broker)

    lines = ok(configs(samsa_broker, "--describe", "--entity-type", "topics", "--entity-name",
                       topic, "--all"))  # fmt: skip

    assert lines[0] == f"All configs for topic {topic} are:"
    default = (
        "  compression.type=producer sensitive=false "
        "synonyms={DEFAULT_CONFIG:compression.type=producer}"
    )
    assert default in lines
    names = [line.split("=", 1)[0].strip() for line in lines[1:]]
    assert names == sorted(names)
    assert set(names) >= {"retention.ms", "cleanup.policy", "segment.bytes"}


def test_describe_without_a_name_covers_every_topic(samsa_broker: BrokerProcess) -> None:
    first, second = new_topic(samsa_broker), new_topic(samsa_broker)
    ok(configs(samsa_broker, "--alter", "--topic", second, "--add-config", "retention.ms=7000"))

    lines = ok(configs(samsa_broker, "--describe", "--entity-type", "topics"))

    assert f"Dynamic configs for topic {first} are:" in lines
    at = lines.index(f"Dynamic configs for topic {second} are:")
    assert lines[at + 1].startswith("  retention.ms=7000 sensitive=false synonyms=")


def test_a_broker_config_and_the_cluster_default_are_altered_and_described(
    samsa_broker: BrokerProcess,
) -> None:
    try:
        assert ok(configs(samsa_broker, "--alter", "--broker", "0", "--add-config",
                          "message.max.bytes=2000000")) == [
            "Completed updating config for broker 0."
        ]  # fmt: skip
        assert ok(configs(samsa_broker, "--alter", "--entity-type", "brokers",
                          "--entity-default", "--add-config", "message.max.bytes=3000000")) == [
            "Completed updating default config for brokers in the cluster."
        ]  # fmt: skip

        assert ok(configs(samsa_broker, "--describe", "--entity-type", "brokers")) == [
            "Dynamic configs for broker 0 are:",
            "  message.max.bytes=2000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
            "message.max.bytes=2000000, DYNAMIC_DEFAULT_BROKER_CONFIG:message.max.bytes=3000000, "
            "DEFAULT_CONFIG:message.max.bytes=1048588}",
            "Default configs for brokers in the cluster are:",
            "  message.max.bytes=3000000 sensitive=false synonyms={"
            "DYNAMIC_DEFAULT_BROKER_CONFIG:message.max.bytes=3000000, "
            "DEFAULT_CONFIG:message.max.bytes=1048588}",
        ]
    finally:
        ok(configs(samsa_broker, "--alter", "--broker", "0", "--delete-config",
                   "message.max.bytes"))  # fmt: skip
        ok(configs(samsa_broker, "--alter", "--broker-defaults", "--delete-config",
                   "message.max.bytes"))  # fmt: skip
    assert ok(configs(samsa_broker, "--describe", "--broker-defaults")) == [
        "Default configs for brokers in the cluster are:"
    ]


def test_what_the_broker_refuses_is_quoted_with_exit_code_1(samsa_broker: BrokerProcess) -> None:
    missing = f"missing-{uuid.uuid4().hex[:8]}"

    unknown_topic = refused(configs(samsa_broker, "--alter", "--topic", missing,
                                    "--add-config", "retention.ms=1"))  # fmt: skip
    bad_value = refused(configs(samsa_broker, "--alter", "--topic", new_topic(samsa_broker),
                                "--add-config", "retention.ms=soon"))  # fmt: skip
    loggers = refused(configs(samsa_broker, "--describe", "--entity-type", "broker-loggers",
                              "--entity-name", "0"))  # fmt: skip

    assert f"[UNKNOWN_TOPIC_OR_PARTITION] Topic {missing} does not exist." in unknown_topic
    assert "[INVALID_CONFIG]" in bad_value
    # samsa keeps no logger configs; the broker's refusal is what the user reads.
    assert "[INVALID_REQUEST]" in loggers and "BROKER_LOGGER" in loggers


def test_a_broker_is_named_by_its_integer_id(samsa_broker: BrokerProcess) -> None:
    error = refused(configs(samsa_broker, "--describe", "--entity-type", "brokers",
                            "--entity-name", "first"), code=2)  # fmt: skip

    assert "must be a valid integer broker id, but it is: first" in error
