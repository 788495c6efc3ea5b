"""DescribeConfigs (key 32, versions 0–4), AlterConfigs (key 33, versions 0–2) and
IncrementalAlterConfigs (key 44, versions 0–1), for TOPIC and BROKER resources.

A broker key is described with its effective value and its source: this
broker's dynamic config (DYNAMIC_BROKER_CONFIG), the cluster-wide dynamic
default (DYNAMIC_DEFAULT_BROKER_CONFIG), ``server.properties``/``--override``
(STATIC_BROKER_CONFIG) or the default (DEFAULT_CONFIG); the keys that cannot
change at runtime are read-only.

A topic's configuration is Kafka's topic-level keys (``TOPIC_CONFIG``): each
described with its effective value and where it came from — the topic's own
override (DYNAMIC_TOPIC_CONFIG), a broker ``log.*`` key set dynamically
(DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG) or given in
``server.properties``/``--override`` (STATIC_BROKER_CONFIG), or the default
(DEFAULT_CONFIG). Alterations are checked against ``TOPIC_CONFIG``
(INVALID_CONFIG naming the key), kept in the topic table and applied to the
live logs at once.

With the authorizer on, describing a topic's configs needs DESCRIBE_CONFIGS on
it and altering them ALTER_CONFIGS (TOPIC_AUTHORIZATION_FAILED); a BROKER
resource needs the same on the cluster (CLUSTER_AUTHORIZATION_FAILED), as Kafka's.

Deviations from Kafka, on purpose:

- BROKER resources (this broker's id, and ``""`` for the cluster-wide default)
  take every key Kafka takes dynamically, checked as Kafka checks them; samsa
  applies some and keeps the rest (:mod:`samsa.broker.dynamic_config`).
  Describing BROKER ``""`` answers the keys set at that level, as Kafka does.
- BROKER_LOGGER, GROUP and CLIENT_METRICS resources are INVALID_REQUEST.
- Synonyms list every broker key that can set a topic key (``log.retention.hours``
  for ``retention.ms``…), not only those at or after the first one as Kafka's
  listing does, so the broker default that applies is always shown.
- APPEND and SUBTRACT start from the effective value (a broker-level
  ``log.cleanup.policy`` included), where Kafka starts from the topic default.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from enum import IntEnum
from typing import Any, Protocol

from samsa.acl import AclOperation
from samsa.acl import ResourceType as AclResourceType
from samsa.broker.api import error_fields, respond
from samsa.broker.config import BROKER_CONFIG, BrokerConfig
from samsa.broker.dynamic_config import (
    DESCRIBED_BROKER_CONFIG,
    DYNAMIC_BROKER_CONFIGS,
    TOPIC_CONFIG_SYNONYMS,
    DynamicBrokerConfig,
    canonical_value,
)
from samsa.broker.metadata.metadata_cache import MetadataCache
from samsa.broker.metadata.topic_manager import TopicManager
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.replication.replica_manager import ReplicaManager
from samsa.broker.security.authorizer import authorize, authorize_cluster
from samsa.cluster.local import validate_topic_name
from samsa.config import ConfigDef, ConfigKey, ConfigType
from samsa.errors import (
    ClusterAuthorizationFailedError,
    ConfigError,
    ErrorCode,
    InvalidConfigError,
    InvalidRequestError,
    KafkaError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import RequestHeader
from samsa.storage.log_config import TOPIC_CONFIG


class ConfigsServices(Protocol):
    """The part of the broker DescribeConfigs, AlterConfigs and IncrementalAlterConfigs use."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def dynamic_config(self) -> DynamicBrokerConfig: ...

    @property
    def metadata(self) -> MetadataCache: ...

    @property
    def node_id(self) -> int: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...

    @property
    def topics(self) -> TopicManager: ...


class ResourceType(IntEnum):
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(IntEnum):
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class AlterConfigOp(IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


_CONFIG_TYPE_IDS = {
    ConfigType.BOOLEAN: 1,
    ConfigType.STRING: 2,
    ConfigType.INT: 3,
    ConfigType.LONG: 5,
    ConfigType.DOUBLE: 6,
    ConfigType.LIST: 7,
    ConfigType.PASSWORD: 9,
}
"""DescribeConfigs ``config_type`` ids (v3+), Kafka's ``DescribeConfigsResponse.ConfigType``."""


def config_string(value: Any, kind: ConfigType) -> str | None:
    """A typed config value as Kafka writes it (``ConfigDef.convertToString``)."""
    if value is None:
        return None
    if kind is ConfigType.BOOLEAN:
        return "true" if value else "false"
    if kind is ConfigType.LIST:
        return ",".join(str(v) for v in value)
    return str(value)


# -- describe ------------------------------------------------------------------------------


def _entry(
    key: ConfigKey,
    value: str | None,
    synonyms: list[dict[str, Any]],
    *,
    read_only: bool,
    include_synonyms: bool,
    docs: bool,
) -> dict[str, Any]:
    sensitive = key.type is ConfigType.PASSWORD
    if sensitive:  # as Kafka: a password's value is never sent, nor its synonyms'
        value = None
        synonyms = [{**synonym, "value": None} for synonym in synonyms]
    return {
        "name": key.name,
        "value": value,
        "read_only": read_only,
        "config_source": synonyms[0]["source"] if synonyms else ConfigSource.DEFAULT_CONFIG,
        "is_sensitive": sensitive,
        "synonyms": synonyms if include_synonyms else [],
        "config_type": _CONFIG_TYPE_IDS.get(key.type, 0),
        "documentation": key.doc if docs else None,
    }


def _broker_synonyms(
    broker: ConfigsServices, names: Iterable[str], *, per_broker: bool = True
) -> list[dict[str, Any]]:
    """Every layer that sets one of ``names``, highest first, each layer listing all of
    them (Kafka's order of sources): this broker's dynamic configs (unless describing
    the cluster-wide default), the dynamic default, the static configs, the defaults."""
    names = list(names)
    dynamic = broker.dynamic_config
    layers = [(dynamic.per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG)] if per_broker else []
    layers.append((dynamic.cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
    found = [
        {"name": name, "value": values[name], "source": source}
        for values, source in layers
        for name in names
        if name in values
    ]
    static = dynamic.static
    found += [
        {
            "name": name,
            "value": config_string(static[name], BROKER_CONFIG.keys[name].type),
            "source": ConfigSource.STATIC_BROKER_CONFIG,
        }
        for name in names
        if name in static.overrides and name in BROKER_CONFIG
    ]
    found += [
        {
            "name": name,
            "value": config_string(key.default, key.type),
            "source": ConfigSource.DEFAULT_CONFIG,
        }
        for name in names
        if (key := DESCRIBED_BROKER_CONFIG.keys[name]).default is not None
    ]
    return found


def _selected(definition: ConfigDef, wanted: Iterable[str] | None) -> list[ConfigKey]:
    keys = sorted(definition.keys.values(), key=lambda k: k.name)
    names = set(wanted or ())
    return [k for k in keys if k.name in names] if names else keys


def _describe_topic(
    broker: ConfigsServices, name: str, wanted: Iterable[str] | None, synonyms: bool, docs: bool
) -> list[dict[str, Any]]:
    validate_topic_name(name)
    info = broker.metadata.get(name)
    if info is None:
        raise UnknownTopicOrPartitionError(f"Topic {name} does not exist.")
    return _topic_entries(broker, info.configs, wanted, synonyms, docs)


def _topic_entries(
    broker: ConfigsServices,
    overrides: Mapping[str, str],
    wanted: Iterable[str] | None,
    synonyms: bool,
    docs: bool,
) -> list[dict[str, Any]]:
    """Each topic config of a topic with ``overrides``: its value and where it comes from."""
    defaults = broker.replica_manager.defaults
    effective = (defaults.with_overrides(overrides) if overrides else defaults).to_props()
    entries = []
    for key in _selected(TOPIC_CONFIG, wanted):
        value = config_string(effective[key.name], key.type)
        found = _broker_synonyms(broker, TOPIC_CONFIG_SYNONYMS.get(key.name, ()))
        if key.name in overrides:
            source = ConfigSource.DYNAMIC_TOPIC_CONFIG
            found.insert(0, {"name": key.name, "value": value, "source": source})
        entries.append(
            _entry(key, value, found, read_only=False, include_synonyms=synonyms, docs=docs)
        )
    return entries


def created_topic_configs(
    broker: ConfigsServices, overrides: Mapping[str, str]
) -> list[dict[str, Any]]:
    """What CreateTopics v5+ answers for a topic it created (KIP-525): every topic config with
    its value and source, as DescribeConfigs would describe the new topic."""
    fields = ("name", "value", "read_only", "config_source", "is_sensitive")
    entries = _topic_entries(broker, overrides, None, synonyms=False, docs=False)
    return [{f: e[f] for f in fields} for e in entries]


def _check_broker_name(broker: ConfigsServices, name: str) -> None:
    if name == "":
        return
    try:
        node_id = int(name)
    except ValueError:
        raise InvalidRequestError(f"Node id must be an integer, but it is: {name}") from None
    if node_id != broker.node_id:
        raise InvalidRequestError(
            f"Unexpected broker id, expected {broker.node_id}, but received {name}"
        )


def _describe_broker(
    broker: ConfigsServices, name: str, wanted: Iterable[str] | None, synonyms: bool, docs: bool
) -> list[dict[str, Any]]:
    """ConfigsServices ``"<id>"``: every key, with its effective value; broker ``""`` (the
    cluster-wide default, as Kafka answers it): only the keys set at that level."""
    _check_broker_name(broker, name)
    per_broker = name != ""
    entries = []
    for key in _selected(DESCRIBED_BROKER_CONFIG, wanted):
        if not per_broker and key.name not in broker.dynamic_config.cluster_default:
            continue
        value = broker.dynamic_config.value(key.name, per_broker=per_broker)
        found = _broker_synonyms(broker, [key.name], per_broker=per_broker)
        read_only = key.name not in DYNAMIC_BROKER_CONFIGS
        entries.append(
            _entry(key, value, found, read_only=read_only, include_synonyms=synonyms, docs=docs)
        )
    return entries


def _check_authorized(operation: AclOperation, resource_type: int, name: str) -> None:
    """Raise the authorization error of the resource unless the request may do ``operation``."""
    if resource_type == ResourceType.TOPIC and not authorize(
        operation, AclResourceType.TOPIC, name
    ):
        raise TopicAuthorizationFailedError(f"not authorized to {operation.name} topic {name}")
    cluster_wide = resource_type in (ResourceType.BROKER, ResourceType.BROKER_LOGGER)
    if cluster_wide and not authorize_cluster(operation):
        raise ClusterAuthorizationFailedError(f"not authorized to {operation.name} the cluster")


def _unsupported_type(resource_type: int) -> KafkaError:
    try:
        kind = ResourceType(resource_type).name
    except ValueError:
        kind = str(resource_type)
    return InvalidRequestError(f"resource type {kind} is not supported")


# -- alter -----------------------------------------------------------------------------------


def _altered_topic(broker: ConfigsServices, resource: Any) -> str:
    """The topic an alteration targets; raises the error a non-topic resource deserves."""
    kind, name = resource.resource_type, resource.resource_name
    if kind != ResourceType.TOPIC:
        raise _unsupported_type(kind)
    validate_topic_name(name)
    if broker.metadata.get(name) is None:
        raise UnknownTopicOrPartitionError(f"Topic {name} does not exist.")
    return str(name)


def _check_topic_configs(broker: ConfigsServices, overrides: Mapping[str, str]) -> None:
    """Every key known and value valid (INVALID_CONFIG naming the key), and consistent."""
    for name, raw in overrides.items():
        if name not in TOPIC_CONFIG:
            raise InvalidConfigError(f"Unknown topic config name: {name}")
        try:
            TOPIC_CONFIG.parse_value(name, raw)
        except ConfigError as exc:
            raise InvalidConfigError(str(exc)) from exc
    config = broker.replica_manager.defaults.with_overrides(overrides)
    if config.min_compaction_lag_ms > config.max_compaction_lag_ms:
        raise InvalidConfigError(
            f"conflict: min.compaction.lag.ms ({config.min_compaction_lag_ms}) is larger than "
            f"max.compaction.lag.ms ({config.max_compaction_lag_ms})"
        )


def _replaced(configs: Iterable[Any]) -> dict[str, str]:
    """AlterConfigs: the request's configs become the resource's whole set."""
    return {c.name: c.value for c in configs if c.value is not None}


def _incremented(
    start: Mapping[str, str],
    configs: Iterable[Any],
    definition: ConfigDef,
    effective: Callable[[str], Any],
    unknown: Callable[[str], KafkaError],
    *,
    any_name: bool = False,
) -> dict[str, str]:
    """IncrementalAlterConfigs: ``start`` with each operation applied in turn (APPEND and
    SUBTRACT start from the ``effective`` value of a list key). With ``any_name``, SET and
    DELETE take a name ``definition`` lacks (the caller checks it), as Kafka's broker
    configs do; APPEND and SUBTRACT still need a definition."""
    configs = list(configs)
    duplicated = sorted(n for n, count in Counter(c.name for c in configs).items() if count > 1)
    if duplicated:
        raise InvalidRequestError(f"Error due to duplicate config keys: {', '.join(duplicated)}")
    overrides = dict(start)
    for config in configs:
        name, op = config.name, config.config_operation
        key = definition.keys.get(name)
        if key is None and not (any_name and op in (AlterConfigOp.SET, AlterConfigOp.DELETE)):
            raise unknown(name)
        if op == AlterConfigOp.DELETE:
            overrides.pop(name, None)
            continue
        if op not in (AlterConfigOp.SET, AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT):
            raise InvalidRequestError(f"Unknown alter configs operation {op} for {name}")
        if config.value is None:
            raise InvalidRequestError(f"Null value not supported for {name}")
        if op == AlterConfigOp.SET:
            overrides[name] = config.value
            continue
        verb = "append" if op == AlterConfigOp.APPEND else "subtract"
        assert key is not None
        if key.type is not ConfigType.LIST:
            raise InvalidConfigError(f"Config value {verb} is not allowed for config key: {name}")
        current = list(effective(name))
        given = [v.strip() for v in config.value.split(",") if v.strip()]
        if op == AlterConfigOp.APPEND:
            updated = current + [v for v in given if v not in current]
        else:
            updated = [v for v in current if v not in given]
        overrides[name] = ",".join(updated)
    return overrides


async def _alter_topic(
    broker: ConfigsServices, resource: Any, validate_only: bool, incremental: bool
) -> None:
    topic = _altered_topic(broker, resource)
    if incremental:
        info = broker.metadata.get(topic)
        effective = broker.replica_manager.topic_config(topic).to_props()
        overrides = _incremented(
            info.configs if info is not None else {},
            resource.configs,
            TOPIC_CONFIG,
            effective.__getitem__,
            lambda name: InvalidConfigError(f"Unknown topic config name: {name}"),
        )
    else:
        overrides = _replaced(resource.configs)
    _check_topic_configs(broker, overrides)
    if not validate_only:
        await broker.topics.alter_configs(topic, overrides)


async def _alter_broker(
    broker: ConfigsServices, resource: Any, validate_only: bool, incremental: bool
) -> None:
    """A dynamic change of this broker (``"<id>"``) or of the cluster-wide default (``""``)."""
    name = resource.resource_name
    _check_broker_name(broker, name)
    per_broker = name != ""
    dynamic = broker.dynamic_config
    if incremental:

        def effective(key: str) -> Any:
            value = dynamic.value(key, per_broker=per_broker)
            return [] if value is None else DESCRIBED_BROKER_CONFIG.parse_value(key, value)

        props = _incremented(
            dynamic.per_broker if per_broker else dynamic.cluster_default,
            resource.configs,
            DESCRIBED_BROKER_CONFIG,
            effective,
            lambda key: InvalidConfigError(f"Unknown config name: {key}"),
            any_name=True,
        )
    else:
        props = _replaced(resource.configs)
    dynamic.validate(per_broker, props)
    canonical = {key: canonical_value(key, value) for key, value in props.items()}
    if not validate_only:
        await dynamic.update(per_broker, canonical)


async def _alter(
    broker: ConfigsServices, resources: Iterable[Any], validate_only: bool, incremental: bool
) -> list[dict[str, Any]]:
    resources = list(resources)
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    results: list[dict[str, Any]] = []
    reported: set[tuple[int, str]] = set()
    for resource in resources:
        ident = (resource.resource_type, resource.resource_name)
        result: dict[str, Any] = {"resource_type": ident[0], "resource_name": ident[1]}
        if counts[ident] > 1:
            if ident not in reported:
                reported.add(ident)
                duplicate = InvalidRequestError("Duplicate resource.")
                results.append({**result, **error_fields(duplicate)})
            continue
        try:
            _check_authorized(AclOperation.ALTER_CONFIGS, *ident)
            if resource.resource_type == ResourceType.BROKER:
                await _alter_broker(broker, resource, validate_only, incremental)
            else:
                await _alter_topic(broker, resource, validate_only, incremental)
            results.append({**result, "error_code": ErrorCode.NONE, "error_message": None})
        except KafkaError as exc:
            results.append({**result, **error_fields(exc)})
    return results


def register(registry: ApiRegistry, broker: ConfigsServices) -> None:
    async def describe_configs(header: RequestHeader, body: Any) -> Any:
        synonyms = body.include_synonyms
        docs = getattr(body, "include_documentation", False)
        results = []
        for resource in body.resources:
            kind, name = resource.resource_type, resource.resource_name
            result: dict[str, Any] = {"resource_type": kind, "resource_name": name, "configs": []}
            try:
                _check_authorized(AclOperation.DESCRIBE_CONFIGS, kind, name)
                if kind == ResourceType.TOPIC:
                    configs = _describe_topic(
                        broker, name, resource.configuration_keys, synonyms, docs
                    )
                elif kind == ResourceType.BROKER:
                    configs = _describe_broker(
                        broker, name, resource.configuration_keys, synonyms, docs
                    )
                else:
                    raise _unsupported_type(kind)
                result.update(error_code=ErrorCode.NONE, error_message=None, configs=configs)
            except KafkaError as exc:
                result.update(error_fields(exc))
            results.append(result)
        return respond(header, {"throttle_time": 0, "results": results})

    async def alter_configs(header: RequestHeader, body: Any) -> Any:
        results = await _alter(broker, body.resources, body.validate_only, incremental=False)
        return respond(header, {"throttle_time": 0, "responses": results})

    async def incremental_alter_configs(header: RequestHeader, body: Any) -> Any:
        results = await _alter(broker, body.resources, body.validate_only, incremental=True)
        return respond(header, {"throttle_time": 0, "responses": results})

    registry.add(ApiKey.DESCRIBE_CONFIGS, 0, 4, describe_configs)
    registry.add(ApiKey.ALTER_CONFIGS, 0, 2, alter_configs)
    registry.add(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, incremental_alter_configs)
