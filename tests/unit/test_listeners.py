"""Listeners by name: listener.security.protocol.map names each listener's protocol."""

from __future__ import annotations

import pytest

from samsa.broker.config import BrokerConfig, ConfigError, parse_listener, parse_protocol_map


def test_a_named_listener_takes_its_protocol_from_the_map() -> None:
    protocols = parse_protocol_map("PLAINTEXT:PLAINTEXT, replication:plaintext")
    assert protocols == {"PLAINTEXT": "PLAINTEXT", "REPLICATION": "PLAINTEXT"}
    listener = parse_listener("replication://127.0.0.1:9093", protocols)
    assert (listener.name, listener.host, listener.port) == ("REPLICATION", "127.0.0.1", 9093)


@pytest.mark.parametrize(
    ("spec", "protocols", "message"),
    [
        ("INTERNAL://127.0.0.1:9093", "PLAINTEXT:PLAINTEXT", "has no protocol"),
        ("SECURE://127.0.0.1:9093", "SECURE:TLS", "unknown security protocol TLS"),
        ("127.0.0.1:9093", "PLAINTEXT:PLAINTEXT", "expected NAME://host:port"),
    ],
)
def test_a_listener_that_cannot_be_served_is_a_configuration_error(
    spec: str, protocols: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_listener(spec, parse_protocol_map(protocols))


def test_a_malformed_protocol_map_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match="NAME:PROTOCOL"):
        parse_protocol_map("REPLICATION")


def test_every_advertised_listener_is_kept() -> None:
    config = BrokerConfig.from_props({
        "listeners": "PLAINTEXT://127.0.0.1:0,REPLICATION://127.0.0.1:0",
        "advertised.listeners": "PLAINTEXT://127.0.0.1:0,REPLICATION://127.0.0.1:7001",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT",
    })  # fmt: skip
    assert [(a.name, a.port) for a in config.advertised_listeners] == [
        ("PLAINTEXT", 0), ("REPLICATION", 7001),
    ]  # fmt: skip


def test_metrics_are_served_only_where_metrics_listeners_says() -> None:
    assert BrokerConfig.from_props({}).metrics_listeners == ()
    config = BrokerConfig.from_props(
        {"metrics.listeners": "http://127.0.0.1:9644, http://[::1]:0/"}
    )
    assert config.metrics_listeners == (("127.0.0.1", 9644), ("::1", 0))


@pytest.mark.parametrize(
    "spec", ["127.0.0.1:9644", "https://127.0.0.1:9644", "http://127.0.0.1", "http://h:70000"]
)
def test_a_metrics_listener_that_is_not_http_host_port_is_a_configuration_error(
    spec: str,
) -> None:
    with pytest.raises(ConfigError, match=r"metrics\.listeners"):
        BrokerConfig.from_props({"metrics.listeners": spec})
