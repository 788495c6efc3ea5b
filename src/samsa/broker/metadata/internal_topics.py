"""Kafka's internal topics: only their coordinators write them, clients cannot remove them.

``__consumer_offsets`` and ``__transaction_state`` hold the state the group and
transaction coordinators rebuild at start-up. A topic is internal by name, as
Kafka's ``Topic.isInternal`` decides — also when a client created it before the
coordinator did — or when the topic table marks it so.

What clients are refused, with INVALID_TOPIC_EXCEPTION:

* Produce: Kafka's ``ReplicaManager`` appends to an internal topic only for its
  coordinators (``internalTopicsAllowed``). Deviation: Kafka also lets a client
  whose ``client.id`` is ``__admin_client`` append; without authentication that
  would be a door any client could open, so samsa lets no client through.
* DeleteRecords: as Kafka's ``ReplicaManager.deleteRecordsOnLocalLog``.
* DeleteTopics and CreatePartitions. Deviation: Kafka's controller accepts both
  (only its command-line tools refuse to delete an internal topic), though
  deleting ``__consumer_offsets`` loses every group's offsets and adding
  partitions to it moves groups to partitions that do not hold their state.
  samsa refuses them with the code Kafka uses for its other refusals here.

The topic manager (:mod:`samsa.broker.metadata.topic_manager`) creates them the first
time a coordinator needs them (FindCoordinator, InitProducerId, a
transaction's offsets, auto-creation by Metadata), with their coordinator's
partition count and configs.
"""

from __future__ import annotations

from samsa.broker.metadata.metadata_cache import MetadataCache
from samsa.coordinator.group.coordinator import OFFSETS_TOPIC
from samsa.coordinator.transaction.coordinator import TRANSACTION_STATE_TOPIC
from samsa.errors import InvalidTopicError

INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})
TRANSACTION_STATE_CONFIGS_FIXED = {"cleanup.policy": "compact"}


def is_internal(metadata: MetadataCache, topic: str) -> bool:
    """Whether ``topic`` is internal, by Kafka's names or by the topic table."""
    if topic in INTERNAL_TOPICS:
        return True
    info = metadata.get(topic)
    return info is not None and info.is_internal


def refuse_client_change(metadata: MetadataCache, topic: str, change: str) -> None:
    """Raise INVALID_TOPIC_EXCEPTION if ``topic`` is internal; ``change`` reads "append to"."""
    if is_internal(metadata, topic):
        raise InvalidTopicError(f"Cannot {change} internal topic {topic}")
