"""``group.max.size``: a classic group takes no more members than it, as Kafka's; members
past it are answered GROUP_MAX_SIZE_REACHED.

Raw JoinGroup v5 requests on a real broker, each member on its own connection (a join
waits for the rebalance). Members are counted with DescribeGroups, so every step waits
on what the broker says rather than on time.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.rawclient import HANG_S, exchange, read_response, request_frame

from samsa.testing import BrokerProcess
from samsa.testing.waiting import wait_until

JOIN_GROUP, DESCRIBE_GROUPS = 11, 15
VERSION = 5
NONE, MEMBER_ID_REQUIRED, GROUP_MAX_SIZE_REACHED = 0, 79, 81
MAX_SIZE = 3


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    # group.initial.rebalance.delay.ms stays Kafka's 3 s: the members here join in its first
    # milliseconds, so they all find the group still waiting for more.
    process = BrokerProcess(tmp_path / "data", [f"group.max.size={MAX_SIZE}"]).start()
    try:
        yield process
    finally:
        process.stop()


def _join_values(group: str, member_id: str) -> dict[str, Any]:
    subscription = struct.pack(">hih", 0, 1, 1) + b"t" + struct.pack(">i", -1)
    return {"group_id": group, "session_timeout": 30_000, "rebalance_timeout": 30_000,
            "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription}]}  # fmt: skip


def _members(broker: BrokerProcess, group: str) -> list[str]:
    response = exchange(broker.bootstrap, DESCRIBE_GROUPS, 5, {"groups": [group]})
    return [m.member_id for m in response.groups[0].members]


def _wait_for_members(broker: BrokerProcess, group: str, count: int) -> None:
    wait_until(
        lambda: len(_members(broker, group)) >= count,
        f"{group} to have {count} members",
        timeout=HANG_S,
        interval=0.01,
    )


def test_a_member_past_group_max_size_is_refused_though_it_was_given_an_id(
    broker: BrokerProcess,
) -> None:
    """KIP-394: every new member is first handed an id, then joins with it. Four are handed
    ids while the group is empty; the fourth to join with its id finds three waiting."""
    group = "max-size"
    ids = []
    for _ in range(MAX_SIZE + 1):
        first = exchange(broker.bootstrap, JOIN_GROUP, VERSION, _join_values(group, ""))
        assert first.error_code.value == MEMBER_ID_REQUIRED
        ids.append(first.member_id)

    host, port = broker.bootstrap.rsplit(":", 1)
    waiting = []
    try:
        for count, member_id in enumerate(ids[:MAX_SIZE], 1):
            sock = socket.create_connection((host, int(port)), timeout=HANG_S)
            waiting.append(sock)
            sock.sendall(request_frame(JOIN_GROUP, VERSION, _join_values(group, member_id)))
            _wait_for_members(broker, group, count)

        refused = exchange(broker.bootstrap, JOIN_GROUP, VERSION, _join_values(group, ids[-1]))
        assert refused.error_code.value == GROUP_MAX_SIZE_REACHED

        answers = [read_response(sock, JOIN_GROUP, VERSION) for sock in waiting]
    finally:
        for sock in waiting:
            sock.close()
    assert [a.error_code.value for a in answers] == [NONE] * MAX_SIZE
    leader = next(a for a in answers if a.leader == a.member_id)
    assert sorted(m.member_id for m in leader.members) == sorted(ids[:MAX_SIZE])
    assert sorted(_members(broker, group)) == sorted(ids[:MAX_SIZE])


def test_a_new_member_of_a_full_group_is_refused(broker: BrokerProcess) -> None:
    group = "full"
    host, port = broker.bootstrap.rsplit(":", 1)
    waiting = []
    try:
        for count in range(1, MAX_SIZE + 1):
            first = exchange(broker.bootstrap, JOIN_GROUP, VERSION, _join_values(group, ""))
            sock = socket.create_connection((host, int(port)), timeout=HANG_S)
            waiting.append(sock)
            sock.sendall(request_frame(JOIN_GROUP, VERSION, _join_values(group, first.member_id)))
            _wait_for_members(broker, group, count)
        answers = [read_response(sock, JOIN_GROUP, VERSION) for sock in waiting]
        assert [a.error_code.value for a in answers] == [NONE] * MAX_SIZE

        fourth = exchange(broker.bootstrap, JOIN_GROUP, VERSION, _join_values(group, ""))
        assert fourth.error_code.value == GROUP_MAX_SIZE_REACHED
    finally:
        for sock in waiting:
            sock.close()
