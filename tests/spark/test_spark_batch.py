"""Batch reads and writes through the samsa data source: real PySpark, real broker."""

from __future__ import annotations

import json

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from tests.spark.conftest import new_topic, produce

from samsa import Admin, Producer
from samsa.testing import BrokerProcess
from samsa.types import TopicPartition

pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]


def _read(spark: SparkSession, bootstrap: str, **options: str) -> list[tuple[int, int, bytes]]:
    df = spark.read.format("samsa").option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        df = df.option(name, value)
    rows = df.load().select("partition", "offset", "value").collect()
    return sorted((r.partition, r.offset, bytes(r.value)) for r in rows)


def test_batch_read_returns_exactly_the_records_in_the_range(
    spark: SparkSession, samsa_broker: BrokerProcess
) -> None:
    topic = new_topic(samsa_broker.bootstrap, partitions=2)
    for p in (0, 1):
        produce(samsa_broker.bootstrap, topic, [b"p%d-%02d" % (p, i) for i in range(40)], p)
    rows = _read(
        spark,
        samsa_broker.bootstrap,
        subscribe=topic,
        startingOffsets=json.dumps({topic: {"0": 10, "1": -2}}),
        endingOffsets=json.dumps({topic: {"0": 25, "1": -1}}),
    )
    expected = [(0, i, b"p0-%02d" % i) for i in range(10, 25)]
    expected += [(1, i, b"p1-%02d" % i) for i in range(40)]
    assert rows == expected


def test_batch_read_returns_every_column_of_the_kafka_source(
    spark: SparkSession, samsa_broker: BrokerProcess
) -> None:
    topic = new_topic(samsa_broker.bootstrap)
    with Producer({"bootstrap.servers": samsa_broker.bootstrap}) as producer:
        producer.send(topic, b"v", key=b"k", headers=[("h", b"1")], timestamp=1_700_000_000_123)
    df = (
        spark.read.format("samsa")
        .option("kafka.bootstrap.servers", samsa_broker.bootstrap)
        .option("assign", json.dumps({topic: [0]}))
        .option("includeHeaders", "true")
        .load()
    )
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp",
                          "timestampType", "headers"]  # fmt: skip
    (row,) = df.selectExpr("*", "cast(timestamp as long) * 1000 as ms").collect()
    assert (bytes(row.key), bytes(row.value), row.topic, row.partition, row.offset) == (
        b"k",
        b"v",
        topic,
        0,
        0,
    )
    assert row.timestampType == 0
    assert [(h.key, bytes(h.value)) for h in row.headers] == [("h", b"1")]
    assert row.ms == 1_700_000_000_000  # whole seconds of 1_700_000_000.123


def test_min_partitions_splits_a_range_into_more_tasks(
    spark: SparkSession, samsa_broker: BrokerProcess
) -> None:
    topic = new_topic(samsa_broker.bootstrap)
    produce(samsa_broker.bootstrap, topic, [b"%03d" % i for i in range(100)])
    df = (
        spark.read.format("samsa")
        .option("kafka.bootstrap.servers", samsa_broker.bootstrap)
        .option("subscribe", topic)
        .option("minPartitions", "4")
        .load()
    )
    assert df.rdd.getNumPartitions() == 4
    assert sorted(r.offset for r in df.select("offset").collect()) == list(range(100))


def test_starting_timestamp_starts_at_the_first_record_at_or_after_it(
    spark: SparkSession, samsa_broker: BrokerProcess
) -> None:
    topic = new_topic(samsa_broker.bootstrap)
    with Producer({"bootstrap.servers": samsa_broker.bootstrap}) as producer:
        for i in range(10):
            producer.send(topic, b"%d" % i, timestamp=1_000_000 + i * 1000)
    rows = _read(spark, samsa_broker.bootstrap, subscribe=topic, startingTimestamp="1004500")
    assert [offset for _, offset, _ in rows] == [5, 6, 7, 8, 9]


def test_read_committed_returns_only_committed_transactions(
    spark: SparkSession, samsa_broker: BrokerProcess
) -> None:
    topic = new_topic(samsa_broker.bootstrap)
    config = {"bootstrap.servers": samsa_broker.bootstrap, "transactional.id": f"{topic}-tx"}
    with Producer(config) as producer:
        producer.init_transactions()
        for outcome in ("committed", "aborted", "committed"):
            producer.begin_transaction()
            for i in range(5):
                producer.send(topic, f"{outcome}-{i}".encode())
            if outcome == "aborted":
                producer.flush()  # written, then aborted: read_uncommitted sees them
                producer.abort_transaction()
            else:
                producer.commit_transaction()
    committed = _read(
        spark,
        samsa_broker.bootstrap,
        subscribe=topic,
        **{"kafka.isolation.level": "read_committed"},
    )
    assert [v for _, _, v in committed] == [b"committed-%d" % i for i in range(5)] * 2
    everything = _read(spark, samsa_broker.bootstrap, subscribe=topic)
    assert len(everything) == 15


def test_deleted_records_fail_the_read_when_fail_on_data_loss_is_true(
    spark: SparkSession, samsa_broker: BrokerProcess
) -> None:
    topic = new_topic(samsa_broker.bootstrap)
    produce(samsa_broker.bootstrap, topic, [b"%03d" % i for i in range(100)])
    with Admin({"bootstrap.servers": samsa_broker.bootstrap}) as admin:
        admin.delete_records({TopicPartition(topic, 0): 50})
    starting = json.dumps({topic: {"0": 0}})
    with pytest.raises(PySparkException, match="failOnDataLoss"):
        _read(spark, samsa_broker.bootstrap, subscribe=topic, startingOffsets=starting)
    rows = _read(
        spark,
        samsa_broker.bootstrap,
        subscribe=topic,
        startingOffsets=starting,
        failOnDataLoss="false",
    )
    assert [offset for _, offset, _ in rows] == list(range(50, 100))


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"subscribe": "a", "assign": '{"a": [0]}'}, "assign"),
        ({"subscribe": "a", "startingOffsets": "latest"}, "startingOffsets"),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "10"}, "maxOffsetsPerTrigger"),
        ({"subscribe": "a", "minPartitions": "0"}, "minPartitions"),
        ({"subscribe": "a", "kafka.group.id": "g"}, "kafka.group.id"),
    ],
)
def test_invalid_options_fail_at_planning_naming_the_option(
    spark: SparkSession, samsa_broker: BrokerProcess, options: dict[str, str], named: str
) -> None:
    with pytest.raises(PySparkException, match=named):
        _read(spark, samsa_broker.bootstrap, **options)


def test_batch_write_sends_every_row_with_key_value_headers_and_partition(
    spark: SparkSession, samsa_broker: BrokerProcess
) -> None:
    topic = new_topic(samsa_broker.bootstrap, partitions=2)
    df = spark.range(20).selectExpr(
        "cast(id as string) as key",
        "concat('v', id) as value",
        "cast(id % 2 as int) as partition",
        "array(named_struct('key', 'n', 'value', cast(cast(id as string) as binary))) as headers",
    )
    df.write.mode("append").format("samsa").option(
        "kafka.bootstrap.servers", samsa_broker.bootstrap
    ).option("topic", topic).save()
    back = (
        spark.read.format("samsa")
        .option("kafka.bootstrap.servers", samsa_broker.bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
        .collect()
    )
    got = sorted((int(r.key), bytes(r.value), r.partition, bytes(r.headers[0].value)) for r in back)
    assert got == [(i, b"v%d" % i, i % 2, b"%d" % i) for i in range(20)]


def test_batch_write_without_a_value_column_fails_naming_it(
    spark: SparkSession, samsa_broker: BrokerProcess
) -> None:
    with pytest.raises(PySparkException, match="value column"):
        spark.range(1).write.mode("append").format("samsa").option(
            "kafka.bootstrap.servers", samsa_broker.bootstrap
        ).option("topic", "anything").save()
