"""Reading a coordinator's internal topic partition back, batch by batch, at start-up."""

from __future__ import annotations

from collections.abc import Iterator

from samsa.records.batch import RecordBatchView, batch_size_at, iter_batches
from samsa.storage import Log

_FIRST_READ_BYTES = 1 << 20


def _whole_batches_end(data: bytes) -> int:
    """How many leading bytes of ``data`` are whole batches."""
    end = 0
    while (size := batch_size_at(data, end)) is not None and end + size <= len(data):
        end += size
    return end


def log_batches(partition_log: Log) -> Iterator[RecordBatchView]:
    """Every batch of a log from its start to its end, in offset order.

    Reads 1 MiB at a time, doubling the read when one batch is larger, and stops
    at a gap at the end of the log.
    """
    offset = partition_log.log_start_offset
    max_bytes = _FIRST_READ_BYTES
    while offset < partition_log.log_end_offset:
        data = partition_log.read(offset, max_bytes).region.read()
        end = _whole_batches_end(data)
        if end == 0:
            if len(data) < max_bytes:
                return  # nothing more to read (a gap at the end of the log)
            max_bytes *= 2  # one batch larger than the read: read more at once
            continue
        for batch in iter_batches(memoryview(data)[:end]):
            offset = max(offset, batch.next_offset)
            yield batch
