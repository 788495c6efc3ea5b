"""CPU per request of the typed-handler glue against the dict-built responses it replaces.

Not a test. For SyncGroup and JoinGroup (one member), the time to turn a decoded request
into what the handler sees and the handler's answer into the response frame:

- *dict*: the old way, ``respond()`` building the version asked's class from a dict;
- *typed*: the newest request (an older one up-converted), the newest response built
  with keyword arguments, written by the asked version's writer.

    .venv/bin/python bench/typed_handlers_bench.py
"""

from __future__ import annotations

import datetime
import time
import timeit
from typing import Any

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.schema.join_group.v9.request import JoinGroupRequest
from kio.schema.join_group.v9.response import JoinGroupResponse, JoinGroupResponseMember
from kio.schema.sync_group.v5.request import SyncGroupRequest
from kio.schema.sync_group.v5.response import SyncGroupResponse
from kio.static.primitive import i32, i32Timedelta

from samsa.broker.api import respond
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import build
from samsa.protocol.codec import RequestHeader, encode_response_for
from samsa.protocol.versions import upgrade

NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))
MEMBER = "client-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"


def per_call_us(fn: Any, number: int = 5_000) -> float:
    return min(timeit.repeat(fn, number=number, repeat=9, timer=time.process_time)) / number * 1e6


def sync_dict(version: int) -> bytes:
    header = RequestHeader(ApiKey.SYNC_GROUP, version, 1, "c")
    response = respond(header, {"throttle_time": 0, "error_code": 0, "protocol_type": "consumer",
                                "protocol_name": "range", "assignment": b"a" * 40})  # fmt: skip
    return encode_response_for(ApiKey.SYNC_GROUP, version, 1, response)


def sync_typed(version: int, request: Any) -> bytes:
    upgrade(request, SyncGroupRequest)
    response = SyncGroupResponse(throttle_time=NO_THROTTLE, error_code=KioErrorCode.none,
                                 protocol_type="consumer", protocol_name="range",
                                 assignment=b"a" * 40)  # fmt: skip
    return encode_response_for(ApiKey.SYNC_GROUP, version, 1, response)


def join_dict(version: int) -> bytes:
    header = RequestHeader(ApiKey.JOIN_GROUP, version, 1, "c")
    response = respond(header, {
        "throttle_time": 0, "error_code": 0, "generation_id": 1, "protocol_type": "consumer",
        "protocol_name": "range", "leader": MEMBER, "skip_assignment": False,
        "member_id": MEMBER,
        "members": [{"member_id": MEMBER, "group_instance_id": None, "metadata": b"m" * 30}],
    })  # fmt: skip
    return encode_response_for(ApiKey.JOIN_GROUP, version, 1, response)


def join_typed(version: int, request: Any) -> bytes:
    upgrade(request, JoinGroupRequest)
    response = JoinGroupResponse(
        throttle_time=NO_THROTTLE, error_code=KioErrorCode.none, generation_id=i32(1),
        protocol_type="consumer", protocol_name="range", leader=MEMBER, member_id=MEMBER,
        members=(JoinGroupResponseMember(member_id=MEMBER, metadata=b"m" * 30),),
    )  # fmt: skip
    return encode_response_for(ApiKey.JOIN_GROUP, version, 1, response)


def requests(api_key: int, version: int) -> Any:
    values: dict[str, Any] = {
        "group_id": "g", "generation_id": 1, "member_id": MEMBER, "protocol_type": "consumer",
        "session_timeout": 10_000, "rebalance_timeout": 30_000, "protocol_name": "range",
        "protocols": [{"name": "range", "metadata": b"m" * 30}],
        "assignments": [{"member_id": MEMBER, "assignment": b"a" * 40}],
    }  # fmt: skip
    cls = load_request_schema(api_key, version)
    return build(cls, {k: v for k, v in values.items() if k in cls.__dataclass_fields__})


def main() -> None:
    for name, api_key, old, typed, versions in (
        ("SyncGroup", ApiKey.SYNC_GROUP, sync_dict, sync_typed, (5, 3, 0)),
        ("JoinGroup", ApiKey.JOIN_GROUP, join_dict, join_typed, (9, 5, 0)),
    ):
        for version in versions:
            request = requests(api_key, version)
            assert old(version) == typed(version, request)
            before = per_call_us(lambda v=version, f=old: f(v))
            after = per_call_us(lambda v=version, r=request, f=typed: f(v, r))
            print(f"{name} v{version}: dict {before:6.2f} µs   typed {after:6.2f} µs")


if __name__ == "__main__":
    main()
