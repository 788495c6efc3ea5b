"""Fetched record batches decoded straight into Arrow columns, for the source's readers.

The consumer's record path builds a Python object per record and PySpark's Arrow
conversion then walks them again. Here a whole RecordBatch v2 becomes one
``pyarrow.RecordBatch`` of the source's schema:

* the records are chained by their length varints, which only a sequential walk can
  follow: where samsa's optional C helper was built (:mod:`samsa.records._native`,
  see setup.py) one pass of C finds every record's fields; without it one Python
  pass finds where each record starts and every other field — attributes,
  timestamp and offset deltas, key and value lengths, header counts — is decoded
  with numpy for all records at once (the bytes at a column of positions,
  continuation bits, shifts, zig-zag). Both give the same columns and errors;
* keys and values become binary arrays cut out of the decompressed buffer by Arrow
  (a ``take`` over an array whose offsets are the records' (start, end) pairs),
  without a per-record ``bytes``;
* headers become a list-of-struct column: with the C helper their spans are found in
  one pass and cut out by Arrow like keys and values; without it, or for a record that
  is not plain (a null header key, bytes after the headers, a key that is not UTF-8),
  the record decoder of :mod:`samsa.records.record` reads the record, which also gives
  the checks and errors of the record path: a corrupt batch raises
  :class:`CorruptRecordError` either way.

numpy and pyarrow come with the ``spark`` extra; the C helper needs a compiler at
install time and nothing at run time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, Final

import numpy as np
import pyarrow as pa

from samsa.errors import CorruptRecordError
from samsa.records.batch import RecordBatchView, TimestampType
from samsa.records.compression import DEFAULT_MAX_DECOMPRESSED
from samsa.records.reader import records_section
from samsa.records.record import decode_record
from samsa.records.varint import MAX_VARINT_BYTES, MAX_VARLONG_BYTES, decode_varint
from samsa.types import TopicPartition

_native: ModuleType | None
try:  # built by setup.py when a C compiler was there; numpy does the same without it
    from samsa.records import _native
except ImportError:  # pragma: no cover - depends on how samsa was installed
    _native = None

__all__ = ["HEADERS_TYPE", "ArrowBatchDecoder", "DecodedBatch", "record_columns"]

_SHIFTS: Final = np.arange(MAX_VARLONG_BYTES, dtype=np.uint64) * np.uint64(7)
_STEPS: Final = np.arange(MAX_VARLONG_BYTES, dtype=np.int64)


class DecodedBatch:
    """The records of one fetched batch (those at or after the fetch position) as Arrow
    columns; ``offset`` is the last record's, as the fetcher needs."""

    __slots__ = ("batch", "leader_epoch", "offset", "offsets")

    def __init__(self, batch: pa.RecordBatch, offsets: Any, leader_epoch: int) -> None:
        self.batch = batch
        self.offsets = offsets
        """The records' offsets (a numpy int64 array), in order."""
        self.offset = int(offsets[-1])
        self.leader_epoch = leader_epoch

    def __len__(self) -> int:
        return int(self.batch.num_rows)


def _varints(data: Any, pos: Any, ends: Any, max_bytes: int) -> tuple[Any, Any]:
    """Zig-zag varints at every position of ``pos`` (each within its record, which ends
    at ``ends``): their values (int64) and the positions after them."""
    if not len(pos):
        return pos, pos
    idx = pos[:, None] + _STEPS[:max_bytes]
    np.minimum(idx, len(data) - 1, out=idx)
    raw = data[idx]
    last = raw < 0x80
    size = last.argmax(axis=1) + 1
    after = pos + size
    if not (last.any(axis=1).all() and (after <= ends).all()):
        raise CorruptRecordError("a record's varint runs past the end of the record")
    digits = (raw & 0x7F).astype(np.uint64) << _SHIFTS[:max_bytes]
    digits[_STEPS[:max_bytes] >= size[:, None]] = 0
    unsigned = digits.sum(axis=1, dtype=np.uint64)
    values = (unsigned >> np.uint64(1)).astype(np.int64) ^ -(unsigned & np.uint64(1)).astype(
        np.int64
    )
    return values, after


def _binary(buf: bytes, starts: Any, lengths: Any) -> pa.Array:
    """A binary array of the byte ranges ``buf[start:start + length]``; length -1 is null.

    The ranges come in buffer order and never overlap, so (start, end) pairs make the
    offsets of one array over the whole buffer whose even elements are the ranges and
    odd ones the bytes between; Arrow's ``take`` of the even ones copies them out.
    """
    count = len(starts)
    valid = lengths >= 0
    bounds = np.empty(2 * count, dtype=np.int32)
    bounds[0::2] = starts
    bounds[1::2] = starts + np.where(valid, lengths, 0)
    whole = pa.Array.from_buffers(
        pa.binary(), 2 * count - 1, [None, pa.py_buffer(bounds), pa.py_buffer(buf)]
    )
    picked = whole.take(pa.array(np.arange(0, 2 * count - 1, 2, dtype=np.int32)))
    nulls = count - int(valid.sum())
    if not nulls:
        return picked
    _, offsets, data = picked.buffers()
    validity = pa.array(valid).buffers()[1]
    return pa.Array.from_buffers(
        pa.binary(), count, [validity, offsets, data], null_count=nulls, offset=picked.offset
    )


def _scan_numpy(buf: bytes, count: int) -> tuple[Any, ...]:
    """The records' fields as columns (see :data:`_scan`), with numpy: one Python pass
    over the length varints finds where each record starts, every other field is
    decoded for all records at once."""
    size = len(buf)
    # Follow the chain of record lengths to where each record ends (the next starts).
    ends: list[int] = []
    append = ends.append
    pos = 0
    try:
        for _ in range(count):
            b = buf[pos]
            if b < 0x80:
                pos += 1 + ((b >> 1) ^ -(b & 1))
            elif buf[pos + 1] < 0x80:  # two bytes: records of 64 B to 8 KiB
                u = (b & 0x7F) | (buf[pos + 1] << 7)
                pos += 2 + ((u >> 1) ^ -(u & 1))
            else:
                length, pos = decode_varint(buf, pos, MAX_VARINT_BYTES)
                pos += length
            append(pos)
    except IndexError:
        raise CorruptRecordError(
            f"batch declares {count} records but its records section ends early"
        ) from None
    data = np.frombuffer(buf, dtype=np.uint8)
    end = np.array(ends, dtype=np.int64)
    start = np.empty_like(end)
    start[0] = 0
    start[1:] = end[:-1]
    # The lengths are checked here, all at once: a bad one shows as a record shorter
    # than the smallest (6 bytes) or one that does not end where the next starts.
    length, body = _varints(data, start, np.minimum(start + 5, size), MAX_VARINT_BYTES)
    fits = (length >= 6) & (body + length == end) & (end <= size)
    if not fits.all():
        bad = int(np.argmin(fits))
        raise CorruptRecordError(
            f"record length {int(length[bad])} does not fit in the "
            f"{size - int(body[bad])} bytes that follow"
        )
    at = body + 1  # past the attributes byte
    timestamp_delta, at = _varints(data, at, end, MAX_VARLONG_BYTES)
    offset_delta, at = _varints(data, at, end, MAX_VARINT_BYTES)
    key_length, key_start = _varints(data, at, end, MAX_VARINT_BYTES)
    at = key_start + np.maximum(key_length, 0)
    if ((key_length < -1) | (at > end)).any():
        raise CorruptRecordError("a record's key length does not fit in the record")
    value_length, value_start = _varints(data, at, end, MAX_VARINT_BYTES)
    at = value_start + np.maximum(value_length, 0)
    if ((value_length < -1) | (at > end)).any():
        raise CorruptRecordError("a record's value length does not fit in the record")
    header_count, at = _varints(data, at, end, MAX_VARINT_BYTES)
    unusual = np.flatnonzero((header_count != 0) | (at != end))
    return (start, end, timestamp_delta, offset_delta, key_start, key_length, value_start,
            value_length, unusual)  # fmt: skip


def _scan_native(buf: bytes, count: int) -> tuple[Any, ...]:
    """The same as :func:`_scan_numpy`, in one pass of C (:mod:`samsa.records._native`)."""
    assert _native is not None
    fields = np.empty((9, count), dtype=np.int64)
    try:
        flagged = _native.scan_records(buf, count, fields)
    except ValueError as exc:
        raise CorruptRecordError(str(exc)) from None
    unusual = np.flatnonzero(fields[8]) if flagged else np.zeros(0, dtype=np.int64)
    return (*fields[:8], unusual)


_scan: Callable[[bytes, int], tuple[Any, ...]] = _scan_native if _native else _scan_numpy
"""Every record's start and end, timestamp delta, offset delta, key start and length,
value start and length (-1: null) as int64 columns, and the indexes of the records with
headers or trailing bytes (left to the record decoder); :class:`CorruptRecordError` when
a record does not fit its length. The C helper's when it was built, else numpy's."""


HEADERS_TYPE: Final = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
"""The Arrow type of a headers column (Spark's: a record without headers is null)."""
_NO_SPANS: Final = np.zeros(0, dtype=np.int64)


def _headers_in_c(
    buf: bytes, unusual: Any, header_at: Any, end: Any, *, count: int, headers_type: pa.DataType
) -> pa.Array | None:
    """The headers column of the records ``unusual`` (the others have none; each one's
    header count is at ``header_at``), their spans found by the C helper; None when a
    record is not plain (a null key, bytes after the headers, a key that is not
    UTF-8…), for the record decoder to judge."""
    assert _native is not None
    ends = np.ascontiguousarray(end[unusual])
    per_record = np.empty(len(unusual), dtype=np.int64)
    total = _native.scan_headers(buf, header_at, ends, per_record, _NO_SPANS)
    if total <= 0:
        return None
    spans = np.empty((4, total), dtype=np.int64)
    if _native.scan_headers(buf, header_at, ends, per_record, spans) != total:
        return None
    try:
        keys = _binary(buf, spans[0], spans[1]).cast(pa.string())  # checks the UTF-8
    except pa.ArrowInvalid:
        return None
    entries = pa.StructArray.from_arrays(
        [keys, _binary(buf, spans[2], spans[3])], fields=list(headers_type.value_type)
    )
    counts = np.zeros(count, dtype=np.int64)
    counts[unusual] = per_record
    offsets = np.zeros(count + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pa.ListArray.from_arrays(
        pa.array(offsets), entries, type=headers_type, mask=pa.array(counts == 0)
    )


def _headers_decoded(
    buf: bytes, unusual: Any, start: Any, count: int, headers_type: pa.DataType
) -> pa.Array:
    """The same as :func:`_headers_in_c`, record by record with the record decoder, which
    also raises CorruptRecordError for whatever is wrong with one."""
    rows: list[Any] = [None] * count
    for i in unusual.tolist():
        record, _ = decode_record(buf, int(start[i]), 0, 0, None)
        if record.headers:
            rows[i] = [{"key": k, "value": v} for k, v in record.headers]
    return pa.array(rows, headers_type)


def record_columns(
    batches: Sequence[RecordBatchView],
    *,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
    headers_type: pa.DataType = HEADERS_TYPE,
) -> tuple[Any, Any, Any, pa.Array, pa.Array, pa.Array | None]:
    """Every record of ``batches`` (one partition's, in order) as columns: offsets,
    timestamps and timestamp types (numpy int64 arrays), keys and values (binary arrays),
    and the headers (an Arrow array of ``headers_type``, null for a record without
    headers, as Spark's Kafka source has them) when any record has some, else None. The
    batches are decoded together: numpy's cost per call is paid once per fetch, not once
    per (often small) batch.

    The checks are those of :func:`samsa.records.reader.iter_records`: a records section
    that disagrees with its batch's header raises :class:`CorruptRecordError`.
    """
    counts = [b.record_count for b in batches]
    if any(c < 0 for c in counts):
        raise CorruptRecordError(f"batch declares {min(counts)} records")
    sections = [records_section(b, max_decompressed) for b in batches]
    buf = sections[0] if len(sections) == 1 else b"".join(sections)
    size = len(buf)
    count = sum(counts)
    if not count:
        if size:
            raise CorruptRecordError(f"batch declares no records but {size} bytes follow")
        empty = np.zeros(0, dtype=np.int64)
        nothing = pa.array([], pa.binary())
        return empty, empty, empty, nothing, nothing, None
    (start, end, timestamp_delta, offset_delta, key_start, key_length, value_start,
     value_length, unusual) = _scan(buf, count)  # fmt: skip
    # Each batch's records end where its section does.
    last = np.cumsum(counts) - 1
    with_records = np.array(counts) > 0
    section_ends = np.cumsum([len(s) for s in sections])
    if not (end[last[with_records]] == section_ends[with_records]).all() or end[-1] != size:
        raise CorruptRecordError(
            f"a batch's records do not end where its records section does ({count} records)"
        )
    headers: pa.Array | None = None
    if len(unusual):
        # Headers (or bytes the fast checks do not account for): the C helper's spans when
        # every such record is plain, else the record decoder.
        if _scan is _scan_native:
            header_at = value_start[unusual] + np.maximum(value_length[unusual], 0)
            headers = _headers_in_c(
                buf, unusual, header_at, end, count=count, headers_type=headers_type
            )
        if headers is None:
            headers = _headers_decoded(buf, unusual, start, count, headers_type)
    last_deltas = np.array([b.last_offset_delta for b in batches], dtype=np.int64)
    if (offset_delta[last[with_records]] > last_deltas[with_records]).any():
        raise CorruptRecordError("a batch's last record has an offset delta beyond its header's")
    log_append = np.array(
        [b.timestamp_type is TimestampType.LOG_APPEND_TIME for b in batches], dtype=np.int64
    )
    offsets = offset_delta + np.repeat(
        np.array([b.base_offset for b in batches], dtype=np.int64), counts
    )
    timestamps = timestamp_delta + np.repeat(
        np.array([b.base_timestamp for b in batches], dtype=np.int64), counts
    )
    timestamp_types = np.repeat(log_append, counts)
    if log_append.any():
        max_timestamps = np.array([b.max_timestamp for b in batches], dtype=np.int64)
        np.copyto(timestamps, np.repeat(max_timestamps, counts), where=timestamp_types == 1)
    keys = _binary(buf, key_start, key_length)
    values = _binary(buf, value_start, value_length)
    return offsets, timestamps, timestamp_types, keys, values, headers


def _repeated_string(text: str, count: int) -> pa.Array:
    encoded = text.encode()
    offsets = np.arange(count + 1, dtype=np.int32) * len(encoded)
    return pa.Array.from_buffers(
        pa.string(), count, [None, pa.py_buffer(offsets), pa.py_buffer(encoded * count)]
    )


class ArrowBatchDecoder:
    """A consumer's ``batch_decoder``: the batches of each fetch as one
    :class:`DecodedBatch` of ``schema`` (the source's columns,
    :func:`samsa.spark.rows.source_schema` in Arrow)."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.include_headers = "headers" in schema.names
        self._headers_type = schema.field("headers").type if self.include_headers else HEADERS_TYPE
        self._timestamp_type = schema.field("timestamp").type

    def __call__(
        self, tp: TopicPartition, batches: Sequence[RecordBatchView], position: int
    ) -> DecodedBatch | None:
        offsets, timestamps, types, keys, values, headers = record_columns(
            batches, headers_type=self._headers_type
        )
        if len(offsets) and offsets[0] < position:
            keep = offsets >= position
            if not keep.any():
                return None
            chosen = pa.array(keep)
            offsets, timestamps, types = offsets[keep], timestamps[keep], types[keep]
            keys, values = keys.filter(chosen), values.filter(chosen)
            if headers is not None:
                headers = headers.filter(chosen)
        count = len(offsets)
        if not count:
            return None
        columns = [
            keys,
            values,
            _repeated_string(tp.topic, count),
            pa.array(np.full(count, tp.partition, dtype=np.int32)),
            pa.array(offsets),
            # Spark's timestamps are microseconds; Kafka's are milliseconds.
            pa.Array.from_buffers(
                self._timestamp_type, count, [None, pa.py_buffer(timestamps * 1000)]
            ),
            pa.array(types.astype(np.int32)),
        ]
        if self.include_headers:
            # As Spark's Kafka source: a record without headers has null, not [].
            columns.append(pa.nulls(count, self._headers_type) if headers is None else headers)
        return DecodedBatch(
            pa.RecordBatch.from_arrays(columns, schema=self.schema),
            offsets,
            batches[-1].partition_leader_epoch,
        )
