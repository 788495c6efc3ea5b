"""The hand-written FetchResponse encoder matches kio's byte for byte, versions 4–17, and
the declared old layouts (samsa.protocol.legacy) for versions 0–3."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from kio.index import load_response_schema

from samsa.protocol.build import build
from samsa.protocol.codec import encode_response_for
from samsa.protocol.fetch_response import FetchPartition, FetchTopic, encode_fetch_response
from samsa.protocol.legacy import kio_version
from samsa.storage import FileRegion

TOPIC_ID = uuid.UUID("12345678-1234-5678-1234-567812345678")


def _partitions(records: list[bytes | None]) -> list[FetchPartition]:
    return [
        FetchPartition(
            partition_index=i,
            error_code=(0 if i % 3 else 1),
            high_watermark=1000 + i,
            last_stable_offset=900 + i,
            log_start_offset=10 + i,
            aborted_transactions=None if i % 2 else [(77, 5 + i), (78, 6 + i)],
            records=value,
        )
        for i, value in enumerate(records)
    ]


def _kio_bytes(version: int, topics: list[FetchTopic], session_id: int) -> bytes:
    cls = load_response_schema(1, kio_version(1, version))
    values = {
        "throttle_time": 7,
        "error_code": 0,
        "session_id": session_id,
        "responses": [
            {
                "topic": t.name,
                "topic_id": t.topic_id,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": p.error_code,
                        "high_watermark": p.high_watermark,
                        "last_stable_offset": p.last_stable_offset,
                        "log_start_offset": p.log_start_offset,
                        "aborted_transactions": None
                        if p.aborted_transactions is None
                        else [
                            {"producer_id": pid, "first_offset": first}
                            for pid, first in p.aborted_transactions
                        ],
                        "preferred_read_replica": -1,
                        "records": p.records,
                    }
                    for p in t.partitions
                ],
            }
            for t in topics
        ],
    }
    return encode_response_for(1, version, 99, build(cls, values))


@pytest.mark.parametrize("version", range(18))
def test_encoder_matches_kio_for_every_version(version: int) -> None:
    topics = [
        FetchTopic("orders", TOPIC_ID, _partitions([b"abc" * 50, None, b"", b"x"])),
        FetchTopic("empty", TOPIC_ID, []),
    ]
    chunks, total = encode_fetch_response(version, 99, topics, throttle_time_ms=7, session_id=0)
    ours = b"".join(c for c in chunks if isinstance(c, bytes))
    assert ours == _kio_bytes(version, topics, 0)
    assert total == len(ours)


@pytest.mark.parametrize("version", [0, 2, 4, 11, 12, 13, 16, 17])
def test_file_regions_stand_where_their_bytes_would(tmp_path: Path, version: int) -> None:
    data = os.urandom(5000)
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        region = FileRegion(fd, 1000, 3000)
        with_region = [FetchTopic("t", TOPIC_ID, _partitions([region, b"tail"]))]
        with_bytes = [FetchTopic("t", TOPIC_ID, _partitions([data[1000:4000], b"tail"]))]
        chunks, total = encode_fetch_response(version, 99, with_region, throttle_time_ms=7)
        assert any(isinstance(c, FileRegion) for c in chunks)
        joined = b"".join(c if isinstance(c, bytes) else c.read() for c in chunks)
        assert joined == _kio_bytes(version, with_bytes, 0)
        assert total == len(joined)
    finally:
        os.close(fd)
