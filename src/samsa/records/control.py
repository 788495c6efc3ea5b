"""Control records: the transaction markers a coordinator writes to partitions.

A control batch has the control and transactional attribute bits set and holds
one record whose key is ``version:int16 type:int16`` and, for commit and abort
markers, whose value is ``version:int16 coordinatorEpoch:int32``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from samsa.errors import CorruptRecordError
from samsa.records.batch import NO_PARTITION_LEADER_EPOCH, CompressionType
from samsa.records.builder import RecordBatchBuilder
from samsa.records.record import Record

_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")
CURRENT_CONTROL_VERSION = 0


class ControlRecordType(IntEnum):
    """Types of control record Kafka defines."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    """A decoded commit or abort marker."""

    type: ControlRecordType
    coordinator_epoch: int
    version: int = CURRENT_CONTROL_VERSION

    @property
    def committed(self) -> bool:
        return self.type is ControlRecordType.COMMIT


def build_end_transaction_batch(
    marker: ControlRecordType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    timestamp: int | None = None,
) -> bytes:
    """A control batch holding one COMMIT or ABORT marker."""
    if marker not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
        raise ValueError(f"{marker.name} is not an end-of-transaction marker")
    builder = RecordBatchBuilder(
        compression=CompressionType.NONE,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
    )
    builder.append(
        _MARKER_VALUE.pack(CURRENT_CONTROL_VERSION, coordinator_epoch),
        key=_KEY.pack(CURRENT_CONTROL_VERSION, marker),
        timestamp=timestamp,
    )
    return builder.build()


def control_record_type(record: Record) -> ControlRecordType:
    """The type named by a control record's key."""
    if record.key is None or len(record.key) < _KEY.size:
        raise CorruptRecordError("control record key is shorter than 4 bytes")
    version, type_id = _KEY.unpack_from(record.key)
    if version < 0:
        raise CorruptRecordError(f"control record key version {version} is negative")
    try:
        return ControlRecordType(type_id)
    except ValueError as exc:
        raise CorruptRecordError(f"unknown control record type {type_id}") from exc


def parse_end_transaction_marker(record: Record) -> EndTransactionMarker:
    """Decode a COMMIT or ABORT marker record."""
    kind = control_record_type(record)
    if kind not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
        raise CorruptRecordError(f"control record is {kind.name}, not a transaction marker")
    if record.value is None or len(record.value) < _MARKER_VALUE.size:
        raise CorruptRecordError("transaction marker value is shorter than 6 bytes")
    version, coordinator_epoch = _MARKER_VALUE.unpack_from(record.value)
    return EndTransactionMarker(kind, coordinator_epoch, version)
