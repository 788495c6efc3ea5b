"""Client configuration: the Java client's names and defaults, and its cross-key rules."""

from __future__ import annotations

import pytest

from samsa.client.config import admin_config, producer_config
from samsa.errors import ConfigError

BOOTSTRAP = {"bootstrap.servers": "127.0.0.1:9092"}


def test_producer_defaults_are_javas() -> None:
    config = producer_config(BOOTSTRAP)
    assert config["acks"] == -1
    assert config["linger.ms"] == 5
    assert config["batch.size"] == 16384
    assert config["buffer.memory"] == 33554432
    assert config["max.block.ms"] == 60000
    assert config["enable.idempotence"] is True
    assert config["max.in.flight.requests.per.connection"] == 5
    assert config["retries"] == 2147483647
    assert config["delivery.timeout.ms"] == 120000
    assert config["request.timeout.ms"] == 30000
    assert config["retry.backoff.ms"] == 100
    assert config["retry.backoff.max.ms"] == 1000
    assert config["metadata.max.age.ms"] == 300000
    assert config["max.request.size"] == 1048576
    assert config["transaction.timeout.ms"] == 60000


def test_admin_defaults_are_javas() -> None:
    config = admin_config(BOOTSTRAP)
    assert config["default.api.timeout.ms"] == 60000
    assert config["request.timeout.ms"] == 30000
    assert config["connections.max.idle.ms"] == 300000


def test_unknown_key_is_rejected_by_name() -> None:
    with pytest.raises(ConfigError, match=r"linger\.msec"):
        producer_config({**BOOTSTRAP, "linger.msec": 5})


@pytest.mark.parametrize(
    ("key", "value"),
    [("acks", "2"), ("linger.ms", "soon"), ("compression.type", "brotli"), ("batch.size", -1)],
)
def test_bad_value_is_rejected_naming_key_and_value(key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=rf"{value!r}.*{key}"):
        producer_config({**BOOTSTRAP, key: value})


def test_bootstrap_servers_are_required_as_host_port() -> None:
    with pytest.raises(ConfigError, match=r"bootstrap\.servers"):
        producer_config({})
    with pytest.raises(ConfigError, match=r"bootstrap\.servers"):
        producer_config({"bootstrap.servers": "localhost"})


@pytest.mark.parametrize("acks", ["1", 0])
def test_idempotence_left_at_default_yields_to_acks(acks: object) -> None:
    config = producer_config({**BOOTSTRAP, "acks": acks})
    assert config["enable.idempotence"] is False
    assert config["acks"] == int(acks)  # type: ignore[call-overload]


def test_explicit_idempotence_with_acks_1_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"enable\.idempotence"):
        producer_config({**BOOTSTRAP, "acks": "1", "enable.idempotence": True})


def test_idempotence_allows_at_most_five_requests_in_flight() -> None:
    with pytest.raises(ConfigError, match=r"max\.in\.flight"):
        producer_config(
            {**BOOTSTRAP, "enable.idempotence": "true",
             "max.in.flight.requests.per.connection": 6}
        )  # fmt: skip


def test_transactional_id_requires_idempotence() -> None:
    with pytest.raises(ConfigError, match=r"transactional\.id"):
        producer_config({**BOOTSTRAP, "transactional.id": "t", "enable.idempotence": False})


def test_delivery_timeout_must_cover_linger_and_request_timeout() -> None:
    with pytest.raises(ConfigError, match=r"delivery\.timeout\.ms"):
        producer_config({**BOOTSTRAP, "delivery.timeout.ms": 1000})
    raised = producer_config({**BOOTSTRAP, "request.timeout.ms": 200_000})
    assert raised["delivery.timeout.ms"] == 200_005


def test_serializers_must_be_callables() -> None:
    with pytest.raises(ConfigError, match=r"value\.serializer"):
        producer_config({**BOOTSTRAP, "value.serializer": "StringSerializer"})
    config = producer_config({**BOOTSTRAP, "value.serializer": str.encode})
    assert config["value.serializer"] is str.encode
    assert config["key.serializer"] is None


def test_none_means_unset() -> None:
    assert producer_config({**BOOTSTRAP, "transactional.id": None})["transactional.id"] is None
