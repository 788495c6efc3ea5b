"""Hostile bytes on a raw socket: each costs the broker one connection and nothing else.

Every frame here is written by hand (or by kio, then damaged) and sent over a
plain TCP socket to a real broker process. A malformed frame must close its
connection while the broker stays alive, keeps its memory flat
and keeps serving real clients. A damaged record batch is refused in the
response. A well-formed request that asks for too much — billions of
partitions, a fetch larger than ``fetch.max.bytes``, answers nobody reads —
must be refused or bounded as Kafka bounds it.
"""

from __future__ import annotations

import datetime
import io
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.index import load_request_schema, load_response_schema
from kio.schema.types import BrokerId, TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from samsa.records import RecordBatchBuilder
from samsa.testing import BrokerProcess, start_broker

QUIET = {"log_level": 3}
MAX_REQUEST_BYTES = 104_857_600  # socket.request.max.bytes
# Only a hang detector: the broker closes at once, and a connection still open after this long
# has been left open (connections.max.idle.ms, Kafka's own limit, is 10 minutes).
HANG_S = 20.0
RSS_GROWTH_LIMIT_KB = 10 * 1024
CORRUPT_MESSAGE = 2
UNSUPPORTED_VERSION = 35

POLICY_VIOLATION = 44
# Kafka refuses a CreateTopics request that would create more partitions than this (KAFKA-17870).
MAX_PARTITIONS_PER_CREATE_TOPICS = 10_000
FETCH_MAX_BYTES = 1_048_576  # fetch.max.bytes of the broker that serves the fetch tests

PRODUCE, FETCH, METADATA, API_VERSIONS, CREATE_TOPICS = 0, 1, 3, 18, 19


# -- frames written by hand ------------------------------------------------------------------


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _header_v1(api_key: int, api_version: int, correlation_id: int = 7) -> bytes:
    client_id = b"hostile"
    return struct.pack(">hhih", api_key, api_version, correlation_id, len(client_id)) + client_id


def _header_v2(api_key: int, api_version: int, correlation_id: int = 7) -> bytes:
    return _header_v1(api_key, api_version, correlation_id) + b"\0"  # no tagged fields


def _pad_to(payload: bytes, size: int) -> bytes:
    return payload + b"\x01" * max(0, size - len(payload))


def _produce_v9_with_topic_count(count: int) -> bytes:
    """Produce v9: null transactional id, acks, timeout, then a compact topic_data count."""
    body = b"\0" + struct.pack(">hi", 1, 30_000) + _uvarint(count + 1)
    return _frame(_pad_to(_header_v2(PRODUCE, 9) + body, 100))


def _produce_v9_with_nested(after_topic_name: bytes) -> bytes:
    """Produce v9 with one topic named "t", followed by ``after_topic_name``."""
    body = b"\0" + struct.pack(">hi", 1, 30_000) + _uvarint(2) + _uvarint(2) + b"t"
    return _frame(_pad_to(_header_v2(PRODUCE, 9) + body + after_topic_name, 100))


def _metadata_v12_with_topic_count(count: int) -> bytes:
    """Metadata v12: a compact topics count, then filler where the topics would be."""
    return _frame(_pad_to(_header_v2(METADATA, 12) + _uvarint(count + 1), 100))


def _metadata_v4_with_topic_count(count: int) -> bytes:
    """Metadata v4 (not flexible): an int32 topics count."""
    return _frame(_pad_to(_header_v1(METADATA, 4) + struct.pack(">i", count), 100))


def _timeout(seconds: float) -> Any:
    return i32Timedelta.parse(datetime.timedelta(seconds=seconds))


def _produce_v9_request(topic: str, records: bytes, correlation_id: int = 11) -> bytes:
    """A well-formed Produce v9 request frame, written by kio."""
    request_class = load_request_schema(PRODUCE, 9)
    module = __import__(request_class.__module__, fromlist=["_"])
    request = request_class(
        transactional_id=None,
        acks=i16(1),
        timeout=_timeout(30),
        topic_data=(
            module.TopicProduceData(
                name=TopicName(topic),
                partition_data=(module.PartitionProduceData(index=0, records=records),),
            ),
        ),
    )
    buffer = io.BytesIO()
    entity_writer(request_class)(buffer, request)
    return _frame(_header_v2(PRODUCE, 9, correlation_id) + buffer.getvalue())


def _create_topics_v7_request(topic: str, partitions: int, correlation_id: int = 13) -> bytes:
    """A CreateTopics v7 request frame for one topic with ``partitions`` partitions."""
    request_class = load_request_schema(CREATE_TOPICS, 7)
    module = __import__(request_class.__module__, fromlist=["_"])
    request = request_class(
        topics=(
            module.CreatableTopic(
                name=TopicName(topic),
                num_partitions=i32(partitions),
                replication_factor=i16(1),
                assignments=(),
                configs=(),
            ),
        ),
        timeout=_timeout(5),
        validate_only=False,
    )
    buffer = io.BytesIO()
    entity_writer(request_class)(buffer, request)
    return _frame(_header_v2(CREATE_TOPICS, 7, correlation_id) + buffer.getvalue())


def _fetch_v12_request(
    topic: str, copies: int, partition_max_bytes: int, max_bytes: int, correlation_id: int = 17
) -> bytes:
    """Fetch v12 from offset 0 of partition 0 of ``topic``, named ``copies`` times."""
    request_class = load_request_schema(FETCH, 12)
    module = __import__(request_class.__module__, fromlist=["_"])
    partition = module.FetchPartition(
        partition=i32(0),
        current_leader_epoch=i32(-1),
        fetch_offset=i64(0),
        last_fetched_epoch=i32(-1),
        log_start_offset=i64(-1),
        partition_max_bytes=i32(partition_max_bytes),
    )
    request = request_class(
        cluster_id=None,
        replica_id=BrokerId(-1),
        max_wait=_timeout(0),
        min_bytes=i32(1),
        max_bytes=i32(max_bytes),
        isolation_level=i8(0),
        session_id=i32(0),
        session_epoch=i32(-1),
        topics=(module.FetchTopic(topic=TopicName(topic), partitions=(partition,) * copies),),
        forgotten_topics_data=(),
        rack_id="",
    )
    buffer = io.BytesIO()
    entity_writer(request_class)(buffer, request)
    return _frame(_header_v2(FETCH, 12, correlation_id) + buffer.getvalue())


def _truncated_produce_v9(topic: str) -> bytes:
    """A valid Produce v9 header followed by only half of its body, framed at the cut length."""
    whole = _produce_v9_request(topic, _batch([b"cut short"]))[4:]
    header_size = len(_header_v2(PRODUCE, 9))
    cut = header_size + (len(whole) - header_size) // 2
    return _frame(whole[:cut])


def _batch(values: list[bytes]) -> bytes:
    builder = RecordBatchBuilder()
    for value in values:
        builder.append(value)
    return bytes(builder.build())


HOSTILE_FRAMES: dict[str, bytes] = {
    "frame size -1": struct.pack(">i", -1),
    "frame size 2**31-1": struct.pack(">i", 2**31 - 1),
    "frame size 100 MiB + 1": struct.pack(">i", MAX_REQUEST_BYTES + 1) + b"\0" * 64,
    "unknown api key 999": _frame(_header_v1(999, 0) + b"\0" * 16),
    "truncated produce v9 body": _truncated_produce_v9("hostile-truncated"),
    "produce v9 topic count 2**31": _produce_v9_with_topic_count(2**31),
    "metadata v12 topic count 2**31": _metadata_v12_with_topic_count(2**31),
    "metadata v4 topic count 2**31-1": _metadata_v4_with_topic_count(2**31 - 1),
    "metadata v12 topic count 2**32 (5-byte uvarint)": _metadata_v12_with_topic_count(2**32),
    "produce v9 topic count 2**34 (5-byte uvarint)": _produce_v9_with_topic_count(2**34),
    "produce v9 partition count 2**32 inside a topic": _produce_v9_with_nested(_uvarint(2**32 + 1)),
    "produce v9 records length 2**32": _produce_v9_with_nested(
        _uvarint(2) + struct.pack(">i", 0) + _uvarint(2**32 + 1)
    ),
    "metadata v12 topic name length 2**32": _frame(
        _pad_to(_header_v2(METADATA, 12) + _uvarint(2) + b"\0" * 16 + _uvarint(2**32 + 1), 100)
    ),
    "metadata v12 tagged field count 2**32": _frame(
        _pad_to(_header_v2(METADATA, 12) + b"\0\1\0" + _uvarint(2**32), 100)
    ),
    # Versions kio lacks, read through samsa.protocol.legacy's layouts.
    "produce v0 topic count 2**31-1": _frame(
        _pad_to(_header_v1(PRODUCE, 0) + struct.pack(">hii", 1, 1000, 2**31 - 1), 100)
    ),
    "produce v0 records length 2**31-1": _frame(
        _header_v1(PRODUCE, 0)
        + struct.pack(">hiih", 1, 1000, 1, 1)
        + b"t"
        + struct.pack(">iii", 1, 0, 2**31 - 1)
        + b"\0" * 64
    ),
    "fetch v0 partition count 2**31-1": _frame(
        _header_v1(FETCH, 0)
        + struct.pack(">iiiih", -1, 0, 1, 1, 1)
        + b"t"
        + struct.pack(">i", 2**31 - 1)
        + b"\0" * 64
    ),
    "truncated list offsets v0 body": _frame(_header_v1(2, 0) + struct.pack(">ii", -1, 1)),
}


# -- talking to the broker -------------------------------------------------------------------


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path_factory.mktemp("hostile") / "data")
    try:
        yield process
    finally:
        process.stop()


def _connect(broker: BrokerProcess) -> socket.socket:
    return socket.create_connection((broker.host, broker.port), timeout=HANG_S)


def _closed_by_peer(sock: socket.socket, seconds: float = HANG_S) -> bool:
    """True once the peer closes (EOF or reset); False if it is still open after ``seconds``.

    Any bytes the peer sends first are read and dropped.
    """
    deadline = time.monotonic() + seconds
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        sock.settimeout(remaining)
        try:
            if sock.recv(65536) == b"":
                return True
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False


def _send_hostile(broker: BrokerProcess, data: bytes) -> bool:
    """Send ``data`` on a fresh connection; True once the broker closes it, False if it hangs."""
    with _connect(broker) as sock:
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            return True  # closed before we finished writing
        return _closed_by_peer(sock)


def _exchange(broker: BrokerProcess, frame: bytes) -> bytes:
    """Send one request frame and return its response frame (without the size prefix)."""
    with _connect(broker) as sock:
        sock.sendall(frame)
        size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
        return _recv_exactly(sock, size)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, f"connection closed after {len(data)} of {size} bytes"
        data += chunk
    return bytes(data)


def _rss_kb(broker: BrokerProcess) -> int:
    assert broker.process is not None
    for line in Path(f"/proc/{broker.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS line")


def _assert_alive(broker: BrokerProcess) -> None:
    assert broker.process is not None
    code = broker.process.poll()
    log_tail = broker.log_path.read_text(errors="replace")[-3000:]
    assert code is None, f"broker exited with {code}; log tail:\n{log_tail}"


def _create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(HANG_S)


def _produce_and_read_back(bootstrap: str, topic: str, count: int) -> list[bytes]:
    _create_topic(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **QUIET})
    for i in range(count):
        producer.produce(topic, f"record-{i}".encode())
    assert producer.flush(HANG_S) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False, **QUIET}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + HANG_S
    while len(values) < count and time.monotonic() < deadline:
        for message in consumer.consume(count, 0.5):
            if message.error() is not None:
                raise KafkaException(message.error())
            values.append(message.value())
    consumer.close()
    return values


def _watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", **QUIET})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), HANG_S)
    finally:
        consumer.close()
    return low, high


def _decode_response(frame: bytes, api_key: int, api_version: int, flexible: bool) -> Any:
    header_size = 5 if flexible else 4  # correlation id (+ an empty tagged-field section)
    if flexible:
        assert frame[4] == 0, "response header v1 carries tagged fields"
    response_class = load_response_schema(api_key, api_version)
    body, _ = entity_reader(response_class)(frame, header_size)
    return body


# -- the tests -------------------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(HOSTILE_FRAMES))
def test_hostile_frame_closes_its_connection(broker: BrokerProcess, name: str) -> None:
    assert _send_hostile(broker, HOSTILE_FRAMES[name]), f"{name}: connection left open"
    _assert_alive(broker)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(HOSTILE_FRAMES))
def test_hostile_frame_leaves_other_connections_served(broker: BrokerProcess, name: str) -> None:
    with _connect(broker) as bystander:
        assert _send_hostile(broker, HOSTILE_FRAMES[name])
        bystander.sendall(_frame(_header_v1(API_VERSIONS, 0)))
        size = struct.unpack(">i", _recv_exactly(bystander, 4))[0]
        response = _decode_response(_recv_exactly(bystander, size), API_VERSIONS, 0, False)
    assert response.error_code == 0


@pytest.mark.timeout(90)
def test_broker_memory_grows_less_than_10_mb_over_the_hostile_sequence(
    broker: BrokerProcess,
) -> None:
    # Real clients first, so that the buffers and schemas they need do not count as growth.
    assert len(_produce_and_read_back(broker.bootstrap, "hostile-warmup", 100)) == 100
    before = _rss_kb(broker)
    for _ in range(3):
        for name, data in HOSTILE_FRAMES.items():
            assert _send_hostile(broker, data), f"{name}: connection left open"
            _assert_alive(broker)
    grown = _rss_kb(broker) - before
    assert grown < RSS_GROWTH_LIMIT_KB, f"RSS grew by {grown} kB"


@pytest.mark.timeout(90)
def test_clients_still_produce_and_consume_after_the_hostile_sequence(
    broker: BrokerProcess,
) -> None:
    for name, data in HOSTILE_FRAMES.items():
        assert _send_hostile(broker, data), f"{name}: connection left open"
    _assert_alive(broker)
    values = _produce_and_read_back(broker.bootstrap, "hostile-after", 50)
    assert values == [f"record-{i}".encode() for i in range(50)]


@pytest.mark.timeout(60)
def test_produce_with_a_bad_crc_is_refused_with_corrupt_message_and_not_appended(
    broker: BrokerProcess,
) -> None:
    topic = "hostile-bad-crc"
    _create_topic(broker.bootstrap, topic)
    batch = bytearray(_batch([b"first value", b"second value"]))
    # A byte of a value: covered by the CRC, and no length or count depends on it.
    batch[batch.index(b"second value") + 3] ^= 0xFF
    response_frame = _exchange(broker, _produce_v9_request(topic, bytes(batch), 42))
    assert struct.unpack_from(">i", response_frame)[0] == 42
    response = _decode_response(response_frame, PRODUCE, 9, flexible=True)
    (topic_response,) = response.responses
    (partition_response,) = topic_response.partition_responses
    assert partition_response.error_code == CORRUPT_MESSAGE
    assert _watermarks(broker.bootstrap, topic) == (0, 0)
    _assert_alive(broker)


@pytest.mark.timeout(60)
def test_produce_with_a_good_crc_over_the_same_path_is_appended(broker: BrokerProcess) -> None:
    # The control for the bad-CRC test: the same hand-built request, undamaged, is accepted.
    topic = "hostile-good-crc"
    _create_topic(broker.bootstrap, topic)
    response_frame = _exchange(broker, _produce_v9_request(topic, _batch([b"a", b"b"]), 43))
    response = _decode_response(response_frame, PRODUCE, 9, flexible=True)
    (partition_response,) = response.responses[0].partition_responses
    assert partition_response.error_code == 0
    assert partition_response.base_offset == 0
    assert _watermarks(broker.bootstrap, topic) == (0, 2)


@pytest.mark.timeout(30)
def test_api_versions_at_version_99_gets_a_v0_unsupported_version_answer(
    broker: BrokerProcess,
) -> None:
    # Sent with a flexible header as a newer client would; the answer uses header v0.
    response_frame = _exchange(broker, _frame(_header_v2(API_VERSIONS, 99, 5) + b"\0" * 8))
    assert struct.unpack_from(">i", response_frame)[0] == 5
    response = _decode_response(response_frame, API_VERSIONS, 0, flexible=False)
    assert response.error_code == UNSUPPORTED_VERSION
    assert len(response.api_keys) > 0
    assert any(key.api_key == API_VERSIONS for key in response.api_keys)
    _assert_alive(broker)


# -- requests that are well formed but ask for too much --------------------------------------
# Each runs on a broker of its own: if the broker gives in, it is left unresponsive or bloated.


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker for one test, SIGKILLed at the end: a broker stuck in a request cannot stop."""
    process = start_broker(tmp_path / "data")
    try:
        yield process
    finally:
        process.kill()


@pytest.fixture(scope="module")
def loaded_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker with fetch.max.bytes of 1 MiB and a topic "loaded" holding about 600 kB."""
    process = start_broker(
        tmp_path_factory.mktemp("loaded") / "data", overrides=[f"fetch.max.bytes={FETCH_MAX_BYTES}"]
    )
    try:
        _create_topic(process.bootstrap, "loaded")
        producer = Producer(
            {"bootstrap.servers": process.bootstrap, "batch.size": 16_384, "linger.ms": 5, **QUIET}
        )
        for i in range(600):
            producer.produce("loaded", f"{i:04d}".encode() * 250)
        assert producer.flush(HANG_S) == 0
        yield process
    finally:
        process.kill()


@pytest.mark.timeout(60)
def test_create_topics_for_2_31_partitions_is_refused_with_policy_violation(
    own_broker: BrokerProcess,
) -> None:
    with _connect(own_broker) as sock:
        sock.sendall(_create_topics_v7_request("hostile-huge", 2**31 - 1))
        sock.settimeout(HANG_S)
        try:
            size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
            response_frame = _recv_exactly(sock, size)
        except TimeoutError:
            created = len(list(own_broker.data_dir.glob("hostile-huge-*")))
            raise AssertionError(
                f"no answer after {HANG_S} s; {created} partition directories created so far"
            ) from None
    response = _decode_response(response_frame, CREATE_TOPICS, 7, flexible=True)
    (topic,) = response.topics
    assert topic.error_code == POLICY_VIOLATION
    assert not list(own_broker.data_dir.glob("hostile-huge-*"))


@pytest.mark.timeout(60)
def test_create_topics_over_the_partition_limit_leaves_the_broker_responsive(
    own_broker: BrokerProcess,
) -> None:
    # The broker stays responsive because it refuses the whole request before doing any of
    # its work: the refusal and the absence of partition directories are what is checked (a
    # deadline of a few seconds on the bystander would only measure how busy the machine is).
    with _connect(own_broker) as sock:
        sock.settimeout(HANG_S)
        sock.sendall(
            _create_topics_v7_request("hostile-many", MAX_PARTITIONS_PER_CREATE_TOPICS + 1)
        )
        with _connect(own_broker) as bystander:
            bystander.settimeout(HANG_S)
            bystander.sendall(_frame(_header_v1(API_VERSIONS, 0)))
            size = struct.unpack(">i", _recv_exactly(bystander, 4))[0]
            answer = _decode_response(_recv_exactly(bystander, size), API_VERSIONS, 0, False)
            assert answer.error_code == 0
        size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
        response = _decode_response(_recv_exactly(sock, size), CREATE_TOPICS, 7, flexible=True)
    (topic,) = response.topics
    assert topic.error_code == POLICY_VIOLATION
    assert not list(own_broker.data_dir.glob("hostile-many-*"))


@pytest.mark.timeout(60)
def test_a_fetch_naming_one_partition_many_times_answers_at_most_fetch_max_bytes(
    loaded_broker: BrokerProcess,
) -> None:
    request = _fetch_v12_request("loaded", 20, FETCH_MAX_BYTES, 2**31 - 1)
    response_size = len(_exchange(loaded_broker, request))
    # One batch may go over the limit (KIP-74); the producer's batches are 16 kB at most.
    assert response_size <= FETCH_MAX_BYTES + 64 * 1024, (
        f"{response_size}-byte response to a {len(request)}-byte request"
    )


@pytest.mark.timeout(60)
def test_pipelined_fetches_the_client_never_reads_keep_broker_memory_bounded(
    loaded_broker: BrokerProcess,
) -> None:
    request = _fetch_v12_request("loaded", 1, FETCH_MAX_BYTES, FETCH_MAX_BYTES)
    single_response = len(_exchange(loaded_broker, request))
    assert single_response > 500_000
    before = _rss_kb(loaded_broker)
    grown = 0
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(HANG_S)
        sock.connect((loaded_broker.host, loaded_broker.port))
        sock.sendall(request * 200)  # 200 answers of ~600 kB each, and none of them read
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and grown < RSS_GROWTH_LIMIT_KB:
            time.sleep(0.2)
            grown = max(grown, _rss_kb(loaded_broker) - before)
    assert grown < RSS_GROWTH_LIMIT_KB, (
        f"RSS grew by {grown // 1024} MB holding answers to 18 kB of requests nobody reads"
    )
