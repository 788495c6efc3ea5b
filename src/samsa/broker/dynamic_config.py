"""Dynamic broker configuration (Kafka's ``DynamicBrokerConfig``, KIP-226) on one node.

The broker's configuration has four layers, highest first — the ``source`` of
a DescribeConfigs entry:

- DYNAMIC_BROKER_CONFIG: set for this broker (BROKER resource ``"<node.id>"``);
- DYNAMIC_DEFAULT_BROKER_CONFIG: the cluster-wide default (BROKER resource ``""``);
- STATIC_BROKER_CONFIG: ``server.properties`` and ``--override``;
- DEFAULT_CONFIG: the definition's default.

Which keys may change: every key Kafka 4.3 lets change at runtime
(:mod:`samsa.broker.kafka_broker_configs`, the "Dynamic Update Mode" column of
Kafka's broker config documentation), and any key Kafka does not know (a
custom config), as Kafka accepts them. The checks are Kafka's, in its order and
with its messages, each INVALID_REQUEST: a read-only key ("Cannot update these
configs dynamically: [num.partitions]"), a keystore or truststore key without a
``listener.name.<listener>.`` prefix, a value of the wrong type or out of
range ("Invalid value 0 for configuration num.io.threads: Value must be at
least 1"), and a per-broker key (listeners, their SSL and SASL settings) set
as the cluster-wide default ("Cannot update these configs at default cluster
level, broker id must be specified").

What samsa does with an accepted key:

- Applied at once: the cluster-wide keys ``BROKER_CONFIG`` defines
  (:data:`APPLIED_BROKER_CONFIGS`). The topic defaults (``log.retention.ms``,
  ``message.max.bytes``, ``log.cleanup.policy``…) reach every partition without a
  topic override of its own, and ``log.cleaner.backoff.ms`` the cleaner; keys of
  pools samsa does not have (``num.io.threads``, ``log.cleaner.threads``…) change
  the effective configuration and nothing else, as they do at start-up.
- Kept and described, not applied: the per-broker keys (listeners and their
  security: samsa serves the listeners it was started with), the keys of features
  samsa lacks (:data:`~samsa.broker.kafka_broker_configs.KEPT_BROKER_CONFIG`:
  remote storage, Kerberos, replication throttles…), listener-prefixed keys and
  custom ones.

Client quota entities (``users/<user>``, ``clients/<id>``,
``users/<user>/clients/<id>``: :mod:`samsa.broker.quota`) of a single node are
kept here too, as Kafka keeps them beside the broker configs under ``/config``.

Persistence: ``samsa-dynamic-configs.json`` in every data directory, written
atomically with a sequence number; at start the highest sequence wins, so the
order of ``log.dirs`` does not matter. A file that cannot be read stops
start-up with a message naming it (dropping a stored ``log.retention.ms``
could delete data); a stored key that is no longer dynamic or valid is logged
as an ERROR and skipped, as Kafka skips invalid dynamic configs.

Deviation: Kafka keeps the cluster-wide default in its metadata log (or
ZooKeeper), shared by every broker; samsa keeps it with the broker's data.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any

from samsa.broker.config import BROKER_CONFIG, BrokerConfig
from samsa.broker.kafka_broker_configs import (
    CLUSTER_LEVEL_LISTENER_CONFIGS,
    CLUSTER_WIDE_CONFIGS,
    KAFKA_STATIC_CONFIGS,
    KEPT_BROKER_CONFIG,
    LISTENER_ONLY_CONFIGS,
    PER_BROKER_CONFIGS,
)
from samsa.broker.replication.replica_manager import ReplicaManager
from samsa.config import ConfigDef, ConfigKey, ConfigType
from samsa.errors import ConfigError, InvalidRequestError, KafkaError, KafkaStorageError
from samsa.storage import LogManager, log_config
from samsa.storage.data_dir_file import DataDirFile
from samsa.storage.log_config import LogConfig

log = logging.getLogger(__name__)

DYNAMIC_CONFIG_FILE = "samsa-dynamic-configs.json"

TOPIC_CONFIG_SYNONYMS = log_config.TOPIC_CONFIG_SYNONYMS
"""Broker keys that set each topic key's default, most specific first (from the topic
config table, :data:`samsa.storage.log_config.TOPIC_CONFIG_KEYS`)."""

DYNAMIC_BROKER_CONFIGS: frozenset[str] = PER_BROKER_CONFIGS | CLUSTER_WIDE_CONFIGS
"""The broker keys AlterConfigs may change, as in Kafka (any other known key is read-only)."""

APPLIED_BROKER_CONFIGS: frozenset[str] = frozenset(
    name for name in CLUSTER_WIDE_CONFIGS if name in BROKER_CONFIG
)
"""The dynamic keys that make the broker's effective configuration (applied at once)."""

DESCRIBED_BROKER_CONFIG = ConfigDef(
    [*BROKER_CONFIG.keys.values(), *KEPT_BROKER_CONFIG.keys.values()]
)
"""Every broker key DescribeConfigs answers: samsa's own and the dynamic ones it keeps."""

_LISTENER_PREFIX = "listener.name."


def _listener_base(name: str) -> str | None:
    """The key a ``listener.name.<listener>.<key>`` name sets, or None for another name."""
    if not name.startswith(_LISTENER_PREFIX):
        return None
    _, dot, base = name.removeprefix(_LISTENER_PREFIX).partition(".")
    return base if dot else None


def check_dynamic_broker_configs(props: Mapping[str, str], per_broker: bool) -> None:
    """Kafka's checks of a dynamic broker layer (``DynamicBrokerConfig.validateConfigs``):
    INVALID_REQUEST with Kafka's message for the first that fails."""
    names = sorted(props)

    def refuse(message: str, refused: list[str]) -> None:
        if refused:
            raise InvalidRequestError(f"{message}: [{', '.join(refused)}]")

    refuse(
        "Cannot update these configs dynamically",
        [n for n in names if n not in DYNAMIC_BROKER_CONFIGS and _is_known(n)],
    )
    refuse(
        "These security configs can be dynamically updated only per-listener using the "
        "listener prefix",
        [n for n in names if n in LISTENER_ONLY_CONFIGS],
    )
    for name in names:
        plain = _listener_base(name) or name
        key = DESCRIBED_BROKER_CONFIG.keys.get(plain)
        problem = None if key is None else _invalid_value(key, props[name])
        if problem:
            raise InvalidRequestError(
                f"Invalid value {props[name]} for configuration {plain}: {problem}"
            )
    if not per_broker:
        refuse(
            "Cannot update these configs at default cluster level, broker id must be specified",
            [n for n in names if _per_broker_only(n)],
        )


def _per_broker_only(name: str) -> bool:
    """Kafka's per-broker keys: a listener's own settings (``listeners``, SSL, SASL) and
    every listener-prefixed key but the connection limits."""
    base = _listener_base(name)
    if base is not None:
        return base not in CLUSTER_LEVEL_LISTENER_CONFIGS
    return name in PER_BROKER_CONFIGS


def _is_known(name: str) -> bool:
    return name in DESCRIBED_BROKER_CONFIG or name in KAFKA_STATIC_CONFIGS


_TYPE_ERRORS = {
    ConfigType.INT: "Not a number of type INT",
    ConfigType.LONG: "Not a number of type LONG",
    ConfigType.DOUBLE: "Not a number of type DOUBLE",
    ConfigType.BOOLEAN: "Expected value to be either true or false",
}


def _invalid_value(key: ConfigKey, raw: str) -> str | None:
    """What is wrong with ``raw`` for ``key``, in Kafka's words, or None."""
    try:
        value = ConfigDef([dataclasses.replace(key, validator=None)]).parse_value(key.name, raw)
    except ConfigError:
        return _TYPE_ERRORS.get(key.type, "Invalid value")
    problem = key.validator(value) if key.validator is not None else None
    return f"Value {problem}" if problem else None


def canonical_value(name: str, raw: str) -> str:
    """A dynamic value as it is stored: as Kafka writes the type of a key samsa applies
    (``" 5 "`` is ``5``), as given for any other."""
    key = BROKER_CONFIG.keys.get(name)
    if key is None or name not in APPLIED_BROKER_CONFIGS:
        return raw
    return _config_string(BROKER_CONFIG.parse_value(name, raw), key.type) or raw


def _config_string(value: Any, kind: ConfigType) -> str | None:
    if value is None:
        return None
    if kind is ConfigType.BOOLEAN:
        return "true" if value else "false"
    if kind is ConfigType.LIST:
        return ",".join(str(v) for v in value)
    return str(value)


def _applied(props: Mapping[str, str]) -> dict[str, str]:
    return {name: value for name, value in props.items() if name in APPLIED_BROKER_CONFIGS}


class DynamicBrokerConfig:
    """The dynamic layers over the static configuration; one writer (the broker's loop)."""

    def __init__(self, static: BrokerConfig) -> None:
        self.static = static
        self.per_broker: dict[str, str] = {}
        self.cluster_default: dict[str, str] = {}
        self.client_quotas: dict[str, dict[str, str]] = {}
        """Quota entity path → its quota configs (single node; a cluster keeps them in
        ZooKeeper)."""
        self.current = static
        """The effective configuration: static overlaid by the default, then the broker layer."""
        self._file = DataDirFile(
            static.log_dirs, DYNAMIC_CONFIG_FILE, "every dynamic broker config"
        )
        self._lock = asyncio.Lock()
        self.on_change: Callable[[BrokerConfig], None] | None = None
        """Called with the new effective configuration after an update is stored (the
        broker sets it: it applies the configuration)."""

    def load(self) -> None:
        """Read the stored layers (blocking: run it off the event loop at start-up)."""
        newest = self._file.load(
            lambda raw: (
                _strings(raw["default"]),
                _strings(raw["broker"]),
                {k: _strings(v) for k, v in dict(raw.get("client_quotas", {})).items()},
            )
        )
        if newest is None:
            return
        default, broker, client_quotas = newest
        self.cluster_default = self._usable(default, False, "the cluster-wide default")
        self.per_broker = self._usable(broker, True, f"broker {self.static.node_id}")
        self.client_quotas = client_quotas
        self.current = self._build(self.cluster_default, self.per_broker)
        if self.cluster_default or self.per_broker:
            log.info(
                "dynamic broker configs: default %s, broker %s",
                self.cluster_default,
                self.per_broker,
            )

    def _usable(self, props: Mapping[str, str], per_broker: bool, level: str) -> dict[str, str]:
        usable: dict[str, str] = {}
        for name, value in props.items():
            try:
                check_dynamic_broker_configs({name: value}, per_broker)
            except KafkaError as exc:
                log.error("ignoring the stored dynamic config of %s %s=%s: %s",
                          level, name, value, exc)  # fmt: skip
                continue
            usable[name] = value
        return usable

    def _build(self, default: Mapping[str, str], broker: Mapping[str, str]) -> BrokerConfig:
        config = BrokerConfig.from_props(
            {**self.static.overrides, **_applied(default), **_applied(broker)}
        )
        _check_log_defaults(config.log_defaults)
        return config

    def validate(self, per_broker: bool, props: Mapping[str, str]) -> BrokerConfig:
        """The configuration ``props`` as one layer's whole set would give; raises
        INVALID_REQUEST (Kafka's messages) for a key that cannot change or a bad value."""
        check_dynamic_broker_configs(props, per_broker)
        self._check_semantics(props)
        default, broker = (self.cluster_default, props) if per_broker else (props, self.per_broker)
        try:
            return self._build(default, broker)
        except ConfigError as exc:
            raise InvalidRequestError(str(exc)) from exc

    def _check_semantics(self, props: Mapping[str, str]) -> None:
        """Kafka's checks of two kept keys' contents (its reconfigurables validate them)."""
        cordoned = props.get("cordoned.log.dirs")
        if cordoned is not None:
            dirs = {str(d) for d in self.static.log_dirs}
            missing = [
                d.strip() for d in cordoned.split(",") if d.strip() and d.strip() not in dirs
            ]
            if missing:
                raise InvalidRequestError(
                    "requirement failed: All entries in cordoned.log.dirs must be present in "
                    f"log.dirs or log.dir. Missing entries : {', '.join(missing)}"
                )
        overrides = props.get("max.connections.per.ip.overrides")
        if overrides:
            for entry in overrides.split(","):
                host, colon, count = entry.strip().rpartition(":")
                if not colon or not host or not count.strip().isdigit():
                    raise InvalidRequestError(
                        "Error parsing configuration property 'max.connections.per.ip.overrides': "
                        f"{entry.strip()!r} is not host:count"
                    )

    def value(self, name: str, *, per_broker: bool = True) -> str | None:
        """A broker key's value as DescribeConfigs answers it: this broker's dynamic value
        (unless ``per_broker`` is false), the cluster-wide default's, else the effective
        one (a kept key's default)."""
        if per_broker and name in self.per_broker:
            return self.per_broker[name]
        if name in self.cluster_default:
            return self.cluster_default[name]
        if name in BROKER_CONFIG:
            return _config_string(self.current[name], BROKER_CONFIG.keys[name].type)
        kept = KEPT_BROKER_CONFIG.keys.get(name)
        return None if kept is None else _config_string(kept.default, kept.type)

    async def update(self, per_broker: bool, props: Mapping[str, str]) -> None:
        """Make ``props`` that layer's whole set: checked, stored in every data dir, applied."""
        async with self._lock:
            config = self.validate(per_broker, props)
            default = self.cluster_default if per_broker else dict(props)
            mine = dict(props) if per_broker else self.per_broker
            await self._store(default, mine, self.client_quotas)
            self.cluster_default, self.per_broker = default, mine
            self.current = config
            if self.on_change is not None:
                self.on_change(config)
            log.info("dynamic broker configs now: default %s, broker %s", default, mine)

    async def update_client_quotas(self, entities: Mapping[str, Mapping[str, str]]) -> None:
        """Make ``entities`` (entity path → quota configs) the whole set of client quotas,
        stored in every data dir."""
        async with self._lock:
            quotas = {path: dict(values) for path, values in entities.items() if values}
            await self._store(self.cluster_default, self.per_broker, quotas)
            self.client_quotas = quotas

    async def _store(
        self,
        default: Mapping[str, str],
        broker: Mapping[str, str],
        client_quotas: Mapping[str, Mapping[str, str]],
    ) -> None:
        document = {"default": default, "broker": broker, "client_quotas": client_quotas}
        sequence, data = self._file.encode_next(document)
        try:
            await asyncio.to_thread(self._file.save, sequence, data)
        except OSError as exc:
            raise KafkaStorageError(f"storing dynamic configs failed: {exc}") from exc


def reconfigure_logs(
    config: BrokerConfig, replica_manager: ReplicaManager, log_manager: LogManager
) -> None:
    """Apply an effective configuration's log defaults to every live log."""
    replica_manager.defaults = config.log_defaults
    log_manager.default_config = config.log_defaults
    log_manager.cleaner_backoff_ms = config["log.cleaner.backoff.ms"]
    by_topic: dict[str, LogConfig] = {}
    for tp in list(log_manager.all_logs()):
        topic_config = by_topic.get(tp.topic)
        if topic_config is None:
            topic_config = by_topic[tp.topic] = replica_manager.topic_config(tp.topic)
        log_manager.update_config(tp, topic_config)


def _check_log_defaults(defaults: LogConfig) -> None:
    if defaults.min_compaction_lag_ms > defaults.max_compaction_lag_ms:
        raise ConfigError(
            f"log.cleaner.min.compaction.lag.ms ({defaults.min_compaction_lag_ms}) is larger "
            f"than log.cleaner.max.compaction.lag.ms ({defaults.max_compaction_lag_ms})"
        )


def _strings(value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise TypeError("a layer must map config names to string values")
    return dict(value)
