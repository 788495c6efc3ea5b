"""JoinGroup and SyncGroup handlers called directly, without a socket: a real group
coordinator over real partition logs in a tmp dir, requests as kio classes, responses
written as the version asked puts them on the wire."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.sync_group.v5.request import SyncGroupRequest, SyncGroupRequestAssignment
from kio.serial import entity_reader
from kio.static.primitive import i32, i32Timedelta
from tests.conftest import ManualClock, ManualTimer

from samsa.broker.handlers.join_group import join_group, register, sync_group
from samsa.broker.network.registry import ApiRegistry
from samsa.coordinator.group.coordinator import GroupConfig, GroupCoordinator
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import RequestHeader, encode_response_for
from samsa.storage import Log, LogConfig
from samsa.storage.log_loader import load_log
from samsa.storage.validator import AppendOrigin
from samsa.types import TopicPartition

T = TypeVar("T")
SUBSCRIPTION = b"\x00\x01"


class Broker:
    """What the group handlers use of a broker: a real coordinator, its appends going to
    real logs, and internal topics that exist."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.logs: dict[TopicPartition, Log] = {}
        clock = ManualClock()
        config = GroupConfig(min_session_timeout_ms=10, initial_rebalance_delay_ms=0)
        self.group_coordinator = GroupCoordinator(
            3, self._append, clock, config, timer=ManualTimer(clock)
        )
        self.topics = self
        self.offsets_topic_created = 0

    async def ensure_offsets_topic(self) -> None:
        self.offsets_topic_created += 1

    async def _append(self, tp: TopicPartition, records: bytes) -> None:
        if tp not in self.logs:
            self.logs[tp] = load_log(self.tmp / f"{tp.topic}-{tp.partition}", LogConfig())
        self.logs[tp].append_as_leader(bytearray(records), origin=AppendOrigin.COORDINATOR)


def run(scenario: Callable[[Broker], Awaitable[T]], tmp_path: Path) -> T:
    async def main() -> T:
        broker = Broker(tmp_path)
        broker.group_coordinator.start()
        try:
            return await scenario(broker)
        finally:
            await broker.group_coordinator.shutdown()

    return asyncio.run(main())


def header(api_key: int, version: int) -> RequestHeader:
    return RequestHeader(api_key, version, 7, "client")


def join_request(member_id: str = "") -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id="g",  # type: ignore[arg-type]
        session_timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
        rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        member_id=member_id,
        protocol_type="consumer",
        protocols=(JoinGroupRequestProtocol(name="range", metadata=SUBSCRIPTION),),
    )


def on_the_wire(api_key: int, version: int, response: Any) -> Any:
    """``response`` as a client of ``version`` reads it back."""
    frame = encode_response_for(api_key, version, 7, response)[4:]
    cls = load_response_schema(api_key, version)
    header, header_size = entity_reader(cls.__header_schema__)(frame, 0)
    assert header.correlation_id == 7
    answer, size = entity_reader(cls)(frame, header_size)
    assert header_size + size == len(frame)
    return answer


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
