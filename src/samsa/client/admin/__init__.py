"""The admin client (:class:`AsyncAdmin`, :class:`Admin`) and the values it takes and returns."""

from samsa.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
)
from samsa.acl import ResourceType as AclResourceType
from samsa.client.admin.client import Admin, AsyncAdmin
from samsa.client.admin.quotas import ClientQuotaAlteration, ClientQuotaFilterComponent
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
    "AccessControlEntry",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "AclResourceType",
    "Admin",
    "AlterConfigOp",
    "AlterConfigOpType",
    "AsyncAdmin",
    "ClientQuotaAlteration",
    "ClientQuotaFilterComponent",
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
    "PatternType",
    "ReplicaInfo",
    "ResourcePattern",
    "ResourceType",
    "ScramUpsertion",
    "TopicDescription",
]
