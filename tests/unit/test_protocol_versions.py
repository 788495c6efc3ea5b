"""Up-converting requests to the newest version, and serve() refusing what it cannot."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v6.response import FindCoordinatorResponse
from kio.schema.heartbeat.v0.request import HeartbeatRequest as HeartbeatV0
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.join_group.v0.request import JoinGroupRequest as JoinGroupV0
from kio.schema.join_group.v0.request import JoinGroupRequestProtocol as ProtocolV0
from kio.schema.join_group.v9.request import JoinGroupRequest

from samsa.broker.network.registry import ApiRegistry
from samsa.broker.typed_api import serve
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import RequestHeader
from samsa.protocol.versions import missing_fields, upgrade


def test_an_old_request_gets_the_newest_schemas_defaults_for_fields_it_lacks() -> None:
    old = JoinGroupV0(
        group_id="g",  # type: ignore[arg-type]
        session_timeout=datetime.timedelta(seconds=10),  # type: ignore[arg-type]
        member_id="",
        protocol_type="consumer",
        protocols=(ProtocolV0(name="range", metadata=b"x"),),
    )
    new = upgrade(old, JoinGroupRequest)
    assert isinstance(new, JoinGroupRequest)
    assert new.rebalance_timeout == datetime.timedelta(milliseconds=-1)  # Kafka's default
    assert (new.group_instance_id, new.reason) == (None, None)
    assert [(p.name, p.metadata) for p in new.protocols] == [("range", b"x")]


def test_a_request_whose_fields_are_the_newest_ones_is_kept_as_read() -> None:
    v3 = load_request_schema(ApiKey.HEARTBEAT, 3)
    old = v3(group_id="g", generation_id=1, member_id="m", group_instance_id=None)
    assert upgrade(old, HeartbeatRequest) is old


def test_a_field_only_old_versions_have_is_listed_as_missing() -> None:
    assert missing_fields(load_request_schema(ApiKey.FIND_COORDINATOR, 0), FindCoordinatorRequest)
    assert missing_fields(HeartbeatV0, HeartbeatRequest) == ()


def test_serve_refuses_versions_the_newest_classes_cannot_express() -> None:
    async def handler(services: None, header: RequestHeader, request: Any) -> Any:
        raise AssertionError("not called")

    with pytest.raises(ValueError, match="key"):
        serve(ApiRegistry(), ApiKey.FIND_COORDINATOR, versions=(0, 6),
              request_class=FindCoordinatorRequest, response_class=FindCoordinatorResponse,
              handler=handler, services=None)  # fmt: skip
    assert load_response_schema(ApiKey.FIND_COORDINATOR, 0)
