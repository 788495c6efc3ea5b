"""Fetched batches decoded into Arrow columns agree with samsa's record decoder.

No Spark here: the decoder the readers hand to their consumer, on built batches and
on a real broker's fetches.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema
from tests.spark.conftest import new_topic

from samsa import Consumer, Producer
from samsa.client.errors import IllegalStateError
from samsa.errors import CorruptRecordError
from samsa.records import HEADER_SIZE, CompressionType, RecordBatchBuilder, read_batch
from samsa.records.batch import RECORD_COUNT_POS, TimestampType
from samsa.records.reader import record_tuples
from samsa.spark import columns
from samsa.spark.columns import ArrowBatchDecoder, DecodedBatch, record_columns
from samsa.spark.rows import source_schema
from samsa.testing import BrokerProcess
from samsa.types import TopicPartition

pytestmark = [pytest.mark.spark]

blobs = st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=200, max_size=9000))
header_lists = st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=8))),
                        max_size=3)  # fmt: skip
timestamp_types = st.sampled_from([TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME])
records = st.lists(
    st.tuples(blobs, blobs, header_lists, st.integers(-(2**40), 2**40), st.integers(0, 300)),
    min_size=1,
    max_size=30,
)


def _batch(
    spec: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int, int]],
    compression: CompressionType = CompressionType.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
) -> bytes:
    builder = RecordBatchBuilder(
        compression=compression, base_offset=1_000_000, timestamp_type=timestamp_type
    )
    delta = 0
    for key, value, headers, timestamp, gap in spec:
        delta += gap
        builder.append(value, key=key, headers=headers, timestamp=timestamp, offset_delta=delta)
        delta += 1
    return builder.build()


SCANS = ["c", "numpy"]
"""The two ways of finding the records' fields: the C helper and the numpy fallback."""


@contextmanager
def _scanning(scan: str) -> Iterator[None]:
    chosen = columns._scan_native if scan == "c" else columns._scan_numpy
    kept, columns._scan = columns._scan, chosen
    try:
        yield
    finally:
        columns._scan = kept


def _columns_as_tuples(*data: bytes, scan: str = "c") -> list[tuple[object, ...]]:
    with _scanning(scan):
        offsets, timestamps, _, keys, values, headers = record_columns(
            [read_batch(d) for d in data]
        )
    count = len(offsets)
    header_rows = headers.to_pylist() if headers is not None else [None] * count
    return list(
        zip(
            offsets.tolist(),
            timestamps.tolist(),
            keys.to_pylist(),
            values.to_pylist(),
            [tuple((h["key"], h["value"]) for h in row or ()) for row in header_rows],
            strict=True,
        )
    )


def test_the_c_helper_is_built_here() -> None:
    """make builds it (a compiler and Python's headers are installed), so both paths are
    tested below; a pip install without a compiler is tested in test_native_build.py."""
    assert columns._native is not None, "setup.py did not build samsa.records._native"
    assert columns._scan is columns._scan_native


@pytest.mark.parametrize("scan", SCANS)
@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            records,
            st.sampled_from(list(CompressionType)),
            st.sampled_from(list(TimestampType)[1:]),
        ),
        min_size=1,
        max_size=3,
    )
)
def test_columns_of_any_batches_are_the_records_the_record_decoder_reads(
    scan: str, specs: list[tuple[list[Any], CompressionType, TimestampType]]
) -> None:
    data = [
        _batch(spec, compression, timestamp_type) for spec, compression, timestamp_type in specs
    ]
    expected = [record for d in data for record in record_tuples(read_batch(d))]
    assert _columns_as_tuples(*data, scan=scan) == expected


def test_timestamp_types_are_each_batchs_own() -> None:
    create = _batch([(None, b"a", [], 7, 0)])
    append = _batch([(None, b"b", [], 7, 0)], timestamp_type=TimestampType.LOG_APPEND_TIME)
    _, _, types, _, _, _ = record_columns([read_batch(create), read_batch(append)])
    assert types.tolist() == [0, 1]


@pytest.mark.parametrize("scan", SCANS)
@settings(max_examples=300, deadline=None)
@given(records, st.data())
def test_a_batch_with_any_byte_of_its_records_changed_decodes_as_the_record_decoder_does(
    scan: str,
    spec: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int, int]],
    data: st.DataObject,
) -> None:
    batch = bytearray(_batch(spec))
    where = data.draw(st.integers(HEADER_SIZE, len(batch) - 1))
    batch[where] = data.draw(st.integers(0, 255))
    try:
        expected = list(record_tuples(read_batch(bytes(batch))))
    except CorruptRecordError:
        with pytest.raises(CorruptRecordError):
            _columns_as_tuples(bytes(batch), scan=scan)
    else:
        assert _columns_as_tuples(bytes(batch), scan=scan) == expected


@pytest.mark.parametrize("scan", SCANS)
@pytest.mark.parametrize("change", [-1, 1])
def test_a_record_count_that_disagrees_with_the_records_raises_corrupt_record(
    scan: str, change: int
) -> None:
    batch = bytearray(_batch([(b"k", b"v", [], 0, 0)] * 3))
    struct.pack_into(">i", batch, RECORD_COUNT_POS, 3 + change)
    with pytest.raises(CorruptRecordError), _scanning(scan):
        record_columns([read_batch(bytes(batch))])


def test_the_decoder_leaves_out_records_before_the_fetch_position() -> None:
    data = _batch([(b"k%d" % i, b"v%d" % i, [], 5, 0) for i in range(10)])
    decoder = ArrowBatchDecoder(to_arrow_schema(source_schema(False), timezone="UTC"))
    decoded = decoder(TopicPartition("t", 2), [read_batch(data)], 1_000_004)
    assert decoded is not None
    assert decoded.batch.column("offset").to_pylist() == list(range(1_000_004, 1_000_010))
    assert decoded.batch.column("value").to_pylist() == [b"v%d" % i for i in range(4, 10)]
    assert decoded.batch.column("partition").to_pylist() == [2] * 6
    assert decoder(TopicPartition("t", 2), [read_batch(data)], 1_000_010) is None


@pytest.mark.timeout(60)
def test_a_consumer_with_the_decoder_skips_aborted_transactions_and_control_batches(
    samsa_broker: BrokerProcess,
) -> None:
    topic = new_topic(samsa_broker.bootstrap, prefix="columns")
    config = {"bootstrap.servers": samsa_broker.bootstrap, "transactional.id": f"{topic}-tx"}
    with Producer(config) as producer:
        producer.init_transactions()
        for outcome in ("committed", "aborted", "committed"):
            producer.begin_transaction()
            for i in range(5):
                producer.send(topic, f"{outcome}-{i}".encode(), partition=0)
            producer.flush()
            if outcome == "aborted":
                producer.abort_transaction()
            else:
                producer.commit_transaction()
    tp = TopicPartition(topic, 0)
    decoder = ArrowBatchDecoder(to_arrow_schema(source_schema(False), timezone="UTC"))
    consumer = Consumer(
        {"bootstrap.servers": samsa_broker.bootstrap, "isolation.level": "read_committed"},
        batch_decoder=decoder,
    )
    try:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        end = consumer.end_offsets([tp])[tp]
        chunks: list[DecodedBatch] = []
        while consumer.position(tp) < end:
            chunks.extend(consumer.poll_decoded(timeout=5))
    finally:
        consumer.close()
    values = [v for chunk in chunks for v in chunk.batch.column("value").to_pylist()]
    assert values == [b"committed-%d" % i for i in range(5)] * 2


def test_a_consumer_with_a_batch_decoder_refuses_a_record_poll(
    samsa_broker: BrokerProcess,
) -> None:
    decoder = ArrowBatchDecoder(to_arrow_schema(source_schema(False), timezone="UTC"))
    with Consumer({"bootstrap.servers": samsa_broker.bootstrap}, batch_decoder=decoder) as c:
        c.assign([TopicPartition("any", 0)])
        with pytest.raises(IllegalStateError):
            c.poll(0)
