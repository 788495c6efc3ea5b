"""The error a coordinator answers for a failed append: Kafka 4's mapping, code by code."""

from __future__ import annotations

import pytest

from samsa.coordinator.errors import write_error_code
from samsa.errors import KafkaStorageError, for_code


@pytest.mark.parametrize(
    ("append_error", "answered"),
    [
        (3, 15),  # UNKNOWN_TOPIC_OR_PARTITION → COORDINATOR_NOT_AVAILABLE
        (19, 15),  # NOT_ENOUGH_REPLICAS → COORDINATOR_NOT_AVAILABLE
        (7, 15),  # REQUEST_TIMED_OUT → COORDINATOR_NOT_AVAILABLE
        (6, 16),  # NOT_LEADER_OR_FOLLOWER → NOT_COORDINATOR
        (56, 16),  # KAFKA_STORAGE_ERROR → NOT_COORDINATOR
        (10, -1),  # MESSAGE_TOO_LARGE → UNKNOWN_SERVER_ERROR
        (18, -1),  # RECORD_LIST_TOO_LARGE → UNKNOWN_SERVER_ERROR
        (4, -1),  # INVALID_FETCH_SIZE → UNKNOWN_SERVER_ERROR
        (20, 20),  # NOT_ENOUGH_REPLICAS_AFTER_APPEND: answered as it is
        (2, 2),  # CORRUPT_MESSAGE: answered as it is
    ],
)
def test_a_failed_append_is_answered_with_kafkas_coordinator_error(
    append_error: int, answered: int
) -> None:
    assert write_error_code(for_code(append_error)("append failed")) == answered


def test_the_storage_error_class_maps_like_its_code() -> None:
    assert write_error_code(KafkaStorageError("disk full")) == 16


def test_an_error_that_is_not_kafkas_is_an_unknown_server_error() -> None:
    assert write_error_code(OSError(28, "No space left on device")) == -1
