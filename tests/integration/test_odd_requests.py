"""Well-formed but odd requests, sent raw to a real broker: each gets an answer, never a traceback.

Every (API, version) pair the broker advertises is sent with the smallest body
its schema allows, and again with null in every nullable array (arrays that
cannot be null get one element, so the nullable arrays nested in them are sent
null too). Each must be answered with a response that decodes, and no field of
it may carry UNKNOWN_SERVER_ERROR: that code is what the dispatch boundary
answers when a handler fails unexpectedly, so finding it means a handler bug.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.serial._introspect import EntityField, EntityTupleField, classify_field, is_optional
from tests.rawclient import exchange

from samsa.protocol.codec import request_class
from samsa.protocol.legacy import legacy_version
from samsa.testing import BrokerProcess, start_broker

QUIET = {"log_level": 3}
PRODUCE, FETCH, LIST_OFFSETS, API_VERSIONS = 0, 1, 2, 18
UNKNOWN_SERVER_ERROR = -1
# Values a minimal body needs to be answered at all: a Produce with acks=0 gets no response.
OVERRIDES: dict[int, dict[str, Any]] = {PRODUCE: {"acks": 1, "timeout": 1000}}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path_factory.mktemp("odd") / "data")
    try:
        yield process
    finally:
        process.stop()


def _log_size(broker: BrokerProcess) -> int:
    return broker.log_path.stat().st_size


def _log_since(broker: BrokerProcess, offset: int) -> str:
    with broker.log_path.open("rb") as log:
        log.seek(offset)
        return log.read().decode(errors="replace")


def _advertised_pairs(broker: BrokerProcess) -> list[tuple[int, int]]:
    response = exchange(broker.bootstrap, API_VERSIONS, 3, {})
    assert response.error_code == 0
    return [
        (key.api_key, version)
        for key in response.api_keys
        for version in range(key.min_version, key.max_version + 1)
    ]


def _null_arrays(cls: type) -> dict[str, Any]:
    """Values for ``cls``: every nullable array null, every other array of structs one element."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        kind = classify_field(field)
        if isinstance(kind, EntityTupleField):
            values[field.name] = None if is_optional(field) else [_null_arrays(kind.type_)]
        elif isinstance(kind, EntityField):
            if not is_optional(field):
                values[field.name] = _null_arrays(kind.type_)
        elif getattr(kind, "is_array", False) and is_optional(field):
            values[field.name] = None
    return values


def _non_nullable_arrays(cls: type) -> list[str]:
    return [
        field.name
        for field in dataclasses.fields(cls)
        if getattr(classify_field(field), "is_array", False) and not is_optional(field)
    ]


def _has_nullable_array(cls: type) -> bool:
    for field in dataclasses.fields(cls):
        kind = classify_field(field)
        if getattr(kind, "is_array", False) and is_optional(field):
            return True
        if isinstance(kind, EntityField | EntityTupleField) and _has_nullable_array(kind.type_):
            return True
    return False


def _error_codes(value: Any) -> Iterator[int]:
    """Every error code in a decoded response, however deeply nested."""
    if isinstance(value, tuple | list):
        for item in value:
            yield from _error_codes(item)
    elif isinstance(value, dict):  # a response in an old layout
        for name, item in value.items():
            if name == "error_code":
                yield int(item)
            else:
                yield from _error_codes(item)
    elif dataclasses.is_dataclass(value):
        for field in dataclasses.fields(value):
            item = getattr(value, field.name)
            if field.name == "error_code" or field.name.endswith("_error_code"):
                yield int(item)
            else:
                yield from _error_codes(item)


def _assert_answered(broker: BrokerProcess, api_key: int, version: int, values: Any) -> None:
    try:
        response = exchange(broker.bootstrap, api_key, version, values)
    except (ConnectionError, TimeoutError) as exc:
        raise AssertionError(f"api key {api_key} v{version}: no answer ({exc!r})") from None
    codes = list(_error_codes(response))
    assert UNKNOWN_SERVER_ERROR not in codes, f"api key {api_key} v{version}: {response}"


@pytest.mark.timeout(180)
def test_every_advertised_api_version_answers_a_minimal_request(broker: BrokerProcess) -> None:
    log_start = _log_size(broker)
    pairs = _advertised_pairs(broker)
    # Versions kio lacks are sent in their old layouts (samsa.protocol.legacy).
    assert {pair for pair in pairs if request_class(*pair) is None} == {
        pair for pair in pairs if legacy_version(*pair) is not None
    }
    for api_key, version in pairs:
        _assert_answered(broker, api_key, version, OVERRIDES.get(api_key, {}))
    assert "Traceback" not in _log_since(broker, log_start)


@pytest.mark.timeout(180)
def test_every_nullable_array_sent_null_is_answered(broker: BrokerProcess) -> None:
    log_start = _log_size(broker)
    sent = 0
    for api_key, version in _advertised_pairs(broker):
        cls = request_class(api_key, version)
        if cls is None or not _has_nullable_array(cls):
            continue
        _assert_answered(broker, api_key, version, _null_arrays(cls) | OVERRIDES.get(api_key, {}))
        sent += 1
    assert sent > 20  # the schemas do have nullable arrays: the walk found them
    assert "Traceback" not in _log_since(broker, log_start)


@pytest.mark.timeout(180)
def test_a_null_where_the_schema_forbids_it_closes_the_connection_without_a_traceback(
    broker: BrokerProcess,
) -> None:
    # Kafka's generated readers refuse it ("non-nullable field ... was serialized as null"),
    # which makes the request unparseable: the connection is closed.
    log_start = _log_size(broker)
    sent = 0
    for api_key, version in _advertised_pairs(broker):
        cls = request_class(api_key, version)
        if cls is None or not _non_nullable_arrays(cls):
            continue
        values = dict.fromkeys(_non_nullable_arrays(cls)) | OVERRIDES.get(api_key, {})
        with pytest.raises(ConnectionError):
            exchange(broker.bootstrap, api_key, version, values)
        sent += 1
    assert sent > 100
    assert "Traceback" not in _log_since(broker, log_start)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("version", [4, 5, 6])
def test_fetch_at_a_pre_session_version_returns_the_records(
    broker: BrokerProcess, version: int
) -> None:
    topic = f"odd-fetch-v{version}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    producer = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    for i in range(3):
        producer.produce(topic, f"v{version}-{i}".encode())
    assert producer.flush(10) == 0
    response = exchange(
        broker.bootstrap,
        FETCH,
        version,
        {
            "replica_id": -1,
            "max_wait": 0,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                    ],
                }
            ],
        },
    )
    (partition,) = response.responses[0].partitions
    assert partition.error_code == 0
    assert partition.high_watermark == 3
    assert partition.records is not None
    for i in range(3):
        assert f"v{version}-{i}".encode() in partition.records


@pytest.mark.timeout(120)
def test_the_broker_log_does_not_grow_a_line_per_bad_frame(broker: BrokerProcess) -> None:
    log_start = _log_size(broker)
    bad_frames = 200
    for _ in range(bad_frames):  # ListOffsets v1 with a null topics array: unparseable
        with pytest.raises(ConnectionError):
            exchange(broker.bootstrap, LIST_OFFSETS, 1, {"topics": None})
    _assert_answered(broker, API_VERSIONS, 3, {})  # the log is written before this answer
    grown = _log_since(broker, log_start)
    assert "Traceback" not in grown
    # At most one burst of the rate-limited warning (10 a minute) and one suppression count
    # (records counted by their first line; the event-loop watchdog's are about the machine).
    records = [
        line for line in grown.splitlines()
        if line[:4].isdigit() and "samsa.broker.network.loop_monitor" not in line
    ]  # fmt: skip
    assert len(records) <= 11, grown
