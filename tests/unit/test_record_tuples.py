"""``record_tuples`` / ``decode_records`` (the consumer's fast decoder) agree with
``iter_records`` / ``decode_record`` (the reference) on every input.

Valid batches come from Hypothesis (keys, values and headers of every length class,
so one-, two- and multi-byte varints all appear; timestamps far from the base).
Broken record sections — every truncation, and bytes overwritten with values that
make varints long, negative or huge — must give the same records or the same
``CorruptRecordError`` from both.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.errors import CorruptRecordError
from samsa.records import RecordBatchBuilder, iter_batches
from samsa.records.reader import iter_records, record_tuples
from samsa.records.record import decode_record, decode_records

payloads = st.one_of(
    st.none(),
    st.binary(max_size=5),
    st.binary(min_size=60, max_size=70),
    st.binary(min_size=8190, max_size=8200),
)
headers = st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))))
records = st.lists(
    st.tuples(payloads, payloads, headers, st.integers(min_value=0, max_value=2**40)),
    min_size=1,
    max_size=20,
)


def _reference(buf: bytes, count: int, base_offset: int, base_ts: int, override: int | None):
    out = []
    pos = 0
    for _ in range(count):
        if pos >= len(buf):
            raise CorruptRecordError("ends early")
        record, pos = decode_record(buf, pos, base_offset, base_ts, override)
        out.append((record.offset, record.timestamp, record.key, record.value, record.headers))
    if pos != len(buf):
        raise CorruptRecordError("trailing bytes")
    return out


def _outcome(decoder, *args):
    try:
        return decoder(*args)
    except CorruptRecordError:
        return "corrupt"


@settings(max_examples=150, deadline=None)
@given(records)
def test_valid_batches_decode_the_same(batch_records) -> None:
    builder = RecordBatchBuilder()
    for key, value, record_headers, timestamp in batch_records:
        builder.append(value, key=key, headers=record_headers, timestamp=timestamp)
    batch = next(iter_batches(builder.build()))
    expected = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in iter_records(batch)]
    assert record_tuples(batch) == expected


def _section(with_headers: bool) -> tuple[bytes, int]:
    builder = RecordBatchBuilder()
    for i in range(6):
        builder.append(
            b"v" * (i * 40), key=None if i == 2 else b"k%d" % i,
            headers=[("h", b"x")] if with_headers and i == 3 else (),
        )  # fmt: skip
    batch = next(iter_batches(builder.build()))
    return bytes(batch.records_data), batch.record_count


@pytest.mark.parametrize("with_headers", [False, True])
def test_truncated_and_overwritten_sections_fail_or_decode_the_same(with_headers: bool) -> None:
    section, count = _section(with_headers)
    cases = [section[:cut] for cut in range(len(section))]
    for position in range(len(section)):
        for byte in (0x00, 0x01, 0x7F, 0x80, 0xFF):
            cases.append(section[:position] + bytes([byte]) + section[position + 1 :])
    for case in cases:
        for override in (None, 77):
            args = (case, count, 5, 1000, override)
            assert _outcome(decode_records, *args) == _outcome(_reference, *args), case
