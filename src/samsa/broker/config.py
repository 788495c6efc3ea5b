"""Broker configuration: Kafka's ``server.properties`` names, defaults and checks.

Properties come from a file (``--config``) and ``--override key=value`` flags,
later ones winning. An unknown key or an invalid value stops start-up with a
message naming it. ``log.*`` keys are the broker-wide defaults of the topic
configuration (:class:`~samsa.storage.LogConfig`), as in Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from samsa.broker.security.security_config import (
    SECURITY_CONFIG_KEYS,
    SECURITY_PROTOCOLS,
    ListenerSecurity,
    inter_broker_security,
    listener_security,
    split_listener_overrides,
)
from samsa.client.security import ClientSecurity
from samsa.config import (
    INT_MAX,
    LONG_MAX,
    ConfigDef,
    ConfigKey,
    ConfigType,
    at_least,
    between,
    one_of,
)
from samsa.errors import ConfigError
from samsa.storage.log_config import LogConfig, topic_defaults

AUTHORIZER_CLASS_NAMES = (
    "kafka.security.authorizer.AclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
)
"""The ``authorizer.class.name`` values that switch the authorizer on."""

_I, _L, _S, _B, _LIST, _D = (
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.STRING,
    ConfigType.BOOLEAN,
    ConfigType.LIST,
    ConfigType.DOUBLE,
)

BROKER_CONFIG = ConfigDef(
    [
        ConfigKey("listeners", _LIST, ["PLAINTEXT://127.0.0.1:9092"], "Addresses to listen on."),
        ConfigKey("advertised.listeners", _LIST, [], "Addresses told to clients."),
        ConfigKey("listener.security.protocol.map", _S,
                  "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
                  "NAME:PROTOCOL pairs naming each listener's security protocol."),
        ConfigKey("log.dirs", _LIST, [], "Data directories (default: log.dir)."),
        ConfigKey("log.dir", _S, "./data", "Data directory when log.dirs is not set."),
        ConfigKey("node.id", _I, -1, "This broker's id (alias of broker.id).", at_least(-1)),
        ConfigKey("broker.id", _I, -1, "This broker's id.", at_least(-1)),
        ConfigKey("cluster.id", _S, "", "Cluster id (generated and kept in meta.properties)."),
        ConfigKey("process.roles", _LIST, [], "Accepted for compatibility; samsa is one process."),
        ConfigKey("num.partitions", _I, 1, "Partitions of auto-created topics.", at_least(1)),
        ConfigKey("default.replication.factor", _I, 1, "Replicas of new topics.", at_least(1)),
        ConfigKey("auto.create.topics.enable", _B, True, "Create topics on first use."),
        ConfigKey("delete.topic.enable", _B, True, "Allow topic deletion."),
        ConfigKey("message.max.bytes", _I, 1048588, "Largest record batch.", at_least(0)),
        ConfigKey("socket.request.max.bytes", _I, 104857600, "Largest request frame.", at_least(1)),
        ConfigKey("queued.max.request.bytes", _L, -1,
                  "Bytes of requests held before reading stops (-1: no limit).", at_least(-1)),
        ConfigKey("connections.max.idle.ms", _L, 600_000,
                  "Close connections idle this long (-1: never)."),
        ConfigKey("max.connections", _I, INT_MAX,
                  "Connections accepted at once; then accepting waits.", at_least(0)),
        ConfigKey("max.connections.per.ip", _I, INT_MAX,
                  "Connections from one address; more are closed.", at_least(0)),
        ConfigKey("quota.window.num", _I, 11,
                  "Samples kept to measure a client's rate for its quotas.", at_least(1)),
        ConfigKey("quota.window.size.seconds", _I, 1,
                  "Time span of each sample of a client's rate.", at_least(1)),
        ConfigKey("socket.send.buffer.bytes", _I, 102400, "SO_SNDBUF (-1: OS).", at_least(-1)),
        ConfigKey("socket.receive.buffer.bytes", _I, 102400, "SO_RCVBUF (-1: OS default).",
                  at_least(-1)),
        ConfigKey("num.network.threads", _I, 3, "Accepted for compatibility.", at_least(1)),
        ConfigKey("num.io.threads", _I, 8, "Accepted for compatibility.", at_least(1)),
        ConfigKey("num.recovery.threads.per.data.dir", _I, 2,
                  "Threads per data dir loading (recovering) logs at start, flushing at stop.",
                  at_least(1)),
        ConfigKey("log.segment.bytes", _I, 1024**3, "Default segment.bytes.", at_least(14)),
        ConfigKey("log.roll.ms", _L, None, "Default segment.ms."),
        ConfigKey("log.roll.hours", _I, 168, "Default segment.ms, in hours.", at_least(1)),
        ConfigKey("log.roll.jitter.ms", _L, None, "Default segment.jitter.ms."),
        ConfigKey("log.roll.jitter.hours", _I, 0, "Default segment.jitter.ms, in hours.",
                  at_least(0)),
        ConfigKey("log.retention.ms", _L, None, "Default retention.ms."),
        ConfigKey("log.retention.minutes", _I, None, "Default retention.ms, in minutes."),
        ConfigKey("log.retention.hours", _I, 168, "Default retention.ms, in hours."),
        ConfigKey("log.retention.bytes", _L, -1, "Default retention.bytes."),
        ConfigKey("log.retention.check.interval.ms", _L, 300_000, "Retention pass interval.",
                  at_least(1)),
        ConfigKey("log.index.interval.bytes", _I, 4096, "Default index.interval.bytes.",
                  at_least(0)),
        ConfigKey("log.index.size.max.bytes", _I, 10 * 1024**2, "Default segment.index.bytes.",
                  at_least(4)),
        ConfigKey("log.flush.interval.messages", _L, LONG_MAX, "Default flush.messages.",
                  at_least(1)),
        ConfigKey("log.flush.interval.ms", _L, None, "Default flush.ms."),
        ConfigKey("log.flush.scheduler.interval.ms", _L, LONG_MAX, "flush.ms check interval."),
        ConfigKey("log.flush.offset.checkpoint.interval.ms", _I, 60_000,
                  "Recovery-point checkpoint interval.", at_least(0)),
        ConfigKey("log.segment.delete.delay.ms", _L, 60_000, "Default file.delete.delay.ms.",
                  at_least(0)),
        ConfigKey("log.cleanup.policy", _LIST, ["delete"], "Default cleanup.policy.",
                  one_of("delete", "compact")),
        ConfigKey("log.message.timestamp.type", _S, "CreateTime", "Default timestamp type.",
                  one_of("CreateTime", "LogAppendTime")),
        ConfigKey("log.message.timestamp.before.max.ms", _L, LONG_MAX, "Default before.max.ms."),
        ConfigKey("log.message.timestamp.after.max.ms", _L, 3600_000, "Default after.max.ms."),
        ConfigKey("log.cleaner.delete.retention.ms", _L, 86_400_000, "Tombstone retention."),
        ConfigKey("log.cleaner.min.cleanable.ratio", _D, 0.5, "Default dirty ratio.",
                  between(0, 1)),
        ConfigKey("log.cleaner.min.compaction.lag.ms", _L, 0, "Default min.compaction.lag.ms."),
        ConfigKey("log.cleaner.max.compaction.lag.ms", _L, LONG_MAX, "Default max lag."),
        ConfigKey("log.preallocate", _B, False, "Default preallocate."),
        ConfigKey("compression.type", _S, "producer", "Default compression.type.",
                  one_of("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")),
        ConfigKey("compression.gzip.level", _I, -1, "Default compression.gzip.level."),
        ConfigKey("compression.lz4.level", _I, 9, "Default compression.lz4.level.",
                  between(1, 17)),
        ConfigKey("compression.zstd.level", _I, 3, "Default compression.zstd.level.",
                  between(-131072, 22)),
        ConfigKey("log.local.retention.ms", _L, -2, "Default local.retention.ms.", at_least(-2)),
        ConfigKey("log.local.retention.bytes", _L, -2, "Default local.retention.bytes.",
                  at_least(-2)),
        ConfigKey("min.insync.replicas", _I, 1, "Default min.insync.replicas.", at_least(1)),
        ConfigKey("unclean.leader.election.enable", _B, False, "Default unclean election."),
        ConfigKey("offsets.topic.num.partitions", _I, 50, "__consumer_offsets partitions.",
                  at_least(1)),
        ConfigKey("offsets.topic.replication.factor", _I, 3,
                  "__consumer_offsets replicas (a cluster; a single node keeps one).",
                  at_least(1)),
        ConfigKey("transaction.state.log.replication.factor", _I, 3,
                  "__transaction_state replicas (a cluster; a single node keeps one).",
                  at_least(1)),
        ConfigKey("transaction.state.log.min.isr", _I, 2,
                  "__transaction_state min.insync.replicas (a cluster).", at_least(1)),
        ConfigKey("transaction.state.log.num.partitions", _I, 50,
                  "__transaction_state partitions.", at_least(1)),
        ConfigKey("transaction.state.log.segment.bytes", _I, 104_857_600,
                  "__transaction_state segment size.", at_least(14)),
        ConfigKey("transaction.max.timeout.ms", _I, 900_000,
                  "Longest transaction.timeout.ms a producer may ask for.", at_least(1)),
        ConfigKey("transaction.abort.timed.out.transaction.cleanup.interval.ms", _I, 10_000,
                  "How often timed-out transactions are looked for.", at_least(1)),
        ConfigKey("transaction.remove.expired.transaction.cleanup.interval.ms", _I, 3_600_000,
                  "How often expired transactional ids are removed.", at_least(1)),
        ConfigKey("transactional.id.expiration.ms", _I, 604_800_000,
                  "Forget an idle transactional id after this long.", at_least(1)),
        ConfigKey("producer.id.expiration.ms", _I, 86_400_000,
                  "Accepted; idle producer state is not expired yet.", at_least(1)),
        ConfigKey("group.initial.rebalance.delay.ms", _I, 3000, "First rebalance delay.",
                  at_least(0)),
        ConfigKey("group.min.session.timeout.ms", _I, 6000, "Shortest session timeout.",
                  at_least(0)),
        ConfigKey("group.max.session.timeout.ms", _I, 1_800_000, "Longest session timeout.",
                  at_least(0)),
        # Kafka's default is 2^31-1 (no limit). Every member of a classic group rejoins on
        # each rebalance and its leader is sent every member's subscription, so a group's
        # rebalances cost in proportion to its size, and one client opening members without
        # end slows every client of the broker; a group of more members than partitions
        # leaves the extra ones idle. 1,000 is far above groups seen in practice.
        ConfigKey("group.max.size", _I, 1000,
                  "Most members in one classic group; JoinGroup past it answers "
                  "GROUP_MAX_SIZE_REACHED (Kafka's default is 2147483647: no limit).",
                  at_least(1)),
        ConfigKey("group.consumer.session.timeout.ms", _I, 45_000,
                  "A consumer-protocol member without a heartbeat this long is removed.",
                  at_least(1)),
        ConfigKey("group.consumer.heartbeat.interval.ms", _I, 5_000,
                  "How often consumer-protocol members are told to heartbeat.", at_least(1)),
        ConfigKey("group.consumer.assignors", _LIST, ["uniform", "range"],
                  "Server-side assignors of consumer groups; the first is the default."),
        ConfigKey("group.consumer.max.size", _I, 2**31 - 1,
                  "Most members in one consumer group.", at_least(1)),
        ConfigKey("offsets.retention.minutes", _I, 10080,
                  "Keep an empty group's offsets this long.", at_least(1)),
        ConfigKey("offsets.retention.check.interval.ms", _L, 600_000,
                  "Offset expiry check interval.", at_least(1)),
        ConfigKey("offsets.commit.timeout.ms", _I, 5000, "Accepted for compatibility.",
                  at_least(1)),
        ConfigKey("offset.metadata.max.bytes", _I, 4096, "Largest commit metadata.",
                  at_least(0)),
        ConfigKey("offsets.load.buffer.size", _I, 5 * 1024**2, "Accepted for compatibility.",
                  at_least(1)),
        ConfigKey("log.cleaner.enable", _B, True, "Run the log cleaner."),
        ConfigKey("log.cleaner.backoff.ms", _L, 15_000, "Cleaner sleep when idle.",
                  at_least(0)),
        ConfigKey("log.cleaner.threads", _I, 1, "Accepted (one cleaner task).", at_least(0)),
        ConfigKey("log.cleaner.dedupe.buffer.size", _L, 134_217_728,
                  "Memory for the cleaner's key map.", at_least(0)),
        ConfigKey("log.cleaner.io.buffer.size", _I, 524_288, "Cleaner read/write buffer.",
                  at_least(0)),
        ConfigKey("log.cleaner.io.max.bytes.per.second", _D, 1.7976931348623157e308,
                  "Accepted for compatibility."),
        ConfigKey("fetch.max.bytes", _I, 55 * 1024 * 1024, "Largest fetch response.",
                  at_least(0)),
        ConfigKey("max.incremental.fetch.session.cache.slots", _I, 1000,
                  "Incremental fetch sessions (KIP-227) the broker keeps at most.", at_least(0)),
        ConfigKey("replica.fetch.max.bytes", _I, 1048576,
                  "Bytes a follower fetches per partition at most.", at_least(0)),
        ConfigKey("replica.fetch.response.max.bytes", _I, 10485760,
                  "Bytes a follower fetches per request at most.", at_least(0)),
        ConfigKey("replica.fetch.wait.max.ms", _I, 500,
                  "How long a follower's fetch waits at the leader for data.", at_least(0)),
        ConfigKey("replica.fetch.min.bytes", _I, 1,
                  "Bytes a follower's fetch waits for at the leader.", at_least(1)),
        ConfigKey("replica.fetch.backoff.ms", _I, 1000,
                  "Pause after a failed follower fetch.", at_least(0)),
        ConfigKey("replica.socket.timeout.ms", _I, 30_000,
                  "Follower request timeout.", at_least(1)),
        ConfigKey("replica.lag.time.max.ms", _L, 30_000,
                  "A follower not caught up for this long leaves the ISR.", at_least(1)),
        ConfigKey("auto.leader.rebalance.enable", _B, True,
                  "The controller gives leadership back to preferred replicas."),
        ConfigKey("leader.imbalance.check.interval.seconds", _L, 300,
                  "How often the controller checks the leader balance.", at_least(1)),
        ConfigKey("leader.imbalance.per.broker.percentage", _I, 10,
                  "Share of a broker's preferred partitions led elsewhere that it tolerates.",
                  between(0, 100)),
        ConfigKey("controlled.shutdown.enable", _B, True,
                  "A cluster broker moves its leaderships away before it stops."),
        ConfigKey("controlled.shutdown.timeout.ms", _L, 30_000,
                  "How long a controlled shutdown waits for leadership to move.", at_least(0)),
        ConfigKey("zookeeper.connect", _S, "",
                  "host:port[,host:port…][/chroot] of ZooKeeper; unset: a single node."),
        ConfigKey("zookeeper.session.timeout.ms", _I, 18_000,
                  "ZooKeeper session timeout: how soon a dead broker is noticed.", at_least(1)),
        ConfigKey("zookeeper.connection.timeout.ms", _I, None,
                  "How long start-up waits for ZooKeeper (default: the session timeout)."),
        ConfigKey("broker.rack", _S, None, "This broker's rack (rack-aware replica placement)."),
        ConfigKey("authorizer.class.name", _S, "",
                  "The authorizer: kafka.security.authorizer.AclAuthorizer or "
                  "org.apache.kafka.metadata.authorizer.StandardAuthorizer (empty: none).",
                  lambda v: None if not v.strip() or v.strip() in AUTHORIZER_CLASS_NAMES else
                  "is not an authorizer samsa provides: use " + " or ".join(AUTHORIZER_CLASS_NAMES)
                  + ", or leave it empty for none"),
        ConfigKey("super.users", _S, "",
                  "Principals allowed everything, separated by ';' (User:admin;User:ops).",
                  lambda v: next((f"entry {u.strip()!r} is not a principal (Type:name)"
                                  for u in v.split(";") if u.strip() and ":" not in u), None)),
        ConfigKey("allow.everyone.if.no.acl.found", _B, False,
                  "Allow an operation on a resource that no ACL names."),
        ConfigKey("event.loop.stall.threshold.ms", _I, 100,
                  "Log the event loop's stack when it has not run for this long (0: off).",
                  at_least(0)),
        ConfigKey("inter.broker.listener.name", _S, None,
                  "The listener brokers reach each other on (default: the first)."),
        ConfigKey("metrics.listeners", _LIST, [],
                  "http://HOST:PORT addresses serving Prometheus metrics at GET /metrics "
                  "(empty: none)."),
        ConfigKey("schema.registry.listeners", _LIST, [],
                  "http://HOST:PORT addresses serving the schema registry's REST API "
                  "(empty: no registry)."),
        ConfigKey("schema.registry.topic", _S, "_schemas",
                  "The compacted topic the schema registry keeps its schemas in."),
        ConfigKey("schema.registry.topic.replication.factor", _I, 3,
                  "Replicas of the schema registry's topic (fewer when fewer brokers are "
                  "alive when it is created).", at_least(1)),
        ConfigKey("schema.registry.max.request.bytes", _I, 16 * 1024 * 1024,
                  "The largest request body the schema registry reads.", at_least(1024)),
        *SECURITY_CONFIG_KEYS,
    ]
)  # fmt: skip


def parse_properties(text: str) -> dict[str, str]:
    """Java ``.properties``: ``key=value`` or ``key: value`` lines; ``#``/``!`` comments."""
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        for i, ch in enumerate(line):
            if ch in "=:":
                key, value = line[:i].strip(), line[i + 1 :].strip()
                break
        else:
            key, value = line, ""
        props[key] = value
    return props


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str
    port: int
    protocol: str = "PLAINTEXT"
    """The security protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."""


def parse_protocol_map(text: str) -> dict[str, str]:
    """``listener.security.protocol.map``: ``NAME:PROTOCOL,…`` (names upper-cased)."""
    protocols: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        name, colon, protocol = item.partition(":")
        if not colon or not name.strip() or not protocol.strip():
            raise ConfigError(f"listener.security.protocol.map entry {item!r} is not NAME:PROTOCOL")
        protocols[name.strip().upper()] = protocol.strip().upper()
    return protocols


def parse_listener(spec: str, protocols: Mapping[str, str] | None = None) -> Listener:
    """``NAME://host:port`` → Listener, with the name's security protocol
    (``listener.security.protocol.map``; a protocol's own name maps to itself)."""
    name, sep, address = spec.partition("://")
    host, colon, port = address.rpartition(":")
    if not sep or not colon or not port.isdigit():
        raise ConfigError(f"invalid listener {spec!r}: expected NAME://host:port")
    name = name.upper()
    protocol = {**{p: p for p in SECURITY_PROTOCOLS}, **(protocols or {})}.get(name)
    if protocol is None:
        raise ConfigError(
            f"listener {spec!r}: {name} has no protocol in listener.security.protocol.map"
        )
    if protocol not in SECURITY_PROTOCOLS:
        raise ConfigError(
            f"listener {spec!r}: unknown security protocol {protocol} (expected one of "
            f"{', '.join(sorted(SECURITY_PROTOCOLS))})"
        )
    return Listener(name, host.strip("[]") or "0.0.0.0", int(port), protocol)


def parse_metrics_listener(spec: str, key: str = "metrics.listeners") -> tuple[str, int]:
    """``http://host:port`` (``metrics.listeners``) → ``(host, port)``; port 0 picks one."""
    scheme, sep, address = spec.partition("://")
    host, colon, port = address.rstrip("/").rpartition(":")
    if scheme.lower() != "http" or not sep or not colon or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"invalid {key} entry {spec!r}: expected http://HOST:PORT")
    return host.strip("[]") or "0.0.0.0", int(port)


@dataclass(frozen=True)
class BrokerConfig:
    """Typed broker configuration; build with :meth:`from_props`."""

    values: Mapping[str, Any]
    listeners: tuple[Listener, ...]
    advertised_listeners: tuple[Listener, ...]
    log_dirs: tuple[Path, ...]
    node_id: int
    log_defaults: LogConfig
    overrides: Mapping[str, str] = field(default_factory=dict)
    security: Mapping[str, ListenerSecurity] = field(default_factory=dict)
    """Each listener's security, by listener name."""
    inter_broker_security: ClientSecurity = field(default_factory=ClientSecurity)
    """How this broker connects to the others (cluster mode)."""
    metrics_listeners: tuple[tuple[str, int], ...] = ()
    """``(host, port)`` of each ``metrics.listeners`` entry."""
    schema_registry_listeners: tuple[tuple[str, int], ...] = ()
    """``(host, port)`` of each ``schema.registry.listeners`` entry."""

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @classmethod
    def from_props(cls, props: Mapping[str, Any]) -> BrokerConfig:
        plain_props, listener_overrides = split_listener_overrides(props)
        values = BROKER_CONFIG.parse(plain_props)
        protocols = parse_protocol_map(values["listener.security.protocol.map"])
        listeners = tuple(parse_listener(s, protocols) for s in values["listeners"])
        if not listeners:
            raise ConfigError("listeners names no address")
        advertised = (
            tuple(parse_listener(s, protocols) for s in values["advertised.listeners"]) or listeners
        )
        dirs = values["log.dirs"] or [values["log.dir"]]
        node_id = values["node.id"] if values["node.id"] >= 0 else max(values["broker.id"], 0)
        if values["socket.request.max.bytes"] > INT_MAX:
            raise ConfigError("socket.request.max.bytes must fit in 32 bits")
        security = _security(values, listeners, listener_overrides)
        inter_broker = ClientSecurity()
        if values["zookeeper.connect"]:
            name = values["inter.broker.listener.name"] or listeners[0].name
            protocol = security[name].protocol if name in security else "PLAINTEXT"
            inter_broker = inter_broker_security(
                name, protocol, values, listener_overrides.get(name, {})
            )
        return cls(
            values=values,
            listeners=listeners,
            advertised_listeners=advertised,
            log_dirs=tuple(Path(d) for d in dirs),
            node_id=node_id,
            log_defaults=LogConfig.from_props(topic_defaults(values)),
            overrides={k: str(v) for k, v in props.items()},
            security=security,
            inter_broker_security=inter_broker,
            metrics_listeners=tuple(parse_metrics_listener(s) for s in values["metrics.listeners"]),
            schema_registry_listeners=tuple(
                parse_metrics_listener(s, "schema.registry.listeners")
                for s in values["schema.registry.listeners"]
            ),
        )

    @classmethod
    def load(cls, config_file: Path | None, overrides: Sequence[str]) -> BrokerConfig:
        """From a properties file and ``key=value`` overrides (later wins)."""
        props: dict[str, str] = {}
        if config_file is not None:
            try:
                props.update(parse_properties(config_file.read_text()))
            except OSError as exc:
                raise ConfigError(f"cannot read {config_file}: {exc.strerror}") from exc
            except UnicodeDecodeError as exc:
                raise ConfigError(f"{config_file} is not UTF-8 text (byte {exc.start})") from None
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"override {item!r} is not key=value")
            props[key.strip()] = value.strip()
        return cls.from_props(props)


def _security(
    values: Mapping[str, Any],
    listeners: tuple[Listener, ...],
    overrides: Mapping[str, Mapping[str, str]],
) -> dict[str, ListenerSecurity]:
    names = {listener.name for listener in listeners}
    for name in overrides:
        if name not in names:
            raise ConfigError(f"listener.name.{name.lower()}.* names no listener in listeners")
    security = {
        listener.name: listener_security(
            listener.name, listener.protocol, values, overrides.get(listener.name, {})
        )
        for listener in listeners
    }
    return security
