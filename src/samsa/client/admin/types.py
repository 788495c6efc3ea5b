"""The values the admin client takes and returns: small frozen dataclasses and enums.

They carry Kafka's vocabulary (``leader_epoch``, ``isr``, ``low_watermark``)
and plain Python types, never kio message objects.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import IntEnum

from samsa.client.cluster import Node
from samsa.types import TopicPartition

__all__ = [
    "AlterConfigOp",
    "AlterConfigOpType",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigResource",
    "ConfigSource",
    "ConfigSynonym",
    "GroupDescription",
    "GroupListing",
    "ListOffsetsResult",
    "MemberDescription",
    "NewTopic",
    "Node",
    "OffsetAndMetadata",
    "OffsetSpec",
    "PartitionDescription",
    "ResourceType",
    "TopicDescription",
]


@dataclass(frozen=True, slots=True)
class NewTopic:
    """A topic to create. -1 partitions or replication factor: the broker's default.

    ``replica_assignment`` maps partition → broker ids and replaces both counts.
    """

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)
    replica_assignment: dict[int, list[int]] | None = None


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    """One partition of a described topic (leader -1: no leader)."""

    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicDescription:
    """A topic: its id, whether it is internal (``__consumer_offsets``…) and its partitions."""

    name: str
    topic_id: uuid.UUID | None
    is_internal: bool
    partitions: tuple[PartitionDescription, ...]


class ResourceType(IntEnum):
    """Config resource types (Kafka's ``ConfigResource.Type`` ids)."""

    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


@dataclass(frozen=True, slots=True)
class ConfigResource:
    """A thing with configs: a topic by name, a broker by id (as a string, '' for defaults)."""

    type: ResourceType
    name: str

    @classmethod
    def topic(cls, name: str) -> ConfigResource:
        return cls(ResourceType.TOPIC, name)

    @classmethod
    def broker(cls, broker_id: int | str) -> ConfigResource:
        return cls(ResourceType.BROKER, str(broker_id))


class ConfigSource(IntEnum):
    """Where a config value comes from (Kafka's ``DescribeConfigsResponse.ConfigSource``)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8

    @classmethod
    def of(cls, value: int) -> ConfigSource:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    """A value that applies to a config from one source, most specific first."""

    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """A config of a resource: its value (None when sensitive) and where it comes from."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    sensitive: bool
    synonyms: tuple[ConfigSynonym, ...] = ()
    documentation: str | None = None

    @property
    def is_default(self) -> bool:
        return self.source is ConfigSource.DEFAULT_CONFIG


class AlterConfigOpType(IntEnum):
    """Operations of IncrementalAlterConfigs."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class AlterConfigOp:
    """One change to one config: SET a value, DELETE (back to the default), APPEND or SUBTRACT
    list items."""

    name: str
    value: str | None = None
    op: AlterConfigOpType = AlterConfigOpType.SET


@dataclass(frozen=True, slots=True)
class GroupListing:
    """A group as ListGroups names it (state and type are '' when the broker omits them)."""

    group_id: str
    protocol_type: str
    state: str = ""
    type: str = ""


@dataclass(frozen=True, slots=True)
class MemberDescription:
    """A member of a group; ``assignment`` decoded when the group uses the consumer protocol."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: tuple[TopicPartition, ...]
    member_metadata: bytes = b""
    member_assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """A group: state (Stable, Empty, Dead…), protocol and members, and its coordinator."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...]
    coordinator: Node | None = None


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset (the next record to read), its metadata string and leader epoch."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class OffsetSpec(IntEnum):
    """Which offset ListOffsets returns; any int >= 0 instead asks by timestamp (ms)."""

    LATEST = -1
    EARLIEST = -2
    MAX_TIMESTAMP = -3


@dataclass(frozen=True, slots=True)
class ListOffsetsResult:
    """An offset found by ListOffsets, with its record's timestamp (-1 when not by time)."""

    offset: int
    timestamp: int
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    """The cluster id, the controller's node id and the brokers."""

    cluster_id: str | None
    controller_id: int
    nodes: tuple[Node, ...]
