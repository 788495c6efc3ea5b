"""The two ways a broker runs, each built by one factory: a single node, or a member of a
ZooKeeper cluster (``zookeeper.connect``).

:class:`~samsa.broker.server.Broker` builds what both share (the log manager, the
coordinators, the registry, the listeners) and asks :func:`single_node` or
:func:`zookeeper_cluster` for the parts that differ, returned as one :class:`ModeParts`:
where metadata comes from and topics are changed, where credentials, ACLs and quotas are
kept, how transaction markers reach partitions, and who answers ElectLeaders and
partition reassignments. Kafka draws the same line between ``KafkaServer`` (ZooKeeper
mode) and ``BrokerServer`` (KRaft) around their shared ``ReplicaManager`` and
coordinators.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from samsa.broker.config import BrokerConfig, Listener
from samsa.broker.dynamic_config import DynamicBrokerConfig
from samsa.broker.handlers.elections import Elect, ElectionResults, single_node_elections
from samsa.broker.handlers.reassignments import ListMoves, Reassign, single_node_reassignments
from samsa.broker.metadata.metadata_cache import LocalMetadataCache, MetadataCache
from samsa.broker.metadata.topic_manager import LocalTopicManager, TopicManager
from samsa.broker.metadata.zk_cluster import ZkCluster
from samsa.broker.metadata.zk_topic_manager import ZkTopicManager
from samsa.broker.quota.manager import ClientQuotas
from samsa.broker.quota.store import LocalQuotaStore, QuotaStore, ZkQuotaStore
from samsa.broker.replication.marker_channel import TxnMarkerChannel
from samsa.broker.replication.replica_manager import ReplicaManager
from samsa.broker.security.scram_credentials import (
    LocalScramCredentials,
    ScramCredentials,
    ZkScramCredentials,
)
from samsa.cluster.acl_store import LocalAclStore, ZkAclStore
from samsa.cluster.change_notifications import ChangeNotificationListener, config_changes
from samsa.cluster.local import LocalMetadataStore
from samsa.coordinator.transaction.coordinator import WriteMarkerFn
from samsa.storage import LogManager
from samsa.types import TopicPartition


@dataclass(frozen=True, slots=True)
class SharedParts:
    """What the broker has built before it asks a factory for the rest."""

    config: BrokerConfig
    """The static configuration."""
    current_config: Callable[[], BrokerConfig]
    """The effective configuration at the time of asking (dynamic layers included)."""
    metadata_store: LocalMetadataStore
    log_manager: LogManager
    dynamic_config: DynamicBrokerConfig
    client_quotas: ClientQuotas
    advertised_listeners: Callable[[], tuple[Listener, ...]]
    advertised_for_request: Callable[[], Listener]
    on_partitions_deleted: Callable[[list[TopicPartition]], Awaitable[object]]


@dataclass(frozen=True, slots=True)
class ModeParts:
    """The parts a single node and a ZooKeeper cluster build differently."""

    cluster: ZkCluster | None
    """The link to the ZooKeeper cluster (None: a single node)."""
    metadata: MetadataCache
    replica_manager: ReplicaManager
    topics: TopicManager
    scram_credentials: ScramCredentials
    local_credentials: LocalScramCredentials | None
    """The credentials to load from the data dirs at start (a single node)."""
    marker_channel: TxnMarkerChannel | None
    """Carries transaction markers to other brokers' partitions (a cluster)."""
    write_marker: WriteMarkerFn
    allocate_producer_id: Callable[[], int]
    local_quotas: LocalQuotaStore | None
    zk_quotas: ZkQuotaStore | None
    config_changes: ChangeNotificationListener[str] | None
    """``/config/changes``, followed for client quotas and SCRAM credentials (a cluster)."""
    new_acl_store: Callable[[], LocalAclStore | ZkAclStore]
    """Called only when an authorizer is configured."""
    elect_leaders: Elect
    reassign: Reassign
    list_reassignments: ListMoves
    coordinators_serve_led_partitions_only: bool
    """Other brokers lead some internal partitions: a coordinator serves the groups and
    transactional ids of the partitions led here, and answers NOT_COORDINATOR for others."""

    @property
    def quota_store(self) -> QuotaStore:
        store = self.local_quotas or self.zk_quotas
        assert store is not None
        return store


def single_node(shared: SharedParts) -> ModeParts:
    """A broker alone: its topic table, credentials, ACLs and quotas live in its data
    dirs, it leads every partition, and it coordinates every group and transaction."""
    config = shared.config
    metadata = LocalMetadataCache(
        shared.metadata_store, config.node_id, shared.advertised_for_request
    )
    replica_manager = ReplicaManager(
        shared.log_manager, metadata, config.log_defaults, local_id=config.node_id
    )
    credentials = LocalScramCredentials(config.log_dirs)
    reassign, list_reassignments = single_node_reassignments(metadata, config.node_id)
    return ModeParts(
        cluster=None,
        metadata=metadata,
        replica_manager=replica_manager,
        topics=LocalTopicManager(
            shared.metadata_store,
            replica_manager,
            shared.current_config,
            node_id=config.node_id,
            offsets_partitions=config["offsets.topic.num.partitions"],
            transaction_partitions=config["transaction.state.log.num.partitions"],
            on_partitions_deleted=shared.on_partitions_deleted,
        ),
        scram_credentials=credentials,
        local_credentials=credentials,
        marker_channel=None,
        write_marker=replica_manager.write_txn_marker,
        allocate_producer_id=shared.metadata_store.allocate_producer_id,
        local_quotas=LocalQuotaStore(shared.dynamic_config, shared.client_quotas),
        zk_quotas=None,
        config_changes=None,
        new_acl_store=lambda: LocalAclStore(config.log_dirs),
        elect_leaders=single_node_elections(metadata),
        reassign=reassign,
        list_reassignments=list_reassignments,
        coordinators_serve_led_partitions_only=False,
    )


def zookeeper_cluster(shared: SharedParts) -> ModeParts:
    """A member of a ZooKeeper cluster: metadata, topics, credentials, ACLs and quotas are
    ZooKeeper's; the controller elects leaders and moves replicas; markers for partitions
    led elsewhere travel by WriteTxnMarkers."""
    config = shared.config
    cluster = ZkCluster(
        config, shared.advertised_listeners, on_partitions_deleted=shared.on_partitions_deleted
    )
    replica_manager = ReplicaManager(
        shared.log_manager, cluster.cache, config.log_defaults, local_id=config.node_id
    )
    cluster.attach(replica_manager)
    marker_channel = TxnMarkerChannel(
        config.node_id,
        replica_manager,
        cluster.cache,
        cluster.endpoint_of,
        security=config.inter_broker_security,
    )
    controller = cluster.controller
    changes = config_changes(cluster.zk)

    async def elect_leaders(
        partitions: list[TopicPartition] | None, unclean: bool
    ) -> ElectionResults | None:
        return await controller.elect_leaders(partitions, unclean=unclean)

    return ModeParts(
        cluster=cluster,
        metadata=cluster.cache,
        replica_manager=replica_manager,
        topics=ZkTopicManager(
            cluster.zk,
            cluster.cache,
            shared.current_config,
            offsets_partitions=config["offsets.topic.num.partitions"],
            transaction_partitions=config["transaction.state.log.num.partitions"],
        ),
        scram_credentials=ZkScramCredentials(cluster.zk, changes),
        local_credentials=None,
        marker_channel=marker_channel,
        write_marker=marker_channel.write,
        allocate_producer_id=cluster.producer_ids.allocate,
        local_quotas=None,
        zk_quotas=ZkQuotaStore(cluster.zk, changes, shared.client_quotas),
        config_changes=changes,
        new_acl_store=lambda: ZkAclStore(cluster.zk),
        elect_leaders=elect_leaders,
        reassign=controller.alter_reassignments,
        list_reassignments=controller.list_reassignments,
        coordinators_serve_led_partitions_only=True,
    )
