"""The admin client (:class:`AsyncAdmin`, :class:`Admin`) and the values it takes and returns."""

from samsa.client.admin.client import Admin, AsyncAdmin
from samsa.client.admin.replicas import (
    ElectionType,
    LogDirDescription,
    PartitionReassignment,
    ReplicaInfo,
)
from samsa.client.admin.types import (
    AlterConfigOp,
    AlterConfigOpType,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ConfigSynonym,
    GroupDescription,
    GroupListing,
    ListOffsetsResult,
    MemberDescription,
    NewTopic,
    Node,
    OffsetAndMetadata,
    OffsetSpec,
    PartitionDescription,
    ResourceType,
    TopicDescription,
)
from samsa.client.admin.users import ScramUpsertion

__all__ = [
    "Admin",
    "AlterConfigOp",
    "AlterConfigOpType",
    "AsyncAdmin",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigResource",
    "ConfigSource",
    "ConfigSynonym",
    "ElectionType",
    "GroupDescription",
    "GroupListing",
    "ListOffsetsResult",
    "LogDirDescription",
    "MemberDescription",
    "NewTopic",
    "Node",
    "OffsetAndMetadata",
    "OffsetSpec",
    "PartitionDescription",
    "PartitionReassignment",
    "ReplicaInfo",
    "ResourceType",
    "ScramUpsertion",
    "TopicDescription",
]
