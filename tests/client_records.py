"""Records the client round-trip tests send, and what the broker stored for them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samsa.records import CompressionType, iter_batches


@dataclass(frozen=True)
class Sent:
    """A record as the producer sent it, with where the broker said it landed."""

    key: bytes
    value: bytes | None
    headers: list[tuple[str, bytes]]
    timestamp: int
    partition: int
    offset: int


def make_record(i: int) -> tuple[bytes, bytes | None, list[tuple[str, bytes]]]:
    """Record ``i``'s key, value and headers: binary bytes, empty and null values, repeated
    and non-ASCII header keys, and now and then a value larger than a default batch."""
    key = b"key-%d-\x00\xff" % i
    if i % 100 == 0:
        value: bytes | None = None
    elif i % 100 == 1:
        value = b""
    elif i % 997 == 0:
        value = bytes(range(256)) * 80
    else:
        value = bytes((i + j) % 256 for j in range(i % 61)) + b"value-%d" % i
    headers = [("h", b"%d" % i), ("empty", b""), ("h", b"\x00\x01"), ("ключ", "значение".encode())]
    return key, value, headers


def codecs_on_disk(data_dir: Path, topic: str) -> set[CompressionType]:
    """The codec of every batch the broker stored for ``topic`` (it stores client bytes)."""
    codecs = set()
    for log_file in data_dir.glob(f"{topic}-*/*.log"):
        codecs |= {batch.compression for batch in iter_batches(log_file.read_bytes())}
    return codecs


def assert_round_trip(
    sent: list[Sent],
    received: list[Any],
    partitions: int,
    *,
    data_dir: Path,
    topic: str,
    codec: str,
) -> None:
    """Every sent record came back byte-exact at its offset; offsets are contiguous; the
    broker stored the client's codec (clients send a batch uncompressed when the codec
    would not shrink it)."""
    assert len(received) == len(sent)
    by_position = {(r.partition, r.offset): r for r in received}
    for record in sent:
        got = by_position[record.partition, record.offset]
        assert got.key == record.key
        assert got.value == record.value
        assert list(got.headers) == record.headers
        assert got.timestamp == record.timestamp
        assert got.timestamp_type == 0  # CreateTime
    for partition in range(partitions):
        offsets = [r.offset for r in received if r.partition == partition]
        assert offsets == list(range(len(offsets)))
    stored = codecs_on_disk(data_dir, topic)
    assert CompressionType[codec.upper()] in stored
    assert stored <= {CompressionType[codec.upper()], CompressionType.NONE}
