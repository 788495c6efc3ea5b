"""build(): kio messages from plain values, refusing keys no version of the message has."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.metadata.v0.response import MetadataResponse as MetadataResponseV0
from kio.schema.metadata.v12.response import MetadataResponse as MetadataResponseV12
from kio.schema.offset_commit.v2.request import OffsetCommitRequest

from samsa.protocol.build import UnknownFieldError, build


def test_a_misspelt_key_is_refused_naming_it_and_the_fields_the_message_has() -> None:
    with pytest.raises(UnknownFieldError) as raised:
        build(MetadataResponseV12, {"throttle_time_ms": 10, "brokers": []})
    assert "'throttle_time_ms'" in str(raised.value)
    assert "throttle_time" in str(raised.value).split("its fields:")[1]


def test_a_misspelt_key_of_a_nested_entity_is_refused() -> None:
    with pytest.raises(UnknownFieldError, match="'leader'"):
        build(MetadataResponseV12, {"topics": [{"name": "t", "partitions": [{"leader": 1}]}]})


def test_a_field_only_other_versions_have_is_dropped() -> None:
    response = build(MetadataResponseV0, {"throttle_time": 5, "cluster_id": "c", "brokers": []})
    assert response == MetadataResponseV0(brokers=(), topics=())


def test_durations_in_milliseconds_become_timedeltas() -> None:
    request = build(
        OffsetCommitRequest,
        {"group_id": "g", "member_id": "m", "retention_time": -1, "topics": []},
    )
    assert request.retention_time == datetime.timedelta(milliseconds=-1)
