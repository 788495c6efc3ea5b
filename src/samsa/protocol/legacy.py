"""Request versions Kafka 3.9 served that kio (Kafka 4's schemas) does not carry (no I/O).

Kafka 4 dropped the oldest versions of many APIs (KIP-896) and kio, generated
from Kafka 4's message definitions, has no classes for them. Rather than a
hand-written class per version, each old version is *translated*:

- its request is read by a declared layout (below, field names as kio spells
  them, field order and types as Kafka 3.9's JSON definitions give them for
  that version) into the kio dataclass of the lowest version kio has
  (``kio_version``). Fields the old version lacks take their schema defaults:
  a Produce v0 request becomes a Produce v3 request whose ``transactional_id``
  is None, a Fetch v2 request a Fetch v4 request with ``max_bytes`` 2^31-1 and
  ``isolation_level`` 0;
- the handler answers with that kio version's response (``respond`` builds it
  for the old version's header), and the response is written back in the old
  layout, field by field from the kio object; the few fields only old
  versions had are *derived* from the newer ones (ListOffsets v0's
  ``old_style_offsets`` from ``offset``, DescribeConfigs v0's ``is_default``
  from ``config_source``).

The handler still sees the real version in the request header, so a version
whose meaning differs (Produce v0–2 carry message formats v0/v1, Fetch v0–3
want them back) can act on it. Every old version is non-flexible: classic
strings (int16 length), bytes and arrays (int32 length, -1 for null), no
tagged fields. Reading checks every length and array count against the bytes
that remain before it slices or loops (see :class:`samsa.protocol.wire.WireReader`),
so an old version opens no way to make the broker allocate from a count.
A body shorter than its layout makes the request undecodable (the connection
is closed); bytes after it are ignored, as Kafka and the kio path ignore them.
"""

from __future__ import annotations

import datetime
import functools
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from kio.index import load_request_schema, load_response_schema

from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import build
from samsa.protocol.wire import WireReader

__all__ = [
    "Array",
    "Derived",
    "LegacyVersion",
    "Struct",
    "Type",
    "decode_legacy_request",
    "decode_legacy_response",
    "encode_legacy_request",
    "encode_legacy_response",
    "kio_version",
    "legacy_version",
    "legacy_versions",
]

INT8, INT16, INT32, INT64 = "int8", "int16", "int32", "int64"
BOOL, STRING, NULLABLE_STRING = "bool", "string", "nullable_string"
RECORDS = "records"  # nullable bytes holding a record set
_FIXED = {INT8: struct.Struct(">b"), BOOL: struct.Struct(">?"), INT16: struct.Struct(">h"),
          INT32: struct.Struct(">i"), INT64: struct.Struct(">q")}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Array:
    """An array of ``item`` (a primitive name or a :class:`Struct`)."""

    item: Type
    nullable: bool = False


@dataclass(frozen=True, slots=True)
class Derived:
    """A response field only old versions have, computed from the kio response entity
    it belongs to (e.g. ListOffsets v0's ``old_style_offsets`` from ``offset``)."""

    type: Type
    compute: Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class Struct:
    fields: tuple[tuple[str, Type | Derived], ...]


Type: TypeAlias = str | Array | Struct


def S(*fields: tuple[str, Type | Derived]) -> Struct:
    return Struct(tuple(fields))


@dataclass(frozen=True, slots=True)
class LegacyVersion:
    """One old version of one API: its layouts and the kio version it is served as."""

    api_key: int
    version: int
    kio_version: int
    request: Struct
    response: Struct

    @property
    def request_class(self) -> type:
        return _kio_class(load_request_schema, self.api_key, self.kio_version)

    @property
    def response_class(self) -> type:
        return _kio_class(load_response_schema, self.api_key, self.kio_version)


@functools.cache
def _kio_class(load: Callable[[int, int], type], api_key: int, version: int) -> type:
    return load(api_key, version)


# -- reading ---------------------------------------------------------------------------
def _min_size(t: Type) -> int:
    """The fewest bytes one value of ``t`` takes on the wire (for array count checks)."""
    if isinstance(t, Struct):
        return sum(_min_size(f if not isinstance(f, Derived) else f.type) for _, f in t.fields)
    if isinstance(t, Array):
        return 4
    if t in _FIXED:
        return _FIXED[t].size
    return 2 if t in (STRING, NULLABLE_STRING) else 4


def _read(reader: WireReader, t: Type) -> Any:
    if isinstance(t, Struct):
        out: dict[str, Any] = {}
        for name, field_type in t.fields:
            assert not isinstance(field_type, Derived), "derived fields are response-only"
            out[name] = _read(reader, field_type)
        return out
    if isinstance(t, Array):
        if t.nullable and reader.take_null_array():
            return None
        count = reader.read_array_count(_min_size(t.item))
        return [_read(reader, t.item) for _ in range(count)]
    fixed = _FIXED.get(t)
    if fixed is not None:
        return fixed.unpack(reader.take(fixed.size))[0]
    if t == STRING:
        return reader.read_string()
    if t == NULLABLE_STRING:
        return reader.read_nullable_string()
    if t == RECORDS:
        return reader.read_nullable_bytes()
    raise AssertionError(f"unknown legacy type {t!r}")


def decode_legacy_request(legacy: LegacyVersion, body: bytes) -> Any:
    """The kio request (of ``legacy.kio_version``) that ``body`` (the bytes after the request
    header) carries; raises :class:`CorruptRecordError` when it does not fit the layout."""
    reader = WireReader(body, f"api key {legacy.api_key} v{legacy.version} request")
    return build(legacy.request_class, _read(reader, legacy.request), older_fields=True)


# -- writing ---------------------------------------------------------------------------
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def _plain(value: Any) -> Any:
    """A kio field value as the number or text it is on the wire."""
    if isinstance(value, datetime.timedelta):
        return int(value / datetime.timedelta(milliseconds=1))
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    return value


def _write(out: bytearray, t: Type, value: Any) -> None:
    if isinstance(t, Struct):
        for name, field_type in t.fields:
            if isinstance(field_type, Derived):
                _write(out, field_type.type, field_type.compute(value))
            else:
                _write(out, field_type, _field(value, name, field_type))
        return
    if isinstance(t, Array):
        if value is None:
            out += _I32.pack(-1)
            return
        out += _I32.pack(len(value))
        for item in value:
            _write(out, t.item, item)
        return
    value = _plain(value)
    fixed = _FIXED.get(t)
    if fixed is not None:
        out += fixed.pack(-1 if value is None else value)
    elif t in (STRING, NULLABLE_STRING):
        if value is None:
            out += _I16.pack(-1)
        else:
            raw = value.encode()
            out += _I16.pack(len(raw))
            out += raw
    elif t == RECORDS:
        if value is None:
            out += _I32.pack(-1)
        else:
            out += _I32.pack(len(value))
            out += value
    else:
        raise AssertionError(f"unknown legacy type {t!r}")


def _field(entity: Any, name: str, field_type: Type) -> Any:
    if isinstance(entity, Mapping):
        return entity[name] if name in entity else _zero(field_type)
    return getattr(entity, name)


def _zero(t: Type) -> Any:
    """The value a field left out of a dict is written with (tests' minimal requests)."""
    if isinstance(t, Struct):
        return {}
    if isinstance(t, Array):
        return None if t.nullable else []
    if t in (NULLABLE_STRING, RECORDS):
        return None
    return "" if t == STRING else 0


def encode_legacy_response(legacy: LegacyVersion, correlation_id: int, response: Any) -> bytes:
    """The response frame (size prefix, header v0, body in the old layout) of a kio response
    of ``legacy.kio_version``."""
    out = bytearray(8)
    _write(out, legacy.response, response)
    _I32.pack_into(out, 0, len(out) - 4)
    _I32.pack_into(out, 4, correlation_id)
    return bytes(out)


def encode_legacy_request(legacy: LegacyVersion, values: Any) -> bytes:
    """A request body in the old layout from a dict or kio object (tests and benchmarks)."""
    out = bytearray()
    _write(out, legacy.request, values)
    return bytes(out)


def decode_legacy_response(legacy: LegacyVersion, body: bytes) -> Any:
    """A response body in the old layout as nested dicts (tests): derived fields included."""

    def plain(t: Type) -> Type:
        if isinstance(t, Struct):
            return Struct(tuple((n, plain(f.type if isinstance(f, Derived) else f))
                                for n, f in t.fields))  # fmt: skip
        if isinstance(t, Array):
            return Array(plain(t.item), t.nullable)
        return t

    reader = WireReader(body, f"api key {legacy.api_key} v{legacy.version} response")
    values = _read(reader, plain(legacy.response))
    reader.expect_end()
    return values


# -- the old versions, from Kafka 3.9's message definitions ----------------------------
def _old_style_offsets(partition: Any) -> list[int]:
    # ListOffsets v0 answered a list of offsets (up to max_num_offsets); one is given here.
    return [partition.offset] if partition.offset >= 0 else []


def _is_default(config: Any) -> bool:
    return bool(config.config_source == 5)  # DEFAULT_CONFIG


def A(item: Type) -> Array:
    return Array(item)


# Produce 0-2 (served as 3): v1 adds throttle_time, v2 log_append_time.
_PRODUCE_PARTITION = S(("index", INT32), ("records", RECORDS))
_PRODUCE_TOPIC = S(("name", STRING), ("partition_data", A(_PRODUCE_PARTITION)))
_PRODUCE_REQUEST = S(("acks", INT16), ("timeout", INT32), ("topic_data", A(_PRODUCE_TOPIC)))


def _produce_response(version: int) -> Struct:
    partition = S(("index", INT32), ("error_code", INT16), ("base_offset", INT64),
                  *((("log_append_time", INT64),) if version >= 2 else ()))  # fmt: skip
    topic = S(("name", STRING), ("partition_responses", A(partition)))
    if version == 0:
        return S(("responses", A(topic)))
    return S(("responses", A(topic)), ("throttle_time", INT32))


# Fetch 0-3 (served as 4): v1 adds throttle_time, v3 max_bytes.
_FETCH_PARTITION = S(("partition", INT32), ("fetch_offset", INT64),
                     ("partition_max_bytes", INT32))  # fmt: skip
_FETCH_TOPIC = S(("topic", STRING), ("partitions", A(_FETCH_PARTITION)))
_FETCHED_PARTITION = S(("partition_index", INT32), ("error_code", INT16),
                       ("high_watermark", INT64), ("records", RECORDS))  # fmt: skip
_FETCHED_TOPIC = S(("topic", STRING), ("partitions", A(_FETCHED_PARTITION)))


def _fetch_request(version: int) -> Struct:
    return S(("replica_id", INT32), ("max_wait", INT32), ("min_bytes", INT32),
             *((("max_bytes", INT32),) if version >= 3 else ()),
             ("topics", A(_FETCH_TOPIC)))  # fmt: skip


def _fetch_response(version: int) -> Struct:
    if version == 0:
        return S(("responses", A(_FETCHED_TOPIC)))
    return S(("throttle_time", INT32), ("responses", A(_FETCHED_TOPIC)))


# ListOffsets 0 (served as 1): max_num_offsets in, a list of offsets out.
_LIST_OFFSETS_PARTITION = S(("partition_index", INT32), ("timestamp", INT64),
                            ("max_num_offsets", INT32))  # fmt: skip
_LIST_OFFSETS_REQUEST = S(("replica_id", INT32), ("topics", A(S(
    ("name", STRING), ("partitions", A(_LIST_OFFSETS_PARTITION))))))  # fmt: skip
_LISTED_PARTITION = S(("partition_index", INT32), ("error_code", INT16),
                      ("old_style_offsets", Derived(A(INT64), _old_style_offsets)))  # fmt: skip
_LIST_OFFSETS_RESPONSE = S(("topics", A(S(("name", STRING), ("partitions", A(_LISTED_PARTITION))))))


# OffsetCommit 0-1 (served as 2): v1 adds the generation, the member and (v1 only)
# commit_timestamp; responses are the same up to v2.
def _offset_commit_request(version: int) -> Struct:
    partition = S(("partition_index", INT32), ("committed_offset", INT64),
                  *((("commit_timestamp", INT64),) if version == 1 else ()),
                  ("committed_metadata", NULLABLE_STRING))  # fmt: skip
    topic = S(("name", STRING), ("partitions", A(partition)))
    if version == 0:
        return S(("group_id", STRING), ("topics", A(topic)))
    return S(("group_id", STRING), ("generation_id_or_member_epoch", INT32),
             ("member_id", STRING), ("topics", A(topic)))  # fmt: skip


_COMMITTED_PARTITION = S(("partition_index", INT32), ("error_code", INT16))
_OFFSET_COMMIT_RESPONSE = S(("topics", A(S(("name", STRING),
                                           ("partitions", A(_COMMITTED_PARTITION))))))  # fmt: skip

# OffsetFetch 0 (served as 1): the same layout as v1.
_OFFSET_FETCH_REQUEST = S(("group_id", STRING), ("topics", A(S(
    ("name", STRING), ("partition_indexes", A(INT32))))))  # fmt: skip
_FETCHED_OFFSET = S(("partition_index", INT32), ("committed_offset", INT64),
                    ("metadata", NULLABLE_STRING), ("error_code", INT16))  # fmt: skip
_OFFSET_FETCH_RESPONSE = S(("topics", A(S(("name", STRING), ("partitions", A(_FETCHED_OFFSET))))))

# CreateTopics 0-1 (served as 2): v1 adds validate_only and error_message.
_CREATABLE_TOPIC = S(
    ("name", STRING), ("num_partitions", INT32), ("replication_factor", INT16),
    ("assignments", A(S(("partition_index", INT32), ("broker_ids", A(INT32))))),
    ("configs", A(S(("name", STRING), ("value", NULLABLE_STRING)))),
)  # fmt: skip


def _create_topics_request(version: int) -> Struct:
    return S(("topics", A(_CREATABLE_TOPIC)), ("timeout", INT32),
             *((("validate_only", BOOL),) if version >= 1 else ()))  # fmt: skip


def _create_topics_response(version: int) -> Struct:
    topic = S(("name", STRING), ("error_code", INT16),
              *((("error_message", NULLABLE_STRING),) if version >= 1 else ()))  # fmt: skip
    return S(("topics", A(topic)))


# DeleteTopics 0 (served as 1): v1 adds throttle_time.
_DELETE_TOPICS_REQUEST = S(("topic_names", A(STRING)), ("timeout", INT32))
_DELETE_TOPICS_RESPONSE = S(("responses", A(S(("name", STRING), ("error_code", INT16)))))

# OffsetForLeaderEpoch 0-1 (served as 2): v1 answers leader_epoch, v2 adds
# current_leader_epoch and throttle_time.
_EPOCH_REQUEST = S(("topics", A(S(("topic", STRING), ("partitions", A(S(
    ("partition", INT32), ("leader_epoch", INT32))))))))  # fmt: skip


def _epoch_response(version: int) -> Struct:
    partition = S(("error_code", INT16), ("partition", INT32),
                  *((("leader_epoch", INT32),) if version >= 1 else ()),
                  ("end_offset", INT64))  # fmt: skip
    return S(("topics", A(S(("topic", STRING), ("partitions", A(partition))))))


# WriteTxnMarkers 0 (served as 1, which only made it flexible).
_MARKER_TOPIC = S(("name", STRING), ("partition_indexes", A(INT32)))
_MARKERS_REQUEST = S(("markers", A(S(
    ("producer_id", INT64), ("producer_epoch", INT16), ("transaction_result", BOOL),
    ("topics", A(_MARKER_TOPIC)), ("coordinator_epoch", INT32)))))  # fmt: skip
_MARKER_RESULT_TOPIC = S(("name", STRING), ("partitions", A(S(
    ("partition_index", INT32), ("error_code", INT16)))))  # fmt: skip
_MARKERS_RESPONSE = S(("markers", A(S(("producer_id", INT64),
                                      ("topics", A(_MARKER_RESULT_TOPIC))))))  # fmt: skip

# DescribeConfigs 0 (served as 1): is_default instead of config_source, no synonyms.
_DESCRIBE_CONFIGS_REQUEST = S(("resources", A(S(
    ("resource_type", INT8), ("resource_name", STRING),
    ("configuration_keys", Array(STRING, nullable=True))))))  # fmt: skip
_DESCRIBED_CONFIG = S(
    ("name", STRING), ("value", NULLABLE_STRING), ("read_only", BOOL),
    ("is_default", Derived(BOOL, _is_default)), ("is_sensitive", BOOL),
)  # fmt: skip
_DESCRIBE_CONFIGS_RESPONSE = S(("throttle_time", INT32), ("results", A(S(
    ("error_code", INT16), ("error_message", NULLABLE_STRING), ("resource_type", INT8),
    ("resource_name", STRING), ("configs", A(_DESCRIBED_CONFIG))))))  # fmt: skip

# DescribeLogDirs 0 (served as 1, the same layout).
_LOG_DIRS_REQUEST = S(("topics", Array(S(("topic", STRING), ("partitions", A(INT32))),
                                       nullable=True)))  # fmt: skip
_LOG_DIR_PARTITION = S(("partition_index", INT32), ("partition_size", INT64),
                       ("offset_lag", INT64), ("is_future_key", BOOL))  # fmt: skip
_LOG_DIRS_RESPONSE = S(("throttle_time", INT32), ("results", A(S(
    ("error_code", INT16), ("log_dir", STRING),
    ("topics", A(S(("name", STRING), ("partitions", A(_LOG_DIR_PARTITION)))))))))  # fmt: skip

_VERSIONS: tuple[LegacyVersion, ...] = (
    *(
        LegacyVersion(ApiKey.PRODUCE, v, 3, _PRODUCE_REQUEST, _produce_response(v))
        for v in (0, 1, 2)
    ),
    *(
        LegacyVersion(ApiKey.FETCH, v, 4, _fetch_request(v), _fetch_response(v))
        for v in (0, 1, 2, 3)
    ),
    LegacyVersion(ApiKey.LIST_OFFSETS, 0, 1, _LIST_OFFSETS_REQUEST, _LIST_OFFSETS_RESPONSE),
    *(
        LegacyVersion(
            ApiKey.OFFSET_COMMIT, v, 2, _offset_commit_request(v), _OFFSET_COMMIT_RESPONSE
        )
        for v in (0, 1)
    ),
    LegacyVersion(ApiKey.OFFSET_FETCH, 0, 1, _OFFSET_FETCH_REQUEST, _OFFSET_FETCH_RESPONSE),
    *(
        LegacyVersion(
            ApiKey.CREATE_TOPICS, v, 2, _create_topics_request(v), _create_topics_response(v)
        )
        for v in (0, 1)
    ),
    LegacyVersion(ApiKey.DELETE_TOPICS, 0, 1, _DELETE_TOPICS_REQUEST, _DELETE_TOPICS_RESPONSE),
    *(
        LegacyVersion(ApiKey.OFFSET_FOR_LEADER_EPOCH, v, 2, _EPOCH_REQUEST, _epoch_response(v))
        for v in (0, 1)
    ),
    LegacyVersion(ApiKey.WRITE_TXN_MARKERS, 0, 1, _MARKERS_REQUEST, _MARKERS_RESPONSE),
    LegacyVersion(
        ApiKey.DESCRIBE_CONFIGS, 0, 1, _DESCRIBE_CONFIGS_REQUEST, _DESCRIBE_CONFIGS_RESPONSE
    ),
    LegacyVersion(ApiKey.DESCRIBE_LOG_DIRS, 0, 1, _LOG_DIRS_REQUEST, _LOG_DIRS_RESPONSE),
)

_BY_KEY: dict[tuple[int, int], LegacyVersion] = {(v.api_key, v.version): v for v in _VERSIONS}


def legacy_version(api_key: int, version: int) -> LegacyVersion | None:
    """The translation of this old version, or None when kio has the version (or nobody does)."""
    return _BY_KEY.get((api_key, version))


def legacy_versions() -> tuple[LegacyVersion, ...]:
    """Every old version translated here."""
    return _VERSIONS


def kio_version(api_key: int, version: int) -> int:
    """The kio version a request of ``version`` is decoded as (itself unless it is old)."""
    legacy = _BY_KEY.get((api_key, version))
    return version if legacy is None else legacy.kio_version
