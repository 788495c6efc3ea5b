"""samsa's admin client (``Admin`` and ``AsyncAdmin``) against a real broker process.

Every admin call is checked by what a user sees: topics listed and described,
configs read back, offsets committed and listed, records gone; and errors raise
the samsa.errors class of the broker's error code. Records and group members
come from confluent-kafka and kafka-python, so the admin client is checked
against other clients' view of the same broker.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer as ConfluentProducer
from kafka import KafkaConsumer

from samsa import Admin, AsyncAdmin
from samsa.client.admin import (
    ConfigResource,
    ConfigSource,
    NewTopic,
    OffsetAndMetadata,
    OffsetSpec,
)
from samsa.client.errors import ClientTimeoutError
from samsa.errors import ConfigError, KafkaError, for_code
from samsa.testing import BrokerProcess, start_broker
from samsa.types import TopicPartition

pytestmark = pytest.mark.timeout(120)

QUIET = {"log_level": 3}
HANG_S = 30  # a deadline that only detects a hang, never a measure of speed
TopicAlreadyExistsError = for_code(36)
UnknownTopicOrPartitionError = for_code(3)
InvalidPartitionsError = for_code(37)
InvalidConfigError = for_code(40)
NonEmptyGroupError = for_code(68)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(
        tmp_path_factory.mktemp("client-admin") / "data",
        overrides=["group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000"],
    )
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[Admin]:
    config = {"bootstrap.servers": broker.bootstrap, "default.api.timeout.ms": HANG_S * 1000}
    with Admin(config) as a:
        yield a


def _broker_log_lines(broker: BrokerProcess, word: str) -> str:
    """The broker's log lines that mention ``word``: what a failure message needs."""
    lines = broker.log_path.read_text(errors="replace").splitlines()
    return "\n".join(line for line in lines if word in line)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _produce(bootstrap: str, topic: str, partition: int, timestamps: list[int]) -> None:
    producer = ConfluentProducer({"bootstrap.servers": bootstrap, **QUIET})
    for i, ts in enumerate(timestamps):
        producer.produce(topic, f"v{i}".encode(), partition=partition, timestamp=ts)
    assert producer.flush(HANG_S) == 0


def test_created_topic_is_described_with_its_partitions_and_configs(admin: Admin) -> None:
    topic = _name("created")
    result = admin.create_topics([NewTopic(topic, 3, 1, {"retention.ms": "3600000"})])
    assert result == {topic: None}
    description = admin.describe_topics([topic])[topic]
    assert [p.partition for p in description.partitions] == [0, 1, 2]
    assert all(p.leader >= 0 and p.isr == p.replicas for p in description.partitions)
    assert not description.is_internal and description.topic_id is not None
    configs = admin.describe_configs([ConfigResource.topic(topic)])[ConfigResource.topic(topic)]
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source is ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert configs["retention.bytes"].is_default


def test_creating_an_existing_topic_raises_topic_already_exists(admin: Admin) -> None:
    topic = _name("twice")
    admin.create_topics([topic])
    with pytest.raises(TopicAlreadyExistsError, match=topic):
        admin.create_topics([topic])


def test_create_topics_without_raising_reports_each_topic(admin: Admin) -> None:
    existing, new = _name("exists"), _name("new")
    admin.create_topics([existing])
    results = admin.create_topics([existing, new], raise_on_error=False)
    assert isinstance(results[existing], TopicAlreadyExistsError)
    assert results[new] is None


def test_validate_only_creates_nothing(admin: Admin) -> None:
    topic = _name("validate")
    assert admin.create_topics([NewTopic(topic, 2)], validate_only=True) == {topic: None}
    assert topic not in admin.list_topics()


def test_invalid_topic_config_raises_invalid_config(admin: Admin) -> None:
    with pytest.raises(InvalidConfigError):
        admin.create_topics([NewTopic(_name("badcfg"), 1, 1, {"no.such.config": "1"})])


def test_deleted_topic_is_no_longer_listed(admin: Admin) -> None:
    topic = _name("deleted")
    admin.create_topics([topic])
    assert topic in admin.list_topics()
    assert admin.delete_topics([topic]) == {topic: None}
    assert topic not in admin.list_topics()


def test_deleting_an_unknown_topic_raises_unknown_topic(admin: Admin) -> None:
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topics([_name("never")])


def test_describing_an_unknown_topic_raises_unknown_topic(admin: Admin) -> None:
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.describe_topics([_name("never")])


def test_internal_topics_are_listed_only_when_asked(admin: Admin) -> None:
    topic = _name("listed")
    admin.create_topics([topic])
    # A commit makes the broker create __consumer_offsets.
    admin.alter_group_offsets(_name("group"), {TopicPartition(topic, 0): 0})
    assert "__consumer_offsets" not in admin.list_topics()
    assert "__consumer_offsets" in admin.list_topics(include_internal=True)
    assert admin.describe_topics(["__consumer_offsets"])["__consumer_offsets"].is_internal


def test_create_partitions_raises_the_partition_count(admin: Admin) -> None:
    topic = _name("grow")
    admin.create_topics([NewTopic(topic, 1)])
    assert admin.create_partitions({topic: 4}) == {topic: None}
    assert len(admin.describe_topics([topic])[topic].partitions) == 4
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({topic: 2})


def test_alter_configs_sets_and_deletes_overrides(admin: Admin) -> None:
    topic = _name("alter")
    resource = ConfigResource.topic(topic)
    admin.create_topics([NewTopic(topic, 1, 1, {"retention.ms": "100000"})])
    admin.alter_configs({resource: {"segment.bytes": "1048576", "retention.ms": None}})
    configs = admin.describe_configs([resource])[resource]
    assert configs["segment.bytes"].value == "1048576"
    assert configs["segment.bytes"].source is ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert configs["retention.ms"].is_default


def test_altering_an_unknown_config_raises_invalid_config(admin: Admin) -> None:
    topic = _name("alterbad")
    admin.create_topics([topic])
    with pytest.raises(InvalidConfigError):
        admin.alter_configs({ConfigResource.topic(topic): {"no.such.config": "1"}})


def test_broker_configs_are_described_with_synonyms(admin: Admin) -> None:
    node = admin.describe_cluster().nodes[0].node_id
    resource = ConfigResource.broker(node)
    configs = admin.describe_configs([resource], include_synonyms=True)[resource]
    assert configs["num.partitions"].value == "1"
    assert configs["log.retention.hours"].synonyms


def test_describe_cluster_names_the_broker(admin: Admin, broker: BrokerProcess) -> None:
    cluster = admin.describe_cluster()
    assert cluster.cluster_id
    assert [(n.host, n.port) for n in cluster.nodes] == [(broker.host, broker.port)]
    assert cluster.controller_id == cluster.nodes[0].node_id


def test_describe_api_versions_gives_the_ranges_the_broker_serves(
    admin: Admin, broker: BrokerProcess
) -> None:
    node_id = admin.describe_cluster().nodes[0].node_id
    versions = admin.describe_api_versions(node_id)
    produce, fetch, api_versions = versions[0], versions[1], versions[18]
    assert produce[0] <= produce[1] and fetch[0] <= fetch[1]
    assert api_versions[1] >= 3  # the flexible ApiVersions every Kafka 4 broker serves
    assert admin.describe_api_versions() == versions  # any broker: the only one here


def test_group_offsets_are_altered_listed_and_deleted(admin: Admin) -> None:
    topic, group = _name("offsets"), _name("group")
    admin.create_topics([NewTopic(topic, 2)])
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    admin.alter_group_offsets(group, {tp0: 5, tp1: OffsetAndMetadata(7, "meta")})
    assert admin.list_group_offsets(group) == {
        tp0: OffsetAndMetadata(5),
        tp1: OffsetAndMetadata(7, "meta"),
    }
    assert admin.list_group_offsets(group, [tp1]) == {tp1: OffsetAndMetadata(7, "meta")}
    assert admin.delete_group_offsets(group, [tp0]) == {tp0: None}
    assert admin.list_group_offsets(group) == {tp1: OffsetAndMetadata(7, "meta")}


def test_groups_with_a_member_are_listed_described_and_not_deletable(
    admin: Admin, broker: BrokerProcess
) -> None:
    topic, group = _name("members"), _name("group")
    admin.create_topics([NewTopic(topic, 3)])
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        client_id="admin-test-member",
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )
    try:
        deadline = time.monotonic() + 20
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(200)
        listing = {g.group_id: g for g in admin.list_groups()}[group]
        assert (listing.protocol_type, listing.state) == ("consumer", "Stable"), (
            f"assignment {consumer.assignment()}; the coordinator's log of the group:\n"
            + _broker_log_lines(broker, group)
        )
        assert [g.group_id for g in admin.list_groups(states=["Stable"])].count(group) == 1
        assert group not in [g.group_id for g in admin.list_groups(states=["Empty"])]
        description = admin.describe_groups([group])[group]
        assert description.state == "Stable" and description.protocol_type == "consumer"
        (member,) = description.members
        assert member.client_id == "admin-test-member"
        assert sorted(member.assignment) == [TopicPartition(topic, p) for p in range(3)]
        assert description.coordinator is not None
        with pytest.raises(NonEmptyGroupError):
            admin.delete_groups([group])
    finally:
        consumer.close()
    assert admin.delete_groups([group]) == {group: None}
    assert admin.describe_groups([group])[group].state == "Dead"


def test_list_offsets_finds_earliest_latest_and_by_timestamp(
    admin: Admin, broker: BrokerProcess
) -> None:
    topic = _name("listoffsets")
    admin.create_topics([NewTopic(topic, 1)])
    base = int(time.time() * 1000) - 60_000
    _produce(broker.bootstrap, topic, 0, [base, base + 10, base + 20])
    tp = TopicPartition(topic, 0)
    assert admin.list_offsets({tp: OffsetSpec.EARLIEST})[tp].offset == 0
    assert admin.list_offsets({tp: OffsetSpec.LATEST})[tp].offset == 3
    by_time = admin.list_offsets({tp: base + 5})[tp]
    assert (by_time.offset, by_time.timestamp) == (1, base + 10)
    assert admin.list_offsets({tp: OffsetSpec.MAX_TIMESTAMP})[tp].offset == 2
    assert admin.list_offsets({tp: base + 1000})[tp].offset == -1


def test_list_offsets_of_an_unknown_topic_raises_unknown_topic(admin: Admin) -> None:
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.list_offsets({TopicPartition(_name("never"), 0): OffsetSpec.LATEST})


def test_delete_records_moves_the_log_start_offset(admin: Admin, broker: BrokerProcess) -> None:
    topic = _name("deleterecords")
    admin.create_topics([NewTopic(topic, 1)])
    now = int(time.time() * 1000)
    _produce(broker.bootstrap, topic, 0, [now] * 5)
    tp = TopicPartition(topic, 0)
    assert admin.delete_records({tp: 3}) == {tp: 3}
    assert admin.list_offsets({tp: OffsetSpec.EARLIEST})[tp].offset == 3
    assert admin.delete_records({tp: -1}) == {tp: 5}


def test_unknown_admin_config_key_raises_config_error_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"no\.such\.key"):
        Admin({"bootstrap.servers": "127.0.0.1:9", "no.such.key": 1})


def test_unreachable_cluster_times_out_with_a_client_timeout() -> None:
    with Admin({"bootstrap.servers": "127.0.0.1:9", "default.api.timeout.ms": 500}) as admin:
        started = time.monotonic()
        with pytest.raises(ClientTimeoutError) as raised:
            admin.list_topics()
        # Only a hang detector, yet well under the 60 s default default.api.timeout.ms: the
        # configured 500 ms is the one in force.
        assert time.monotonic() - started < HANG_S
        assert isinstance(raised.value.__cause__, KafkaError)


def test_async_admin_works_from_asyncio(broker: BrokerProcess) -> None:
    topic = _name("async")

    async def main() -> list[str]:
        async with AsyncAdmin({"bootstrap.servers": broker.bootstrap}) as admin:
            await admin.create_topics([NewTopic(topic, 2)])
            described = await admin.describe_topics([topic])
            assert len(described[topic].partitions) == 2
            return await admin.list_topics()

    assert topic in asyncio.run(main())
