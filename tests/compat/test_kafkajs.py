"""KafkaJS 2.2 (Node.js, from npm) against a real samsa broker.

``kafkajs/check.js`` is samsa's own program on KafkaJS's API; ``make test`` installs its
pinned dependency (``npm ci`` from ``kafkajs/package-lock.json``). Each test runs one of
its steps — an idempotent gzip producer and a group, transactions with offsets and
read_committed, a group of two members, admin calls — and asserts on the JSON it prints.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer

from samsa.client.producer.partitioner import partition_for_key
from samsa.testing import BrokerProcess, start_broker

pytestmark = pytest.mark.timeout(180)

PROGRAM = Path(__file__).parent / "kafkajs" / "check.js"
COUNT = 60  # check.js's COUNT


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path_factory.mktemp("kafkajs"))
    try:
        yield process
    finally:
        process.stop()


def run_step(broker: BrokerProcess, step: str, name: str) -> Any:
    node = shutil.which("node")
    assert node and (PROGRAM.parent / "node_modules" / "kafkajs").is_dir(), (
        "Node.js or KafkaJS is missing: `make test` installs nodejs and npm (Debian "
        "packages) and runs `npm ci` in tests/compat/kafkajs"
    )
    done = subprocess.run(
        [node, str(PROGRAM), f"127.0.0.1:{broker.port}", step, name],
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def expected_value(i: int) -> str:
    return f"value-{i}-{'x' * i}"


def test_an_idempotent_gzip_producer_places_keys_as_kafka_does_and_a_group_reads_them(
    broker: BrokerProcess,
) -> None:
    topic = f"kafkajs-{uuid.uuid4().hex[:8]}"
    result = run_step(broker, "produce-consume", topic)

    assert result["created"] is True
    assert {sent["error"] for sent in result["sent"]} == {0}
    seen = result["seen"]
    assert sorted(r["key"] for r in seen) == sorted(f"key-{i}" for i in range(COUNT))
    for r in seen:
        i = int(r["key"].removeprefix("key-"))
        assert (r["value"], r["header"]) == (expected_value(i), str(i))
        # KafkaJS's default partitioner is Java's: murmur2 of the key, as samsa's.
        assert r["partition"] == partition_for_key(r["key"].encode(), 3)


def test_records_kafkajs_wrote_read_the_same_through_librdkafka(broker: BrokerProcess) -> None:
    topic = f"kafkajs-{uuid.uuid4().hex[:8]}"
    run_step(broker, "produce-consume", topic)
    consumer = Consumer(
        {"bootstrap.servers": f"127.0.0.1:{broker.port}", "group.id": f"{topic}-rd",
         "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )  # fmt: skip
    try:
        consumer.subscribe([topic])
        got: dict[str, tuple[str, list[Any] | None]] = {}
        for _ in range(300):
            if len(got) == COUNT:
                break
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got[message.key().decode()] = (message.value().decode(), message.headers())
    finally:
        consumer.close()
    assert got == {f"key-{i}": (expected_value(i), [("n", str(i).encode())]) for i in range(COUNT)}


def test_kafkajs_transactions_commit_and_abort_with_their_group_offsets(
    broker: BrokerProcess,
) -> None:
    result = run_step(broker, "transactions", f"kafkajs-{uuid.uuid4().hex[:8]}")

    # KafkaJS reads read_committed by default: the aborted transaction is not seen.
    assert result["values"] == [f"committed-{t}-{i}" for t in (1, 2) for i in range(3)]
    assert result["offsets"][0]["partitions"] == [{"partition": 0, "offset": "7", "metadata": None}]
    assert result["high"] == ["12"]  # 9 records and 3 transaction markers


def test_two_kafkajs_members_split_the_partitions_and_read_each_record_once(
    broker: BrokerProcess,
) -> None:
    result = run_step(broker, "group-split", f"kafkajs-{uuid.uuid4().hex[:8]}")

    first, second = (set(partitions) for partitions in result["assigned"])
    assert first | second == set(range(6)) and not first & second
    keys = Counter(r["key"] for r in result["seen"])
    assert keys == Counter(f"key-{i}" for i in range(COUNT))
    for r in result["seen"]:
        assert r["partition"] in (first, second)[r["member"]]
    assert (result["state"], result["protocol"], result["members"]) == (
        "Stable",
        "RoundRobinAssigner",
        2,
    )


def test_kafkajs_admin_adds_partitions_alters_configs_and_deletes_a_topic(
    broker: BrokerProcess,
) -> None:
    result = run_step(broker, "admin", f"kafkajs-{uuid.uuid4().hex[:8]}")

    assert result == {
        "partitions": [0, 1, 2, 3],
        "retention": [["retention.ms", "123456"]],
        "listed": True,
        "afterDelete": False,
    }
