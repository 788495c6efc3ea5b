"""ListOffsets over the wire: special timestamps and versions 1–11."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from tests.rawclient import exchange

from samsa.testing import BrokerProcess

TOPIC = "list-offsets"


@pytest.fixture(scope="module")
def timestamps(samsa_broker: BrokerProcess) -> list[int]:
    producer = Producer({"bootstrap.servers": samsa_broker.bootstrap, "linger.ms": 0,
                         "log_level": 3})  # fmt: skip
    base = int(time.time() * 1000) - 10_000
    stamps = [base + i * 10 for i in range(50)]
    stamps[20] = base + 5_000  # the maximum timestamp, in the middle
    for i, ts in enumerate(stamps):
        producer.produce(TOPIC, f"v{i}".encode(), timestamp=ts)
        producer.flush(10)
    return stamps


def _offset(bootstrap: str, version: int, timestamp: int) -> tuple[int, int, int]:
    response = exchange(
        bootstrap, 2, version,
        {"replica_id": -1, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}]}]},
    )  # fmt: skip
    answer = response.topics[0].partitions[0]
    return answer.error_code.value, answer.offset, answer.timestamp


@pytest.mark.parametrize("version", [1, 4, 7, 9, 11])
def test_earliest_and_latest_offsets_at_every_version(
    samsa_broker: BrokerProcess, timestamps: list[int], version: int
) -> None:
    assert _offset(samsa_broker.bootstrap, version, -2)[:2] == (0, 0)
    assert _offset(samsa_broker.bootstrap, version, -1)[:2] == (0, len(timestamps))


def test_max_timestamp_finds_the_record_that_carries_it(
    samsa_broker: BrokerProcess, timestamps: list[int]
) -> None:
    assert _offset(samsa_broker.bootstrap, 7, -3) == (0, 20, max(timestamps))


def test_a_timestamp_between_records_answers_the_next_record(
    samsa_broker: BrokerProcess, timestamps: list[int]
) -> None:
    assert _offset(samsa_broker.bootstrap, 11, timestamps[10] - 5) == (0, 10, timestamps[10])


def test_tiered_storage_specs_answer_no_offset(
    samsa_broker: BrokerProcess, timestamps: list[int]
) -> None:
    assert _offset(samsa_broker.bootstrap, 11, -5)[:2] == (0, -1)
