"""RecordBatch v2: a zero-copy view, a builder, a reader, codecs and control records."""

from samsa.records.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    CompressionType,
    RecordBatchView,
    TimestampType,
    batch_size_at,
    iter_batches,
    read_batch,
)
from samsa.records.builder import RecordBatchBuilder, build_batch
from samsa.records.control import (
    ControlRecordType,
    EndTransactionMarker,
    build_end_transaction_batch,
    control_record_type,
    parse_end_transaction_marker,
)
from samsa.records.reader import iter_records, read_records
from samsa.records.record import Header, Record

__all__ = [
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "CompressionType",
    "ControlRecordType",
    "EndTransactionMarker",
    "Header",
    "Record",
    "RecordBatchBuilder",
    "RecordBatchView",
    "TimestampType",
    "batch_size_at",
    "build_batch",
    "build_end_transaction_batch",
    "control_record_type",
    "iter_batches",
    "iter_records",
    "parse_end_transaction_marker",
    "read_batch",
    "read_records",
]
