"""Produce responses encoded by hand are the bytes kio writes for the same values."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from samsa.broker.api import response_class
from samsa.errors import ErrorCode
from samsa.protocol.build import build
from samsa.protocol.codec import encode_response
from samsa.protocol.produce_response import (
    FIRST_VERSION,
    LAST_VERSION,
    encode_produce_response,
    with_throttle_time,
)

VERSIONS = range(FIRST_VERSION, LAST_VERSION + 1)
TOPIC_ID = uuid.UUID("5b0c3c1e-8a4f-4c0e-9d4e-2f6a1b7c9d10")


def kio_bytes(version: int, correlation_id: int, topics: list[dict[str, Any]], ms: int) -> bytes:
    response = build(response_class(0, version), {"responses": topics, "throttle_time": ms})
    return encode_response(correlation_id, response)


def appended(index: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "index": index,
        "log_start_offset": 0,
        "error_code": ErrorCode.NONE,
        "base_offset": 1_234_567_890_123,
        "log_append_time": -1,
        **extra,
    }


def topic(partitions: list[dict[str, Any]], name: str = "orders") -> dict[str, Any]:
    return {"name": name, "topic_id": TOPIC_ID, "partition_responses": partitions}


@pytest.mark.parametrize("version", VERSIONS)
def test_a_one_record_answer_is_the_bytes_kio_writes(version: int) -> None:
    topics = [topic([appended()])]
    assert encode_produce_response(version, 7, topics, 0) == kio_bytes(version, 7, topics, 0)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_log_append_time_and_a_throttle_are_the_bytes_kio_writes(version: int) -> None:
    topics = [topic([appended(log_append_time=1_764_200_000_123)])]
    assert encode_produce_response(version, -5, topics, 2_500) == kio_bytes(
        version, -5, topics, 2_500
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_an_error_answer_with_record_errors_is_the_bytes_kio_writes(version: int) -> None:
    failed = {
        "index": 3,
        "log_start_offset": -1,
        "error_code": ErrorCode.INVALID_RECORD,
        "error_message": "record 1 has a null key: compacted topic — ünïcode",
        "base_offset": -1,
        "log_append_time": -1,
        "record_errors": [
            {"batch_index": 1, "batch_index_error_message": "null key"},
            {"batch_index": 4, "batch_index_error_message": None},
        ],
    }
    refused = {
        "index": 0,
        "log_start_offset": -1,
        "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        "error_message": "",
        "base_offset": -1,
        "log_append_time": -1,
    }
    topics = [topic([appended(), failed]), topic([refused], name="ängste")]
    assert encode_produce_response(version, 1, topics, 0) == kio_bytes(version, 1, topics, 0)


@pytest.mark.parametrize("version", VERSIONS)
def test_no_topics_and_many_partitions_are_the_bytes_kio_writes(version: int) -> None:
    assert encode_produce_response(version, 2, [], 0) == kio_bytes(version, 2, [], 0)
    many = [topic([appended(i) for i in range(200)], name="t" * 300)]
    assert encode_produce_response(version, 2, many, 0) == kio_bytes(version, 2, many, 0)


def test_a_topic_without_an_id_is_answered_with_the_zero_id_as_kio_writes_it() -> None:
    topics = [{"name": "", "topic_id": None, "partition_responses": [appended()]}]
    assert encode_produce_response(13, 9, topics, 0) == kio_bytes(13, 9, topics, 0)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_throttle_patched_in_gives_the_bytes_kio_writes_with_it(version: int) -> None:
    topics = [topic([appended(), appended(1)])]
    unthrottled = encode_produce_response(version, 11, topics, 0)
    assert with_throttle_time(version, unthrottled, 30_000) == kio_bytes(
        version, 11, topics, 30_000
    )
