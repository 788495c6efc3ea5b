"""Metadata answers at every version: topics as they are now, whatever was asked before."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from tests.rawclient import exchange

from samsa.errors import ErrorCode
from samsa.testing import BrokerProcess

QUIET = {"log_level": 3}
TIMEOUT_S = 30
METADATA = 3


def _new_topic(broker: BrokerProcess, partitions: int) -> str:
    name = f"meta-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(TIMEOUT_S)
    return name


def _metadata(broker: BrokerProcess, version: int, names: list[str]) -> object:
    topics = [{"name": n} if version < 10 else {"name": n, "topic_id": None} for n in names]
    return exchange(broker.bootstrap, METADATA, version, {
        "topics": topics, "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False})  # fmt: skip


@pytest.mark.parametrize("version", range(14))
def test_metadata_of_a_topic_and_a_missing_one_decodes_at_every_version(
    samsa_broker: BrokerProcess, version: int
) -> None:
    topic = _new_topic(samsa_broker, 3)
    for _ in range(2):  # the second answer is the one a cache would give
        response: object = _metadata(samsa_broker, version, [topic, f"{topic}-missing"])
        found, missing = response.topics  # type: ignore[attr-defined]
        assert (found.name, found.error_code) == (topic, ErrorCode.NONE)
        assert sorted(p.partition_index for p in found.partitions) == [0, 1, 2]
        assert {p.leader_id for p in found.partitions} == {response.brokers[0].node_id}  # type: ignore[attr-defined]
        # Before v4 a request always allows auto-creation: the missing topic is made.
        created = version < 4
        assert missing.error_code == (
            ErrorCode.NONE if created else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )


def test_metadata_lists_partitions_added_since_the_topic_was_last_asked(
    samsa_broker: BrokerProcess,
) -> None:
    topic = _new_topic(samsa_broker, 1)
    before: object = _metadata(samsa_broker, 12, [topic])
    assert len(before.topics[0].partitions) == 1  # type: ignore[attr-defined]
    admin = AdminClient({"bootstrap.servers": samsa_broker.bootstrap, **QUIET})
    admin.create_partitions([NewPartitions(topic, 4)])[topic].result(TIMEOUT_S)

    after: object = _metadata(samsa_broker, 12, [topic])
    assert sorted(p.partition_index for p in after.topics[0].partitions) == [0, 1, 2, 3]  # type: ignore[attr-defined]
