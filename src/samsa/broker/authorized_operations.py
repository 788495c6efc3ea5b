"""Authorized-operations bitfields, as Kafka answers them with no authorizer configured.

Metadata (v8+) and DescribeCluster can ask for the operations
the caller may perform on a resource; the answer is a 32-bit field with bit
``code`` set for each allowed ``AclOperation``. Kafka without an authorizer
allows every operation its ACL model defines on the resource type
(``AclEntry.supportedOperations``), and so does samsa: it has no authorizer.
When the client does not ask, the field keeps Kafka's "not computed" value.
"""

from __future__ import annotations

from enum import IntEnum

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
"""The value of an authorized-operations field that was not asked for."""


class AclOperation(IntEnum):
    """Kafka's ACL operation codes (bit positions in an authorized-operations field)."""

    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


def to_bitfield(operations: frozenset[AclOperation]) -> int:
    """The 32-bit field with the bit of each operation set."""
    return sum(1 << op for op in operations)


TOPIC_OPERATIONS = to_bitfield(
    frozenset(
        {
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.CREATE,
            AclOperation.DESCRIBE,
            AclOperation.DELETE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
        }
    )
)
"""Every operation Kafka defines on a TOPIC resource."""

CLUSTER_OPERATIONS = to_bitfield(
    frozenset(
        {
            AclOperation.CREATE,
            AclOperation.CLUSTER_ACTION,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
            AclOperation.IDEMPOTENT_WRITE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE,
        }
    )
)
"""Every operation Kafka defines on the CLUSTER resource."""


def topic_operations(asked: bool) -> int:
    """The field for a topic: every topic operation when ``asked``, else "not computed"."""
    return TOPIC_OPERATIONS if asked else AUTHORIZED_OPERATIONS_OMITTED


def cluster_operations(asked: bool) -> int:
    """The field for the cluster: every cluster operation when ``asked``, else "not computed"."""
    return CLUSTER_OPERATIONS if asked else AUTHORIZED_OPERATIONS_OMITTED
