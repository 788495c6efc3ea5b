"""Produce request bodies (v3–13) read without copying their records (no I/O).

kio's native reader copies every ``records`` field out of the frame, and the
log needs the batches writable to assign offsets in place, which cost the
broker two copies of every produced byte. This reader builds the same kio
dataclasses (``ProduceRequest``, ``TopicProduceData``, ``PartitionProduceData``)
with each partition's ``records`` a ``memoryview`` slice of the frame: writable
when the frame is (a ``bytearray`` or a pooled receive buffer), so the log
rewrites base offsets and leader epochs in the received bytes and writes them
to the segment from there.

It reads only the common shape and declines (returns None) on anything else:
a null or negative count or length where the schema forbids it, a count or
length the remaining bytes cannot back, a malformed varint, any tagged field,
a string that is not UTF-8. The caller then decodes the frame the general way
(:func:`samsa.protocol.codec.decode_request`, the guard then kio), which
refuses what is malformed with the error it always gave. Bytes after the body
are ignored, as there. Tests compare its results with kio's on the same bytes.
"""

from __future__ import annotations

import struct
import sys
import uuid
from datetime import timedelta
from typing import Any, NamedTuple

from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import RequestHeader, request_class

__all__ = ["FIRST_VERSION", "LAST_VERSION", "decode_produce_request"]

FIRST_VERSION = 3
LAST_VERSION = 13
_FIRST_FLEXIBLE = 9
_FIRST_TOPIC_ID = 13

_HEADER = struct.Struct(">hhih")  # api key, api version, correlation id, client id length
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")


class _Classes(NamedTuple):
    request: Any
    topic: Any
    partition: Any


_classes: dict[int, _Classes] = {}


def _classes_for(version: int) -> _Classes | None:
    classes = _classes.get(version)
    if classes is None:
        request = request_class(ApiKey.PRODUCE, version)
        if request is None:
            return None
        module = sys.modules[request.__module__]
        classes = _classes[version] = _Classes(
            request, module.TopicProduceData, module.PartitionProduceData
        )
    return classes


class _Declined(Exception):
    """The bytes are not in the shape this reader takes: decode them the general way."""


def _uvarint(data: Any, position: int) -> tuple[int, int]:
    value = shift = 0
    for index in range(position, min(position + 5, len(data))):
        byte = data[index]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, index + 1
        shift += 7
    raise _Declined


def decode_produce_request(
    frame: bytes | bytearray | memoryview,
) -> tuple[RequestHeader, Any] | None:
    """The header and kio ``ProduceRequest`` of a Produce v3–13 frame whose records are views
    of ``frame``; None when the frame must be decoded the general way."""
    try:
        api_key, version, correlation_id, client_id_length = _HEADER.unpack_from(frame, 0)
    except struct.error:
        return None
    if api_key != ApiKey.PRODUCE or not FIRST_VERSION <= version <= LAST_VERSION:
        return None
    classes = _classes.get(version) or _classes_for(version)
    if classes is None:
        return None
    view = memoryview(frame)
    try:
        position = _HEADER.size
        if client_id_length == -1:
            client_id = None
        else:
            position, client_id = _string(view, position, client_id_length)
        header = RequestHeader(api_key, version, correlation_id, client_id)
        if version >= _FIRST_FLEXIBLE:
            body = _flexible_body(view, _end_of_tags(view, position), classes)
        else:
            body = _legacy_body(view, position, classes)
    except (_Declined, struct.error, IndexError, UnicodeDecodeError):
        return None
    return header, body


def _string(view: memoryview, position: int, length: int) -> tuple[int, str]:
    end = position + length
    if length < 0 or end > len(view):
        raise _Declined
    return end, str(view[position:end], "utf-8")


def _count(view: memoryview, position: int, count: int) -> None:
    """Every element takes at least one byte: a larger count is a lie."""
    if count < 0 or count > len(view) - position:
        raise _Declined


def _legacy_body(view: memoryview, position: int, classes: _Classes) -> Any:
    (length,) = _I16.unpack_from(view, position)
    position += 2
    transactional_id = None
    if length != -1:
        position, transactional_id = _string(view, position, length)
    acks, timeout = _ACKS_TIMEOUT.unpack_from(view, position)
    position += _ACKS_TIMEOUT.size
    (topic_count,) = _I32.unpack_from(view, position)
    position += 4
    _count(view, position, topic_count)
    topics = []
    for _ in range(topic_count):
        (length,) = _I16.unpack_from(view, position)
        position, name = _string(view, position + 2, length)
        (partition_count,) = _I32.unpack_from(view, position)
        position += 4
        _count(view, position, partition_count)
        partitions = []
        for _ in range(partition_count):
            index, size = struct.unpack_from(">ii", view, position)
            position += 8
            records = None
            if size != -1:
                end = position + size
                if size < 0 or end > len(view):
                    raise _Declined
                records, position = view[position:end], end
            partitions.append(classes.partition(index=index, records=records))
        topics.append(classes.topic(name=name, partition_data=tuple(partitions)))
    return classes.request(
        transactional_id=transactional_id,
        acks=acks,
        timeout=timedelta(milliseconds=timeout),
        topic_data=tuple(topics),
    )


def _flexible_body(view: memoryview, position: int, classes: _Classes) -> Any:
    by_topic_id = classes.request.__version__ >= _FIRST_TOPIC_ID
    length, position = _uvarint(view, position)
    transactional_id = None
    if length:
        position, transactional_id = _string(view, position, length - 1)
    acks, timeout = _ACKS_TIMEOUT.unpack_from(view, position)
    position += _ACKS_TIMEOUT.size
    topic_count, position = _uvarint(view, position)
    topic_count -= 1  # 0 would be a null array: refused the general way
    _count(view, position, topic_count)
    topics = []
    for _ in range(topic_count):
        if by_topic_id:
            raw = bytes(view[position : position + 16])
            if len(raw) != 16:
                raise _Declined
            position += 16
            topic_id = uuid.UUID(bytes=raw) if any(raw) else None
        else:
            length, position = _uvarint(view, position)
            position, name = _string(view, position, length - 1)
        partition_count, position = _uvarint(view, position)
        partition_count -= 1
        _count(view, position, partition_count)
        partitions = []
        for _ in range(partition_count):
            (index,) = _I32.unpack_from(view, position)
            size, position = _uvarint(view, position + 4)
            records = None
            if size:
                end = position + size - 1
                if end > len(view):
                    raise _Declined
                records, position = view[position:end], end
            position = _end_of_tags(view, position)
            partitions.append(classes.partition(index=index, records=records))
        position = _end_of_tags(view, position)
        if by_topic_id:
            topics.append(classes.topic(topic_id=topic_id, partition_data=tuple(partitions)))
        else:
            topics.append(classes.topic(name=name, partition_data=tuple(partitions)))
    _end_of_tags(view, position)
    return classes.request(
        transactional_id=transactional_id,
        acks=acks,
        timeout=timedelta(milliseconds=timeout),
        topic_data=tuple(topics),
    )


def _end_of_tags(view: memoryview, position: int) -> int:
    """Past an empty tagged-field section; any tagged field is declined."""
    if view[position] != 0:
        raise _Declined
    return position + 1
