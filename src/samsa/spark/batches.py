"""Kafka record batches built straight from Arrow columns: the sink's encoder.

For each Arrow record batch the sink writes, :class:`ArrowBatchEncoder` picks
every row's partition and encodes the rows of each partition as RecordBatch v2
records sections (:class:`~samsa.records.builder.EncodedRecords`), which the
producer sends as its own batches (``Producer.send_batch``). The result is the
bytes ``Producer.send`` would produce, row by row, for the same rows stamped
with the same timestamp, cut into batches where its accumulator cuts them
(when nothing is drained early):

- partition: the ``partition`` column when not null; else Kafka's default
  partitioner, ``toPositive(murmur2(key)) % partitions``, computed with numpy
  for the whole key column; keyless rows (or every row, with
  ``partitioner.ignore.keys``) stay on one partition until ``batch.size`` bytes
  went to it, as the producer's sticky partitioner counts them, then move on.
  Unlike the producer, which moves to a random partition, the encoder moves to
  the next one (from the task's partition number, modulo the partition count),
  so a replayed task places its keyless rows as the first attempt did.
- batches: a new batch starts when the open one's estimated size plus the
  row's would pass ``batch.size`` (capped at ``max.request.size``), the
  accumulator's rule; the first row of a batch always fits.
- records: all rows of one call share its timestamp (timestamp deltas 0). Where
  samsa's optional C helper was built (:mod:`samsa.records._native`) one pass of
  C writes the records, headers included (taken from the Arrow columns without a
  Python object per row). Otherwise — and for headers with a null entry or key —
  the length, offset-delta, key-length and value-length varints are computed with
  numpy for the whole column, and Arrow's ``take`` interleaves them with the keys'
  and values' bytes in one pass; header sections are encoded one by one in
  Python. Both give the same bytes.

The one CRC per batch and the header are written by the producer's sender,
once the producer id, epoch and sequence are known.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from samsa.client.producer.accumulator import RECORD_OVERHEAD
from samsa.errors import MessageTooLargeError
from samsa.records.batch import HEADER_SIZE, CompressionType
from samsa.records.builder import EncodedRecords
from samsa.records.compression import compress
from samsa.records.varint import encode_varint

_native: ModuleType | None
try:  # built by setup.py when a C compiler was there; numpy does the same without it
    from samsa.records import _native
except ImportError:  # pragma: no cover - depends on how samsa was installed
    _native = None

__all__ = ["ArrowBatchEncoder", "EncodedBatch", "murmur2_partitions"]

Int64s = npt.NDArray[np.int64]

_SEED = 0x9747B28C
_M = np.uint32(0x5BD1E995)
_ESTIMATE_OVERHEAD = 10  # RecordBatchBuilder.estimated_size counts a record as this + data
_ESTIMATE_HEADER = 4  # … and a header as this + its key's characters + its value
_RESERVED_HEADER = 10  # AsyncProducer.prepare sizes a header as this + key + value
_NULL_HEADERS = b"\x00"  # a header count of zero


@dataclass(frozen=True, slots=True)
class EncodedBatch:
    """One batch for one partition of one topic."""

    topic: str
    partition: int
    records: EncodedRecords


def _zigzag(values: Int64s) -> npt.NDArray[np.uint64]:
    return ((values << 1) ^ (values >> 63)).astype(np.uint64)


def _varint_sizes(zigzag: npt.NDArray[np.uint64]) -> Int64s:
    sizes = np.ones(len(zigzag), dtype=np.int64)
    for bits in (7, 14, 21, 28, 35):
        sizes += zigzag >= np.uint64(1 << bits)
    return sizes


def _put_varints(
    out: npt.NDArray[np.uint8],
    positions: Int64s,
    zigzag: npt.NDArray[np.uint64],
    sizes: Int64s,
) -> None:
    """Write each zig-zag value's varint bytes at its position in ``out``."""
    remaining = zigzag
    for byte in range(int(sizes.max(initial=1))):
        more = sizes > byte + 1
        present = sizes > byte
        low = (remaining & np.uint64(0x7F)).astype(np.uint8) | (more.astype(np.uint8) << 7)
        out[positions[present] + byte] = low[present]
        remaining = remaining >> np.uint64(7)


_encode_in_c = True
"""Whether keys are hashed, and rows without headers encoded, by the C helper where it was
built (the tests turn it off to run the numpy paths)."""


def _starts(array: pa.Array) -> Int64s:
    """Where every entry of a large_binary array starts in its data buffer."""
    return np.frombuffer(
        array.buffers()[1], dtype=np.int64, count=len(array), offset=array.offset * 8
    )


def _data(array: pa.Array) -> pa.Buffer | bytes:
    found = array.buffers()[2]
    return b"" if found is None else found


def murmur2_partitions(keys: pa.Array, num_partitions: int) -> npt.NDArray[np.int64]:
    """``toPositive(murmur2(key)) % num_partitions`` for every key of a binary column
    (Kafka's default partitioner, as :func:`samsa.client.producer.partitioner.
    partition_for_key`); null keys get -1."""
    keys = keys.cast(pa.large_binary())
    n = len(keys)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    if _native is not None and _encode_in_c:
        partitions = np.empty(n, dtype=np.int64)
        _native.murmur2_partitions(
            _starts(keys), _lengths(keys), _data(keys), num_partitions, partitions
        )
        return partitions
    offsets = np.frombuffer(keys.buffers()[1], dtype=np.int64, count=n + 1, offset=keys.offset * 8)
    data_buffer = keys.buffers()[2]
    data = (
        np.frombuffer(data_buffer, dtype=np.uint8)
        if data_buffer is not None
        else np.zeros(0, dtype=np.uint8)
    )
    # Reads past a key's end land in this padding, and are masked out.
    data = np.concatenate([data, np.zeros(4, dtype=np.uint8)])
    starts = offsets[:-1]
    lengths = offsets[1:] - starts
    h = (np.uint32(_SEED) ^ lengths.astype(np.uint32)).astype(np.uint32)
    words = lengths // 4
    for word in range(int(words.max(initial=0))):
        active = words > word
        at = np.where(active, starts + 4 * word, 0)
        k = (
            data[at].astype(np.uint32)
            | (data[at + 1].astype(np.uint32) << np.uint32(8))
            | (data[at + 2].astype(np.uint32) << np.uint32(16))
            | (data[at + 3].astype(np.uint32) << np.uint32(24))
        )
        k = k * _M
        k ^= k >> np.uint32(24)
        k = k * _M
        h = np.where(active, (h * _M) ^ k, h)
    tail = lengths & 3
    rest = starts + words * 4
    for size, shift in ((3, 16), (2, 8)):
        h = np.where(tail >= size, h ^ (data[rest + size - 1].astype(np.uint32) << shift), h)
    h = np.where(tail > 0, (h ^ data[rest].astype(np.uint32)) * _M, h)
    h ^= h >> np.uint32(13)
    h = h * _M
    h ^= h >> np.uint32(15)
    partitions = ((h & np.uint32(0x7FFFFFFF)) % np.uint32(num_partitions)).astype(np.int64)
    if keys.null_count:
        partitions[~keys.is_valid().to_numpy(zero_copy_only=False)] = -1
    return partitions


def _lengths(array: pa.Array) -> Int64s:
    """Byte length of every entry of a large_binary array, -1 for null."""
    n = len(array)
    offsets = np.frombuffer(
        array.buffers()[1], dtype=np.int64, count=n + 1, offset=array.offset * 8
    )
    lengths = offsets[1:] - offsets[:-1]
    if array.null_count:
        lengths = np.where(array.is_valid().to_numpy(zero_copy_only=False), lengths, -1)
    return lengths


def _header_sections(
    headers: pa.Array,
) -> tuple[list[bytes], Int64s, Int64s] | None:
    """Per row: the encoded header section, and its share of the producer's estimated
    and reserved sizes; None when no row has a header."""
    if not pc.max(pc.list_value_length(headers)).as_py():  # None: every row's is null
        return None
    sections: list[bytes] = []
    estimated = np.zeros(len(headers), dtype=np.int64)
    reserved = np.zeros(len(headers), dtype=np.int64)
    for row, items in enumerate(headers.to_pylist()):
        if not items:
            sections.append(_NULL_HEADERS)
            continue
        parts = [encode_varint(len(items))]
        for item in items:
            # str() as the producer's send() does for a header key
            key = str(item["key"])
            value = item["value"]
            encoded_key = key.encode()
            parts += (encode_varint(len(encoded_key)), encoded_key)
            parts.append(encode_varint(-1) if value is None else encode_varint(len(value)))
            if value is not None:
                parts.append(value)
            value_size = 0 if value is None else len(value)
            estimated[row] += len(key) + value_size + _ESTIMATE_HEADER
            reserved[row] += len(key) + value_size + _RESERVED_HEADER
        sections.append(b"".join(parts))
    return sections, estimated, reserved


def _records_in_c(
    *,
    order: Int64s,
    offset_deltas: Int64s,
    keys: pa.Array,
    values: pa.Array,
    key_sizes: Int64s,
    value_sizes: Int64s,
    headers: _HeaderColumns | None,
) -> tuple[memoryview, Int64s]:
    """:meth:`ArrowBatchEncoder._records` in one pass of C."""
    assert _native is not None
    starts = np.empty(len(order) + 1, dtype=np.int64)
    rows = (
        np.ascontiguousarray(order, dtype=np.int64),
        np.ascontiguousarray(offset_deltas, dtype=np.int64),
        _starts(keys), np.ascontiguousarray(key_sizes, dtype=np.int64), _data(keys),
        _starts(values), np.ascontiguousarray(value_sizes, dtype=np.int64), _data(values),
    )  # fmt: skip
    if headers is None:
        data = _native.encode_records(*rows, starts)
    else:
        data = _native.encode_records_with_headers(
            *rows, headers.first, headers.count, headers.key_starts, headers.key_sizes,
            headers.key_data, headers.value_starts, headers.value_sizes, headers.value_data,
            starts,
        )  # fmt: skip
    return memoryview(data), starts


@dataclass(frozen=True, slots=True)
class _HeaderColumns:
    """The rows' headers for the C helper: row r has entries ``first[r]`` … ``+ count[r]``;
    and each row's share of the producer's estimated and reserved sizes."""

    first: Int64s
    count: Int64s
    key_starts: Int64s
    key_sizes: Int64s
    key_data: pa.Buffer | bytes
    value_starts: Int64s
    value_sizes: Int64s
    value_data: pa.Buffer | bytes
    estimated: Int64s
    reserved: Int64s


def _header_columns(headers: pa.Array) -> _HeaderColumns | None:
    """The headers of every row as columns (no per-row Python); None when no row has any,
    or when one is unusual (a null entry or key: :func:`_header_sections` deals with it)."""
    n = len(headers)
    counts = pc.list_value_length(headers).fill_null(0).to_numpy(zero_copy_only=False)
    counts = counts.astype(np.int64)
    if not counts.any():
        return None
    entries = headers.flatten()  # the entries of the rows' lists, in row order
    if entries.null_count:
        return None
    by_name = dict(zip([f.name for f in entries.type], entries.flatten(), strict=True))
    keys, values = by_name["key"], by_name["value"]
    if keys.null_count:
        return None
    # The producer's estimates count a header key's characters, as send() measures a str.
    key_chars = pc.utf8_length(keys).to_numpy(zero_copy_only=False).astype(np.int64)
    keys, values = keys.cast(pa.large_binary()), values.cast(pa.large_binary())
    key_sizes, value_sizes = _lengths(keys), _lengths(values)
    first = np.zeros(n, dtype=np.int64)
    np.cumsum(counts[:-1], out=first[1:])
    row_of = np.repeat(np.arange(n), counts)
    per_header = key_chars + np.maximum(value_sizes, 0)

    def per_row(extra: int) -> Int64s:
        weights = (per_header + extra).astype(np.float64)
        return np.bincount(row_of, weights=weights, minlength=n).astype(np.int64)

    return _HeaderColumns(
        first=first, count=counts, key_starts=_starts(keys), key_sizes=key_sizes,
        key_data=_data(keys), value_starts=_starts(values), value_sizes=value_sizes,
        value_data=_data(values), estimated=per_row(_ESTIMATE_HEADER),
        reserved=per_row(_RESERVED_HEADER),
    )  # fmt: skip


class ArrowBatchEncoder:
    """Turns the rows of Arrow record batches into producer batches (one per call of
    :meth:`encode` per partition and ``batch.size``); keeps each topic's keyless
    placement between calls."""

    def __init__(
        self,
        *,
        batch_size: int,
        max_request_size: int,
        buffer_memory: int,
        compression: CompressionType = CompressionType.NONE,
        ignore_keys: bool = False,
        first_partition: int = 0,
    ) -> None:
        self.batch_size = max(1, min(batch_size, max_request_size))
        self.sticky_size = max(1, batch_size)  # the producer's sticky partitioner's
        self.max_request_size = max_request_size
        self.buffer_memory = buffer_memory
        self.compression = compression
        self.ignore_keys = ignore_keys
        self.first_partition = first_partition
        self._keyless: dict[str, tuple[int, int]] = {}  # topic → (partition, bytes sent)

    def encode(
        self,
        topic: str,
        num_partitions: int,
        *,
        values: pa.Array,
        keys: pa.Array | None = None,
        partitions: pa.Array | None = None,
        headers: pa.Array | None = None,
        timestamp: int,
        max_batch_bytes: int | None = None,
    ) -> Iterator[EncodedBatch]:
        """The batches of the rows of ``topic`` (columns of equal length), in partition order
        and, within a partition, in row order; none larger than ``max_batch_bytes`` (as the
        producer estimates sizes) when given, else than ``batch.size``. Raises
        MessageTooLargeError for a row the producer's send() would refuse, ValueError for a
        partition outside the topic."""
        batch_size = self.batch_size
        if max_batch_bytes is not None:
            batch_size = max(1, min(batch_size, max_batch_bytes))
        n = len(values)
        if n == 0:
            return
        values = values.cast(pa.large_binary())
        keys = pa.nulls(n, pa.large_binary()) if keys is None else keys.cast(pa.large_binary())
        key_sizes, value_sizes = _lengths(keys), _lengths(values)
        sections = header_columns = None
        if headers is not None:
            if _native is not None and _encode_in_c:
                header_columns = _header_columns(headers)
            if header_columns is None:
                sections = _header_sections(headers)
        estimated = _ESTIMATE_OVERHEAD + np.maximum(key_sizes, 0) + np.maximum(value_sizes, 0)
        reserved = RECORD_OVERHEAD + np.maximum(key_sizes, 0) + np.maximum(value_sizes, 0)
        if sections is not None:
            estimated += sections[1]
            reserved += sections[2]
        if header_columns is not None:
            estimated += header_columns.estimated
            reserved += header_columns.reserved
        self._check_sizes(reserved)
        placed = self._partitions(topic, num_partitions, keys, partitions, reserved)
        order = np.argsort(placed, kind="stable")
        sorted_partitions = placed[order]
        bounds = np.flatnonzero(np.diff(sorted_partitions)) + 1
        group_starts = np.concatenate([[0], bounds]).astype(np.int64)
        group_ends = np.concatenate([bounds, [n]]).astype(np.int64)
        estimated_sorted, reserved_sorted = estimated[order], reserved[order]
        chunk_starts: list[int] = []
        for start, end in zip(group_starts.tolist(), group_ends.tolist(), strict=True):
            chunk_starts += self._chunks(
                estimated_sorted[start:end], reserved_sorted[start:end], start, batch_size
            )
        starts = np.array(chunk_starts, dtype=np.int64)
        ends = np.append(starts[1:], n)
        offset_deltas = np.arange(n, dtype=np.int64) - np.repeat(starts, ends - starts)
        header_section = None if sections is None else [sections[0][i] for i in order.tolist()]
        data, record_offsets = self._records(
            order=order, offset_deltas=offset_deltas, keys=keys, values=values,
            key_sizes=key_sizes, value_sizes=value_sizes, header_sections=header_section,
            header_columns=header_columns,
        )  # fmt: skip
        cuts = record_offsets[np.append(starts, n)].tolist()
        for i, (start, end) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
            section: bytes | memoryview = data[cuts[i] : cuts[i + 1]]
            if self.compression is not CompressionType.NONE:
                section = compress(self.compression, section)
            yield EncodedBatch(
                topic,
                int(sorted_partitions[start]),
                EncodedRecords(section, end - start, timestamp, timestamp, self.compression),
            )

    def _check_sizes(self, reserved: Int64s) -> None:
        largest = int(reserved.max())
        for name, limit in (
            ("max.request.size", self.max_request_size),
            ("buffer.memory", self.buffer_memory),
        ):
            if largest > limit:
                raise MessageTooLargeError(
                    f"the record is {largest} bytes when serialized, larger than {name}={limit}"
                )

    def _partitions(
        self,
        topic: str,
        num_partitions: int,
        keys: pa.Array,
        explicit: pa.Array | None,
        reserved: Int64s,
    ) -> Int64s:
        n = len(keys)
        if self.ignore_keys:
            placed = np.full(n, -1, dtype=np.int64)
        else:
            placed = murmur2_partitions(keys, num_partitions)
        if explicit is not None and explicit.null_count < n:
            valid = explicit.is_valid().to_numpy(zero_copy_only=False)
            given = explicit.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
            outside = valid & ((given < 0) | (given >= num_partitions))
            if outside.any():
                raise ValueError(
                    f"a row's partition {int(given[outside][0])} is not one of topic "
                    f"{topic!r}'s partitions 0…{num_partitions - 1}"
                )
            placed = np.where(valid, given, placed)
        keyless = np.flatnonzero(placed < 0)
        if len(keyless):
            placed[keyless] = self._sticky(topic, num_partitions, reserved[keyless])
        return placed

    def _sticky(self, topic: str, num_partitions: int, sizes: Int64s) -> Int64s:
        """Partitions for keyless rows: ``batch.size`` bytes (as the producer counts them) to
        one partition, then the next."""
        partition, produced = self._keyless.get(topic, (self.first_partition % num_partitions, 0))
        partition %= num_partitions
        sums = np.cumsum(sizes)
        placed = np.empty(len(sizes), dtype=np.int64)
        start, base = 0, 0
        while start < len(sizes):
            # The row that brings the partition to batch.size is the last one it gets.
            target = base + self.sticky_size - produced
            end = int(np.searchsorted(sums, target, side="left")) + 1
            end = min(end, len(sizes))
            placed[start:end] = partition
            produced += int(sums[end - 1]) - base
            base = int(sums[end - 1])
            if produced >= self.sticky_size:
                partition, produced = (partition + 1) % num_partitions, 0
            start = end
        self._keyless[topic] = (partition, produced)
        return placed

    @staticmethod
    def _chunks(estimated: Int64s, reserved: Int64s, offset: int, batch_size: int) -> list[int]:
        """Where batches start among one partition's rows: the accumulator's rule, a new
        batch when the open one's estimate plus the row's reserved size passes batch.size."""
        limit = batch_size - HEADER_SIZE
        before = np.concatenate([[0], np.cumsum(estimated)])  # estimate of the rows before i
        joined = before[:-1] + reserved
        starts = []
        start, n = 0, len(estimated)
        while start < n:
            starts.append(offset + start)
            threshold = limit + int(before[start])
            # Past `last`, the rows before alone pass the limit: the batch ends by then.
            last = int(np.searchsorted(before, threshold, side="right"))
            window = joined[start + 1 : min(last, n - 1) + 1] > threshold
            stop = int(np.argmax(window)) if window.any() else len(window)
            start = start + 1 + stop
        return starts

    def _records(
        self,
        *,
        order: Int64s,
        offset_deltas: Int64s,
        keys: pa.Array,
        values: pa.Array,
        key_sizes: Int64s,
        value_sizes: Int64s,
        header_sections: Sequence[bytes] | None,
        header_columns: _HeaderColumns | None = None,
    ) -> tuple[memoryview, Int64s]:
        """Every record's bytes, rows in ``order``, back to back; and where each starts."""
        if header_sections is None and _native is not None and _encode_in_c:
            return _records_in_c(
                order=order, offset_deltas=offset_deltas, keys=keys, values=values,
                key_sizes=key_sizes, value_sizes=value_sizes, headers=header_columns,
            )  # fmt: skip
        n = len(order)
        key_sizes, value_sizes = key_sizes[order], value_sizes[order]
        key_zz, value_zz, delta_zz = (
            _zigzag(key_sizes),
            _zigzag(value_sizes),
            _zigzag(offset_deltas),
        )
        key_vs, value_vs, delta_vs = (
            _varint_sizes(key_zz),
            _varint_sizes(value_zz),
            _varint_sizes(delta_zz),
        )
        if header_sections is None:
            header_sizes = np.ones(n, dtype=np.int64)
        else:
            header_sizes = np.fromiter((len(s) for s in header_sections), np.int64, count=n)
        # attributes, timestamp delta (0), offset delta, key, value, headers
        body = (
            2 + delta_vs + key_vs + np.maximum(key_sizes, 0) + value_vs
            + np.maximum(value_sizes, 0) + header_sizes
        )  # fmt: skip
        body_zz = _zigzag(body)
        body_vs = _varint_sizes(body_zz)
        # Per row, two pieces built here: "length attributes timestampDelta offsetDelta
        # keyLength" before the key, "valueLength" between key and value.
        head_sizes = body_vs + 2 + delta_vs + key_vs
        piece_sizes = np.empty(2 * n, dtype=np.int64)
        piece_sizes[0::2], piece_sizes[1::2] = head_sizes, value_vs
        piece_offsets = np.zeros(2 * n + 1, dtype=np.int64)
        np.cumsum(piece_sizes, out=piece_offsets[1:])
        small = np.zeros(int(piece_offsets[-1]), dtype=np.uint8)
        heads = piece_offsets[0:-1:2]
        _put_varints(small, heads, body_zz, body_vs)
        _put_varints(small, heads + body_vs + 2, delta_zz, delta_vs)
        _put_varints(small, heads + body_vs + 2 + delta_vs, key_zz, key_vs)
        _put_varints(small, piece_offsets[1:-1:2], value_zz, value_vs)
        small_array = pa.LargeBinaryArray.from_buffers(
            pa.large_binary(), 2 * n, [None, pa.py_buffer(piece_offsets), pa.py_buffer(small)]
        )
        if header_sections is None:
            tails = pa.LargeBinaryArray.from_buffers(
                pa.large_binary(),
                n,
                [None, pa.py_buffer(np.arange(n + 1, dtype=np.int64)), pa.py_buffer(bytes(n))],
            )
        else:
            tails = pa.array(header_sections, pa.large_binary())
        pieces = pa.concat_arrays([small_array, keys, values, tails])
        rows = np.arange(n, dtype=np.int64)
        index = np.empty((n, 5), dtype=np.int64)
        index[:, 0] = 2 * rows
        index[:, 1] = 2 * n + order
        index[:, 2] = 2 * rows + 1
        index[:, 3] = 3 * n + order
        index[:, 4] = 4 * n + rows
        records = pieces.take(pa.array(index.ravel()))
        record_sizes = body_vs + body
        starts = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(record_sizes, out=starts[1:])
        data = records.buffers()[2]
        first = int(
            np.frombuffer(records.buffers()[1], dtype=np.int64, count=1, offset=records.offset * 8)[
                0
            ]
        )
        return memoryview(data)[first : first + int(starts[-1])], starts
