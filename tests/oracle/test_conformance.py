"""samsa answers as Apache Kafka answers: each scenario is played on both, and every
difference in the answers (after :mod:`tests.oracle.differential` sets aside what depends
on the broker) fails the test, unless ``compat/FINDINGS.md`` explains it — such
a scenario is marked ``xfail(strict=True)``, so it fails again once samsa agrees."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from tests.oracle.differential import Names, Scenario, Step, compare

from samsa.records import CompressionType, RecordBatchBuilder
from samsa.testing import BrokerProcess
from samsa.testing.kafka import KafkaCluster

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT = 8, 9, 10, 11, 12
SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS = 14, 15, 16
CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS, INIT_PRODUCER_ID = 19, 20, 21, 22
OFFSET_FOR_LEADER_EPOCH, END_TXN = 23, 26
DESCRIBE_CONFIGS, ALTER_CONFIGS = 32, 33
CREATE_PARTITIONS, DELETE_GROUPS, INCREMENTAL_ALTER_CONFIGS = 37, 42, 44
OFFSET_DELETE, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS = 47, 61, 65
TOPIC_RESOURCE = 2


def _batch(
    count: int = 1,
    *,
    key: bytes | None = b"k",
    producer_id: int = -1,
    epoch: int = -1,
    sequence: int = -1,
    compression: CompressionType = CompressionType.NONE,
) -> bytes:
    builder = RecordBatchBuilder(
        producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
        compression=compression,
    )  # fmt: skip
    for index in range(count):
        builder.append(b"value-%d" % index, key=key, timestamp=1_700_000_000_000 + index)
    return bytes(builder.build())


def _corrupt_crc(batch: bytes) -> bytes:
    return batch[:-1] + bytes([batch[-1] ^ 0xFF])


def _with_magic(batch: bytes, magic: int) -> bytes:
    return batch[:16] + bytes([magic]) + batch[17:]


def _create(
    partitions: int = 1,
    replication: int = 1,
    configs: dict[str, str] | None = None,
    *,
    name: str | None = None,
    validate_only: bool = False,
) -> Step:
    def values(n: Names, _answers: list[Any]) -> dict[str, Any]:
        return {"topics": [{
            "name": n.topic if name is None else name, "num_partitions": partitions,
            "replication_factor": replication, "assignments": [],
            "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
        }], "timeout": 10_000, "validate_only": validate_only}  # fmt: skip

    return Step(CREATE_TOPICS, 7, values, "create topic")


def _produce(records: bytes | None = None, *, partition: int = 0, acks: int = -1) -> Step:
    def values(n: Names, _answers: list[Any]) -> dict[str, Any]:
        return {
            "transactional_id": None,
            "acks": acks,
            "timeout": 10_000,
            "topic_data": [
                {
                    "name": n.topic,
                    "partition_data": [
                        {"index": partition, "records": _batch() if records is None else records}
                    ],
                }
            ],
        }

    return Step(PRODUCE, 9, values, "produce")


def _idempotent_produce(sequence: int, count: int = 1, epoch_shift: int = 0) -> Step:
    """A Produce of the producer id the scenario's first step (InitProducerId) was given."""

    def values(n: Names, answers: list[Any]) -> dict[str, Any]:
        first = answers[1]
        epoch = int(first.producer_epoch) + epoch_shift
        batch = _batch(count, producer_id=int(first.producer_id), epoch=epoch, sequence=sequence)
        return {"transactional_id": None, "acks": -1, "timeout": 10_000, "topic_data": [{
            "name": n.topic, "partition_data": [{"index": 0, "records": batch}]}]}  # fmt: skip

    return Step(PRODUCE, 9, values, f"idempotent produce seq {sequence}")


def _fetch(offset: int, *, partition: int = 0, version: int = 12) -> Step:
    def values(n: Names, _answers: list[Any]) -> dict[str, Any]:
        return {
            "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": n.topic, "partitions": [{
                "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": "",
        }  # fmt: skip

    return Step(FETCH, version, values, f"fetch from {offset}")


def _list_offsets(timestamp: int, *, partition: int = 0) -> Step:
    def values(n: Names, _answers: list[Any]) -> dict[str, Any]:
        return {"replica_id": -1, "isolation_level": 0, "topics": [{"name": n.topic,
                "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                "timestamp": timestamp}]}]}  # fmt: skip

    return Step(LIST_OFFSETS, 7, values, f"list offsets {timestamp}")


def _metadata_by_id(name: str | None, *, unknown: bool = False) -> Step:
    """Metadata v12 for the topic the scenario's first step created, by its id."""

    def values(n: Names, answers: list[Any]) -> dict[str, Any]:
        topic_id = uuid.UUID(int=1) if unknown else answers[0].topics[0].topic_id
        return {"topics": [{"name": name, "topic_id": topic_id}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False}  # fmt: skip

    return Step(METADATA, 12, values, f"metadata by id, name {name!r}")


def _metadata(auto_create: bool = False) -> Step:
    def values(n: Names, _answers: list[Any]) -> dict[str, Any]:
        return {"topics": [{"name": n.topic, "topic_id": None}],
                "allow_auto_topic_creation": auto_create,
                "include_topic_authorized_operations": False}  # fmt: skip

    return Step(METADATA, 12, values, "metadata")


def _topic_configs(
    operation: int, name: str, value: str | None, *, validate_only: bool = False
) -> Step:
    def values(n: Names, _answers: list[Any]) -> dict[str, Any]:
        return {"resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": n.topic,
                "configs": [{"name": name, "config_operation": operation, "value": value}]}],
                "validate_only": validate_only}  # fmt: skip

    return Step(INCREMENTAL_ALTER_CONFIGS, 1, values, f"alter config {name}")


def _describe_configs(names: list[str] | None) -> Step:
    def values(n: Names, _answers: list[Any]) -> dict[str, Any]:
        return {"resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": n.topic,
                               "configuration_keys": names}],
                "include_synonyms": False, "include_documentation": False}  # fmt: skip

    return Step(DESCRIBE_CONFIGS, 4, values, "describe configs")


def _group(api_key: int, version: int, extra: dict[str, Any], note: str) -> Step:
    def values(n: Names, _answers: list[Any]) -> dict[str, Any]:
        return {"group_id": n.group, **extra}

    return Step(api_key, version, values, note)


def _init_producer_id() -> Step:
    values = {"transactional_id": None, "transaction_timeout": 60_000, "producer_id": -1,
              "producer_epoch": -1}  # fmt: skip
    return Step(INIT_PRODUCER_ID, 5, values, "init producer id")


def _create_partitions(count: int) -> Step:
    def values(n: Names, _answers: list[Any]) -> dict[str, Any]:
        return {"topics": [{"name": n.topic, "count": count, "assignments": None}],
                "timeout": 10_000, "validate_only": False}  # fmt: skip

    return Step(CREATE_PARTITIONS, 3, values, f"create partitions {count}")


def _delete_records(offset: int) -> Step:
    def values(n: Names, _answers: list[Any]) -> dict[str, Any]:
        return {"topics": [{"name": n.topic, "partitions": [
            {"partition_index": 0, "offset": offset}]}], "timeout": 10_000}  # fmt: skip

    return Step(DELETE_RECORDS, 2, values, f"delete records to {offset}")


def _delete_topic() -> Step:
    def values(n: Names, _answers: list[Any]) -> dict[str, Any]:
        return {"topics": [{"name": n.topic, "topic_id": None}], "timeout": 10_000}

    return Step(DELETE_TOPICS, 6, values, "delete topic")


def _join(session_timeout_ms: int) -> Step:
    """A JoinGroup v9 of a new member (no member id) with ``session_timeout_ms``."""
    return _group(JOIN_GROUP, 9, {
        "session_timeout": session_timeout_ms, "rebalance_timeout": 1000, "member_id": "",
        "group_instance_id": None, "protocol_type": "consumer", "protocols": _PROTOCOLS,
        "reason": None,
    }, "join")  # fmt: skip


_PROTOCOLS = [{"name": "range", "metadata": b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00"}]

# fmt: off
SCENARIOS = [
    Scenario("metadata-of-an-unknown-topic", [_metadata()]),
    Scenario("metadata-by-topic-id", [_create(2), _metadata_by_id(None)]),
    Scenario("metadata-by-topic-id-named-empty", [_create(2), _metadata_by_id("")]),
    Scenario("metadata-by-an-unknown-topic-id", [_create(), _metadata_by_id(None, unknown=True)]),
    Scenario("metadata-of-an-invalid-name",
             [Step(METADATA, 12, {"topics": [{"name": "bad/name", "topic_id": None}],
                                  "allow_auto_topic_creation": False,
                                  "include_topic_authorized_operations": False})]),
    Scenario("metadata-of-a-name-too-long",
             [Step(METADATA, 12, {"topics": [{"name": "x" * 250, "topic_id": None}],
                                  "allow_auto_topic_creation": False,
                                  "include_topic_authorized_operations": False})]),
    Scenario("metadata-of-an-empty-name",
             [Step(METADATA, 12, {"topics": [{"name": "", "topic_id": None}],
                                  "allow_auto_topic_creation": False,
                                  "include_topic_authorized_operations": False})]),
    Scenario("create-a-topic-then-again", [_create(3), _create(3), _metadata()]),
    Scenario("create-validate-only", [_create(2, validate_only=True), _metadata()]),
    Scenario("create-with-an-invalid-name", [_create(name="bad/name")]),
    Scenario("create-with-a-name-too-long", [_create(name="x" * 250)]),
    Scenario("create-with-a-dot-name", [_create(name="..")]),
    Scenario("create-with-zero-partitions", [_create(0)]),
    Scenario("create-with-replication-above-brokers", [_create(1, 3)]),
    Scenario("create-with-an-unknown-config", [_create(configs={"no.such.config": "1"})]),
    Scenario("create-with-a-bad-config-value", [_create(configs={"retention.ms": "soon"})]),
    Scenario("create-with-a-bad-cleanup-policy", [_create(configs={"cleanup.policy": "keep"})]),
    Scenario("delete-an-unknown-topic", [_delete_topic()]),
    Scenario("produce-to-an-unknown-topic", [_produce()]),
    Scenario("produce-to-an-unknown-partition", [_create(), _produce(partition=5)]),
    Scenario(
        "produce-and-read-back",
        [
            _create(),
            _produce(_batch(3)),
            _produce(_batch(2)),
            _fetch(0),
            _list_offsets(-2),
            _list_offsets(-1),
            _list_offsets(-3),
        ],
    ),
    Scenario("produce-a-batch-with-a-bad-crc", [_create(), _produce(_corrupt_crc(_batch()))]),
    Scenario("produce-a-batch-of-magic-1", [_create(), _produce(_with_magic(_batch(), 1))]),
    Scenario(
        "produce-a-keyless-record-to-a-compacted-topic",
        [_create(configs={"cleanup.policy": "compact"}), _produce(_batch(key=None))],
    ),
    Scenario(
        "produce-compressed",
        [_create(), _produce(_batch(5, compression=CompressionType.GZIP)), _list_offsets(-1)],
    ),
    Scenario("produce-with-acks-2", [_create(), _produce(acks=2)]),
    Scenario("fetch-beyond-the-log-end", [_create(), _produce(), _fetch(5)]),
    Scenario("fetch-an-unknown-partition", [_create(), _fetch(0, partition=3)]),
    Scenario("list-offsets-of-an-unknown-partition", [_create(), _list_offsets(-1, partition=4)]),
    Scenario("describe-configs-of-an-unknown-topic", [_describe_configs(["retention.ms"])]),
    Scenario("alter-a-config-to-a-bad-value", [_create(), _topic_configs(0, "retention.ms", "x")]),
    Scenario("alter-an-unknown-config", [_create(), _topic_configs(0, "no.such", "1")]),
    Scenario(
        "alter-then-describe-a-config",
        [_create(), _topic_configs(0, "retention.ms", "1000"), _describe_configs(["retention.ms"])],
    ),
    Scenario("create-fewer-partitions", [_create(3), _create_partitions(2)]),
    Scenario("create-the-same-partition-count", [_create(3), _create_partitions(3)]),
    Scenario("create-partitions-of-an-unknown-topic", [_create_partitions(4)]),
    Scenario(
        "delete-records-beyond-the-high-watermark",
        [_create(), _produce(_batch(2)), _delete_records(10)],
    ),
    Scenario(
        "delete-records-then-list-offsets",
        [_create(), _produce(_batch(4)), _delete_records(2), _list_offsets(-2)],
    ),
    Scenario(
        "offset-fetch-of-an-unknown-group",
        [
            Step(
                OFFSET_FETCH,
                9,
                lambda n, _a: {
                    "groups": [
                        {"group_id": n.group, "member_id": None, "member_epoch": -1, "topics": None}
                    ],
                    "require_stable": False,
                },
            )
        ],
    ),
    Scenario(
        "describe-an-unknown-group",
        [
            Step(
                DESCRIBE_GROUPS,
                5,
                lambda n, _a: {"groups": [n.group], "include_authorized_operations": False},
            )
        ],
    ),
    Scenario(
        "delete-an-unknown-group",
        [Step(DELETE_GROUPS, 2, lambda n, _a: {"groups_names": [n.group]})],
    ),
    Scenario(
        "heartbeat-of-an-unknown-member",
        [
            _group(
                HEARTBEAT,
                4,
                {"generation_id": 1, "member_id": "m", "group_instance_id": None},
                "heartbeat",
            )
        ],
    ),
    Scenario(
        "join-with-a-session-timeout-too-small",
        [
            _join(1),
        ],
    ),
    Scenario(
        "join-without-a-member-id",
        [
            _join(10_000),
        ],
    ),
    Scenario(
        "offset-delete-of-an-unknown-group",
        [
            _group(
                OFFSET_DELETE,
                0,
                {"topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]},
                "offset delete",
            )
        ],
    ),
    Scenario(
        "find-a-group-coordinator",
        [Step(FIND_COORDINATOR, 4, lambda n, _a: {"key_type": 0, "coordinator_keys": [n.group]})],
    ),
    Scenario(
        "idempotent-produce-in-order-duplicate-and-out-of-order",
        [
            _create(),
            _init_producer_id(),
            _idempotent_produce(0, 2),
            _idempotent_produce(0, 2),
            _idempotent_produce(5),
            _idempotent_produce(2),
            _list_offsets(-1),
        ],
        ignore=frozenset({"producer_id"}),
    ),
    Scenario(
        "idempotent-produce-with-a-future-epoch",
        [_create(), _init_producer_id(), _idempotent_produce(0, epoch_shift=1)],
        ignore=frozenset({"producer_id"}),
    ),
    Scenario(
        "end-an-unknown-transaction",
        [
            Step(
                END_TXN,
                4,
                lambda n, _a: {
                    "transactional_id": n.txn,
                    "producer_id": 1,
                    "producer_epoch": 0,
                    "committed": True,
                },
            )
        ],
    ),
    Scenario(
        "describe-an-unknown-transaction",
        [Step(DESCRIBE_TRANSACTIONS, 0, lambda n, _a: {"transactional_ids": [n.txn]})],
    ),
    Scenario(
        "describe-producers-of-a-topic",
        [
            _create(),
            _init_producer_id(),
            _idempotent_produce(0),
            Step(
                DESCRIBE_PRODUCERS,
                0,
                lambda n, _a: {"topics": [{"name": n.topic, "partition_indexes": [0, 1]}]},
            ),
        ],
        ignore=frozenset({"producer_id", "last_timestamp"}),
    ),
    Scenario(
        "offset-for-leader-epoch",
        [
            _create(),
            _produce(),
            Step(
                OFFSET_FOR_LEADER_EPOCH,
                4,
                lambda n, _a: {
                    "replica_id": -1,
                    "topics": [
                        {
                            "topic": n.topic,
                            "partitions": [
                                {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0},
                                {"partition": 7, "current_leader_epoch": -1, "leader_epoch": 0},
                            ],
                        }
                    ],
                },
            ),
        ],
    ),
]
# fmt: on

EXPLAINED: dict[str, str] = {}
"""Scenario id → the compat/FINDINGS.md entry that explains its difference."""


@pytest.mark.parametrize(
    "scenario",
    [
        pytest.param(s, marks=pytest.mark.xfail(strict=True, reason=EXPLAINED[s.id]))
        if s.id in EXPLAINED
        else s
        for s in SCENARIOS
    ],
    ids=lambda s: s.id,
)
def test_samsa_answers_as_kafka_does(
    kafka: KafkaCluster, samsa: BrokerProcess, scenario: Scenario
) -> None:
    found = compare(kafka.bootstrap, samsa.bootstrap, scenario, "oracle")
    assert not found, "\n".join(found)


def test_the_harness_sees_a_difference() -> None:
    # A scrubbed answer that differs in an error code is reported, one that differs only in
    # a broker-dependent field is not.
    from tests.oracle.differential import differences, scrub

    a = {"error_code": "NONE", "node_id": 1, "topics": [{"name": "t", "offset": 3}]}
    b = {"error_code": "NONE", "node_id": 2, "topics": [{"name": "t", "offset": 3}]}
    c = {"error_code": "INVALID_CONFIG", "node_id": 1, "topics": [{"name": "t", "offset": 3}]}
    assert differences(scrub(a), scrub(b)) == []
    assert differences(scrub(a), scrub(c)) == [".error_code: Kafka 'NONE', samsa 'INVALID_CONFIG'"]
    assert struct.calcsize(">i") == 4
