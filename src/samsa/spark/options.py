"""The data source's options: Spark's Kafka source and sink option names, parsed and checked.

Everything here runs when Spark plans a query, so a wrong option fails before any
task starts, with a :class:`~samsa.errors.ConfigError` whose message names the
option. Option names are case-insensitive (Spark lower-cases them); ``kafka.*``
options go to samsa's clients with the prefix removed, each client getting the
keys it defines. Nothing here imports pyspark.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from samsa.client.config import (
    ADMIN_CONFIG,
    CONSUMER_CONFIG,
    PRODUCER_CONFIG,
    admin_config,
    consumer_config,
    producer_config,
)
from samsa.config import ConfigDef
from samsa.errors import ConfigError
from samsa.types import TopicPartition

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetBound",
    "SinkOptions",
    "SourceOptions",
    "Subscription",
    "parse_duration_ms",
]

EARLIEST = -2
LATEST = -1

# Options Spark itself may hand a data source along with the user's.
_SPARK_OPTIONS = frozenset({"path", "checkpointlocation", "queryname"})

_SOURCE_OPTIONS = frozenset(
    {
        "assign",
        "subscribe",
        "subscribepattern",
        "startingoffsets",
        "endingoffsets",
        "startingtimestamp",
        "endingtimestamp",
        "startingoffsetsbytimestamp",
        "endingoffsetsbytimestamp",
        "startingoffsetsbytimestampstrategy",
        "maxoffsetspertrigger",
        "minoffsetspertrigger",
        "maxtriggerdelay",
        "minpartitions",
        "failondataloss",
        "includeheaders",
        "kafkaconsumer.polltimeoutms",
    }
)
_SINK_OPTIONS = frozenset({"topic", "transactionalidprefix"})

# Client keys the connector sets itself, and why a user may not.
_SOURCE_RESERVED = {
    "group.id": "the source keeps its offsets in Spark's checkpoint and joins no group",
    "group.instance.id": "the source joins no group",
    "auto.offset.reset": "use startingOffsets (and failOnDataLoss for deleted records)",
    "enable.auto.commit": "the source keeps its offsets in Spark's checkpoint",
    "allow.auto.create.topics": "the source never creates topics (reading a deleted topic "
    "would bring it back empty)",
    "key.deserializer": "keys are returned as binary: cast or parse them in Spark",
    "value.deserializer": "values are returned as binary: cast or parse them in Spark",
}
_SINK_RESERVED = {
    "key.serializer": "write a binary or string key column",
    "value.serializer": "write a binary or string value column",
    "transactional.id": "the streaming sink derives one per query and task "
    "(set transactionalIdPrefix to change its prefix)",
}


def _lower(options: Mapping[str, Any]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _positive_int(options: Mapping[str, str], name: str, label: str) -> int | None:
    raw = options.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"option {label}: {raw!r} is not an integer") from None
    if value <= 0:
        raise ConfigError(f"option {label}: must be a positive integer, not {value}")
    return value


def _bool(options: Mapping[str, str], name: str, label: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise ConfigError(f"option {label}: {raw!r} is not true or false")


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|sec|m|min|h|d)?\s*$", re.IGNORECASE)
_UNIT_MS = {None: 1, "ms": 1, "s": 1000, "sec": 1000, "m": 60_000, "min": 60_000,
            "h": 3_600_000, "d": 86_400_000}  # fmt: skip


def parse_duration_ms(raw: str, label: str) -> int:
    """``"15m"``, ``"10s"``, ``"500ms"`` or a bare number of milliseconds, in ms."""
    match = _DURATION.match(raw)
    if match is None:
        raise ConfigError(f"option {label}: {raw!r} is not a duration such as 500ms, 10s or 15m")
    unit = match.group(2).lower() if match.group(2) else None
    return int(match.group(1)) * _UNIT_MS[unit]


def _json_object(raw: str, label: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ConfigError(f"option {label}: not valid JSON ({e.msg}): {raw!r}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"option {label}: expected a JSON object, got {raw!r}")
    return value


def _partition_map(raw: str, label: str) -> dict[TopicPartition, int]:
    """``{"topic": {"0": 23, "1": -1}}`` as {TopicPartition: int}."""
    result: dict[TopicPartition, int] = {}
    for topic, partitions in _json_object(raw, label).items():
        if not isinstance(partitions, dict):
            raise ConfigError(
                f'option {label}: topic {topic!r} needs an object of partitions, e.g. {{"0": 5}}'
            )
        for partition, value in partitions.items():
            try:
                number = int(partition)
            except ValueError:
                raise ConfigError(
                    f"option {label}: partition {partition!r} of {topic!r} is not a number"
                ) from None
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigError(
                    f"option {label}: the value for {topic}-{partition} must be an integer"
                )
            result[TopicPartition(topic, number)] = value
    return result


@dataclass(frozen=True, slots=True)
class Subscription:
    """Which partitions to read: exactly one of ``assign``, ``subscribe``, ``subscribePattern``."""

    kind: Literal["assign", "subscribe", "subscribePattern"]
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    partitions: tuple[TopicPartition, ...] = ()

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> Subscription:
        given = [name for name in ("assign", "subscribe", "subscribepattern") if name in options]
        if len(given) != 1:
            names = ", ".join(given) if given else "none"
            raise ConfigError(
                "exactly one of the options assign, subscribe, subscribePattern must be set "
                f"(set: {names})"
            )
        if "assign" in options:
            raw = options["assign"]
            partitions: list[TopicPartition] = []
            for topic, numbers in _json_object(raw, "assign").items():
                if not isinstance(numbers, list) or not all(
                    isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in numbers
                ):
                    raise ConfigError(
                        f"option assign: topic {topic!r} needs a list of partitions, "
                        f'e.g. {{"{topic}": [0, 1]}}'
                    )
                partitions += [TopicPartition(topic, n) for n in numbers]
            if not partitions:
                raise ConfigError(f"option assign: no partitions in {raw!r}")
            return cls("assign", partitions=tuple(sorted(set(partitions))))
        if "subscribe" in options:
            topics = tuple(t.strip() for t in options["subscribe"].split(",") if t.strip())
            if not topics:
                raise ConfigError("option subscribe: give one or more topic names, comma-separated")
            return cls("subscribe", topics=topics)
        pattern = options["subscribepattern"]
        try:
            re.compile(pattern)
        except re.error as e:
            raise ConfigError(
                f"option subscribePattern: {pattern!r} is not a regex ({e})"
            ) from None
        return cls("subscribePattern", pattern=pattern)


@dataclass(frozen=True, slots=True)
class OffsetBound:
    """Where a read starts or ends.

    ``kind`` is ``earliest``, ``latest``, ``offsets`` (per partition; -2 earliest,
    -1 latest), ``timestamp`` (one time for every partition) or ``timestamps``
    (per partition); times are epoch milliseconds. ``option`` names the option it
    came from, for error messages.
    """

    kind: Literal["earliest", "latest", "offsets", "timestamp", "timestamps"]
    option: str
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None


def _bound(
    options: Mapping[str, str], which: Literal["starting", "ending"], default: str
) -> OffsetBound:
    # Spark's precedence: one timestamp, then timestamps by partition, then offsets.
    label = f"{which}Timestamp"
    if label.lower() in options:
        raw = options[label.lower()]
        try:
            stamp = int(raw)
        except ValueError:
            raise ConfigError(f"option {label}: {raw!r} is not a timestamp in ms") from None
        if stamp < 0:
            raise ConfigError(f"option {label}: must not be negative, not {stamp}")
        return OffsetBound("timestamp", label, timestamp=stamp)
    label = f"{which}OffsetsByTimestamp"
    if label.lower() in options:
        stamps = _partition_map(options[label.lower()], label)
        negative = sorted(str(tp) for tp, ts in stamps.items() if ts < 0)
        if negative:
            raise ConfigError(f"option {label}: negative timestamps for {', '.join(negative)}")
        return OffsetBound("timestamps", label, offsets=stamps)
    label = f"{which}Offsets"
    raw = options.get(label.lower(), default).strip()
    if raw.lower() in ("earliest", "latest"):
        return OffsetBound("earliest" if raw.lower() == "earliest" else "latest", label)
    offsets = _partition_map(raw, label)
    bad = sorted(str(tp) for tp, offset in offsets.items() if offset < EARLIEST)
    if bad:
        raise ConfigError(
            f"option {label}: offsets must be >= 0, or -2 (earliest) or -1 (latest): "
            + ", ".join(bad)
        )
    return OffsetBound("offsets", label, offsets=offsets)


def _client_options(
    options: Mapping[str, str], definitions: tuple[ConfigDef, ...], reserved: Mapping[str, str]
) -> dict[str, str]:
    props: dict[str, str] = {}
    for name, value in options.items():
        if not name.startswith("kafka."):
            continue
        key = name[len("kafka.") :]
        if key in reserved:
            raise ConfigError(f"option kafka.{key} is not supported: {reserved[key]}")
        if not any(key in definition for definition in definitions):
            raise ConfigError(f"option kafka.{key}: {key!r} is not a samsa client setting")
        props[key] = value
    if not props.get("bootstrap.servers"):
        raise ConfigError("option kafka.bootstrap.servers is required (host:port[,host:port])")
    return props


def _for_client(props: Mapping[str, str], definition: ConfigDef) -> dict[str, str]:
    return {k: v for k, v in props.items() if k in definition}


def _check_client(props: Mapping[str, Any], parse: Any) -> None:
    try:
        parse(props)
    except ConfigError as e:
        raise ConfigError(f"option kafka.*: {e}") from None


def _reject(options: Mapping[str, str], known: frozenset[str]) -> None:
    unknown = sorted(
        name
        for name in options
        if name not in known and name not in _SPARK_OPTIONS and not name.startswith("kafka.")
        and not name.startswith("spark.")
    )  # fmt: skip
    if unknown:
        raise ConfigError(f"unknown option(s) for format samsa: {', '.join(unknown)}")


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """The reading options, checked; see the README's Spark section for each one."""

    client: Mapping[str, str]
    subscription: Subscription
    starting: OffsetBound
    ending: OffsetBound
    starting_by_timestamp_strategy: Literal["error", "latest"]
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int

    @property
    def isolation_level(self) -> str:
        return self.client.get("isolation.level", "read_uncommitted")

    def consumer_props(self) -> dict[str, Any]:
        props: dict[str, Any] = _for_client(self.client, CONSUMER_CONFIG)
        props.update(
            {"enable.auto.commit": False, "auto.offset.reset": "none",
             "allow.auto.create.topics": False}
        )  # fmt: skip
        return props

    def admin_props(self) -> dict[str, Any]:
        return _for_client(self.client, ADMIN_CONFIG)

    @classmethod
    def parse(cls, raw_options: Mapping[str, Any], *, streaming: bool) -> SourceOptions:
        options = _lower(raw_options)
        _reject(options, _SOURCE_OPTIONS)
        client = _client_options(options, (CONSUMER_CONFIG, ADMIN_CONFIG), _SOURCE_RESERVED)
        _check_client(_for_client(client, CONSUMER_CONFIG), consumer_config)
        _check_client(_for_client(client, ADMIN_CONFIG), admin_config)
        subscription = Subscription.parse(options)
        starting = _bound(options, "starting", "latest" if streaming else "earliest")
        ending = _bound(options, "ending", "latest")
        if streaming:
            for name in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"):
                if name in options:
                    raise ConfigError(
                        f"option {ending.option} is for batch queries only: a stream has no end"
                    )
        else:
            if starting.kind == "latest":
                raise ConfigError(
                    "option startingOffsets: 'latest' is not valid for a batch query "
                    "(it would read nothing); use earliest or offsets"
                )
            if starting.kind == "offsets" and LATEST in starting.offsets.values():
                raise ConfigError(
                    "option startingOffsets: -1 (latest) is not valid for a batch query"
                )
            if ending.kind == "earliest":
                raise ConfigError(
                    "option endingOffsets: 'earliest' is not valid (it would read nothing)"
                )
            if ending.kind == "offsets" and EARLIEST in ending.offsets.values():
                raise ConfigError("option endingOffsets: -2 (earliest) is not valid")
            for name in ("maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay"):
                if name in options:
                    label = {"maxoffsetspertrigger": "maxOffsetsPerTrigger",
                             "minoffsetspertrigger": "minOffsetsPerTrigger",
                             "maxtriggerdelay": "maxTriggerDelay"}[name]  # fmt: skip
                    raise ConfigError(f"option {label} is for streaming queries only")
        if subscription.kind == "assign":
            for bound in (starting, ending):
                if bound.kind in ("offsets", "timestamps"):
                    extra = sorted(
                        str(tp) for tp in bound.offsets if tp not in subscription.partitions
                    )
                    if extra:
                        raise ConfigError(
                            f"option {bound.option}: partitions not in option assign: "
                            + ", ".join(extra)
                        )
        strategy = options.get("startingoffsetsbytimestampstrategy", "error").lower()
        if strategy not in ("error", "latest"):
            raise ConfigError(
                f"option startingOffsetsByTimestampStrategy: {strategy!r} is not error or latest"
            )
        max_rows = _positive_int(options, "maxoffsetspertrigger", "maxOffsetsPerTrigger")
        min_rows = _positive_int(options, "minoffsetspertrigger", "minOffsetsPerTrigger")
        if max_rows is not None and min_rows is not None and min_rows > max_rows:
            raise ConfigError(
                f"option minOffsetsPerTrigger ({min_rows}) must not exceed "
                f"maxOffsetsPerTrigger ({max_rows})"
            )
        delay = parse_duration_ms(options.get("maxtriggerdelay", "15m"), "maxTriggerDelay")
        poll_timeout = _positive_int(
            options, "kafkaconsumer.polltimeoutms", "kafkaConsumer.pollTimeoutMs"
        )
        return cls(
            client=client,
            subscription=subscription,
            starting=starting,
            ending=ending,
            starting_by_timestamp_strategy="latest" if strategy == "latest" else "error",
            max_offsets_per_trigger=max_rows,
            min_offsets_per_trigger=min_rows,
            max_trigger_delay_ms=delay,
            min_partitions=_positive_int(options, "minpartitions", "minPartitions"),
            fail_on_data_loss=_bool(options, "failondataloss", "failOnDataLoss", True),
            include_headers=_bool(options, "includeheaders", "includeHeaders", False),
            poll_timeout_ms=120_000 if poll_timeout is None else poll_timeout,
        )


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """The writing options, checked."""

    client: Mapping[str, str]
    topic: str | None
    transactional_id_prefix: str

    def producer_props(self) -> dict[str, Any]:
        return _for_client(self.client, PRODUCER_CONFIG)

    def admin_props(self) -> dict[str, Any]:
        return _for_client(self.client, ADMIN_CONFIG)

    @classmethod
    def parse(cls, raw_options: Mapping[str, Any]) -> SinkOptions:
        options = _lower(raw_options)
        _reject(options, _SINK_OPTIONS)
        client = _client_options(options, (PRODUCER_CONFIG, ADMIN_CONFIG), _SINK_RESERVED)
        _check_client(_for_client(client, PRODUCER_CONFIG), producer_config)
        _check_client(_for_client(client, ADMIN_CONFIG), admin_config)
        topic = options.get("topic")
        if topic is not None and not topic.strip():
            raise ConfigError("option topic: must not be empty")
        prefix = options.get("transactionalidprefix", "samsa-spark")
        if not prefix.strip():
            raise ConfigError("option transactionalIdPrefix: must not be empty")
        return cls(client=client, topic=topic, transactional_id_prefix=prefix)
