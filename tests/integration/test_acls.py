"""ACLs on a single node: every protected API is refused without its ACL and served with it.

One broker serves the table: started with the authorizer and
``allow.everyone.if.no.acl.found``, given an ACL that lets ``User:ANONYMOUS``
(every connection until clients authenticate) ALTER the cluster — what
creating ACLs needs — and the topics the cases use, then restarted with
``allow.everyone.if.no.acl.found=false``: from then on a resource no ACL names
is refused, and that first ACL still holds after the restart. Each case is an
API, Kafka's operation on one resource and the error Kafka answers without it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.acls import ANONYMOUS, AUTHORIZER, create_acl, delete_acl, describe_acls
from tests.rawclient import exchange

from samsa.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from samsa.errors import ErrorCode
from samsa.records import RecordBatchBuilder
from samsa.testing import BrokerProcess, start_broker

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
TXN = ResourceType.TRANSACTIONAL_ID
Op = AclOperation
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
TXN_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
QUIET = {"log_level": 3}


@dataclass(frozen=True)
class Names:
    """The resources one case uses (each case its own)."""

    topic: str
    group: str
    txn: str

    def of(self, resource_type: ResourceType) -> str:
        return {TOPIC: self.topic, GROUP: self.group, TXN: self.txn}.get(resource_type, "")


Call = Callable[[str, Names], int]
"""Sends the case's request to the broker; the error code that says whether it was refused."""


@dataclass(frozen=True)
class Case:
    id: str
    resource_type: ResourceType
    operation: AclOperation
    refused: ErrorCode
    call: Call
    given: tuple[tuple[ResourceType, AclOperation], ...] = field(default=())
    """ACLs the request needs besides the one tested (granted for both halves)."""
    topic_exists: bool = True
    """Whether the fixture creates the case's topic first."""


def _batch() -> bytes:
    builder = RecordBatchBuilder()
    builder.append(b"value")
    return bytes(builder.build())


def _produce(transactional: bool) -> Call:
    def call(bootstrap: str, n: Names) -> int:
        response = exchange(bootstrap, 0, 9, {
            "transactional_id": n.txn if transactional else None, "acks": 1, "timeout": 5000,
            "topic_data": [{"name": n.topic,
                            "partition_data": [{"index": 0, "records": _batch()}]}],
        })  # fmt: skip
        return int(response.responses[0].partition_responses[0].error_code)

    return call


def _fetch(replica_id: int) -> Call:
    def call(bootstrap: str, n: Names) -> int:
        response = exchange(bootstrap, 1, 12, {
            "replica_id": replica_id, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": n.topic, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20,
            }]}],
            "forgotten_topics_data": [], "rack_id": "",
        })  # fmt: skip
        return int(response.responses[0].partitions[0].error_code)

    return call


def _list_offsets(bootstrap: str, n: Names) -> int:
    response = exchange(bootstrap, 2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": n.topic, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})  # fmt: skip
    return int(response.topics[0].partitions[0].error_code)


def _metadata(bootstrap: str, n: Names) -> int:
    response = exchange(
        bootstrap,
        3,
        12,
        {
            "topics": [{"name": n.topic, "topic_id": None}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )
    return int(response.topics[0].error_code)


def _metadata_auto_create(bootstrap: str, n: Names) -> int:
    response = exchange(bootstrap, 3, 12, {"topics": [{"name": n.topic, "topic_id": None}],
                                           "allow_auto_topic_creation": True})  # fmt: skip
    return int(response.topics[0].error_code)


def _leader_epoch(bootstrap: str, n: Names) -> int:
    response = exchange(
        bootstrap,
        23,
        4,
        {
            "replica_id": -1,
            "topics": [
                {
                    "topic": n.topic,
                    "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}],
                }
            ],
        },
    )
    return int(response.topics[0].partitions[0].error_code)


def _create_topic(bootstrap: str, n: Names) -> int:
    response = exchange(bootstrap, 19, 7, {"topics": [{
        "name": n.topic, "num_partitions": 1, "replication_factor": 1,
        "assignments": [], "configs": []}], "timeout": 5000, "validate_only": True})  # fmt: skip
    return int(response.topics[0].error_code)


def _delete_topic(bootstrap: str, n: Names) -> int:
    response = exchange(bootstrap, 20, 6, {"topics": [{"name": n.topic, "topic_id": None}],
                                           "timeout": 5000})  # fmt: skip
    return int(response.responses[0].error_code)


def _create_partitions(bootstrap: str, n: Names) -> int:
    response = exchange(bootstrap, 37, 3, {"topics": [{"name": n.topic, "count": 2,
                                           "assignments": None}], "timeout": 5000,
                                           "validate_only": True})  # fmt: skip
    return int(response.results[0].error_code)


def _delete_records(bootstrap: str, n: Names) -> int:
    response = exchange(bootstrap, 21, 2, {"topics": [{"name": n.topic, "partitions": [
        {"partition_index": 0, "offset": 0}]}], "timeout": 5000})  # fmt: skip
    return int(response.topics[0].partitions[0].error_code)


def _describe_configs(resource_type: int) -> Call:
    def call(bootstrap: str, n: Names) -> int:
        name = n.topic if resource_type == 2 else ""
        response = exchange(bootstrap, 32, 4, {"resources": [
            {"resource_type": resource_type, "resource_name": name, "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False})  # fmt: skip
        return int(response.results[0].error_code)

    return call


def _alter_configs(bootstrap: str, n: Names) -> int:
    response = exchange(bootstrap, 44, 1, {"resources": [{
        "resource_type": 2, "resource_name": n.topic, "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "600000"}]}],
        "validate_only": True})  # fmt: skip
    return int(response.responses[0].error_code)


def _describe_producers(bootstrap: str, n: Names) -> int:
    response = exchange(bootstrap, 61, 0, {"topics": [{"name": n.topic,
                                                       "partition_indexes": [0]}]})  # fmt: skip
    return int(response.topics[0].partitions[0].error_code)


def _find_coordinator(key_type: int) -> Call:
    def call(bootstrap: str, n: Names) -> int:
        key = n.group if key_type == 0 else n.txn
        response = exchange(bootstrap, 10, 4, {"key_type": key_type, "coordinator_keys": [key]})
        return int(response.coordinators[0].error_code)

    return call


def _join_group(bootstrap: str, n: Names) -> int:
    response = exchange(bootstrap, 11, 5, {
        "group_id": n.group, "session_timeout": 10_000, "rebalance_timeout": 10_000,
        "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}]})  # fmt: skip
    return int(response.error_code)


def _heartbeat(bootstrap: str, n: Names) -> int:
    response = exchange(
        bootstrap,
        12,
        4,
        {"group_id": n.group, "generation_id": 1, "member_id": "m", "group_instance_id": None},
    )
    return int(response.error_code)


def _offset_commit(bootstrap: str, n: Names) -> int:
    response = exchange(bootstrap, 8, 8, {
        "group_id": n.group, "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None, "topics": [{"name": n.topic, "partitions": [{
            "partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
            "committed_metadata": ""}]}]})  # fmt: skip
    return int(response.topics[0].partitions[0].error_code)


def _offset_fetch(bootstrap: str, n: Names) -> int:
    response = exchange(bootstrap, 9, 7, {"group_id": n.group, "topics": None,
                                          "require_stable": False})  # fmt: skip
    return int(response.error_code)


def _describe_groups(bootstrap: str, n: Names) -> int:
    response = exchange(bootstrap, 15, 5, {"groups": [n.group],
                                           "include_authorized_operations": False})  # fmt: skip
    return int(response.groups[0].error_code)


def _delete_groups(bootstrap: str, n: Names) -> int:
    response = exchange(bootstrap, 42, 2, {"groups_names": [n.group]})
    return int(response.results[0].error_code)


def _init_producer_id(transactional: bool) -> Call:
    def call(bootstrap: str, n: Names) -> int:
        response = exchange(bootstrap, 22, 4, {
            "transactional_id": n.txn if transactional else None,
            "transaction_timeout": 60_000, "producer_id": -1, "producer_epoch": -1})  # fmt: skip
        return int(response.error_code)

    return call


def _end_txn(bootstrap: str, n: Names) -> int:
    response = exchange(bootstrap, 26, 3, {"transactional_id": n.txn, "producer_id": 1,
                                           "producer_epoch": 0, "committed": True})  # fmt: skip
    return int(response.error_code)


def _add_offsets_to_txn(bootstrap: str, n: Names) -> int:
    response = exchange(bootstrap, 25, 3, {"transactional_id": n.txn, "producer_id": 1,
                                           "producer_epoch": 0, "group_id": n.group})  # fmt: skip
    return int(response.error_code)


def _add_partitions_to_txn(bootstrap: str, n: Names) -> int:
    response = exchange(bootstrap, 24, 3, {
        "v3_and_below_transactional_id": n.txn, "v3_and_below_producer_id": 1,
        "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": n.topic, "partitions": [0]}]})  # fmt: skip
    return int(response.results_by_topic_v3_and_below[0].results_by_partition[0]
               .partition_error_code)  # fmt: skip


def _write_txn_markers(bootstrap: str, n: Names) -> int:
    response = exchange(
        bootstrap,
        27,
        1,
        {
            "markers": [
                {
                    "producer_id": 1,
                    "producer_epoch": 0,
                    "transaction_result": True,
                    "topics": [{"name": n.topic, "partition_indexes": [0]}],
                    "coordinator_epoch": 0,
                }
            ]
        },
    )
    return int(response.markers[0].topics[0].partitions[0].error_code)


def _describe_transactions(bootstrap: str, n: Names) -> int:
    response = exchange(bootstrap, 65, 0, {"transactional_ids": [n.txn]})
    return int(response.transaction_states[0].error_code)


def _sync_group(bootstrap: str, n: Names) -> int:
    response = exchange(bootstrap, 14, 3, {"group_id": n.group, "generation_id": 1,
                                           "member_id": "m", "group_instance_id": None,
                                           "assignments": []})  # fmt: skip
    return int(response.error_code)


def _leave_group(bootstrap: str, n: Names) -> int:
    response = exchange(bootstrap, 13, 4, {"group_id": n.group, "members": [
        {"member_id": "m", "group_instance_id": None}]})  # fmt: skip
    return int(response.error_code)


def _offset_delete(bootstrap: str, n: Names) -> int:
    response = exchange(bootstrap, 47, 0, {"group_id": n.group, "topics": [
        {"name": n.topic, "partitions": [{"partition_index": 0}]}]})  # fmt: skip
    return int(response.error_code)


def _txn_offset_commit(bootstrap: str, n: Names) -> int:
    response = exchange(bootstrap, 28, 3, {
        "transactional_id": n.txn, "group_id": n.group, "producer_id": 1, "producer_epoch": 0,
        "generation_id": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": n.topic, "partitions": [{
            "partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
            "committed_metadata": ""}]}]})  # fmt: skip
    return int(response.topics[0].partitions[0].error_code)


def _describe_topic_partitions(bootstrap: str, n: Names) -> int:
    response = exchange(bootstrap, 75, 0, {"topics": [{"name": n.topic}],
                                           "response_partition_limit": 100})  # fmt: skip
    return int(response.topics[0].error_code)


def _describe_client_quotas(bootstrap: str, n: Names) -> int:
    response = exchange(bootstrap, 48, 1, {"components": [], "strict": False})
    return int(response.error_code)


def _alter_client_quotas(bootstrap: str, n: Names) -> int:
    response = exchange(bootstrap, 49, 1, {"entries": [{
        "entity": [{"entity_type": "user", "entity_name": f"quota-{n.topic}"}],
        "ops": [{"key": "producer_byte_rate", "value": 1000.0, "remove": False}],
    }], "validate_only": True})  # fmt: skip
    return int(response.entries[0].error_code)


def _describe_scram_credentials(bootstrap: str, n: Names) -> int:
    return int(exchange(bootstrap, 50, 0, {"users": None}).error_code)


def _alter_scram_credentials(bootstrap: str, n: Names) -> int:
    response = exchange(bootstrap, 51, 0, {"deletions": [], "upsertions": [{
        "name": "admin", "mechanism": 2, "iterations": 4096, "salt": b"salt",
        "salted_password": b"x" * 64}]})  # fmt: skip
    return int(response.results[0].error_code)


def _describe_log_dirs(bootstrap: str, n: Names) -> int:
    return int(exchange(bootstrap, 35, 4, {"topics": None}).error_code)


def _list_reassignments(bootstrap: str, n: Names) -> int:
    return int(exchange(bootstrap, 46, 0, {"timeout": 5000, "topics": None}).error_code)


def _alter_reassignments(bootstrap: str, n: Names) -> int:
    response = exchange(bootstrap, 45, 0, {"timeout": 5000, "topics": []})
    return int(response.error_code)


def _describe_acls(bootstrap: str, n: Names) -> int:
    return int(describe_acls(bootstrap).error_code)


def _create_acls(bootstrap: str, n: Names) -> int:
    return create_acl(bootstrap, TOPIC, "t", Op.READ)


def _elect_leaders(bootstrap: str, n: Names) -> int:
    response = exchange(bootstrap, 43, 2, {"election_type": 0, "topic_partitions": None,
                                           "timeout": 5000})  # fmt: skip
    return int(response.error_code)


CLUSTER_CASES = [
    Case("describe-client-quotas", CLUSTER, Op.DESCRIBE_CONFIGS, CLUSTER_DENIED,
         _describe_client_quotas),
    Case("alter-client-quotas", CLUSTER, Op.ALTER_CONFIGS, CLUSTER_DENIED, _alter_client_quotas),
    Case("describe-user-scram-credentials", CLUSTER, Op.DESCRIBE, CLUSTER_DENIED,
         _describe_scram_credentials),
    Case("alter-user-scram-credentials", CLUSTER, Op.ALTER, CLUSTER_DENIED,
         _alter_scram_credentials),
    Case("describe-log-dirs", CLUSTER, Op.DESCRIBE, CLUSTER_DENIED, _describe_log_dirs),
    Case("list-partition-reassignments", CLUSTER, Op.DESCRIBE, CLUSTER_DENIED,
         _list_reassignments),
    Case("alter-partition-reassignments", CLUSTER, Op.ALTER, CLUSTER_DENIED,
         _alter_reassignments),
    Case("describe-acls", CLUSTER, Op.DESCRIBE, CLUSTER_DENIED, _describe_acls),
    Case("create-acls", CLUSTER, Op.ALTER, CLUSTER_DENIED, _create_acls),
    Case("elect-leaders", CLUSTER, Op.ALTER, CLUSTER_DENIED, _elect_leaders),
    Case("describe-broker-configs", CLUSTER, Op.DESCRIBE_CONFIGS, CLUSTER_DENIED,
         _describe_configs(4)),
    Case("init-idempotent-producer-id", CLUSTER, Op.IDEMPOTENT_WRITE, CLUSTER_DENIED,
         _init_producer_id(False)),
]  # fmt: skip
"""The APIs that act on the whole cluster: API × principal × code, on a broker where the
caller has no ACL at all (refused) and on one where it is a super user (served)."""

CASES = [
    Case("produce", TOPIC, Op.WRITE, TOPIC_DENIED, _produce(False)),
    Case("transactional-produce", TXN, Op.WRITE, TXN_DENIED, _produce(True), ((TOPIC, Op.WRITE),)),
    Case("fetch", TOPIC, Op.READ, TOPIC_DENIED, _fetch(-1)),
    Case("follower-fetch", CLUSTER, Op.CLUSTER_ACTION, TOPIC_DENIED, _fetch(1)),
    Case("list-offsets", TOPIC, Op.DESCRIBE, TOPIC_DENIED, _list_offsets),
    Case("metadata", TOPIC, Op.DESCRIBE, TOPIC_DENIED, _metadata),
    Case("metadata-auto-create", TOPIC, Op.CREATE, TOPIC_DENIED, _metadata_auto_create,
         ((TOPIC, Op.DESCRIBE),), topic_exists=False),
    Case("offset-for-leader-epoch", TOPIC, Op.DESCRIBE, TOPIC_DENIED, _leader_epoch),
    Case("create-topics", TOPIC, Op.CREATE, TOPIC_DENIED, _create_topic),
    Case("delete-topics", TOPIC, Op.DELETE, TOPIC_DENIED, _delete_topic),
    Case("create-partitions", TOPIC, Op.ALTER, TOPIC_DENIED, _create_partitions),
    Case("delete-records", TOPIC, Op.DELETE, TOPIC_DENIED, _delete_records),
    Case("describe-topic-configs", TOPIC, Op.DESCRIBE_CONFIGS, TOPIC_DENIED, _describe_configs(2)),
    Case("describe-broker-configs", CLUSTER, Op.DESCRIBE_CONFIGS, CLUSTER_DENIED,
         _describe_configs(4)),
    Case("describe-client-quotas", CLUSTER, Op.DESCRIBE_CONFIGS, CLUSTER_DENIED,
         _describe_client_quotas),
    Case("alter-client-quotas", CLUSTER, Op.ALTER_CONFIGS, CLUSTER_DENIED, _alter_client_quotas),
    Case("alter-topic-configs", TOPIC, Op.ALTER_CONFIGS, TOPIC_DENIED, _alter_configs),
    Case("describe-producers", TOPIC, Op.READ, TOPIC_DENIED, _describe_producers),
    Case("find-group-coordinator", GROUP, Op.DESCRIBE, GROUP_DENIED, _find_coordinator(0)),
    Case("join-group", GROUP, Op.READ, GROUP_DENIED, _join_group),
    Case("heartbeat", GROUP, Op.READ, GROUP_DENIED, _heartbeat),
    Case("sync-group", GROUP, Op.READ, GROUP_DENIED, _sync_group),
    Case("leave-group", GROUP, Op.READ, GROUP_DENIED, _leave_group),
    Case("offset-delete", GROUP, Op.DELETE, GROUP_DENIED, _offset_delete),
    Case("describe-topic-partitions", TOPIC, Op.DESCRIBE, TOPIC_DENIED,
         _describe_topic_partitions),
    Case("txn-offset-commit-txn", TXN, Op.WRITE, TXN_DENIED, _txn_offset_commit,
         ((GROUP, Op.READ), (TOPIC, Op.READ))),
    Case("txn-offset-commit-group", GROUP, Op.READ, GROUP_DENIED, _txn_offset_commit,
         ((TXN, Op.WRITE), (TOPIC, Op.READ))),
    Case("txn-offset-commit-topic", TOPIC, Op.READ, TOPIC_DENIED, _txn_offset_commit,
         ((TXN, Op.WRITE), (GROUP, Op.READ))),
    Case("offset-commit-group", GROUP, Op.READ, GROUP_DENIED, _offset_commit, ((TOPIC, Op.READ),)),
    Case("offset-commit-topic", TOPIC, Op.READ, TOPIC_DENIED, _offset_commit, ((GROUP, Op.READ),)),
    Case("offset-fetch", GROUP, Op.DESCRIBE, GROUP_DENIED, _offset_fetch),
    Case("describe-groups", GROUP, Op.DESCRIBE, GROUP_DENIED, _describe_groups),
    Case("delete-groups", GROUP, Op.DELETE, GROUP_DENIED, _delete_groups),
    Case("find-transaction-coordinator", TXN, Op.DESCRIBE, TXN_DENIED, _find_coordinator(1)),
    Case("init-transactional-producer-id", TXN, Op.WRITE, TXN_DENIED, _init_producer_id(True)),
    Case("init-idempotent-producer-id", CLUSTER, Op.IDEMPOTENT_WRITE, CLUSTER_DENIED,
         _init_producer_id(False)),
    Case("add-partitions-to-txn", TXN, Op.WRITE, TXN_DENIED, _add_partitions_to_txn,
         ((TOPIC, Op.WRITE),)),
    Case("add-offsets-to-txn", GROUP, Op.READ, GROUP_DENIED, _add_offsets_to_txn,
         ((TXN, Op.WRITE),)),
    Case("end-txn", TXN, Op.WRITE, TXN_DENIED, _end_txn),
    Case("describe-transactions", TXN, Op.DESCRIBE, TXN_DENIED, _describe_transactions),
]  # fmt: skip


CLIENT_TOPICS = ["acl-confluent", "acl-samsa-admin", "acl-cli-orders"]
"""Topics of the client tests (created with the table's)."""


def _names(case: Case) -> Names:
    return Names(f"acl-{case.id}", f"acl-group-{case.id}", f"acl-txn-{case.id}")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """The authorizer on; User:ANONYMOUS may ALTER the cluster, nothing else has an ACL."""
    data = tmp_path_factory.mktemp("acls") / "data"
    broker = start_broker(data, [AUTHORIZER, "allow.everyone.if.no.acl.found=true",
                                 "group.initial.rebalance.delay.ms=0"])  # fmt: skip
    try:
        assert create_acl(broker.bootstrap, CLUSTER, "", Op.ALTER) == ErrorCode.NONE
        for topic in [_names(c).topic for c in CASES if c.topic_exists] + CLIENT_TOPICS:
            response = exchange(broker.bootstrap, 19, 7, {"topics": [{
                "name": topic, "num_partitions": 1, "replication_factor": 1,
                "assignments": [], "configs": []}], "timeout": 5000})  # fmt: skip
            assert response.topics[0].error_code == ErrorCode.NONE
        broker.stop()
        broker.overrides[1] = "allow.everyone.if.no.acl.found=false"
        broker.start()
        yield broker
    finally:
        broker.stop()


def _grant(bootstrap: str, names: Names, acls: Any, principal: str) -> None:
    for resource_type, operation in acls:
        code = create_acl(bootstrap, resource_type, names.of(resource_type), operation,
                          principal=principal)  # fmt: skip
        assert code == ErrorCode.NONE


def _revoke(bootstrap: str, names: Names, acls: Any, principal: str) -> None:
    for resource_type, operation in acls:
        delete_acl(bootstrap, resource_type, names.of(resource_type), operation,
                   principal=principal)  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_a_protected_api_is_refused_without_its_acl(broker: BrokerProcess, case: Case) -> None:
    names = _names(case)
    _grant(broker.bootstrap, names, case.given, ANONYMOUS)
    try:
        assert case.call(broker.bootstrap, names) == case.refused
    finally:
        _revoke(broker.bootstrap, names, case.given, ANONYMOUS)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_a_protected_api_is_served_once_an_acl_allows_it(broker: BrokerProcess, case: Case) -> None:
    names = _names(case)
    acls = (*case.given, (case.resource_type, case.operation))
    _grant(broker.bootstrap, names, acls, ANONYMOUS)
    try:
        assert case.call(broker.bootstrap, names) not in (
            TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED,
        )  # fmt: skip
    finally:
        _revoke(broker.bootstrap, names, acls, ANONYMOUS)


def test_an_acl_for_every_user_allows_anonymous(broker: BrokerProcess) -> None:
    names = Names("acl-list-offsets", "", "")
    _grant(broker.bootstrap, names, [(TOPIC, Op.DESCRIBE)], "User:*")
    try:
        assert _list_offsets(broker.bootstrap, names) == ErrorCode.NONE
    finally:
        _revoke(broker.bootstrap, names, [(TOPIC, Op.DESCRIBE)], "User:*")


def test_an_acl_for_another_user_does_not_allow_anonymous(broker: BrokerProcess) -> None:
    names = Names("acl-list-offsets", "", "")
    _grant(broker.bootstrap, names, [(TOPIC, Op.DESCRIBE)], "User:alice")
    try:
        assert _list_offsets(broker.bootstrap, names) == TOPIC_DENIED
    finally:
        _revoke(broker.bootstrap, names, [(TOPIC, Op.DESCRIBE)], "User:alice")


def test_a_prefixed_deny_beats_a_literal_allow(broker: BrokerProcess) -> None:
    bootstrap, topic = broker.bootstrap, "acl-fetch"
    deny = (TOPIC, "acl-", Op.READ)
    assert create_acl(bootstrap, TOPIC, topic, Op.READ) == ErrorCode.NONE
    assert create_acl(bootstrap, *deny, permission=AclPermissionType.DENY,
                      pattern_type=PatternType.PREFIXED) == ErrorCode.NONE  # fmt: skip
    try:
        assert _fetch(-1)(bootstrap, Names(topic, "", "")) == TOPIC_DENIED
    finally:
        delete_acl(bootstrap, TOPIC, topic, Op.READ)
        delete_acl(bootstrap, *deny, permission=AclPermissionType.DENY,
                   pattern_type=PatternType.PREFIXED)  # fmt: skip


def test_a_deny_for_the_clients_host_beats_an_allow_for_every_host(broker: BrokerProcess) -> None:
    bootstrap, topic = broker.bootstrap, "acl-fetch"
    assert create_acl(bootstrap, TOPIC, topic, Op.READ) == ErrorCode.NONE
    assert create_acl(bootstrap, TOPIC, topic, Op.READ, permission=AclPermissionType.DENY,
                      host="127.0.0.1") == ErrorCode.NONE  # fmt: skip
    try:
        assert _fetch(-1)(bootstrap, Names(topic, "", "")) == TOPIC_DENIED
    finally:
        delete_acl(bootstrap, TOPIC, topic, Op.READ)
        delete_acl(bootstrap, TOPIC, topic, Op.READ, permission=AclPermissionType.DENY,
                   host="127.0.0.1")  # fmt: skip


def test_a_deny_of_describe_on_the_cluster_refuses_describe_log_dirs(
    broker: BrokerProcess,
) -> None:
    deny = {"permission": AclPermissionType.DENY, "host": "127.0.0.1"}
    assert create_acl(broker.bootstrap, CLUSTER, "", Op.DESCRIBE, **deny) == ErrorCode.NONE
    try:
        response = exchange(broker.bootstrap, 35, 4, {"topics": None})
        assert (response.error_code, response.results) == (CLUSTER_DENIED, ())
    finally:
        delete_acl(broker.bootstrap, CLUSTER, "", Op.DESCRIBE, **deny)


def test_metadata_for_every_topic_lists_only_the_topics_the_caller_may_describe(
    broker: BrokerProcess,
) -> None:
    names = Names("acl-metadata", "", "")
    _grant(broker.bootstrap, names, [(TOPIC, Op.DESCRIBE)], ANONYMOUS)
    try:
        response = exchange(
            broker.bootstrap, 3, 12, {"topics": None, "allow_auto_topic_creation": False}
        )
        assert [t.name for t in response.topics] == ["acl-metadata"]
    finally:
        _revoke(broker.bootstrap, names, [(TOPIC, Op.DESCRIBE)], ANONYMOUS)


def test_list_groups_lists_only_the_groups_the_caller_may_describe(broker: BrokerProcess) -> None:
    names = Names("acl-join-group", "acl-group-join-group", "")
    _grant(broker.bootstrap, names, [(GROUP, Op.READ)], ANONYMOUS)
    # ALTER on the cluster implies DESCRIBE, which would list every group.
    deny = {"permission": AclPermissionType.DENY, "host": "127.0.0.1"}
    assert create_acl(broker.bootstrap, CLUSTER, "", Op.DESCRIBE, **deny) == ErrorCode.NONE
    try:
        _join_group(broker.bootstrap, names)  # the group exists now
        _join_group(broker.bootstrap, Names("", "acl-group-hidden", ""))
        response = exchange(broker.bootstrap, 16, 4, {"states_filter": []})
        assert [g.group_id for g in response.groups] == ["acl-group-join-group"]
    finally:
        _revoke(broker.bootstrap, names, [(GROUP, Op.READ)], ANONYMOUS)
        delete_acl(broker.bootstrap, CLUSTER, "", Op.DESCRIBE, **deny)


def test_the_acl_given_before_the_restart_is_still_there(broker: BrokerProcess) -> None:
    response = describe_acls(broker.bootstrap)
    assert [
        (r.resource_type, r.resource_name, [(a.principal, a.operation) for a in r.acls])
        for r in response.resources
    ] == [(CLUSTER, "kafka-cluster", [(ANONYMOUS, Op.ALTER)])]


def test_describe_acls_is_refused_with_security_disabled_without_an_authorizer(
    samsa_broker: BrokerProcess,
) -> None:
    assert describe_acls(samsa_broker.bootstrap).error_code == ErrorCode.SECURITY_DISABLED


def test_a_delegation_token_acl_is_refused_with_invalid_request(broker: BrokerProcess) -> None:
    code = create_acl(broker.bootstrap, ResourceType.DELEGATION_TOKEN, "token", Op.DESCRIBE)
    assert code == ErrorCode.INVALID_REQUEST


@pytest.fixture(scope="module")
def locked_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """The authorizer on and no ACL at all: everything is refused."""
    broker = start_broker(tmp_path_factory.mktemp("locked") / "data", [AUTHORIZER])
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def super_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """The authorizer on, no ACL at all, and the caller a super user."""
    overrides = [AUTHORIZER, f"super.users=User:alice;{ANONYMOUS}"]
    broker = start_broker(tmp_path_factory.mktemp("super") / "data", overrides)
    try:
        yield broker
    finally:
        broker.stop()


@pytest.mark.parametrize("case", CLUSTER_CASES, ids=lambda c: c.id)
def test_a_cluster_api_is_refused_to_a_principal_without_an_acl(
    locked_broker: BrokerProcess, case: Case
) -> None:
    assert case.call(locked_broker.bootstrap, _names(case)) == case.refused


@pytest.mark.parametrize("case", CLUSTER_CASES, ids=lambda c: c.id)
def test_a_cluster_api_is_served_to_a_super_user(super_broker: BrokerProcess, case: Case) -> None:
    assert case.call(super_broker.bootstrap, _names(case)) not in (
        CLUSTER_DENIED, TOPIC_DENIED, GROUP_DENIED, TXN_DENIED
    )  # fmt: skip


def test_creating_an_acl_without_alter_on_the_cluster_is_refused(
    locked_broker: BrokerProcess,
) -> None:
    assert create_acl(locked_broker.bootstrap, TOPIC, "t", Op.READ) == CLUSTER_DENIED


def test_electing_leaders_without_alter_on_the_cluster_is_refused(
    locked_broker: BrokerProcess,
) -> None:
    response = exchange(locked_broker.bootstrap, 43, 2, {"election_type": 0,
                                                         "topic_partitions": None,
                                                         "timeout": 5000})  # fmt: skip
    assert response.error_code == CLUSTER_DENIED


def test_writing_transaction_markers_without_cluster_action_is_refused(
    locked_broker: BrokerProcess,
) -> None:
    # (ALTER on the cluster would do too, as in Kafka: the other broker's ACL gives it.)
    assert _write_txn_markers(locked_broker.bootstrap, Names("t", "", "")) == CLUSTER_DENIED


def test_a_super_user_is_allowed_everything(tmp_path: Path) -> None:
    overrides = [AUTHORIZER, f"super.users=User:alice;{ANONYMOUS}"]
    with start_broker(tmp_path / "data", overrides) as broker:
        names = Names("super", "super-group", "super-txn")
        assert _create_topic(broker.bootstrap, names) == ErrorCode.NONE
        assert _find_coordinator(0)(broker.bootstrap, names) == ErrorCode.NONE
        assert create_acl(broker.bootstrap, TOPIC, "t", Op.READ) == ErrorCode.NONE


def test_an_unknown_authorizer_class_stops_start_up(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", ["authorizer.class.name=com.example.MyAuthorizer"])
    broker.launch()
    assert broker.process is not None
    assert broker.process.wait(timeout=30) != 0
    assert "is not an authorizer samsa provides" in broker.log_path.read_text()


def _confluent_admin(broker: BrokerProcess) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})


def test_confluent_kafka_creates_an_acl_the_broker_enforces(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AclBinding as Binding
    from confluent_kafka.admin import AclOperation as Operation
    from confluent_kafka.admin import AclPermissionType as Permission
    from confluent_kafka.admin import ResourcePatternType
    from confluent_kafka.admin import ResourceType as Kind

    admin = _confluent_admin(broker)
    binding = Binding(Kind.TOPIC, "acl-confluent", ResourcePatternType.LITERAL, ANONYMOUS, "*",
                      Operation.DESCRIBE, Permission.ALLOW)  # fmt: skip
    admin.create_acls([binding])[binding].result(10)
    try:
        assert _list_offsets(broker.bootstrap, Names("acl-confluent", "", "")) == ErrorCode.NONE
    finally:
        delete_acl(broker.bootstrap, TOPIC, "acl-confluent", Op.DESCRIBE)


def test_confluent_kafka_describes_the_acls_a_filter_selects(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AclBindingFilter as Filter
    from confluent_kafka.admin import AclOperation as Operation
    from confluent_kafka.admin import AclPermissionType as Permission
    from confluent_kafka.admin import ResourcePatternType
    from confluent_kafka.admin import ResourceType as Kind

    create_acl(broker.bootstrap, TOPIC, "acl-confluent-", Op.WRITE, principal="User:alice",
               pattern_type=PatternType.PREFIXED)  # fmt: skip
    try:
        admin = _confluent_admin(broker)  # alive until the result is in
        selected = admin.describe_acls(Filter(
            Kind.TOPIC, "acl-confluent-eu", ResourcePatternType.MATCH, None, None,
            Operation.ANY, Permission.ANY)).result(10)  # fmt: skip
        assert [(b.name, b.resource_pattern_type, b.principal, b.operation) for b in selected] == [
            ("acl-confluent-", ResourcePatternType.PREFIXED, "User:alice", Operation.WRITE)
        ]
    finally:
        delete_acl(broker.bootstrap, TOPIC, "acl-confluent-", Op.WRITE, principal="User:alice",
                   pattern_type=PatternType.PREFIXED)  # fmt: skip


def test_confluent_kafka_deletes_the_acls_a_filter_selects(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AclBindingFilter as Filter
    from confluent_kafka.admin import AclOperation as Operation
    from confluent_kafka.admin import AclPermissionType as Permission
    from confluent_kafka.admin import ResourcePatternType
    from confluent_kafka.admin import ResourceType as Kind

    for op in (Op.READ, Op.WRITE):
        create_acl(broker.bootstrap, GROUP, "acl-confluent-group", op, principal="User:alice")
    acl_filter = Filter(Kind.GROUP, "acl-confluent-group", ResourcePatternType.LITERAL,
                        "User:alice", None, Operation.ANY, Permission.ANY)  # fmt: skip
    admin = _confluent_admin(broker)  # alive until the result is in
    (future,) = admin.delete_acls([acl_filter]).values()
    assert sorted(b.operation.name for b in future.result(10)) == ["READ", "WRITE"]
    assert describe_acls(broker.bootstrap, "User:alice").resources == ()


def test_samsa_admin_lists_the_acls_it_created(broker: BrokerProcess) -> None:
    from samsa.acl import AccessControlEntry, AclBinding, AclBindingFilter, ResourcePattern
    from samsa.client.admin import Admin

    binding = AclBinding(
        ResourcePattern(TOPIC, "acl-samsa-admin"),
        AccessControlEntry("User:alice", "*", Op.READ, AclPermissionType.DENY),
    )
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_acls([binding])
        try:
            assert admin.describe_acls(AclBindingFilter(principal="User:alice")) == [binding]
        finally:
            admin.delete_acls([AclBindingFilter(principal="User:alice")])


def _samsa_acls(broker: BrokerProcess, *args: str) -> int:
    from samsa.cli.main import main

    return main(["acls", "--bootstrap-server", broker.bootstrap, *args])


def test_samsa_acls_add_grants_what_it_names(broker: BrokerProcess) -> None:
    added = _samsa_acls(broker, "--add", "--allow-principal", ANONYMOUS, "--operation", "Read",
                        "--topic", "acl-cli-", "--resource-pattern-type", "prefixed")  # fmt: skip
    assert added == 0
    try:
        assert _fetch(-1)(broker.bootstrap, Names("acl-cli-orders", "", "")) == ErrorCode.NONE
    finally:
        delete_acl(broker.bootstrap, TOPIC, "acl-cli-", Op.READ, pattern_type=PatternType.PREFIXED)


def test_samsa_acls_list_prints_each_resources_acls(
    broker: BrokerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    create_acl(broker.bootstrap, TOPIC, "acl-cli-orders", Op.WRITE, principal="User:alice")
    try:
        assert _samsa_acls(broker, "--list", "--topic", "acl-cli-orders") == 0
    finally:
        delete_acl(broker.bootstrap, TOPIC, "acl-cli-orders", Op.WRITE, principal="User:alice")
    assert capsys.readouterr().out.splitlines()[:2] == [
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=acl-cli-orders, "
        "patternType=LITERAL)`: ",
        "\t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)",
    ]


def test_samsa_acls_remove_with_force_deletes_the_principals_acls(broker: BrokerProcess) -> None:
    assert _samsa_acls(broker, "--add", "--allow-principal", "User:carol", "--consumer",
                       "--topic", "acl-cli-orders", "--group", "acl-cli-group") == 0  # fmt: skip
    assert _samsa_acls(broker, "--remove", "--force", "--allow-principal", "User:carol",
                       "--topic", "acl-cli-orders", "--group", "acl-cli-group") == 0  # fmt: skip
    assert describe_acls(broker.bootstrap, "User:carol").resources == ()


def test_the_producer_and_consumer_acls_are_all_that_clients_need(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, Producer

    topic, group = "acl-clients-e2e", "acl-clients-e2e-group"
    assert _samsa_acls(broker, "--add", "--allow-principal", ANONYMOUS, "--producer",
                       "--topic", topic) == 0  # fmt: skip
    assert _samsa_acls(broker, "--add", "--allow-principal", ANONYMOUS, "--consumer",
                       "--topic", topic, "--group", group) == 0  # fmt: skip
    try:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                             "allow.auto.create.topics": True, **QUIET})  # fmt: skip
        producer.produce(topic, b"granted")
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                             "auto.offset.reset": "earliest", **QUIET})  # fmt: skip
        consumer.subscribe([topic])
        try:
            message = None
            deadline = time.monotonic() + 30
            while message is None and time.monotonic() < deadline:
                message = consumer.poll(0.5)
            assert message is not None and message.error() is None
            assert message.value() == b"granted"
        finally:
            consumer.close()
    finally:
        _samsa_acls(broker, "--remove", "--force", "--allow-principal", ANONYMOUS,
                    "--topic", topic, "--group", group)  # fmt: skip


def test_metadata_answers_the_operations_the_acls_allow_on_a_topic(broker: BrokerProcess) -> None:
    names = Names("acl-metadata", "", "")
    _grant(broker.bootstrap, names, [(TOPIC, Op.READ)], ANONYMOUS)
    try:
        response = exchange(broker.bootstrap, 3, 10, {
            "topics": [{"name": names.topic, "topic_id": None}],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": True,
            "include_cluster_authorized_operations": False,
        })  # fmt: skip
        assert response.topics[0].topic_authorized_operations == (1 << Op.READ) | (1 << Op.DESCRIBE)
    finally:
        _revoke(broker.bootstrap, names, [(TOPIC, Op.READ)], ANONYMOUS)


def test_samsa_acls_add_without_a_principal_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from samsa.cli.main import main

    assert main(["acls", "--bootstrap-server", "127.0.0.1:1", "--add", "--topic", "t"]) == 2
    assert "--add needs --allow-principal or --deny-principal" in capsys.readouterr().err
