"""Dynamic broker configuration (Kafka's ``DynamicBrokerConfig``, KIP-226) on one node.

The broker's configuration has four layers, highest first — the ``source`` of
a DescribeConfigs entry:

- DYNAMIC_BROKER_CONFIG: set for this broker (BROKER resource ``"<node.id>"``);
- DYNAMIC_DEFAULT_BROKER_CONFIG: the cluster-wide default (BROKER resource ``""``);
- STATIC_BROKER_CONFIG: ``server.properties`` and ``--override``;
- DEFAULT_CONFIG: the definition's default.

Which keys may change: Kafka lets every broker key that sets a topic default
change at runtime (``DynamicLogConfig``: the synonyms of the topic configs,
``log.retention.ms``, ``log.segment.bytes``, ``message.max.bytes``,
``log.cleanup.policy``…), plus cleaner, thread-pool, listener and quota keys.
samsa accepts the ones it applies live: all the topic-default keys (every
partition without a topic override of its own takes the new value at once)
and ``log.cleaner.backoff.ms``. Any other key is refused as Kafka refuses a
static one: INVALID_REQUEST, "Cannot update these configs dynamically".
Thread counts are not accepted: samsa has no such pools to resize.

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
import logging
from collections.abc import Callable, Mapping
from typing import Any

from samsa.broker.config import BROKER_CONFIG, BrokerConfig
from samsa.broker.replication.replica_manager import ReplicaManager
from samsa.errors import ConfigError, InvalidRequestError, KafkaError, KafkaStorageError
from samsa.storage import LogManager, log_config
from samsa.storage.data_dir_file import DataDirFile
from samsa.storage.log_config import LogConfig

log = logging.getLogger(__name__)

DYNAMIC_CONFIG_FILE = "samsa-dynamic-configs.json"

TOPIC_CONFIG_SYNONYMS = log_config.TOPIC_CONFIG_SYNONYMS
"""Broker keys that set each topic key's default, most specific first (from the topic
config table, :data:`samsa.storage.log_config.TOPIC_CONFIG_KEYS`)."""

DYNAMIC_BROKER_CONFIGS: frozenset[str] = frozenset(
    {name for names in TOPIC_CONFIG_SYNONYMS.values() for name in names}
    | {"log.cleaner.backoff.ms"}
)
"""The broker keys samsa lets AlterConfigs change (and applies at once)."""


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
        self.cluster_default = self._usable(default, "the cluster-wide default")
        self.per_broker = self._usable(broker, f"broker {self.static.node_id}")
        self.client_quotas = client_quotas
        self.current = self._build(self.cluster_default, self.per_broker)
        if self.cluster_default or self.per_broker:
            log.info(
                "dynamic broker configs: default %s, broker %s",
                self.cluster_default,
                self.per_broker,
            )

    def _usable(self, props: Mapping[str, str], level: str) -> dict[str, str]:
        usable: dict[str, str] = {}
        for name, value in props.items():
            try:
                self._check({name: value})
            except KafkaError as exc:
                log.error("ignoring the stored dynamic config of %s %s=%s: %s",
                          level, name, value, exc)  # fmt: skip
                continue
            usable[name] = value
        return usable

    def _check(self, props: Mapping[str, str]) -> None:
        not_dynamic = sorted(name for name in props if name not in DYNAMIC_BROKER_CONFIGS)
        if not_dynamic:
            raise InvalidRequestError(
                f"Cannot update these configs dynamically: Set({', '.join(not_dynamic)})"
            )
        for name, value in props.items():
            try:
                BROKER_CONFIG.parse_value(name, value)
            except ConfigError as exc:
                raise InvalidRequestError(f"Invalid config value for {name}: {exc}") from exc

    def _build(self, default: Mapping[str, str], broker: Mapping[str, str]) -> BrokerConfig:
        config = BrokerConfig.from_props({**self.static.overrides, **default, **broker})
        _check_log_defaults(config.log_defaults)
        return config

    def validate(self, per_broker: bool, props: Mapping[str, str]) -> BrokerConfig:
        """The configuration ``props`` as one layer's whole set would give; raises
        INVALID_REQUEST (Kafka's messages) for a key that cannot change or a bad value."""
        self._check(props)
        default, broker = (self.cluster_default, props) if per_broker else (props, self.per_broker)
        try:
            return self._build(default, broker)
        except ConfigError as exc:
            raise InvalidRequestError(str(exc)) from exc

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
