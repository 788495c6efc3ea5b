"""JoinGroup and SyncGroup handlers called directly, without a socket: a real group
coordinator over real partition logs in a tmp dir, requests as kio classes, responses
written as the version asked puts them on the wire."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.schema.sync_group.v5.request import SyncGroupRequest, SyncGroupRequestAssignment
from kio.static.primitive import i32, i32Timedelta
from tests.unit.handlers.group_broker import (
    SUBSCRIPTION,
    Broker,
    header,
    join_request,
    on_the_wire,
    run,
)

from samsa.broker.handlers.join_group import join_group, register, sync_group
from samsa.broker.network.registry import ApiRegistry
from samsa.protocol.api_keys import ApiKey


def test_a_new_member_of_v4_and_later_is_told_to_rejoin_with_its_member_id(
    tmp_path: Path,
) -> None:
    async def scenario(broker: Broker) -> None:
        response = await join_group(broker, header(ApiKey.JOIN_GROUP, 9), join_request())
        assert response.error_code == KioErrorCode.member_id_required
        assert response.member_id.startswith("client-")
        assert broker.offsets_topic_created == 1

    run(scenario, tmp_path)


def test_a_member_joins_and_syncs_its_assignment(tmp_path: Path) -> None:
    async def scenario(broker: Broker) -> None:
        first = await join_group(broker, header(ApiKey.JOIN_GROUP, 9), join_request())
        joined = await join_group(
            broker, header(ApiKey.JOIN_GROUP, 9), join_request(first.member_id)
        )
        assert (joined.error_code, joined.generation_id, joined.leader, joined.protocol_name) == (
            KioErrorCode.none, 1, first.member_id, "range",
        )  # fmt: skip
        assert [(m.member_id, m.metadata) for m in joined.members] == [
            (first.member_id, SUBSCRIPTION)
        ]
        synced = await sync_group(
            broker,
            header(ApiKey.SYNC_GROUP, 5),
            SyncGroupRequest(
                group_id="g",  # type: ignore[arg-type]
                generation_id=i32(1),
                member_id=first.member_id,
                protocol_type="consumer",
                protocol_name="range",
                assignments=(
                    SyncGroupRequestAssignment(member_id=first.member_id, assignment=b"mine"),
                ),
            ),
        )
        assert (synced.error_code, synced.assignment) == (KioErrorCode.none, b"mine")

    run(scenario, tmp_path)


def test_a_v0_join_is_served_up_converted_and_answered_in_v0s_layout(tmp_path: Path) -> None:
    async def scenario(broker: Broker) -> Any:
        registry = ApiRegistry()
        register(registry, broker)
        handle = registry.handler_for(ApiKey.JOIN_GROUP, 0)
        assert handle is not None
        v0 = load_request_schema(ApiKey.JOIN_GROUP, 0)(
            group_id="g",
            session_timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
            member_id="",
            protocol_type="consumer",
            protocols=(
                load_request_schema(ApiKey.JOIN_GROUP, 0)
                .__dataclass_fields__["protocols"]
                .type.__args__[0](name="range", metadata=SUBSCRIPTION),
            ),
        )
        return on_the_wire(ApiKey.JOIN_GROUP, 0, await handle(header(ApiKey.JOIN_GROUP, 0), v0))

    answer = run(scenario, tmp_path)
    # v0 members need no known member id; v0 has no throttle time, and its protocol name
    # is a string that cannot be null.
    assert answer.error_code == KioErrorCode.none
    assert (answer.generation_id, answer.protocol_name) == (1, "range")
    assert answer.leader == answer.member_id != ""
    assert not hasattr(answer, "throttle_time")
