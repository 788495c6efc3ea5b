"""Down-conversion benchmark: what serving Fetch v0–3 (message formats v0/v1) costs.

Not a test. Two parts:

1. In process: :func:`samsa.records.legacy.down_convert` over RecordBatch v2 bytes
   (batches of 500 records, 100 B and 1 KiB values, uncompressed / gzip / lz4, to
   magic 0 and 1), and :func:`message_set_to_batch` (Produce v0–2's conversion the
   other way), in records/s and MB/s of record values.
2. Against ``samsa serve``: confluent-kafka writes N records to a one-partition topic, then
   one client reads them all from offset 0 with back-to-back Fetch requests of 1 MiB
   (``partition_max_bytes``) — Fetch v3 (down-converted to magic 1), Fetch v1 (magic 0)
   and Fetch v4 (stored batches sent with ``os.sendfile``, the path every Kafka 4-era
   client takes) — timing each pass; the raw client parses only the offsets it needs to
   go on.

    .venv/bin/python bench/down_conversion_bench.py            # default (~1 minute)
    .venv/bin/python bench/down_conversion_bench.py --quick    # smaller
    .venv/bin/python bench/down_conversion_bench.py --v4-only  # Fetch v4 only (runs on code
                                                               # without down-conversion too)

Results: bench/RESULTS.md, section "Down-conversion for old clients".
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.records.batch import CompressionType
from samsa.records.builder import RecordBatchBuilder
from samsa.testing import start_broker

FETCH = 1
BATCH_RECORDS = 500


def _batches(count: int, size: int, codec: CompressionType) -> bytes:
    value = os.urandom(size // 2) * 2
    out = []
    for base in range(0, count, BATCH_RECORDS):
        builder = RecordBatchBuilder(compression=codec, base_offset=base)
        for i in range(min(BATCH_RECORDS, count - base)):
            builder.append(value, key=b"key-%d" % (base + i), timestamp=1_700_000_000_000 + i)
        out.append(builder.build())
    return b"".join(out)


def _best(run: Callable[..., object], args: tuple[object, ...], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run(*args)
        times.append(time.perf_counter() - start)
    return min(times)


def in_process(records: int, repeat: int) -> None:
    print(f"in process: {records:,} records per run, best of {repeat}")
    print(f"{'conversion':<34} {'codec':<6} {'size':>6} {'records/s':>12} {'MB/s':>8}")
    for size in (100, 1024):
        for codec in (CompressionType.NONE, CompressionType.GZIP, CompressionType.LZ4):
            stored = _batches(records, size, codec)
            for magic in (1, 0):
                seconds = _best(_down_convert, (stored, magic), repeat)
                _row(f"down-convert v2 -> magic {magic}", codec, size, records, seconds)
            message_set = _down_convert(stored, 1)
            seconds = _best(_to_batch, (message_set,), repeat)
            _row("produce: magic 1 set -> v2 batch", codec, size, records, seconds)


def _down_convert(stored: bytes, magic: int) -> bytes:
    from samsa.records.legacy import down_convert

    return down_convert(stored, magic, 0, 1 << 62, min_one_message=True)


def _to_batch(message_set: bytes) -> bytes:
    from samsa.records.legacy import message_set_to_batch

    return message_set_to_batch(message_set, now_ms=0)


def _row(what: str, codec: CompressionType, size: int, records: int, seconds: float) -> None:
    rate = records / seconds
    print(f"{what:<34} {codec.name.lower():<6} {size:>5}B {rate:>12,.0f} {rate * size / 1e6:>8.1f}")


def _fetch_frame(version: int, topic: str, offset: int, max_bytes: int) -> bytes:
    name = topic.encode()
    body = struct.pack(">hhih", FETCH, version, 1, 5) + b"bench"
    body += struct.pack(">iii", -1, 0, 1)  # replica id, max wait, min bytes
    if version >= 3:
        body += struct.pack(">i", max_bytes)
    if version >= 4:
        body += b"\x00"  # isolation level
    body += struct.pack(">ih", 1, len(name)) + name
    body += struct.pack(">iiqi", 1, 0, offset, max_bytes)
    return struct.pack(">i", len(body)) + body


def _recv(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(min(size - len(data), 1 << 20))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        data += chunk
    return bytes(data)


def _next_offset(version: int, frame: bytes, topic: str) -> tuple[int, int]:
    """(offset after the last record returned, records bytes) of a one-partition response."""
    pos = 4 + (4 if version >= 1 else 0)  # correlation id, throttle time
    pos += 4 + 2 + len(topic) + 4 + 4 + 2 + 8  # topics, name, partitions, index, error, hw
    if version >= 4:
        pos += 8  # last stable offset
        (aborted,) = struct.unpack_from(">i", frame, pos)
        pos += 4 + max(aborted, 0) * 16
    (size,) = struct.unpack_from(">i", frame, pos)
    pos += 4
    end = pos + max(size, 0)
    last = -1
    while pos + 12 <= end:
        offset, length = struct.unpack_from(">qi", frame, pos)
        if pos + 12 + length > end:
            break
        if version >= 4:
            (delta,) = struct.unpack_from(">i", frame, pos + 23)
            offset += delta
        last = offset
        pos += 12 + length
    return last + 1, max(size, 0)


def fetch_all(bootstrap: str, topic: str, version: int, count: int) -> tuple[float, int]:
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port))) as sock:
        offset, total = 0, 0
        start = time.perf_counter()
        while offset < count:
            sock.sendall(_fetch_frame(version, topic, offset, 1 << 20))
            (size,) = struct.unpack(">i", _recv(sock, 4))
            offset, records = _next_offset(version, _recv(sock, size), topic)
            total += records
        return time.perf_counter() - start, total


def against_broker(
    count: int, size: int, codec: str, repeat: int, versions: tuple[int, ...]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        broker = start_broker(Path(tmp) / "data")
        try:
            topic = f"down-conversion-{codec}"
            admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 3})
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
            producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 10,
                                 "compression.type": codec, "batch.size": 1_000_000,
                                 "log_level": 3})  # fmt: skip
            value = os.urandom(size)
            for i in range(count):
                while True:
                    try:
                        producer.produce(topic, value, b"key-%d" % i, partition=0)
                        break
                    except BufferError:
                        producer.poll(0.1)
            assert producer.flush(60) == 0
            print(f"\nsamsa serve, {count:,} records of {size} B, {codec}, "
                  f"1 MiB fetches, median of {repeat}")  # fmt: skip
            print(f"{'request':<28} {'records/s':>12} {'MB/s':>8} {'response MB':>12}")
            labels = {4: "Fetch v4 (zero copy)", 3: "Fetch v3 (-> magic 1)",
                      1: "Fetch v1 (-> magic 0)"}  # fmt: skip
            for version in versions:
                label = labels[version]
                runs = [fetch_all(broker.bootstrap, topic, version, count) for _ in range(repeat)]
                rate = count / statistics.median(r[0] for r in runs)
                response_mb = runs[0][1] / 1e6
                print(f"{label:<28} {rate:>12,.0f} {rate * size / 1e6:>8.1f} {response_mb:>12.1f}")
        finally:
            broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--v4-only", action="store_true")
    args = parser.parse_args()
    repeat = 3
    if not args.v4_only:
        in_process(20_000 if args.quick else 100_000, repeat)
    count = 50_000 if args.quick else 300_000
    versions = (4,) if args.v4_only else (4, 3, 1)
    for size, codec in ((100, "none"), (1024, "none"), (1024, "lz4")):
        against_broker(count if size == 100 else count // 3, size, codec, repeat, versions)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
