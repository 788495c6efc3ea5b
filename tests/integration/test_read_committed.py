"""read_committed over the wire: transactions written with raw requests, read by confluent-kafka.

The transaction coordinator is not served yet, so the tests play its part:
InitProducerId (idempotent) hands out producer ids, Produce carries
transactional batches, WriteTxnMarkers commits or aborts them.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tests.rawclient import exchange, read_response, request_frame

from samsa.records import RecordBatchBuilder
from samsa.testing import BrokerProcess, start_broker

QUIET = {"log_level": 3}
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
FETCH = 1
HANG_S = 30  # a deadline that only detects a hang, never a measure of speed
LONG_POLL_MS = 600_000  # max_wait of a fetch that a commit must wake long before


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with start_broker(tmp_path_factory.mktemp("read-committed") / "data") as process:
        yield process


class RawProducer:
    """A transactional producer made of raw requests; its id comes from InitProducerId."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        response = exchange(bootstrap, 22, 4, {"transactional_id": None,
                                               "transaction_timeout": 60_000})  # fmt: skip
        assert response.error_code.value == 0
        self.producer_id, self.epoch = response.producer_id, response.producer_epoch
        self.sequence = 0

    def send(self, *values: bytes) -> int:
        """Produce one transactional batch; return its base offset."""
        builder = RecordBatchBuilder(
            is_transactional=True, producer_id=self.producer_id,
            producer_epoch=self.epoch, base_sequence=self.sequence,
        )  # fmt: skip
        for value in values:
            builder.append(value)
        self.sequence += len(values)
        response = exchange(self.bootstrap, 0, 9, {
            "transactional_id": "raw", "acks": -1, "timeout": 10_000,
            "topic_data": [{"name": self.topic, "partition_data": [
                {"index": 0, "records": builder.build()}]}],
        })  # fmt: skip
        partition = response.responses[0].partition_responses[0]
        assert partition.error_code.value == 0, partition
        return int(partition.base_offset)

    def end(self, commit: bool, *, epoch: int | None = None, partition: int = 0) -> int:
        """Write the commit or abort marker; return the partition's error code."""
        response = exchange(self.bootstrap, 27, 1, {"markers": [{
            "producer_id": self.producer_id,
            "producer_epoch": self.epoch if epoch is None else epoch,
            "transaction_result": commit, "coordinator_epoch": 0,
            "topics": [{"name": self.topic, "partition_indexes": [partition]}],
        }]})  # fmt: skip
        marker = response.markers[0]
        assert marker.producer_id == self.producer_id
        return int(marker.topics[0].partitions[0].error_code.value)


def _create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(HANG_S)


def _latest(bootstrap: str, topic: str, isolation_level: int) -> int:
    response = exchange(bootstrap, 2, 7, {
        "replica_id": -1, "isolation_level": isolation_level,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    })  # fmt: skip
    return int(response.topics[0].partitions[0].offset)


def _consume(bootstrap: str, topic: str, isolation_level: str) -> list[bytes]:
    """Every value from offset 0 to the end a consumer of ``isolation_level`` sees."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"reader-{isolation_level}",
        "isolation.level": isolation_level, "enable.auto.commit": False,
        "enable.partition.eof": True, **QUIET,
    })  # fmt: skip
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return values
                raise AssertionError(error)
            value = message.value()
            assert value is not None
            values.append(value)
        raise AssertionError(f"no end of partition after {values}")
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def transactions(broker: BrokerProcess) -> dict[str, Any]:
    """One committed and one aborted transaction, interleaved, then a second commit."""
    topic = "transactions"
    _create_topic(broker.bootstrap, topic)
    committer = RawProducer(broker.bootstrap, topic)
    aborter = RawProducer(broker.bootstrap, topic)
    assert committer.send(b"c1", b"c2") == 0
    assert aborter.send(b"a1", b"a2") == 2
    lso_both_open = _latest(broker.bootstrap, topic, READ_COMMITTED)
    hw_both_open = _latest(broker.bootstrap, topic, READ_UNCOMMITTED)
    assert committer.end(commit=True) == 0  # offset 4
    lso_one_open = _latest(broker.bootstrap, topic, READ_COMMITTED)
    assert aborter.end(commit=False) == 0  # offset 5
    assert committer.send(b"c3") == 6
    assert committer.end(commit=True) == 0  # offset 7
    return {
        "topic": topic, "committer": committer, "aborter": aborter,
        "lso_both_open": lso_both_open, "hw_both_open": hw_both_open,
        "lso_one_open": lso_one_open,
    }  # fmt: skip


def test_read_committed_consumer_sees_only_committed_records(
    broker: BrokerProcess, transactions: dict[str, Any]
) -> None:
    values = _consume(broker.bootstrap, transactions["topic"], "read_committed")
    assert values == [b"c1", b"c2", b"c3"]


def test_read_uncommitted_consumer_sees_every_data_record(
    broker: BrokerProcess, transactions: dict[str, Any]
) -> None:
    values = _consume(broker.bootstrap, transactions["topic"], "read_uncommitted")
    assert values == [b"c1", b"c2", b"a1", b"a2", b"c3"]


def test_list_offsets_read_committed_answers_the_lso_while_a_transaction_is_open(
    broker: BrokerProcess, transactions: dict[str, Any]
) -> None:
    assert transactions["lso_both_open"] == 0
    assert transactions["hw_both_open"] == 4
    assert transactions["lso_one_open"] == 2
    topic = transactions["topic"]
    assert _latest(broker.bootstrap, topic, READ_COMMITTED) == 8
    assert _latest(broker.bootstrap, topic, READ_UNCOMMITTED) == 8


def _fetch_values(topic: str, isolation_level: int, max_wait_ms: int) -> dict[str, Any]:
    return {
        "max_wait": max_wait_ms, "min_bytes": 1, "isolation_level": isolation_level,
        "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}],
    }  # fmt: skip


def _fetch(bootstrap: str, topic: str, isolation_level: int) -> Any:
    response = exchange(bootstrap, FETCH, 12, _fetch_values(topic, isolation_level, 0))
    return response.responses[0].partitions[0]


def _tcp_queue(local_port: int, remote_port: int, queue: str) -> int:
    """The ``tx`` or ``rx`` queue (bytes) of the loopback TCP socket local_port → remote_port."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, remote = (int(a.rsplit(":", 1)[1], 16) for a in fields[1:3])
            if (local, remote) == (local_port, remote_port):
                tx, rx = (int(q, 16) for q in fields[4].split(":"))
                return tx if queue == "tx" else rx
    raise AssertionError(f"no TCP socket {local_port} -> {remote_port}")


def _read_by_broker(sock: socket.socket) -> bool:
    """True once every byte sent on ``sock`` has been read by the broker process itself."""
    ours, theirs = sock.getsockname()[1], sock.getpeername()[1]
    return _tcp_queue(ours, theirs, "tx") == 0 and _tcp_queue(theirs, ours, "rx") == 0


def test_fetch_lists_aborted_transactions_only_for_read_committed(
    broker: BrokerProcess, transactions: dict[str, Any]
) -> None:
    topic, aborter = transactions["topic"], transactions["aborter"]
    committed = _fetch(broker.bootstrap, topic, READ_COMMITTED)
    assert [(t.producer_id, t.first_offset) for t in committed.aborted_transactions] == [
        (aborter.producer_id, 2)
    ]
    assert (committed.high_watermark, committed.last_stable_offset) == (8, 8)
    uncommitted = _fetch(broker.bootstrap, topic, READ_UNCOMMITTED)
    assert uncommitted.aborted_transactions is None
    assert uncommitted.last_stable_offset == 8


def test_a_read_committed_long_poll_wakes_when_the_transaction_commits(
    broker: BrokerProcess,
) -> None:
    topic = "long-poll"
    _create_topic(broker.bootstrap, topic)
    producer = RawProducer(broker.bootstrap, topic)
    producer.send(b"pending")
    host, port = broker.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=HANG_S) as poll:
        poll.sendall(request_frame(FETCH, 12, _fetch_values(topic, READ_COMMITTED, LONG_POLL_MS)))
        # Once the broker has read the fetch it waits: nothing is stable yet.
        deadline = time.monotonic() + HANG_S
        while not _read_by_broker(poll):
            assert time.monotonic() < deadline, "the broker never read the fetch"
            time.sleep(0.01)
        assert producer.end(commit=True) == 0
        try:
            response = read_response(poll, FETCH, 12)
        except TimeoutError:
            # A fetch that only max_wait ends would wait LONG_POLL_MS, far beyond HANG_S.
            raise AssertionError("the waiting fetch was not woken by the commit") from None
    partition = response.responses[0].partitions[0]
    assert partition.last_stable_offset == 2
    assert partition.records  # the committed batch (and its marker)


def test_markers_are_fenced_or_refused_per_partition(broker: BrokerProcess) -> None:
    topic = "fenced"
    _create_topic(broker.bootstrap, topic)
    committer = RawProducer(broker.bootstrap, topic)
    committer.send(b"c4")
    assert committer.end(commit=True, epoch=committer.epoch - 1) == 47  # INVALID_PRODUCER_EPOCH
    assert committer.end(commit=True, partition=7) == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert committer.end(commit=True) == 0


def test_describe_producers_lists_epochs_and_open_transactions(broker: BrokerProcess) -> None:
    topic = "described"
    _create_topic(broker.bootstrap, topic)
    open_ = RawProducer(broker.bootstrap, topic)
    open_.send(b"x", b"y")
    done = RawProducer(broker.bootstrap, topic)
    done.send(b"z")
    assert done.end(commit=True) == 0
    response = exchange(broker.bootstrap, 61, 0, {"topics": [
        {"name": topic, "partition_indexes": [0, 5]}]})  # fmt: skip
    found, missing = response.topics[0].partitions
    assert found.error_code.value == 0
    producers = {p.producer_id: p for p in found.active_producers}
    assert set(producers) == {open_.producer_id, done.producer_id}
    described = producers[open_.producer_id]
    assert (described.producer_epoch, described.last_sequence) == (open_.epoch, 1)
    assert described.current_txn_start_offset == 0
    assert described.last_timestamp > 0
    assert producers[done.producer_id].current_txn_start_offset == -1
    assert producers[done.producer_id].coordinator_epoch == 0
    assert missing.error_code.value == 3
