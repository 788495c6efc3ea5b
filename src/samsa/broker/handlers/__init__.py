"""Request handlers, one module per API family; each registers the versions it serves.

:func:`register_all` hands each module the services it uses, and only those.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from samsa.broker.config import BrokerConfig, Listener
from samsa.broker.dynamic_config import DynamicBrokerConfig
from samsa.broker.handlers import (
    acls,
    api_versions,
    client_quotas,
    cluster,
    configs,
    consumer_groups,
    delete_groups,
    delete_records,
    describe_groups,
    describe_transactions,
    elections,
    end_txn,
    fetch,
    groups,
    heartbeat,
    join_group,
    leader_epochs,
    list_offsets,
    log_dirs,
    metadata,
    partitions,
    produce,
    producer_id,
    producers,
    reassignments,
    sasl,
    scram_credentials,
    topics,
    transactions,
    txn_markers,
)
from samsa.broker.metadata.metadata_cache import MetadataCache
from samsa.broker.metadata.topic_manager import TopicManager
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.quota.manager import ClientQuotas
from samsa.broker.quota.store import QuotaStore
from samsa.broker.replication.replica_manager import ReplicaManager
from samsa.broker.security.scram_credentials import ScramCredentials
from samsa.coordinator.group.coordinator import GroupCoordinator
from samsa.coordinator.transaction.coordinator import TransactionCoordinator


class Services:
    """What the broker offers its handlers; each handler is given the part it uses.

    Handler modules that take a view of it (``TopicsServices``…) declare that view as
    a Protocol: mypy holds them to it.
    """

    def __init__(
        self,
        *,
        node_id: int,
        config: Callable[[], BrokerConfig],
        advertised: Callable[[], Listener],
        metadata: MetadataCache,
        topics: TopicManager,
        allocate_producer_id: Callable[[], int],
        replica_manager: ReplicaManager,
        group_coordinator: GroupCoordinator,
        txn_coordinator: TransactionCoordinator,
        dynamic_config: DynamicBrokerConfig,
        elect_leaders: elections.Elect,
        reassign: reassignments.Reassign,
        list_reassignments: reassignments.ListMoves,
        scram_credentials: ScramCredentials,
        client_quotas: ClientQuotas,
        quota_store: QuotaStore,
    ) -> None:
        self.node_id = node_id
        self.current_config = config
        self.current_advertised = advertised
        self.metadata = metadata
        self.topics = topics
        self.allocate_producer_id = allocate_producer_id
        self.replica_manager = replica_manager
        self.group_coordinator = group_coordinator
        self.txn_coordinator = txn_coordinator
        self.dynamic_config = dynamic_config
        self.elect_leaders = elect_leaders
        self.reassign = reassign
        self.list_reassignments = list_reassignments
        self.scram_credentials = scram_credentials
        self.client_quotas = client_quotas
        self.quota_store = quota_store

    @property
    def config(self) -> BrokerConfig:
        """The effective configuration, read per request (dynamic changes replace it)."""
        return self.current_config()

    @property
    def advertised(self) -> Listener:
        """The address clients are told to use (port 0 is bound after start)."""
        return self.current_advertised()


def register_all(registry: ApiRegistry, s: Services) -> None:
    config = s.current_config
    api_versions.register(registry)
    metadata.register(registry, s)
    topics.register(
        registry, config=config, metadata=s.metadata, topics=s.topics,
        created_configs=functools.partial(configs.created_topic_configs, s),
    )  # fmt: skip
    produce.register(
        registry, metadata=s.metadata, replicas=s.replica_manager, quotas=s.client_quotas
    )
    fetch.register(
        registry,
        config=config,
        metadata=s.metadata,
        replicas=s.replica_manager,
        quotas=s.client_quotas,
    )
    list_offsets.register(registry, replicas=s.replica_manager)
    leader_epochs.register(registry, replicas=s.replica_manager)
    producer_id.register(registry, s)
    partitions.register(registry, metadata=s.metadata, topics=s.topics)
    delete_records.register(registry, s)
    cluster.register(registry, metadata=s.metadata)
    configs.register(registry, s)
    groups.register(
        registry,
        config=config,
        txn_partition_of=s.txn_coordinator.partition_of,
        metadata_store=s.metadata,
        topic_manager=s.topics,
        group_coordinator=s.group_coordinator,
    )
    consumer_groups.register(
        registry, metadata=s.metadata, topic_manager=s.topics, group_coordinator=s.group_coordinator
    )
    join_group.register(registry, s)
    heartbeat.register(registry, s)
    describe_groups.register(registry, s)
    delete_groups.register(registry, s)
    end_txn.register(registry, s)
    describe_transactions.register(registry, s)
    transactions.register(
        registry,
        config=config,
        metadata=s.metadata,
        topic_manager=s.topics,
        group_coordinator=s.group_coordinator,
        txn_coordinator=s.txn_coordinator,
    )
    txn_markers.register(registry, replicas=s.replica_manager)
    elections.register(registry, elect=s.elect_leaders)
    log_dirs.register(registry, log_manager=s.replica_manager.log_manager)
    reassignments.register(
        registry, metadata=s.metadata, reassign=s.reassign, moves=s.list_reassignments
    )
    producers.register(registry, replicas=s.replica_manager)
    sasl.register(registry)
    scram_credentials.register(registry, credentials=s.scram_credentials)
    acls.register(registry)
    client_quotas.register(registry, s)
