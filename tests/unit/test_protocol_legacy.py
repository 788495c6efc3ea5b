"""Request versions kio lacks, read and answered in their old layouts (samsa.protocol.legacy)."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from kio.index import load_response_schema

from samsa.protocol.build import build
from samsa.protocol.codec import RequestDecodeError, decode_request, encode_response_for
from samsa.protocol.legacy import (
    Array,
    Derived,
    LegacyVersion,
    Struct,
    Type,
    decode_legacy_response,
    encode_legacy_request,
    legacy_versions,
)

VERSIONS = {f"{v.request_class.__name__[:-7]}v{v.version}": v for v in legacy_versions()}


def _sample(t: Type | Derived, seed: int) -> Any:
    """A value of ``t`` with every field set (no zeros), differing by ``seed``."""
    if isinstance(t, Struct):
        return {name: _sample(f, seed + i) for i, (name, f) in enumerate(t.fields)}
    if isinstance(t, Array):
        return [_sample(t.item, seed), _sample(t.item, seed + 7)]
    return {
        "int8": 1 + seed % 100, "int16": 300 + seed, "int32": 70_000 + seed,
        "int64": 5_000_000_000 + seed, "bool": True, "string": f"s{seed}",
        "nullable_string": f"n{seed}", "records": b"r%d" % seed,
    }[t]  # fmt: skip


def _frame(legacy: LegacyVersion, body: bytes) -> bytes:
    header = struct.pack(">hhih", legacy.api_key, legacy.version, 5, 4) + b"test"
    return header + body


def _assert_carries(entity: Any, values: dict[str, Any]) -> None:
    for name, value in values.items():
        if not hasattr(entity, name):
            continue  # a field only the old version has
        got = getattr(entity, name)
        if isinstance(value, list) and value and isinstance(value[0], dict):
            assert len(got) == len(value)
            for item, expected in zip(got, value, strict=True):
                _assert_carries(item, expected)
        elif isinstance(value, list):
            assert list(got) == value
        elif hasattr(got, "total_seconds"):
            assert got.total_seconds() * 1000 == value
        else:
            assert got == value, name


@pytest.mark.parametrize("legacy", VERSIONS.values(), ids=VERSIONS.keys())
def test_an_old_request_decodes_into_the_kio_class_it_is_served_as(legacy: LegacyVersion) -> None:
    values = _sample(legacy.request, 1)
    header, body = decode_request(_frame(legacy, encode_legacy_request(legacy, values)))
    assert (header.api_key, header.api_version, header.correlation_id) == (
        legacy.api_key, legacy.version, 5,
    )  # fmt: skip
    assert type(body) is legacy.request_class
    _assert_carries(body, values)


@pytest.mark.parametrize("legacy", VERSIONS.values(), ids=VERSIONS.keys())
def test_an_old_request_cut_short_is_refused(legacy: LegacyVersion) -> None:
    body = encode_legacy_request(legacy, _sample(legacy.request, 1))
    with pytest.raises(RequestDecodeError):
        decode_request(_frame(legacy, body[:-1]))


def test_an_array_count_the_bytes_cannot_back_is_refused_before_anything_is_read() -> None:
    produce_v0 = next(v for v in legacy_versions() if (v.api_key, v.version) == (0, 0))
    body = struct.pack(">hii", 1, 1000, 0x7FFFFFFF)  # acks, timeout, 2^31-1 topics
    with pytest.raises(RequestDecodeError, match="exceeds the remaining bytes"):
        decode_request(_frame(produce_v0, body))


def test_a_produce_v0_response_has_neither_throttle_time_nor_log_append_time() -> None:
    produce_v0 = next(v for v in legacy_versions() if (v.api_key, v.version) == (0, 0))
    response = build(load_response_schema(0, 3), {
        "responses": [{"name": "t", "partition_responses": [
            {"index": 2, "error_code": 0, "base_offset": 41, "log_append_time": 5}]}],
        "throttle_time": 9,
    })  # fmt: skip
    frame = encode_response_for(0, 0, 5, response)
    expected_body = (
        struct.pack(">i", 1) + struct.pack(">h", 1) + b"t"
        + struct.pack(">i", 1) + struct.pack(">ihq", 2, 0, 41)
    )  # fmt: skip
    assert frame == struct.pack(">ii", 4 + len(expected_body), 5) + expected_body
    assert decode_legacy_response(produce_v0, frame[8:])["responses"][0]["name"] == "t"


def test_list_offsets_v0_answers_the_offset_found_as_a_list_of_one() -> None:
    list_offsets_v0 = next(v for v in legacy_versions() if (v.api_key, v.version) == (2, 0))
    response = build(load_response_schema(2, 1), {"topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "error_code": 0, "timestamp": -1, "offset": 17},
        {"partition_index": 1, "error_code": 3, "timestamp": -1, "offset": -1},
    ]}]})  # fmt: skip
    decoded = decode_legacy_response(list_offsets_v0, encode_response_for(2, 0, 5, response)[8:])
    partitions = decoded["topics"][0]["partitions"]
    assert [p["old_style_offsets"] for p in partitions] == [[17], []]
    assert [p["error_code"] for p in partitions] == [0, 3]


def test_describe_configs_v0_says_is_default_for_a_default_config() -> None:
    describe_v0 = next(v for v in legacy_versions() if (v.api_key, v.version) == (32, 0))
    config = {"read_only": False, "is_sensitive": False, "synonyms": []}
    response = build(load_response_schema(32, 1), {"throttle_time": 0, "results": [{
        "error_code": 0, "error_message": None, "resource_type": 2, "resource_name": "t",
        "configs": [{"name": "a", "value": "1", "config_source": 5, **config},
                    {"name": "b", "value": "2", "config_source": 1, **config}],
    }]})  # fmt: skip
    decoded = decode_legacy_response(describe_v0, encode_response_for(32, 0, 5, response)[8:])
    assert [c["is_default"] for c in decoded["results"][0]["configs"]] == [True, False]
