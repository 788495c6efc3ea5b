"""A storage failure is answered with its error code and a message that does not say where
the broker keeps its data; the broker's log says it whole."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.rawclient import exchange

from samsa.errors import ErrorCode
from samsa.testing import BrokerProcess

CREATE_TOPICS = 19


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "data").start()
    try:
        yield process
    finally:
        process.stop()


def test_a_log_that_cannot_be_created_is_answered_without_the_data_path(
    broker: BrokerProcess,
) -> None:
    # A file where the partition's directory goes: the broker cannot make its log.
    (broker.data_dir / "blocked-0").write_text("not a directory")
    response = exchange(broker.bootstrap, CREATE_TOPICS, 5, {
        "topics": [{"name": "blocked", "num_partitions": 1, "replication_factor": 1,
                    "assignments": [], "configs": []}],
        "timeout": 30_000, "validate_only": False,
    })  # fmt: skip
    (topic,) = response.topics
    assert topic.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    message = topic.error_message
    assert "blocked-0" in message  # still says which log
    assert str(broker.data_dir.resolve()) not in message and str(broker.data_dir) not in message
    assert not re.search(r"(^|[\s'\"])/\w", message), message
    assert str(broker.data_dir.resolve() / "blocked-0") in broker.log_path.read_text()
