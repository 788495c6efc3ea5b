"""Produce responses (v3–13) encoded by hand from the Produce handler's values (no I/O).

Building kio's response entities from the handler's dicts and writing them with
kio's ``entity_writer`` cost a one-record Produce about a fifth of the broker's
CPU. This writes the same bytes straight from the values: per topic its name
(v3–12, its encoding kept per name) or id (v13), per partition ``index``,
``error_code``, ``base_offset``, ``log_append_time`` (v2+), ``log_start_offset``
(v5+), ``record_errors`` and ``error_message`` (v8+), then ``throttle_time_ms``;
v9+ in the flexible layout (compact arrays and strings, empty tagged-field
sections: the handler sets neither ``current_leader`` nor ``node_endpoints``).
Tests compare every version's bytes with kio's for the same values.

``throttle_time_ms`` is the last field of the body (before v9+'s empty tag
section), so :func:`with_throttle_time` patches it in place when a request
quota throttles an answer already encoded.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from samsa.protocol.wire import encode_uvarint

__all__ = ["FIRST_VERSION", "LAST_VERSION", "encode_produce_response", "with_throttle_time"]

FIRST_VERSION = 3
LAST_VERSION = 13
_FIRST_LOG_START = 5
_FIRST_RECORD_ERRORS = 8
_FIRST_FLEXIBLE = 9
_FIRST_TOPIC_ID = 13

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_HEADER = struct.Struct(">ii")  # size prefix, correlation id
_PARTITION_V3 = struct.Struct(">ihqq")  # index, error code, base offset, log append time
_PARTITION_V5 = struct.Struct(">ihqqq")  # ... and log start offset
_ZERO_UUID = bytes(16)

_names: dict[tuple[str, bool], bytes] = {}
"""Topic names as written: (name, flexible) → its length prefix and UTF-8 bytes."""
_MAX_NAMES = 10_000


def _name(name: str, flexible: bool) -> bytes:
    encoded = _names.get((name, flexible))
    if encoded is None:
        raw = name.encode()
        encoded = (encode_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw
        if len(_names) < _MAX_NAMES:
            _names[name, flexible] = encoded
    return encoded


def _nullable_string(value: str | None, flexible: bool) -> bytes:
    if value is None:
        return b"\0" if flexible else b"\xff\xff"
    raw = value.encode()
    return (encode_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


def _count(n: int, flexible: bool) -> bytes:
    return encode_uvarint(n + 1) if flexible else _I32.pack(n)


def encode_produce_response(
    version: int,
    correlation_id: int,
    topics: Iterable[Mapping[str, Any]],
    throttle_time_ms: int,
) -> bytes:
    """The response frame (size prefix, response header, body) of a Produce v3–13 request.

    ``topics`` are the handler's values: ``name`` (v3–12) or ``topic_id`` (v13, a
    ``uuid.UUID`` or None for the zero id) and ``partition_responses``, each with
    ``index``, ``error_code``, ``base_offset``, ``log_append_time`` (ms, -1 for none),
    ``log_start_offset`` and optionally ``error_message`` and ``record_errors``
    (``batch_index``, ``batch_index_error_message``).
    """
    flexible = version >= _FIRST_FLEXIBLE
    with_log_start = version >= _FIRST_LOG_START
    with_errors = version >= _FIRST_RECORD_ERRORS
    by_id = version >= _FIRST_TOPIC_ID
    topics = topics if isinstance(topics, list | tuple) else list(topics)
    parts: list[bytes] = [b"", b"\0" if flexible else b"", _count(len(topics), flexible)]
    append = parts.append
    for topic in topics:
        if by_id:
            topic_id: uuid.UUID | None = topic.get("topic_id")
            append(_ZERO_UUID if topic_id is None else topic_id.bytes)
        else:
            append(_name(topic["name"], flexible))
        partitions = topic["partition_responses"]
        append(_count(len(partitions), flexible))
        for p in partitions:
            if with_log_start:
                append(_PARTITION_V5.pack(
                    p["index"], p["error_code"], p["base_offset"], p["log_append_time"],
                    p["log_start_offset"],
                ))  # fmt: skip
            else:
                append(_PARTITION_V3.pack(
                    p["index"], p["error_code"], p["base_offset"], p["log_append_time"]
                ))  # fmt: skip
            if with_errors:
                record_errors = p.get("record_errors", ())
                append(_count(len(record_errors), flexible))
                for e in record_errors:
                    append(_I32.pack(e["batch_index"]))
                    append(_nullable_string(e.get("batch_index_error_message"), flexible))
                    if flexible:
                        append(b"\0")
                append(_nullable_string(p.get("error_message"), flexible))
            if flexible:
                append(b"\0")
        if flexible:
            append(b"\0")
    append(_I32.pack(throttle_time_ms))
    if flexible:
        append(b"\0")
    body = b"".join(parts)
    return _HEADER.pack(len(body) + 4, correlation_id) + body


def with_throttle_time(version: int, frame: bytes, throttle_time_ms: int) -> bytes:
    """An encoded Produce v3–13 response with its ``throttle_time_ms`` replaced."""
    end = len(frame) - (1 if version >= _FIRST_FLEXIBLE else 0)
    return frame[: end - 4] + _I32.pack(throttle_time_ms) + frame[end:]
