"""Kafka's ``__transaction_state`` record formats, so tools that read the topic understand it.

Key, version 0 (TransactionLogKey): ``version:int16 transactional_id:string``.

Value (TransactionLogValue), versions 0 and 1; version 1 is the flexible one::

    version:int16 producer_id:int64 producer_epoch:int16 transaction_timeout_ms:int32
    transaction_status:int8
    transaction_partitions:nullable [topic:string partition_ids:[int32]]
    transaction_last_update_timestamp_ms:int64 transaction_start_timestamp_ms:int64

Version 0 uses classic types (int16-length strings, int32-length arrays, -1 for
null). Version 1 uses compact ones (unsigned-varint length + 1, 0 for null) and
ends every struct with tagged fields; the value's tagged fields are
``0: previous_producer_id int64``, ``1: next_producer_id int64``,
``2: client_transaction_version int16`` and ``3: next_producer_epoch int16``,
written only when they differ from their defaults (-1, -1, 0, -1), as Kafka's
generated code does. Unknown tags are skipped when read.

Kafka 4 writes version 1 once ``transaction.version`` is 1 or more (new 4.x
clusters start at 2); Kafka 3.5+ reads it. Samsa writes version 1 too and reads
both. ``transaction_partitions`` is null for Empty and an array otherwise (empty
once a transaction completed), as Kafka writes it. A null value is a tombstone
(the transactional id expired); callers see a record without a value and never
pass it here.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from samsa.errors import CorruptRecordError
from samsa.protocol.wire import WireReader, encode_string, encode_uvarint

TRANSACTION_LOG_KEY_VERSION = 0
TRANSACTION_LOG_VALUE_VERSION = 1
_FIRST_FLEXIBLE_VALUE_VERSION = 1
_MAX_VALUE_VERSION = 1
# Tags of TransactionLogValue's tagged fields (version 1+).
TAG_PREVIOUS_PRODUCER_ID = 0
TAG_NEXT_PRODUCER_ID = 1
TAG_CLIENT_TRANSACTION_VERSION = 2
TAG_NEXT_PRODUCER_EPOCH = 3
_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_HEAD = struct.Struct(">hqhib")  # version, producer id, epoch, timeout, status
_TIMESTAMPS = struct.Struct(">qq")  # last update, start

TopicPartitions = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    """One transactional id's state as ``__transaction_state`` stores it.

    ``transaction_status`` is Kafka's state id (Empty=0 … PrepareEpochFence=7);
    ``transaction_partitions`` lists ``(topic, partition ids)``, None when null.
    """

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    transaction_partitions: TopicPartitions | None
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0
    next_producer_epoch: int = -1


class _Reader(WireReader):
    """``WireReader`` with the two things this format adds: int8 and known tagged fields."""

    __slots__ = ()

    def read_int8(self) -> int:
        return int(_I8.unpack(self._take(1))[0])

    def read_nullable_array_count(self, min_item_size: int) -> int | None:
        """A nullable array's element count (None for null), refused when it cannot fit."""
        count = self._length(_I32)
        if count is not None and count * min_item_size > self.remaining:
            raise self._corrupt(f"array of {count} elements exceeds the remaining bytes")
        return count

    def read_tagged_fields(self) -> dict[int, bytes]:
        """A flexible struct's tagged fields as ``{tag: raw bytes}``; tags must ascend."""
        fields: dict[int, bytes] = {}
        previous = -1
        for _ in range(self.read_uvarint()):
            tag = self.read_uvarint()
            if tag <= previous:
                raise self._corrupt(f"tagged field {tag} does not follow tag {previous}")
            previous = tag
            fields[tag] = self._take(self.read_uvarint())
        return fields


def _compact_string(value: str) -> bytes:
    raw = value.encode()
    return encode_uvarint(len(raw) + 1) + raw


def encode_transaction_log_key(transactional_id: str) -> bytes:
    return _I16.pack(TRANSACTION_LOG_KEY_VERSION) + encode_string(transactional_id)


def decode_transaction_log_key(data: bytes) -> str:
    """The transactional id of a version 0 key; any other version or trailing bytes is corrupt."""
    reader = _Reader(data, "transaction log key")
    version = reader.read_int16()
    if version != TRANSACTION_LOG_KEY_VERSION:
        raise CorruptRecordError(f"transaction log key version {version} is unknown")
    transactional_id = reader.read_string()
    reader.expect_end()
    return transactional_id


def _encode_partitions(partitions: TopicPartitions | None, flexible: bool) -> bytes:
    if not flexible:
        if partitions is None:
            return _I32.pack(-1)
        parts = [_I32.pack(len(partitions))]
        for topic, ids in partitions:
            parts += [encode_string(topic), _I32.pack(len(ids)), *(_I32.pack(i) for i in ids)]
        return b"".join(parts)
    if partitions is None:
        return encode_uvarint(0)
    parts = [encode_uvarint(len(partitions) + 1)]
    for topic, ids in partitions:
        parts += [
            _compact_string(topic),
            encode_uvarint(len(ids) + 1),
            *(_I32.pack(i) for i in ids),
        ]
        parts.append(encode_uvarint(0))  # the element's (empty) tagged fields
    return b"".join(parts)


def _encode_tagged_fields(value: TransactionLogValue) -> bytes:
    tagged: list[tuple[int, bytes]] = []
    if value.previous_producer_id != -1:
        tagged.append((TAG_PREVIOUS_PRODUCER_ID, _I64.pack(value.previous_producer_id)))
    if value.next_producer_id != -1:
        tagged.append((TAG_NEXT_PRODUCER_ID, _I64.pack(value.next_producer_id)))
    if value.client_transaction_version != 0:
        tagged.append((TAG_CLIENT_TRANSACTION_VERSION, _I16.pack(value.client_transaction_version)))
    if value.next_producer_epoch != -1:
        tagged.append((TAG_NEXT_PRODUCER_EPOCH, _I16.pack(value.next_producer_epoch)))
    return encode_uvarint(len(tagged)) + b"".join(
        encode_uvarint(tag) + encode_uvarint(len(raw)) + raw for tag, raw in tagged
    )


def encode_transaction_log_value(
    value: TransactionLogValue, version: int = TRANSACTION_LOG_VALUE_VERSION
) -> bytes:
    """Encode as ``version`` (1 unless asked); version 0 drops the tagged fields."""
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise ValueError(f"transaction log value version {version} is unknown")
    flexible = version >= _FIRST_FLEXIBLE_VALUE_VERSION
    head = _HEAD.pack(
        version,
        value.producer_id,
        value.producer_epoch,
        value.transaction_timeout_ms,
        value.transaction_status,
    )
    body = _encode_partitions(value.transaction_partitions, flexible) + _TIMESTAMPS.pack(
        value.last_update_timestamp_ms, value.start_timestamp_ms
    )
    return head + body + (_encode_tagged_fields(value) if flexible else b"")


def _read_partitions(reader: _Reader) -> TopicPartitions | None:
    # Each element takes at least two bytes: a string length and an array count.
    count = reader.read_nullable_array_count(min_item_size=2)
    if count is None:
        return None
    partitions = []
    for _ in range(count):
        topic = reader.read_string()
        ids = reader.read_int32_array()
        if reader.flexible:
            reader.read_tagged_fields()
        partitions.append((topic, ids))
    return tuple(partitions)


def _tagged_int(
    fields: dict[int, bytes], tag: int, read: Callable[[WireReader], int], default: int
) -> int:
    """A tagged field holding one integer; bytes before or after it are corrupt."""
    raw = fields.get(tag)
    if raw is None:
        return default
    reader = WireReader(raw, f"transaction log value: tagged field {tag}")
    value = read(reader)
    reader.expect_end()
    return value


def decode_transaction_log_value(data: bytes) -> TransactionLogValue:
    """Decode versions 0 and 1; an unknown version or bytes after the value are corrupt."""
    reader = _Reader(data, "transaction log value")
    version = reader.read_int16()
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise CorruptRecordError(f"transaction log value version {version} is unknown")
    reader.flexible = version >= _FIRST_FLEXIBLE_VALUE_VERSION
    producer_id = reader.read_int64()
    producer_epoch = reader.read_int16()
    timeout_ms = reader.read_int32()
    status = reader.read_int8()
    partitions = _read_partitions(reader)
    last_update = reader.read_int64()
    start = reader.read_int64()
    tagged = reader.read_tagged_fields() if reader.flexible else {}
    reader.expect_end()
    return TransactionLogValue(
        producer_id,
        producer_epoch,
        timeout_ms,
        status,
        partitions,
        last_update,
        start,
        previous_producer_id=_tagged_int(
            tagged, TAG_PREVIOUS_PRODUCER_ID, WireReader.read_int64, -1
        ),
        next_producer_id=_tagged_int(tagged, TAG_NEXT_PRODUCER_ID, WireReader.read_int64, -1),
        client_transaction_version=_tagged_int(
            tagged, TAG_CLIENT_TRANSACTION_VERSION, WireReader.read_int16, 0
        ),
        next_producer_epoch=_tagged_int(tagged, TAG_NEXT_PRODUCER_EPOCH, WireReader.read_int16, -1),
    )
