"""A broker context for the group handlers, without a socket: a real group coordinator whose
appends go to real partition logs in a tmp dir, requests as kio classes, responses read
back as a client of the version asked reads them."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.sync_group.v5.request import SyncGroupRequest, SyncGroupRequestAssignment
from kio.schema.types import GroupId
from kio.serial import entity_reader
from kio.static.primitive import i32, i32Timedelta
from tests.conftest import ManualClock, ManualTimer

from samsa.broker.handlers.join_group import join_group, sync_group
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


async def stable_member(broker: Broker) -> str:
    """The member id of the one member of group "g", joined and synced (generation 1)."""
    first = await join_group(broker, header(ApiKey.JOIN_GROUP, 9), join_request())
    await join_group(broker, header(ApiKey.JOIN_GROUP, 9), join_request(first.member_id))
    synced = await sync_group(broker, header(ApiKey.SYNC_GROUP, 5), SyncGroupRequest(
        group_id=GroupId("g"), generation_id=i32(1), member_id=first.member_id,
        assignments=(SyncGroupRequestAssignment(member_id=first.member_id, assignment=b"mine"),),
    ))  # fmt: skip
    assert synced.error_code == KioErrorCode.none
    return first.member_id
