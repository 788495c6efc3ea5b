"""Per-log (topic-level) configuration, with Kafka's names and defaults.

:data:`TOPIC_CONFIG_KEYS` is the one table of the topic configs: name, type, default,
validation, and the broker keys that set the default (Kafka's ``LogConfig`` and
``ServerTopicConfigSynonyms``). :data:`TOPIC_CONFIG`, :class:`LogConfig`'s defaults,
:func:`topic_defaults` (the broker-wide defaults) and the synonyms DescribeConfigs lists
are made from it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar

from samsa.config import (
    LONG_MAX,
    ConfigDef,
    ConfigKey,
    ConfigType,
    Validator,
    at_least,
    between,
    one_of,
)

_L, _I, _D, _S, _B, _LIST = (
    ConfigType.LONG,
    ConfigType.INT,
    ConfigType.DOUBLE,
    ConfigType.STRING,
    ConfigType.BOOLEAN,
    ConfigType.LIST,
)


def _gzip_level(value: Any) -> str | None:
    return None if value == -1 or 1 <= value <= 9 else "must be -1 or in [1, 9]"


def _throttled_replicas(value: Any) -> str | None:
    items = value if isinstance(value, list) else [value]
    if items == ["*"]:
        return None
    for item in items:
        partition, colon, broker = str(item).strip().partition(":")
        if not colon or not partition.isdigit() or not broker.isdigit():
            return "must be a list of partition:broker pairs, or *"
    return None


def _only_false(value: Any) -> str | None:
    return (
        "Tiered Storage functionality is disabled in the broker; a topic cannot be "
        "configured with remote log storage"
        if value
        else None
    )


HOUR = 3600_000
DAY = 24 * HOUR


@dataclass(frozen=True, slots=True)
class BrokerSynonym:
    """A broker key that sets a topic key's default: ``value * scale`` (a key in hours or
    minutes sets a key in milliseconds)."""

    name: str
    scale: int = 1


@dataclass(frozen=True, slots=True)
class TopicConfigKey(ConfigKey):
    """A topic config key and the broker keys that set its default, most specific first
    (Kafka's ``ServerTopicConfigSynonyms``); none for a key no broker key sets."""

    synonyms: tuple[BrokerSynonym, ...] = ()


def _key(
    name: str,
    kind: ConfigType,
    default: Any,
    doc: str,
    validator: Validator | None = None,
    *,
    synonyms: Sequence[str | tuple[str, int]] = (),
) -> TopicConfigKey:
    return TopicConfigKey(
        name,
        kind,
        default,
        doc,
        validator,
        tuple(BrokerSynonym(s) if isinstance(s, str) else BrokerSynonym(*s) for s in synonyms),
    )


TOPIC_CONFIG_KEYS: tuple[TopicConfigKey, ...] = (
    _key("segment.bytes", _I, 1024**3, "Size at which a segment rolls.", at_least(14),
         synonyms=["log.segment.bytes"]),
    _key("segment.ms", _L, 7 * DAY, "Age at which segments roll.", at_least(1),
         synonyms=["log.roll.ms", ("log.roll.hours", HOUR)]),
    _key("segment.jitter.ms", _L, 0, "Random reduction of segment.ms.", at_least(0),
         synonyms=["log.roll.jitter.ms", ("log.roll.jitter.hours", HOUR)]),
    _key("segment.index.bytes", _I, 10 * 1024**2, "Offset index size.", at_least(4),
         synonyms=["log.index.size.max.bytes"]),
    _key("index.interval.bytes", _I, 4096, "Bytes between index entries.", at_least(0),
         synonyms=["log.index.interval.bytes"]),
    _key("retention.ms", _L, 7 * DAY, "Age after which segments go; -1 keeps.", at_least(-1),
         synonyms=["log.retention.ms", ("log.retention.minutes", 60_000),
                   ("log.retention.hours", HOUR)]),
    _key("retention.bytes", _L, -1, "Size above which old segments go; -1 keeps.",
         synonyms=["log.retention.bytes"]),
    _key("max.message.bytes", _I, 1048588, "Largest record batch accepted.", at_least(0),
         synonyms=["message.max.bytes"]),
    _key("flush.messages", _L, LONG_MAX, "fsync after this many records.", at_least(1),
         synonyms=["log.flush.interval.messages"]),
    _key("flush.ms", _L, LONG_MAX, "fsync after this long.", at_least(0),
         synonyms=["log.flush.interval.ms"]),
    _key("file.delete.delay.ms", _L, 60_000, "Delay before deleting files.", at_least(0),
         synonyms=["log.segment.delete.delay.ms"]),
    _key("message.timestamp.type", _S, "CreateTime", "Timestamp the log keeps.",
         one_of("CreateTime", "LogAppendTime"), synonyms=["log.message.timestamp.type"]),
    _key("message.timestamp.before.max.ms", _L, LONG_MAX,
         "How far in the past a CreateTime may be.", at_least(0),
         synonyms=["log.message.timestamp.before.max.ms"]),
    _key("message.timestamp.after.max.ms", _L, HOUR,
         "How far in the future a CreateTime may be.", at_least(0),
         synonyms=["log.message.timestamp.after.max.ms"]),
    _key("cleanup.policy", _LIST, ["delete"], "delete, compact, or both.",
         one_of("delete", "compact"), synonyms=["log.cleanup.policy"]),
    _key("delete.retention.ms", _L, DAY, "Tombstone retention.", at_least(0),
         synonyms=["log.cleaner.delete.retention.ms"]),
    _key("min.compaction.lag.ms", _L, 0, "Minimum age before compaction.", at_least(0),
         synonyms=["log.cleaner.min.compaction.lag.ms"]),
    _key("max.compaction.lag.ms", _L, LONG_MAX, "Maximum age before compaction.", at_least(1),
         synonyms=["log.cleaner.max.compaction.lag.ms"]),
    _key("min.cleanable.dirty.ratio", _D, 0.5, "Dirty ratio that triggers cleaning.",
         between(0, 1), synonyms=["log.cleaner.min.cleanable.ratio"]),
    _key("min.insync.replicas", _I, 1, "Replicas that must ack acks=all.", at_least(1),
         synonyms=["min.insync.replicas"]),
    _key("unclean.leader.election.enable", _B, False, "Elect out-of-sync replicas.",
         synonyms=["unclean.leader.election.enable"]),
    _key("compression.type", _S, "producer", "Codec the log keeps.",
         one_of("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
         synonyms=["compression.type"]),
    _key("preallocate", _B, False, "Pre-allocate segment files.",
         synonyms=["log.preallocate"]),
    _key("compression.gzip.level", _I, -1,
         "gzip level when the broker compresses (-1: the codec's default).", _gzip_level,
         synonyms=["compression.gzip.level"]),
    _key("compression.lz4.level", _I, 9, "lz4 level when the broker compresses.",
         between(1, 17), synonyms=["compression.lz4.level"]),
    _key("compression.zstd.level", _I, 3, "zstd level when the broker compresses.",
         between(-131072, 22), synonyms=["compression.zstd.level"]),
    _key("leader.replication.throttled.replicas", _LIST, [],
         "Replicas (partition:broker, or *) throttled on the leader's side.",
         _throttled_replicas),
    _key("follower.replication.throttled.replicas", _LIST, [],
         "Replicas (partition:broker, or *) throttled on the follower's side.",
         _throttled_replicas),
    _key("remote.storage.enable", _B, False,
         "Tiered storage: samsa has none, so only false is accepted.", _only_false),
    _key("local.retention.ms", _L, -2,
         "Local retention under tiered storage (-2: retention.ms).", at_least(-2),
         synonyms=["log.local.retention.ms"]),
    _key("local.retention.bytes", _L, -2,
         "Local retention under tiered storage (-2: retention.bytes).", at_least(-2),
         synonyms=["log.local.retention.bytes"]),
    _key("remote.log.copy.disable", _B, False, "Tiered storage: accepted, unused."),
    _key("remote.log.delete.on.disable", _B, False, "Tiered storage: accepted, unused."),
)  # fmt: skip
"""Kafka 4's topic configs: the one table the rest is made from (:data:`TOPIC_CONFIG`,
:class:`LogConfig`'s defaults, the broker-wide defaults of :func:`topic_defaults`, the
synonyms DescribeConfigs lists). The compression levels apply where the broker compresses
(a topic whose ``compression.type`` names a codec); the tiered-storage keys are accepted
at their defaults so that tools which copy a topic's configs from Kafka work, and
``remote.storage.enable=true`` is refused (INVALID_CONFIG), as a Kafka broker without
tiered storage refuses it."""

TOPIC_CONFIG = ConfigDef(TOPIC_CONFIG_KEYS)
"""The topic configs as a :class:`~samsa.config.ConfigDef` (parsing and validation)."""

TOPIC_CONFIG_SYNONYMS: Mapping[str, tuple[str, ...]] = {
    key.name: tuple(synonym.name for synonym in key.synonyms)
    for key in TOPIC_CONFIG_KEYS
    if key.synonyms
}
"""Broker keys that set each topic key's default, most specific first."""

TOPIC_ONLY_CONFIGS: frozenset[str] = frozenset(
    key.name for key in TOPIC_CONFIG_KEYS if not key.synonyms
)
"""Topic keys no broker key sets (Kafka has no synonym for them either)."""


def topic_defaults(broker_values: Mapping[str, Any]) -> dict[str, Any]:
    """The topic keys' defaults that typed broker values set: each from its first synonym
    that has a value (scaled to the topic key's unit), else the topic key's own default."""
    defaults: dict[str, Any] = {}
    for key in TOPIC_CONFIG_KEYS:
        if not key.synonyms:
            continue
        defaults[key.name] = next(
            (
                value if synonym.scale == 1 else value * synonym.scale
                for synonym in key.synonyms
                if (value := broker_values[synonym.name]) is not None
            ),
            key.default,
        )
    return defaults


_FROM_TABLE: Any = object()
"""A field default that :func:`_defaults_from_table` replaces by the table's."""

_C = TypeVar("_C", bound=type)


def _freeze(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _defaults_from_table(cls: _C) -> _C:
    fields_ = list(cls.__annotations__)
    names = [name.replace(".", "_") for name in TOPIC_CONFIG.keys]
    if fields_ != names:
        raise TypeError(f"{cls.__name__}'s fields are not the topic config table's: {fields_}")
    for attr, key in zip(names, TOPIC_CONFIG.keys.values(), strict=True):
        setattr(cls, attr, _freeze(key.default))
    return cls


@dataclass(frozen=True, slots=True)
@_defaults_from_table
class LogConfig:
    """Typed view of a log's configuration; build with :meth:`from_props`.

    One field per row of :data:`TOPIC_CONFIG_KEYS`, in its order (checked at import);
    the defaults are the table's."""

    segment_bytes: int = _FROM_TABLE
    segment_ms: int = _FROM_TABLE
    segment_jitter_ms: int = _FROM_TABLE
    segment_index_bytes: int = _FROM_TABLE
    index_interval_bytes: int = _FROM_TABLE
    retention_ms: int = _FROM_TABLE
    retention_bytes: int = _FROM_TABLE
    max_message_bytes: int = _FROM_TABLE
    flush_messages: int = _FROM_TABLE
    flush_ms: int = _FROM_TABLE
    file_delete_delay_ms: int = _FROM_TABLE
    message_timestamp_type: str = _FROM_TABLE
    message_timestamp_before_max_ms: int = _FROM_TABLE
    message_timestamp_after_max_ms: int = _FROM_TABLE
    cleanup_policy: tuple[str, ...] = _FROM_TABLE
    delete_retention_ms: int = _FROM_TABLE
    min_compaction_lag_ms: int = _FROM_TABLE
    max_compaction_lag_ms: int = _FROM_TABLE
    min_cleanable_dirty_ratio: float = _FROM_TABLE
    min_insync_replicas: int = _FROM_TABLE
    unclean_leader_election_enable: bool = _FROM_TABLE
    compression_type: str = _FROM_TABLE
    preallocate: bool = _FROM_TABLE
    compression_gzip_level: int = _FROM_TABLE
    compression_lz4_level: int = _FROM_TABLE
    compression_zstd_level: int = _FROM_TABLE
    leader_replication_throttled_replicas: tuple[str, ...] = _FROM_TABLE
    follower_replication_throttled_replicas: tuple[str, ...] = _FROM_TABLE
    remote_storage_enable: bool = _FROM_TABLE
    local_retention_ms: int = _FROM_TABLE
    local_retention_bytes: int = _FROM_TABLE
    remote_log_copy_disable: bool = _FROM_TABLE
    remote_log_delete_on_disable: bool = _FROM_TABLE

    @classmethod
    def from_props(cls, props: Mapping[str, Any] | None = None) -> LogConfig:
        """Parse Kafka topic properties (``{"segment.bytes": "1048576"}``); unknown keys fail."""
        values = TOPIC_CONFIG.parse(props or {})
        return cls(**{name.replace(".", "_"): _freeze(v) for name, v in values.items()})

    def with_overrides(self, props: Mapping[str, Any]) -> LogConfig:
        """A copy with some properties changed (Kafka names)."""
        changes = {
            name.replace(".", "_"): _freeze(TOPIC_CONFIG.parse_value(name, raw))
            for name, raw in props.items()
        }
        return replace(self, **changes)

    def to_props(self) -> dict[str, Any]:
        """Kafka-named properties with their typed values."""
        return {f.name.replace("_", "."): getattr(self, f.name) for f in fields(self)}

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"
