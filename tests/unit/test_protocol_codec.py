"""decode_request / encode_response against real kio messages, and hostile frames."""

from __future__ import annotations

import contextlib
import datetime
import importlib
import io
import os
import resource
import signal
import struct
import subprocess
import sys
import textwrap
import uuid
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import DecodeError
from kio.serial.writers import write_unsigned_varint

import samsa.protocol
from samsa.protocol import (
    RequestDecodeError,
    RequestHeader,
    decode_request,
    encode_response,
    peek_header,
    request_class,
)
from samsa.records import build_batch

RECORDS = build_batch([b"first value", b"second value"], keys=[b"k1", None], timestamp=1_700_000)


def schema(api: str, version: int, kind: str = "request") -> ModuleType:
    return importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")


def encoded(cls: type, obj: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(cls)(buffer, obj)
    return buffer.getvalue()


def request_frame(request: Any, correlation_id: int = 7, client_id: str | None = "cli") -> bytes:
    """A request frame (without size prefix) as a Kafka client writes it, built by kio."""
    header_cls = request.__header_schema__
    header = header_cls(
        request_api_key=request.__api_key__,
        request_api_version=request.__version__,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    return encoded(header_cls, header) + encoded(type(request), request)


def uvarint(value: int) -> bytes:
    buffer = io.BytesIO()
    write_unsigned_varint(buffer, value)
    return buffer.getvalue()


def header_v1(api_key: int, api_version: int, correlation_id: int = 7) -> bytes:
    return struct.pack(">hhih", api_key, api_version, correlation_id, 3) + b"cli"


def header_v2(api_key: int, api_version: int, correlation_id: int = 7) -> bytes:
    return header_v1(api_key, api_version, correlation_id) + b"\x00"


def padded(frame: bytes, size: int = 100) -> bytes:
    return frame + bytes(size - len(frame))


# ---- requests that round-trip -------------------------------------------------------------


def api_versions_request(version: int) -> Any:
    cls = schema("api_versions", version).ApiVersionsRequest
    if version < 3:
        return cls()
    return cls(client_software_name="samsa-test", client_software_version="1.0")


def metadata_request(version: int) -> Any:
    module = schema("metadata", version)
    if version == 0:
        return module.MetadataRequest(topics=(module.MetadataRequestTopic(name="orders"),))
    if version == 9:
        return module.MetadataRequest(
            topics=(module.MetadataRequestTopic(name="orders"),),
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=True,
            include_topic_authorized_operations=False,
        )
    return module.MetadataRequest(
        topics=(
            module.MetadataRequestTopic(topic_id=None, name="orders"),
            module.MetadataRequestTopic(topic_id=uuid.UUID(int=42), name=None),
        ),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=True,
    )


def produce_request(version: int, records: bytes | None = RECORDS) -> Any:
    module = schema("produce", version)
    return module.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(
            module.TopicProduceData(
                name="orders",
                partition_data=(
                    module.PartitionProduceData(index=0, records=records),
                    module.PartitionProduceData(index=3, records=None),
                ),
            ),
        ),
    )


def fetch_request(version: int) -> Any:
    module = schema("fetch", version)
    partition = module.FetchPartition(partition=2, fetch_offset=1234, partition_max_bytes=1 << 20)
    topic = module.FetchTopic(topic="orders", partitions=(partition,))
    common: dict[str, Any] = {
        "max_wait": datetime.timedelta(milliseconds=500),
        "min_bytes": 1,
        "topics": (topic,),
    }
    if version < 12:
        return module.FetchRequest(**common)
    return module.FetchRequest(
        **common,
        cluster_id="cluster-1",  # a tagged field
        forgotten_topics_data=(module.ForgottenTopic(topic="old", partitions=(1, 2)),),
        rack_id="rack-a",
    )


SAMPLE_REQUESTS = [
    *(api_versions_request(version) for version in range(5)),
    *(metadata_request(version) for version in (0, 9, 12)),
    *(produce_request(version) for version in (3, 9, 12)),
    *(fetch_request(version) for version in (4, 12)),
]


def sample_id(request: Any) -> str:
    return f"{type(request).__name__}-v{request.__version__}"


@pytest.mark.parametrize("request_body", SAMPLE_REQUESTS, ids=sample_id)
def test_decode_request_returns_the_body_kio_encoded(request_body: Any) -> None:
    _, body = decode_request(request_frame(request_body))
    assert body == request_body


@pytest.mark.parametrize("request_body", SAMPLE_REQUESTS, ids=sample_id)
def test_decode_request_returns_the_header_fields(request_body: Any) -> None:
    header, _ = decode_request(request_frame(request_body, correlation_id=-5, client_id="app-1"))
    assert header == RequestHeader(
        api_key=request_body.__api_key__,
        api_version=request_body.__version__,
        correlation_id=-5,
        client_id="app-1",
    )


@pytest.mark.parametrize("client_id", [None, "", "ç-client"])
@pytest.mark.parametrize("request_body", [produce_request(3), produce_request(9)], ids=sample_id)
def test_the_header_reads_as_kio_reads_it(client_id: str | None, request_body: Any) -> None:
    frame = request_frame(request_body, correlation_id=99, client_id=client_id)
    kio_header, _ = entity_reader(request_body.__header_schema__)(frame, 0)
    header, _ = decode_request(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        kio_header.request_api_key,
        kio_header.request_api_version,
        kio_header.correlation_id,
        kio_header.client_id,
    )


def test_produce_records_come_back_byte_for_byte() -> None:
    _, body = decode_request(request_frame(produce_request(9)))
    assert body.topic_data[0].partition_data[0].records == RECORDS


def test_request_class_names_kios_class_for_a_known_version() -> None:
    assert request_class(0, 9) is schema("produce", 9).ProduceRequest


@pytest.mark.parametrize(("api_key", "api_version"), [(999, 0), (0, 0), (3, 99), (4, 0), (-1, 0)])
def test_request_class_is_none_where_kio_has_no_schema(api_key: int, api_version: int) -> None:
    assert request_class(api_key, api_version) is None


# ---- frames that are refused ----------------------------------------------------------------


def test_an_unknown_api_key_is_rejected() -> None:
    with pytest.raises(RequestDecodeError):
        decode_request(header_v1(999, 0) + b"\x00\x00")


@pytest.mark.parametrize(
    ("api_key", "api_version"), [(0, 14), (3, 99)], ids=["produce-v14", "md-v99"]
)
def test_an_unsupported_version_is_rejected(api_key: int, api_version: int) -> None:
    with pytest.raises(RequestDecodeError):
        decode_request(padded(header_v1(api_key, api_version)))


@pytest.mark.parametrize(
    ("api_key", "api_version"), [(0, 0), (3, 99)], ids=["produce-v0", "md-v99"]
)
def test_peek_header_reads_a_frame_of_an_unsupported_version(
    api_key: int, api_version: int
) -> None:
    assert peek_header(padded(header_v1(api_key, api_version, 4242))) == (
        api_key,
        api_version,
        4242,
    )


def test_peek_header_rejects_a_frame_shorter_than_eight_bytes() -> None:
    with pytest.raises(RequestDecodeError):
        peek_header(b"\x00\x12\x00\x03\x00\x00\x00")


def test_every_truncation_of_a_frame_is_rejected() -> None:
    frame = request_frame(metadata_request(12))
    for length in range(len(frame)):
        with pytest.raises(RequestDecodeError):
            decode_request(frame[:length])


@pytest.mark.parametrize("request_body", SAMPLE_REQUESTS, ids=sample_id)
def test_trailing_bytes_after_the_body_are_ignored_as_kafka_does(request_body: Any) -> None:
    _header, body = decode_request(request_frame(request_body) + b"\x00\x01\x02")
    assert body == request_body


def test_a_negative_client_id_length_other_than_null_is_rejected() -> None:
    frame = struct.pack(">hhih", 18, 0, 7, -2)
    with pytest.raises(RequestDecodeError):
        decode_request(frame)


def test_a_client_id_that_is_not_utf8_is_rejected() -> None:
    frame = struct.pack(">hhih", 18, 0, 7, 2) + b"\xff\xfe"
    with pytest.raises(RequestDecodeError):
        decode_request(frame)


def test_a_tagged_field_in_request_header_v2_is_rejected() -> None:
    frame = header_v1(18, 3) + b"\x01" + uvarint(0) + uvarint(1) + b"x" + b"\x01\x01\x00"
    with pytest.raises(RequestDecodeError):
        decode_request(frame)


def test_an_unknown_tagged_field_in_the_body_is_rejected() -> None:
    # ApiVersionsRequest v3: two empty compact strings, then one tag (99) of one byte.
    frame = header_v2(18, 3) + b"\x01\x01" + b"\x01" + uvarint(99) + uvarint(1) + b"x"
    with pytest.raises(RequestDecodeError):
        decode_request(frame)


def test_an_error_raised_by_kio_becomes_a_request_decode_error() -> None:
    # Metadata v0 with one topic whose name is not UTF-8: the guard passes it, kio refuses it.
    frame = header_v1(3, 0) + struct.pack(">ih", 1, 2) + b"\xff\xfe"
    with pytest.raises(RequestDecodeError) as raised:
        decode_request(frame)
    assert isinstance(raised.value.__cause__, DecodeError)


# ---- counts the bytes cannot back -----------------------------------------------------------

# ProduceRequest v3: null transactional id, acks, timeout, then the topic_data count.
PRODUCE_V3_PREFIX = header_v1(0, 3) + struct.pack(">hhi", -1, -1, 30_000)
# ProduceRequest v9: null transactional id (compact), acks, timeout, then the topic_data count.
PRODUCE_V9_PREFIX = header_v2(0, 9) + b"\x00" + struct.pack(">hi", -1, 30_000)

HOSTILE_FRAMES = {
    "produce-v3-count-int32-max": PRODUCE_V3_PREFIX + struct.pack(">i", 2**31 - 1),
    "produce-v3-count-2**31-as-int32": PRODUCE_V3_PREFIX + bytes.fromhex("80000000"),
    "metadata-v0-count-int32-max": header_v1(3, 0) + struct.pack(">i", 2**31 - 1),
    "metadata-v0-count-minus-two": header_v1(3, 0) + struct.pack(">i", -2),
    "metadata-v12-compact-count-2**31": header_v2(3, 12) + uvarint(2**31 + 1),
    "metadata-v12-compact-count-2**32": header_v2(3, 12) + uvarint(2**32 + 1),
    "metadata-v12-compact-count-2**34": header_v2(3, 12) + uvarint(2**34 + 1),
    "produce-v9-compact-count-2**32": PRODUCE_V9_PREFIX + uvarint(2**32 + 1),
    "produce-v9-inner-compact-count-2**32": (
        PRODUCE_V9_PREFIX + uvarint(2) + uvarint(2) + b"t" + uvarint(2**32 + 1)
    ),
    "metadata-v12-six-byte-varint": header_v2(3, 12) + b"\x81\x80\x80\x80\x80\x00",
}


@pytest.mark.parametrize("frame", list(HOSTILE_FRAMES.values()), ids=list(HOSTILE_FRAMES))
def test_an_array_count_larger_than_the_frame_is_rejected(frame: bytes) -> None:
    with pytest.raises(RequestDecodeError):
        decode_request(padded(frame))


KIO_ALONE = """
from kio.schema.metadata.v12.request import MetadataRequest
from kio.serial import entity_reader
entity_reader(MetadataRequest)({body!r}, 0)
"""

DECODE_REQUEST = """
from samsa.protocol import RequestDecodeError, decode_request
try:
    decode_request({frame!r})
except RequestDecodeError:
    print("rejected")
"""


def run_python(source: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(source)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "RUST_BACKTRACE": "0"},
        preexec_fn=no_core_dump,
        check=False,
    )


def no_core_dump() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def test_kio_alone_aborts_the_process_on_a_five_byte_compact_array_count() -> None:
    # Why the guard exists: this is a SIGABRT, not an exception (kio 0.6.5).
    body = padded(uvarint(2**32 + 1))
    result = run_python(KIO_ALONE.format(body=body))
    assert result.returncode == -signal.SIGABRT, result.stderr


def test_decode_request_rejects_the_same_count_and_the_process_lives_on() -> None:
    frame = padded(header_v2(3, 12) + uvarint(2**32 + 1))
    result = run_python(DECODE_REQUEST.format(frame=frame))
    assert (result.returncode, result.stdout.strip()) == (0, "rejected"), result.stderr


FUZZ_BASES = [request_frame(produce_request(9)), request_frame(metadata_request(12))]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.sampled_from(FUZZ_BASES),
    mutations=st.lists(
        st.tuples(st.integers(min_value=0, max_value=10_000), st.integers(0, 255)),
        min_size=1,
        max_size=8,
    ),
    cut=st.none() | st.integers(min_value=0, max_value=10_000),
)
def test_decode_request_on_mutated_frames_returns_or_raises_request_decode_error(
    base: bytes, mutations: list[tuple[int, int]], cut: int | None
) -> None:
    frame = bytearray(base)
    for position, value in mutations:
        frame[position % len(frame)] = value
    if cut is not None:
        del frame[cut % len(frame) :]
    with contextlib.suppress(RequestDecodeError):
        decode_request(bytes(frame))


# ---- responses ------------------------------------------------------------------------------


def decode_response(frame: bytes, response_cls: type) -> tuple[int, Any, int]:
    """(correlation id, body, header size) read back with kio, checking the size prefix."""
    (size,) = struct.unpack_from(">i", frame, 0)
    assert size == len(frame) - 4
    header_cls: Any = response_cls.__header_schema__
    header, header_size = entity_reader(header_cls)(frame, 4)
    body, body_size = entity_reader(response_cls)(frame, 4 + header_size)
    assert 4 + header_size + body_size == len(frame)
    return header.correlation_id, body, header_size


def api_versions_response(version: int) -> Any:
    module = schema("api_versions", version, "response")
    api_keys = (
        module.ApiVersion(api_key=0, min_version=3, max_version=12),
        module.ApiVersion(api_key=18, min_version=0, max_version=4),
    )
    if version == 0:
        return module.ApiVersionsResponse(error_code=ErrorCode.none, api_keys=api_keys)
    return module.ApiVersionsResponse(
        error_code=ErrorCode.none, api_keys=api_keys, throttle_time=datetime.timedelta(0)
    )


def metadata_response_v12() -> Any:
    module = schema("metadata", 12, "response")
    partition = module.MetadataResponsePartition(
        error_code=ErrorCode.none,
        partition_index=0,
        leader_id=1,
        leader_epoch=0,
        replica_nodes=(1,),
        isr_nodes=(1,),
        offline_replicas=(),
    )
    return module.MetadataResponse(
        throttle_time=datetime.timedelta(0),
        brokers=(module.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=9092),),
        cluster_id="samsa-cluster",
        controller_id=1,
        topics=(
            module.MetadataResponseTopic(
                error_code=ErrorCode.none,
                name="orders",
                topic_id=uuid.UUID(int=7),
                is_internal=False,
                partitions=(partition,),
                topic_authorized_operations=-(2**31),
            ),
        ),
    )


def produce_response_v9() -> Any:
    module = schema("produce", 9, "response")
    partition = module.PartitionProduceResponse(
        index=0, error_code=ErrorCode.none, base_offset=41, record_errors=()
    )
    return module.ProduceResponse(
        responses=(module.TopicProduceResponse(name="orders", partition_responses=(partition,)),)
    )


def fetch_response_v12(records: bytes | memoryview) -> Any:
    module = schema("fetch", 12, "response")
    partition = module.PartitionData(
        partition_index=0,
        error_code=ErrorCode.none,
        high_watermark=2,
        aborted_transactions=None,
        records=records,
    )
    return module.FetchResponse(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        responses=(module.FetchableTopicResponse(topic="orders", partitions=(partition,)),),
    )


SAMPLE_RESPONSES = [
    api_versions_response(0),
    api_versions_response(3),
    metadata_response_v12(),
    produce_response_v9(),
    fetch_response_v12(RECORDS),
]


@pytest.mark.parametrize("response", SAMPLE_RESPONSES, ids=sample_id)
def test_encode_response_reads_back_with_kio(response: Any) -> None:
    correlation_id, body, _ = decode_response(encode_response(123, response), type(response))
    assert (correlation_id, body) == (123, response)


@pytest.mark.parametrize("version", [0, 3])
def test_api_versions_responses_use_response_header_v0(version: int) -> None:
    frame = encode_response(5, api_versions_response(version))
    assert frame[4:8] == struct.pack(">i", 5)
    assert frame[8:10] == b"\x00\x00"  # the body's error code follows the correlation id
    _, _, header_size = decode_response(frame, type(api_versions_response(version)))
    assert header_size == 4


def test_flexible_responses_other_than_api_versions_use_response_header_v1() -> None:
    frame = encode_response(5, metadata_response_v12())
    assert frame[4:9] == struct.pack(">i", 5) + b"\x00"  # correlation id, empty tag section


@pytest.mark.parametrize("response", SAMPLE_RESPONSES, ids=sample_id)
def test_the_response_header_is_what_kios_header_writer_writes(response: Any) -> None:
    header_cls: Any = response.__header_schema__
    kio_header = encoded(header_cls, header_cls(correlation_id=-77))
    frame = encode_response(-77, response)
    assert frame[4 : 4 + len(kio_header)] == kio_header


def test_records_given_as_a_memoryview_are_encoded_unchanged() -> None:
    response = fetch_response_v12(memoryview(RECORDS))
    _, body, _ = decode_response(encode_response(1, response), type(response))
    assert body.responses[0].partitions[0].records == RECORDS


def test_the_protocol_package_exports_exactly_its_public_names() -> None:
    assert sorted(samsa.protocol.__all__) == [
        "FrameError",
        "GuardError",
        "RequestDecodeError",
        "RequestHeader",
        "check_entity",
        "decode_request",
        "encode_response",
        "peek_header",
        "request_class",
    ]
