"""Transaction APIs: AddPartitionsToTxn 0–5 (24) and TxnOffsetCommit 0–5 (28). The
others are typed handlers of their own modules: AddOffsetsToTxn 0–4 (25) and EndTxn 0–5
(26) in :mod:`~samsa.broker.handlers.end_txn`, DescribeTransactions 0 (65) and
ListTransactions 0–1 (66) in :mod:`~samsa.broker.handlers.describe_transactions`.
AddPartitionsToTxn keeps versions 0–3, whose fields version 5 lacks (one transaction).

A transactional id's coordinator is the leader of its ``__transaction_state``
partition (on a single node, this broker for every id); ``__transaction_state`` is
created on the first FindCoordinator for one (or the first transactional
InitProducerId), as Kafka creates it. The decisions live in
:class:`~samsa.coordinator.transaction.coordinator.TransactionCoordinator`; this
module translates requests and responses of every served version.

Versions and deviations:

* PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH to the versions that
  predate it (below 2 for AddPartitionsToTxn, AddOffsetsToTxn and EndTxn), and
  TRANSACTION_ABORTABLE as INVALID_TXN_STATE below the versions that added it
  (AddPartitionsToTxn 5, TxnOffsetCommit 4), as Kafka does.
* AddPartitionsToTxn 4+ (Kafka's broker-to-coordinator form) is served with any
  number of transactions: ``verify_only`` answers per partition whether it is in
  the ongoing transaction and changes nothing; without it the partitions are
  added as by versions 0–3.
* Transaction version 1 semantics only (this broker advertises no
  ``transaction.version`` feature): EndTxn 5 answers producer id and epoch -1, as
  Kafka does for transaction version 1 clients, and TxnOffsetCommit 5 still
  needs AddOffsetsToTxn first.
* TxnOffsetCommit checks the producer against the transaction coordinator's state
  (its epoch, and an ongoing transaction holding the group's offsets partition)
  rather than against the offsets partition's producer state and verification;
  the error codes are the ones Kafka answers for each case. The group
  coordinator checks the member and each partition and answers each partition's
  code, that of a failed append too (Kafka 4's mapping,
  :mod:`samsa.coordinator.errors`).

With the authorizer on, each API checks what Kafka checks: AddPartitionsToTxn
(versions 0–3), AddOffsetsToTxn, EndTxn and TxnOffsetCommit need WRITE on the
transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); AddPartitionsToTxn
also WRITE on each topic (TOPIC_AUTHORIZATION_FAILED, the other partitions
OPERATION_NOT_ATTEMPTED) and, from version 4 (broker to coordinator),
CLUSTER_ACTION on the cluster; AddOffsetsToTxn and TxnOffsetCommit need READ on
the group (GROUP_AUTHORIZATION_FAILED), TxnOffsetCommit READ on each topic;
DescribeTransactions needs DESCRIBE on each id and shows only the topics the
caller may DESCRIBE; ListTransactions lists the ids the caller may DESCRIBE.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from samsa.acl import AclOperation, ResourceType
from samsa.broker.api import respond
from samsa.broker.config import BrokerConfig
from samsa.broker.metadata.metadata_cache import MetadataCache
from samsa.broker.metadata.topic_manager import TopicManager
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.security.authorizer import authorize, authorize_cluster
from samsa.coordinator.group.coordinator import (
    GroupCoordinator,
    OffsetCommitMember,
    PartitionOffset,
)
from samsa.coordinator.transaction.coordinator import (
    TransactionCoordinator,
)
from samsa.errors import ErrorCode
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import RequestHeader
from samsa.types import TopicPartition

CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
READ, WRITE, DESCRIBE = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE
TOPIC, GROUP, TRANSACTIONAL_ID = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.TRANSACTIONAL_ID,
)


def for_version(
    error: ErrorCode, version: int, *, fenced_since: int, abortable_since: int | None = None
) -> ErrorCode:
    """The error code a request version understands (Kafka's older equivalents)."""
    if error == ErrorCode.PRODUCER_FENCED and version < fenced_since:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if (
        error == ErrorCode.TRANSACTION_ABORTABLE
        and abortable_since is not None
        and version < abortable_since
    ):
        return ErrorCode.INVALID_TXN_STATE
    return error


def _by_topic(codes: dict[TopicPartition, ErrorCode]) -> list[dict[str, Any]]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp, code in codes.items():
        topics.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "partition_error_code": code}
        )
    return [{"name": name, "results_by_partition": parts} for name, parts in topics.items()]


def register(
    registry: ApiRegistry,
    *,
    config: Callable[[], BrokerConfig],
    metadata: MetadataCache,
    topic_manager: TopicManager,
    group_coordinator: GroupCoordinator,
    txn_coordinator: TransactionCoordinator,
) -> None:
    coordinator = txn_coordinator
    groups = group_coordinator
    metadata_max_bytes = config()["offset.metadata.max.bytes"]

    # -- AddPartitionsToTxn ----------------------------------------------------------
    async def add_one(
        version: int, ids: tuple[str, int, int], topics: Any, verify_only: bool
    ) -> dict[str, Any]:
        transactional_id, producer_id, epoch = ids
        wanted = list(
            dict.fromkeys(TopicPartition(t.name, p) for t in topics for p in t.partitions)
        )
        refused = {tp for tp in wanted if version < 4 and not authorize(WRITE, TOPIC, tp.topic)}
        if version < 4 and not authorize(WRITE, TRANSACTIONAL_ID, transactional_id):
            codes = dict.fromkeys(wanted, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        elif refused:
            codes = {
                tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED
                if tp in refused
                else ErrorCode.OPERATION_NOT_ATTEMPTED
                for tp in wanted
            }
        elif verify_only:
            codes = coordinator.verify_partitions(transactional_id, producer_id, epoch, wanted)
        elif any(metadata.leadership(tp) is None for tp in wanted):
            codes = {
                tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if metadata.leadership(tp) is None
                else ErrorCode.OPERATION_NOT_ATTEMPTED
                for tp in wanted
            }
        else:
            error = await coordinator.add_partitions(transactional_id, producer_id, epoch, wanted)
            codes = dict.fromkeys(wanted, error)
        return {
            "transactional_id": transactional_id,
            "topic_results": _by_topic(
                {
                    tp: for_version(c, version, fenced_since=2, abortable_since=5)
                    for tp, c in codes.items()
                }
            ),
        }

    async def add_partitions_to_txn(header: RequestHeader, body: Any) -> Any:
        version = header.api_version
        if version >= 4 and not authorize_cluster(AclOperation.CLUSTER_ACTION):
            return respond(header, {"throttle_time": 0, "results_by_transaction": [],
                                    "error_code": CLUSTER_DENIED})  # fmt: skip
        if version >= 4:
            results = []
            for t in body.transactions:
                ids = (t.transactional_id, t.producer_id, t.producer_epoch)
                results.append(await add_one(version, ids, t.topics, t.verify_only))
            return respond(header, {"throttle_time": 0, "error_code": ErrorCode.NONE,
                                    "results_by_transaction": results})  # fmt: skip
        ids = (
            body.v3_and_below_transactional_id,
            body.v3_and_below_producer_id,
            body.v3_and_below_producer_epoch,
        )
        result = await add_one(version, ids, body.v3_and_below_topics, verify_only=False)
        return respond(
            header, {"throttle_time": 0, "results_by_topic_v3_and_below": result["topic_results"]}
        )

    # -- TxnOffsetCommit ---------------------------------------------------------------
    def producer_error(header: RequestHeader, body: Any) -> ErrorCode:
        """The transaction coordinator's verdict on the committing producer."""
        error = coordinator.check_offset_commit(
            body.transactional_id, body.producer_id, body.producer_epoch, body.group_id
        )
        if error == ErrorCode.INVALID_TXN_STATE:
            # What verification answers; older versions map back.
            error = ErrorCode.TRANSACTION_ABORTABLE
        return for_version(error, header.api_version, fenced_since=0, abortable_since=4)

    async def txn_offset_commit(header: RequestHeader, body: Any) -> Any:
        if refusal := _offset_commit_refusal(body):
            return respond(header, {"throttle_time": 0, "topics": [
                {"name": t.name, "partitions": [
                    {"partition_index": p.partition_index, "error_code": refusal}
                    for p in t.partitions
                ]} for t in body.topics
            ]})  # fmt: skip
        member = OffsetCommitMember(
            body.group_id,
            getattr(body, "generation_id", -1),
            getattr(body, "member_id", ""),
            getattr(body, "group_instance_id", None),
        )
        requested = [
            PartitionOffset(
                TopicPartition(topic.name, p.partition_index),
                p.committed_offset,
                getattr(p, "committed_leader_epoch", -1),
                p.committed_metadata or "",
                topic_exists=metadata.leadership(TopicPartition(topic.name, p.partition_index))
                is not None,
            )
            for topic in body.topics
            for p in topic.partitions
            if authorize(READ, TOPIC, topic.name)
        ]
        codes = []
        if requested:  # not when every topic was refused
            codes = await groups.commit_transactional_offsets(
                member,
                body.producer_id,
                body.producer_epoch,
                requested,
                producer_error=producer_error(header, body),
                metadata_max_bytes=metadata_max_bytes,
                before_write=topic_manager.ensure_offsets_topic,
            )
        by_partition = {
            TopicPartition(t.name, p.partition_index): ErrorCode.TOPIC_AUTHORIZATION_FAILED
            for t in body.topics
            for p in t.partitions
        }
        by_partition.update({p.tp: code for p, code in zip(requested, codes, strict=True)})
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, code in by_partition.items():
            topics.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "error_code": code}
            )
        return respond(header, {
            "throttle_time": 0,
            "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
        })  # fmt: skip

    def _offset_commit_refusal(body: Any) -> ErrorCode:
        if not authorize(WRITE, TRANSACTIONAL_ID, body.transactional_id):
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        if not authorize(READ, GROUP, body.group_id):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED
        return ErrorCode.NONE

    registry.add(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 5, add_partitions_to_txn)
    registry.add(ApiKey.TXN_OFFSET_COMMIT, 0, 5, txn_offset_commit)
