"""The source's columns, and consumer records turned into Arrow record batches.

The columns are those of Spark's Kafka source: key, value, topic, partition,
offset, timestamp, timestampType, and headers when ``includeHeaders`` is true
(null for a record without headers, as in Spark's Kafka source).
Executors hand Spark ``pyarrow.RecordBatch`` objects, which skips PySpark's per-row
type checks. The readers build them from fetched batches directly
(:mod:`samsa.spark.columns`); :class:`ArrowRows` builds them from consumer records,
the path bench/spark_bench.py compares that with.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from samsa.client.consumer.types import ConsumerRecord

__all__ = ["HEADERS_TYPE", "ArrowRows", "record_tuple", "source_schema"]

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def source_schema(include_headers: bool) -> StructType:
    """The columns a read returns."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def _headers(record: ConsumerRecord) -> list[dict[str, Any]] | None:
    # As Spark's Kafka source: a record without headers has null, not an empty array.
    if not record.headers:
        return None
    return [{"key": key, "value": value} for key, value in record.headers]


class ArrowRows:
    """Collects records and hands them out as record batches of Spark's Arrow schema.

    Not thread-safe; one per Spark task.
    """

    def __init__(self, schema: StructType) -> None:
        self.schema = to_arrow_schema(schema, timezone="UTC")
        self._include_headers = "headers" in schema.fieldNames()
        self._records: list[ConsumerRecord] = []

    def __len__(self) -> int:
        return len(self._records)

    def extend(self, records: Iterable[ConsumerRecord]) -> None:
        self._records.extend(records)

    def take(self) -> pa.RecordBatch:
        """A record batch of what was collected; the collection starts again empty."""
        records, self._records = self._records, []
        columns = [
            pa.array([r.key for r in records], pa.binary()),
            pa.array([r.value for r in records], pa.binary()),
            pa.array([r.topic for r in records], pa.string()),
            pa.array([r.partition for r in records], pa.int32()),
            pa.array([r.offset for r in records], pa.int64()),
            # Spark's timestamps are microseconds; Kafka's are milliseconds.
            pa.array([r.timestamp * 1000 for r in records], self.schema.field("timestamp").type),
            pa.array([r.timestamp_type for r in records], pa.int32()),
        ]
        if self._include_headers:
            columns.append(
                pa.array([_headers(r) for r in records], self.schema.field("headers").type)
            )
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)


def record_tuple(record: ConsumerRecord, include_headers: bool) -> tuple[Any, ...]:
    """One record as a row tuple (the slower path PySpark converts itself; for benchmarks)."""
    import datetime

    row: tuple[Any, ...] = (
        record.key,
        record.value,
        record.topic,
        record.partition,
        record.offset,
        datetime.datetime.fromtimestamp(record.timestamp / 1000, datetime.UTC),
        record.timestamp_type,
    )
    if include_headers:
        row += ([(k, v) for k, v in record.headers] if record.headers else None,)
    return row
