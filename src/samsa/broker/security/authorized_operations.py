"""Authorized-operations bitfields: what the caller may do to a topic, group or the cluster.

Metadata (v8+), DescribeCluster and DescribeGroups can ask for the operations
the caller may perform on a resource; the answer is a 32-bit field with bit
``code`` set for each allowed ``AclOperation``. With the authorizer on, each
operation Kafka defines on the resource type (``AclEntry.supportedOperations``)
is asked of it for the request's principal; without one, Kafka allows every
such operation, and so does samsa. When the client does not ask, the field keeps
Kafka's "not computed" value.
"""

from __future__ import annotations

from samsa.acl import CLUSTER_NAME, AclOperation, ResourceType
from samsa.broker.security.authorizer import authorized_operations

__all__ = ["AclOperation", "cluster_operations", "group_operations", "topic_operations"]

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
"""The value of an authorized-operations field that was not asked for."""


def to_bitfield(operations: frozenset[AclOperation]) -> int:
    """The 32-bit field with the bit of each operation set."""
    return sum(1 << op for op in operations)


GROUP_OPERATIONS = frozenset({AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE})
"""The group operations samsa answers for: it has no group configs, so the
DESCRIBE_CONFIGS and ALTER_CONFIGS Kafka 4 also lists are left out."""


def _field(asked: bool, resource_type: ResourceType, name: str) -> int:
    if not asked:
        return AUTHORIZED_OPERATIONS_OMITTED
    allowed = authorized_operations(resource_type, name)
    if resource_type == ResourceType.GROUP:
        allowed &= GROUP_OPERATIONS
    return to_bitfield(allowed)


def topic_operations(asked: bool, topic: str) -> int:
    """The field for a topic, for the request being served ("not computed" unless ``asked``)."""
    return _field(asked, ResourceType.TOPIC, topic)


def group_operations(asked: bool, group: str) -> int:
    """The field for a group, for the request being served ("not computed" unless ``asked``)."""
    return _field(asked, ResourceType.GROUP, group)


def cluster_operations(asked: bool) -> int:
    """The field for the cluster, for the request being served ("not computed" unless
    ``asked``)."""
    return _field(asked, ResourceType.CLUSTER, CLUSTER_NAME)
