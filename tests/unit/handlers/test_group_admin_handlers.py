"""Heartbeat, DescribeGroups, ListGroups, DeleteGroups and OffsetDelete handlers called
directly, without a socket, over a real group coordinator (see group_broker)."""

from __future__ import annotations

from pathlib import Path

from kio.index import load_request_schema
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.offset_delete.v0.request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32
from tests.unit.handlers.group_broker import Broker, header, on_the_wire, run, stable_member

from samsa.broker.handlers.delete_groups import delete_groups, offset_delete
from samsa.broker.handlers.describe_groups import describe_groups, list_groups
from samsa.broker.handlers.describe_groups import register as register_describe
from samsa.broker.handlers.heartbeat import heartbeat
from samsa.broker.network.registry import ApiRegistry
from samsa.protocol.api_keys import ApiKey

G = GroupId("g")


def beat(member: str, generation: int = 1) -> HeartbeatRequest:
    return HeartbeatRequest(group_id=G, generation_id=i32(generation), member_id=member)


def test_a_member_of_the_current_generation_heartbeats(tmp_path: Path) -> None:
    async def scenario(broker: Broker) -> list[KioErrorCode]:
        member = await stable_member(broker)
        h = header(ApiKey.HEARTBEAT, 4)
        return [
            (await heartbeat(broker, h, beat(member))).error_code,
            (await heartbeat(broker, h, beat(member, generation=0))).error_code,
            (await heartbeat(broker, h, beat("nobody"))).error_code,
        ]

    assert run(scenario, tmp_path) == [
        KioErrorCode.none, KioErrorCode.illegal_generation, KioErrorCode.unknown_member_id,
    ]  # fmt: skip


def test_a_stable_group_is_described_with_its_member_and_assignment(tmp_path: Path) -> None:
    async def scenario(broker: Broker) -> tuple[str, object]:
        member = await stable_member(broker)
        request = DescribeGroupsRequest(groups=(G,), include_authorized_operations=False)
        response = await describe_groups(broker, header(ApiKey.DESCRIBE_GROUPS, 5), request)
        return member, response.groups

    member, groups = run(scenario, tmp_path)
    [group] = groups  # type: ignore[misc]
    assert (group.error_code, group.group_state, group.protocol_type, group.protocol_data) == (
        KioErrorCode.none, "Stable", "consumer", "range",
    )  # fmt: skip
    assert [(m.member_id, m.member_assignment) for m in group.members] == [(member, b"mine")]


def test_describe_groups_v0_is_answered_without_the_fields_v0_lacks(tmp_path: Path) -> None:
    async def scenario(broker: Broker) -> object:
        await stable_member(broker)
        registry = ApiRegistry()
        register_describe(registry, broker)
        handle = registry.handler_for(ApiKey.DESCRIBE_GROUPS, 0)
        assert handle is not None
        v0 = load_request_schema(ApiKey.DESCRIBE_GROUPS, 0)(groups=("g",))
        response = await handle(header(ApiKey.DESCRIBE_GROUPS, 0), v0)
        return on_the_wire(ApiKey.DESCRIBE_GROUPS, 0, response)

    answer = run(scenario, tmp_path)
    assert [g.group_state for g in answer.groups] == ["Stable"]  # type: ignore[attr-defined]
    assert not hasattr(answer, "throttle_time")
    assert not hasattr(answer.groups[0], "authorized_operations")  # type: ignore[attr-defined]


def test_list_groups_filters_by_state(tmp_path: Path) -> None:
    async def scenario(broker: Broker) -> tuple[list[str], list[str]]:
        await stable_member(broker)
        h = header(ApiKey.LIST_GROUPS, 5)
        stable = await list_groups(broker, h, ListGroupsRequest(states_filter=("stable",)))
        empty = await list_groups(broker, h, ListGroupsRequest(states_filter=("Empty",)))
        return [g.group_id for g in stable.groups], [g.group_id for g in empty.groups]

    assert run(scenario, tmp_path) == (["g"], [])


def test_a_group_with_members_is_not_deleted(tmp_path: Path) -> None:
    async def scenario(broker: Broker) -> list[tuple[str, KioErrorCode]]:
        await stable_member(broker)
        request = DeleteGroupsRequest(groups_names=(G,))
        response = await delete_groups(broker, header(ApiKey.DELETE_GROUPS, 2), request)
        return [(r.group_id, r.error_code) for r in response.results]

    assert run(scenario, tmp_path) == [("g", KioErrorCode.non_empty_group)]


def test_offset_delete_of_an_unknown_group_answers_group_id_not_found(tmp_path: Path) -> None:
    async def scenario(broker: Broker) -> tuple[KioErrorCode, int]:
        request = OffsetDeleteRequest(group_id=GroupId("nobody"), topics=(OffsetDeleteRequestTopic(
            name=TopicName("t"), partitions=(OffsetDeleteRequestPartition(partition_index=i32(0)),),
        ),))  # fmt: skip
        response = await offset_delete(broker, header(ApiKey.OFFSET_DELETE, 0), request)
        return response.error_code, len(response.topics)

    assert run(scenario, tmp_path) == (KioErrorCode.group_id_not_found, 0)
