"""Per-log (topic-level) configuration, with Kafka's names and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from samsa.config import LONG_MAX, ConfigDef, ConfigKey, ConfigType, at_least, between, one_of

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


TOPIC_CONFIG = ConfigDef(
    [
        ConfigKey("segment.bytes", _I, 1024**3, "Size at which a segment rolls.", at_least(14)),
        ConfigKey("segment.ms", _L, 7 * 24 * 3600_000, "Age at which segments roll.", at_least(1)),
        ConfigKey("segment.jitter.ms", _L, 0, "Random reduction of segment.ms.", at_least(0)),
        ConfigKey("segment.index.bytes", _I, 10 * 1024**2, "Offset index size.", at_least(4)),
        ConfigKey("index.interval.bytes", _I, 4096, "Bytes between index entries.", at_least(0)),
        ConfigKey("retention.ms", _L, 7 * 24 * 3600_000, "Age after which segments go; -1 keeps.",
                  at_least(-1)),
        ConfigKey("retention.bytes", _L, -1, "Size above which old segments go; -1 keeps."),
        ConfigKey("max.message.bytes", _I, 1048588, "Largest record batch accepted.", at_least(0)),
        ConfigKey("flush.messages", _L, LONG_MAX, "fsync after this many records.", at_least(1)),
        ConfigKey("flush.ms", _L, LONG_MAX, "fsync after this long.", at_least(0)),
        ConfigKey("file.delete.delay.ms", _L, 60_000, "Delay before deleting files.", at_least(0)),
        ConfigKey("message.timestamp.type", _S, "CreateTime", "Timestamp the log keeps.",
                  one_of("CreateTime", "LogAppendTime")),
        ConfigKey("message.timestamp.before.max.ms", _L, LONG_MAX,
                  "How far in the past a CreateTime may be.", at_least(0)),
        ConfigKey("message.timestamp.after.max.ms", _L, 3600_000,
                  "How far in the future a CreateTime may be.", at_least(0)),
        ConfigKey("cleanup.policy", _LIST, ["delete"], "delete, compact, or both.",
                  one_of("delete", "compact")),
        ConfigKey("delete.retention.ms", _L, 24 * 3600_000, "Tombstone retention.", at_least(0)),
        ConfigKey("min.compaction.lag.ms", _L, 0, "Minimum age before compaction.", at_least(0)),
        ConfigKey("max.compaction.lag.ms", _L, LONG_MAX, "Maximum age before compaction.",
                  at_least(1)),
        ConfigKey("min.cleanable.dirty.ratio", _D, 0.5, "Dirty ratio that triggers cleaning.",
                  between(0, 1)),
        ConfigKey("min.insync.replicas", _I, 1, "Replicas that must ack acks=all.", at_least(1)),
        ConfigKey("unclean.leader.election.enable", _B, False, "Elect out-of-sync replicas."),
        ConfigKey("compression.type", _S, "producer", "Codec the log keeps.",
                  one_of("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")),
        ConfigKey("preallocate", _B, False, "Pre-allocate segment files."),
        ConfigKey("compression.gzip.level", _I, -1,
                  "gzip level when the broker compresses (-1: the codec's default).",
                  _gzip_level),
        ConfigKey("compression.lz4.level", _I, 9, "lz4 level when the broker compresses.",
                  between(1, 17)),
        ConfigKey("compression.zstd.level", _I, 3, "zstd level when the broker compresses.",
                  between(-131072, 22)),
        ConfigKey("leader.replication.throttled.replicas", _LIST, [],
                  "Replicas (partition:broker, or *) throttled on the leader's side.",
                  _throttled_replicas),
        ConfigKey("follower.replication.throttled.replicas", _LIST, [],
                  "Replicas (partition:broker, or *) throttled on the follower's side.",
                  _throttled_replicas),
        ConfigKey("remote.storage.enable", _B, False,
                  "Tiered storage: samsa has none, so only false is accepted.", _only_false),
        ConfigKey("local.retention.ms", _L, -2,
                  "Local retention under tiered storage (-2: retention.ms).", at_least(-2)),
        ConfigKey("local.retention.bytes", _L, -2,
                  "Local retention under tiered storage (-2: retention.bytes).", at_least(-2)),
        ConfigKey("remote.log.copy.disable", _B, False, "Tiered storage: accepted, unused."),
        ConfigKey("remote.log.delete.on.disable", _B, False, "Tiered storage: accepted, unused."),
    ]
)  # fmt: skip
"""Kafka 4's topic configs. The compression levels apply where the broker compresses (a
topic whose ``compression.type`` names a codec); the tiered-storage keys are accepted at
their defaults so that tools which copy a topic's configs from Kafka work, and
``remote.storage.enable=true`` is refused (INVALID_CONFIG), as a Kafka broker without
tiered storage refuses it."""


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Typed view of a log's configuration; build with :meth:`from_props`."""

    segment_bytes: int = 1024**3
    segment_ms: int = 7 * 24 * 3600_000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024**2
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3600_000
    retention_bytes: int = -1
    max_message_bytes: int = 1048588
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    file_delete_delay_ms: int = 60_000
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3600_000
    cleanup_policy: tuple[str, ...] = ("delete",)
    delete_retention_ms: int = 24 * 3600_000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    compression_type: str = "producer"
    preallocate: bool = False
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    leader_replication_throttled_replicas: tuple[str, ...] = ()
    follower_replication_throttled_replicas: tuple[str, ...] = ()
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False

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


def _freeze(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value
