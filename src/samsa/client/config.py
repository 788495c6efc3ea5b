"""Client configuration: the Java client's property names and defaults.

Each client parses its properties once, at construction: an unknown key or an
invalid value raises :class:`~samsa.errors.ConfigError` naming the key (and the
value). Serializers and deserializers are Python callables (or None for raw
bytes), so they are checked here rather than by :class:`~samsa.config.ConfigDef`,
which knows only strings, numbers and lists.

TLS and SASL keys are :mod:`samsa.client.security`'s. Keys Kafka defines for
features samsa's clients do not have (GSSAPI, OAUTHBEARER, interceptors,
metrics reporters) are deliberately absent: naming one fails
loudly instead of being silently ignored. A few keys are accepted, checked and
not yet acted on, so configuration files written for Java clients load:
``client.dns.lookup`` and ``client.rack`` (asyncio resolves names),
``socket.connection.setup.timeout.max.ms`` (every attempt gets
``socket.connection.setup.timeout.ms``), and ``metadata.max.idle.ms`` (a producer
keeps refreshing every topic it has used). The consumer's keys are defined
here for the consumer to come.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from samsa.client.security import SECURITY_KEYS
from samsa.config import INT_MAX, ConfigDef, ConfigKey, ConfigType, at_least, one_of
from samsa.errors import ConfigError

__all__ = [
    "ADMIN_CONFIG",
    "CONSUMER_CONFIG",
    "PRODUCER_CONFIG",
    "ClientConfig",
    "admin_config",
    "consumer_config",
    "parse_bootstrap",
    "producer_config",
]

_I, _L, _S, _B, _LIST = (
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.STRING,
    ConfigType.BOOLEAN,
    ConfigType.LIST,
)


def _secret(name: str) -> bool:
    return "password" in name or name == "sasl.jaas.config"


def _common(*, request_timeout_ms: int, idle_ms: int, receive_buffer: int) -> list[ConfigKey]:
    return [
        ConfigKey("bootstrap.servers", _LIST, [], "host:port pairs to discover the cluster from."),
        ConfigKey("client.id", _S, "", "Name sent with every request (default: generated)."),
        ConfigKey("client.rack", _S, "", "Rack of this client."),
        ConfigKey("client.dns.lookup", _S, "use_all_dns_ips", "How host names are resolved.",
                  one_of("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only")),
        *SECURITY_KEYS,
        ConfigKey("request.timeout.ms", _I, request_timeout_ms, "Wait for one response.",
                  at_least(0)),
        ConfigKey("retry.backoff.ms", _L, 100, "First wait before a retry.", at_least(0)),
        ConfigKey("retry.backoff.max.ms", _L, 1000, "Longest wait before a retry.", at_least(0)),
        ConfigKey("reconnect.backoff.ms", _L, 50, "First wait before reconnecting.", at_least(0)),
        ConfigKey("reconnect.backoff.max.ms", _L, 1000, "Longest wait before reconnecting.",
                  at_least(0)),
        ConfigKey("metadata.max.age.ms", _L, 300_000, "Refresh metadata at least this often.",
                  at_least(0)),
        ConfigKey("metadata.recovery.strategy", _S, "rebootstrap",
                  "When every known broker is gone: ask bootstrap.servers again, or not.",
                  one_of("none", "rebootstrap")),
        ConfigKey("connections.max.idle.ms", _L, idle_ms, "Close connections idle this long.",
                  at_least(-1)),
        ConfigKey("socket.connection.setup.timeout.ms", _L, 10_000, "Time to open a connection.",
                  at_least(0)),
        ConfigKey("socket.connection.setup.timeout.max.ms", _L, 30_000,
                  "Longest connection set-up time after repeated failures.", at_least(0)),
        ConfigKey("send.buffer.bytes", _I, 131_072, "SO_SNDBUF (-1: OS default).", at_least(-1)),
        ConfigKey("receive.buffer.bytes", _I, receive_buffer, "SO_RCVBUF (-1: OS default).",
                  at_least(-1)),
    ]  # fmt: skip


PRODUCER_CONFIG = ConfigDef(
    [
        *_common(request_timeout_ms=30_000, idle_ms=540_000, receive_buffer=32_768),
        ConfigKey(
            "acks",
            _S,
            "all",
            "Replicas that must have a record: all (-1), 0 or 1.",
            one_of("all", "-1", "0", "1"),
        ),
        ConfigKey(
            "linger.ms", _L, 5, "Wait this long for more records to join a batch.", at_least(0)
        ),
        ConfigKey("batch.size", _I, 16_384, "Target size of a batch in bytes.", at_least(0)),
        ConfigKey(
            "buffer.memory", _L, 33_554_432, "Bytes of records waiting to be sent.", at_least(0)
        ),
        ConfigKey(
            "max.block.ms", _L, 60_000, "Longest time send() blocks (buffer full).", at_least(0)
        ),
        ConfigKey(
            "compression.type",
            _S,
            "none",
            "Codec of produced batches.",
            one_of("none", "gzip", "snappy", "lz4", "zstd"),
        ),
        ConfigKey("enable.idempotence", _B, True, "Exactly one copy of each record per partition."),
        ConfigKey(
            "max.in.flight.requests.per.connection",
            _I,
            5,
            "Unanswered produce requests per broker.",
            at_least(1),
        ),
        ConfigKey("retries", _I, INT_MAX, "Resends of a failed batch.", at_least(0)),
        ConfigKey(
            "delivery.timeout.ms",
            _I,
            120_000,
            "Longest time from send() to an outcome.",
            at_least(0),
        ),
        ConfigKey("max.request.size", _I, 1_048_576, "Largest produce request.", at_least(0)),
        ConfigKey("partitioner.ignore.keys", _B, False, "Partition keyed records as unkeyed."),
        ConfigKey(
            "metadata.max.idle.ms", _L, 300_000, "Forget topics unused this long.", at_least(5000)
        ),
        ConfigKey("transactional.id", _S, None, "Id of a transactional producer."),
        ConfigKey(
            "transaction.timeout.ms", _I, 60_000, "Coordinator aborts after this long.", at_least(1)
        ),
    ]
)

CONSUMER_CONFIG = ConfigDef(
    [
        *_common(request_timeout_ms=30_000, idle_ms=540_000, receive_buffer=65_536),
        ConfigKey("group.id", _S, None, "Consumer group (None: no group, assign() only)."),
        ConfigKey("group.instance.id", _S, None, "Static membership id."),
        ConfigKey("group.protocol", _S, "classic", "Group protocol.", one_of("classic")),
        ConfigKey(
            "auto.offset.reset",
            _S,
            "latest",
            "Where to start without a committed offset.",
            one_of("earliest", "latest", "none"),
        ),
        ConfigKey("enable.auto.commit", _B, True, "Commit positions in the background."),
        ConfigKey("auto.commit.interval.ms", _I, 5000, "Auto-commit period.", at_least(0)),
        ConfigKey("max.poll.records", _I, 500, "Records returned by one poll().", at_least(1)),
        ConfigKey("max.poll.interval.ms", _I, 300_000, "Longest gap between polls.", at_least(1)),
        ConfigKey(
            "session.timeout.ms", _I, 45_000, "Member expiry without heartbeats.", at_least(1)
        ),
        ConfigKey("heartbeat.interval.ms", _I, 3000, "Heartbeat period.", at_least(1)),
        ConfigKey(
            "partition.assignment.strategy",
            _LIST,
            ["range", "cooperative-sticky"],
            "Assignors in preference order.",
            one_of("range", "roundrobin", "cooperative-sticky"),
        ),
        ConfigKey("fetch.min.bytes", _I, 1, "Bytes a fetch waits for.", at_least(0)),
        ConfigKey("fetch.max.bytes", _I, 52_428_800, "Largest fetch response.", at_least(0)),
        ConfigKey("fetch.max.wait.ms", _I, 500, "Longest fetch wait.", at_least(0)),
        ConfigKey(
            "max.partition.fetch.bytes", _I, 1_048_576, "Largest data per partition.", at_least(0)
        ),
        ConfigKey(
            "isolation.level",
            _S,
            "read_uncommitted",
            "Read committed data only, or all.",
            one_of("read_uncommitted", "read_committed"),
        ),
        ConfigKey("check.crcs", _B, True, "Check the CRC of fetched batches."),
        ConfigKey("exclude.internal.topics", _B, True, "Patterns never match internal topics."),
        ConfigKey("allow.auto.create.topics", _B, True, "Subscribing may create topics."),
        ConfigKey("default.api.timeout.ms", _I, 60_000, "Timeout of blocking calls.", at_least(0)),
    ]
)

ADMIN_CONFIG = ConfigDef(
    [
        *_common(request_timeout_ms=30_000, idle_ms=300_000, receive_buffer=65_536),
        ConfigKey(
            "default.api.timeout.ms",
            _I,
            60_000,
            "Timeout of one admin call, retries included.",
            at_least(0),
        ),
        ConfigKey("retries", _I, INT_MAX, "Resends of a failed request.", at_least(0)),
    ]
)

_CALLABLE_KEYS: dict[int, frozenset[str]] = {
    id(PRODUCER_CONFIG): frozenset({"key.serializer", "value.serializer"}),
    id(CONSUMER_CONFIG): frozenset({"key.deserializer", "value.deserializer"}),
    id(ADMIN_CONFIG): frozenset(),
}


class ClientConfig(Mapping[str, Any]):
    """Typed values of a client's properties, and which of them the user set.

    Java's producer treats some defaults differently from the same value set
    explicitly (``enable.idempotence`` yields to ``acks`` only when left at its
    default), so the explicit keys are kept.
    """

    def __init__(self, values: dict[str, Any], explicit: frozenset[str]) -> None:
        self._values = values
        self.explicit = explicit

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        shown = {
            k: "<hidden>" if _secret(k) and v is not None else v for k, v in self._values.items()
        }
        return f"ClientConfig({shown!r})"

    def with_values(self, **changes: Any) -> ClientConfig:
        """A copy with values replaced (keys in Python form: ``enable_idempotence``)."""
        values = dict(self._values)
        for name, value in changes.items():
            values[name.replace("_", ".")] = value
        return ClientConfig(values, self.explicit)


def parse_bootstrap(servers: list[str]) -> list[tuple[str, int]]:
    """``host:port`` strings as (host, port) pairs; raises ConfigError on a bad entry."""
    if not servers:
        raise ConfigError("bootstrap.servers is required: a list of host:port pairs")
    addresses = []
    for server in servers:
        host, _, port = server.rpartition(":")
        host = host.strip("[]")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"invalid value {server!r} for bootstrap.servers: expected host:port")
        addresses.append((host, int(port)))
    return addresses


def _parse(definition: ConfigDef, props: Mapping[str, Any]) -> ClientConfig:
    callable_keys = _CALLABLE_KEYS[id(definition)]
    # None stands for "not set" (a missing transactional.id, group.id...), as in Java.
    plain = {
        name: value
        for name, value in props.items()
        if name not in callable_keys and value is not None
    }
    values = definition.parse(plain)
    for name in sorted(callable_keys):
        value = props.get(name)
        if value is not None and not callable(value):
            raise ConfigError(
                f"invalid value {value!r} for {name}: expected a callable (or None for bytes)"
            )
        values[name] = value
    parse_bootstrap(values["bootstrap.servers"])
    for low, high in (
        ("retry.backoff.ms", "retry.backoff.max.ms"),
        ("reconnect.backoff.ms", "reconnect.backoff.max.ms"),
    ):
        values[high] = max(values[high], values[low])  # Java lets the first raise the cap
    return ClientConfig(values, frozenset(props))


def producer_config(props: Mapping[str, Any]) -> ClientConfig:
    """Parse producer properties and apply Java's cross-key rules.

    Idempotence needs ``acks=all``, ``retries`` > 0 and at most 5 requests in flight:
    set explicitly against those it is a ConfigError; left at its default it is
    turned off instead, as in Java. ``delivery.timeout.ms`` must cover
    ``linger.ms + request.timeout.ms`` (raised to it when not set explicitly).
    A ``transactional.id`` requires idempotence.
    """
    config = _parse(PRODUCER_CONFIG, props)
    acks = -1 if config["acks"] == "all" else int(config["acks"])
    config = config.with_values(acks=acks)
    conflicts = []
    if acks != -1:
        conflicts.append(f"acks={config['acks']} (must be all)")
    if config["retries"] == 0:
        conflicts.append("retries=0 (must be > 0)")
    if config["max.in.flight.requests.per.connection"] > 5:
        conflicts.append(
            f"max.in.flight.requests.per.connection={config['max.in.flight.requests.per.connection']}"
            " (must be at most 5)"
        )
    explicit_idempotence = "enable.idempotence" in config.explicit
    if conflicts and config["enable.idempotence"]:
        if explicit_idempotence or config["transactional.id"] is not None:
            raise ConfigError(
                "invalid value True for enable.idempotence: idempotence requires "
                + "; ".join(conflicts)
            )
        config = config.with_values(enable_idempotence=False)
    if config["transactional.id"] is not None and not config["enable.idempotence"]:
        raise ConfigError(
            f"invalid value {config['transactional.id']!r} for transactional.id: "
            "transactions require enable.idempotence=true"
        )
    floor = config["linger.ms"] + config["request.timeout.ms"]
    if config["delivery.timeout.ms"] < floor:
        if "delivery.timeout.ms" in config.explicit:
            raise ConfigError(
                f"invalid value {config['delivery.timeout.ms']} for delivery.timeout.ms: "
                f"must be at least linger.ms + request.timeout.ms = {floor}"
            )
        config = config.with_values(delivery_timeout_ms=min(floor, INT_MAX))
    return config


def consumer_config(props: Mapping[str, Any]) -> ClientConfig:
    """Parse consumer properties."""
    return _parse(CONSUMER_CONFIG, props)


def admin_config(props: Mapping[str, Any]) -> ClientConfig:
    """Parse admin client properties."""
    return _parse(ADMIN_CONFIG, props)


Serializer = Callable[[Any], bytes | None]
"""A ``key.serializer`` / ``value.serializer``: the object to send → its bytes."""
