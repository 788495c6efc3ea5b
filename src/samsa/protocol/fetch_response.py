"""Hand-written FetchResponse encoder (versions 0–17) for zero-copy record data.

The one place samsa writes a message layout itself, because it is the hot
path: record sets stay in the segment files and are sent with ``os.sendfile``,
so the response is produced as a list of byte chunks with file regions between
them, and the size prefix is computed without reading the records. Every
version is checked byte for byte against kio's encoder in the tests (versions
0–3, which kio lacks, against the layouts of :mod:`samsa.protocol.legacy`).

Tagged fields are never written (their defaults: no diverging epoch, no
leader hint, no snapshot id, no node endpoints), as kio omits default tags.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from samsa.protocol.wire import encode_uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_FIXED = struct.Struct(">ihqqq")  # index, error, hw, lso, log start
_PARTITION_FIXED_V4 = struct.Struct(">ihqq")  # v4 has no log start offset
_PARTITION_FIXED_V0 = struct.Struct(">ihq")  # v0-3: index, error, hw
_ABORTED = struct.Struct(">qq")
FLEXIBLE_FROM = 12
TOPIC_IDS_FROM = 13


class Region(Protocol):
    """A file region to send with ``os.sendfile`` (``samsa.storage.FileRegion``)."""

    @property
    def fd(self) -> int: ...
    @property
    def position(self) -> int: ...
    @property
    def length(self) -> int: ...


Chunk = bytes | Region


@dataclass(slots=True)
class FetchPartition:
    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: Sequence[tuple[int, int]] | None = None
    preferred_read_replica: int = -1
    records: bytes | Region | None = b""


@dataclass(slots=True)
class FetchTopic:
    name: str
    topic_id: uuid.UUID | None = None
    partitions: list[FetchPartition] = field(default_factory=list)


def _length(value: int, flexible: bool, nullable_null: bool = False) -> bytes:
    """Array/records/string length prefix: int32 (or int16 for strings is separate)."""
    if flexible:
        return b"\x00" if nullable_null else encode_uvarint(value + 1)
    return _I32.pack(-1 if nullable_null else value)


def encode_fetch_response(
    version: int,
    correlation_id: int,
    topics: Sequence[FetchTopic],
    *,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
) -> tuple[list[Chunk], int]:
    """The whole response frame (size prefix included) as chunks, and its total size."""
    flexible = version >= FLEXIBLE_FROM
    chunks: list[Chunk] = []
    out = bytearray(b"\x00\x00\x00\x00")
    out += _I32.pack(correlation_id)
    if flexible:
        out += b"\x00"  # response header v1: no tagged fields
    if version >= 1:
        out += _I32.pack(throttle_time_ms)
    if version >= 7:
        out += _I16.pack(error_code)
        out += _I32.pack(session_id)
    out += _length(len(topics), flexible)
    total = 0
    for topic in topics:
        if version >= TOPIC_IDS_FROM:
            out += (topic.topic_id or uuid.UUID(int=0)).bytes
        else:
            name = topic.name.encode()
            out += encode_uvarint(len(name) + 1) if flexible else _I16.pack(len(name))
            out += name
        out += _length(len(topic.partitions), flexible)
        for p in topic.partitions:
            if version >= 5:
                out += _PARTITION_FIXED.pack(p.partition_index, p.error_code, p.high_watermark,
                                             p.last_stable_offset, p.log_start_offset)  # fmt: skip
            elif version == 4:
                out += _PARTITION_FIXED_V4.pack(p.partition_index, p.error_code,
                                                p.high_watermark, p.last_stable_offset)  # fmt: skip
            else:
                out += _PARTITION_FIXED_V0.pack(p.partition_index, p.error_code, p.high_watermark)
            aborted = p.aborted_transactions
            if version < 4:
                pass  # no last stable offset, no aborted transactions before v4
            elif aborted is None:
                out += _length(0, flexible, nullable_null=True)
            else:
                out += _length(len(aborted), flexible)
                for producer_id, first_offset in aborted:
                    out += _ABORTED.pack(producer_id, first_offset)
                    if flexible:
                        out += b"\x00"
            if version >= 11:
                out += _I32.pack(p.preferred_read_replica)
            records = p.records
            if records is None:
                out += _length(0, flexible, nullable_null=True)
            elif isinstance(records, bytes):
                out += _length(len(records), flexible)
                out += records
            else:
                out += _length(records.length, flexible)
                chunks.append(bytes(out))
                total += len(out)
                out = bytearray()
                chunks.append(records)
                total += records.length
            if flexible:
                out += b"\x00"  # partition tags
        if flexible:
            out += b"\x00"  # topic tags
    if flexible:
        out += b"\x00"  # response tags
    chunks.append(bytes(out))
    total += len(out)
    first = chunks[0]
    assert isinstance(first, bytes)
    chunks[0] = _I32.pack(total - 4) + first[4:]
    return chunks, total


def with_throttle_time(version: int, chunks: list[Chunk], throttle_time_ms: int) -> list[Chunk]:
    """The chunks of an encoded response with its ``throttle_time_ms`` replaced (the first
    chunk holds the size prefix, the header and the throttle time)."""
    first = chunks[0]
    assert isinstance(first, bytes)
    offset = 8 + (1 if version >= FLEXIBLE_FROM else 0)
    patched = first[:offset] + _I32.pack(throttle_time_ms) + first[offset + 4 :]
    return [patched, *chunks[1:]]
