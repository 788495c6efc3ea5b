"""The Spark sink's write path without Spark: Arrow batches → ``ArrowBatchEncoder`` →
``Producer.send_batch``, against one broker, with the CPU each side spends per row.

    python bench/spark_write_bench.py [--size 100] [--rows 300000] [--batch-size 16384 ...]

Starts its own broker in a temporary directory, writes ``--rows`` rows of ``--size``-byte
values (keys ``b"0"``, ``b"1"``…) in Arrow batches of 10 000 rows to a 2-partition topic,
twice per batch size; prints the second run's rows/s (wall), and the client's and the
broker's CPU per row (``time.process_time`` and ``/proc/<pid>/stat``).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from samsa import Admin, Producer
from samsa.client.admin import NewTopic
from samsa.spark.batches import ArrowBatchEncoder
from samsa.testing import start_broker

ARROW_ROWS = 10_000


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def write(bootstrap: str, broker_pid: int, *, size: int, rows: int, batch_size: int) -> str:
    keys = pa.array([b"%d" % i for i in range(ARROW_ROWS)])
    values = pa.array([b"x" * size] * ARROW_ROWS)
    with Producer({"bootstrap.servers": bootstrap, "batch.size": batch_size}) as producer:
        partitions = len(producer.partitions_for("bench"))
        config = producer.config
        encoder = ArrowBatchEncoder(
            batch_size=batch_size,
            max_request_size=config["max.request.size"],
            buffer_memory=config["buffer.memory"],
        )
        broker_cpu, client_cpu, start = (
            _cpu_seconds(broker_pid),
            time.process_time(),
            time.perf_counter(),
        )
        encoding = 0.0
        for _ in range(rows // ARROW_ROWS):
            began = time.process_time()
            batches = list(
                encoder.encode("bench", partitions, values=values, keys=keys, timestamp=1)
            )
            encoding += time.process_time() - began
            for batch in batches:
                producer.send_batch(batch.topic, batch.partition, batch.records)
        producer.flush()
        wall = time.perf_counter() - start
        client = (time.process_time() - client_cpu) / rows * 1e6
        broker = (_cpu_seconds(broker_pid) - broker_cpu) / rows * 1e6
    return (
        f"{size:>4} B  batch.size {batch_size:>7}  {rows / wall:>9,.0f} rows/s  client CPU "
        f"{client:.2f} µs/row (encoder {encoding / rows * 1e6:.2f})  broker CPU {broker:.2f} µs/row"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--batch-size", type=int, action="append")
    args = parser.parse_args()
    broker = start_broker(Path(tempfile.mkdtemp(prefix="spark-write-bench-")) / "data")
    assert broker.process is not None
    try:
        with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
            admin.create_topics([NewTopic("bench", 2)])
        for batch_size in args.batch_size or [16384, 262144, 524288]:
            for _ in range(2):
                line = write(
                    broker.bootstrap, broker.process.pid, size=args.size, rows=args.rows,
                    batch_size=batch_size,
                )  # fmt: skip
            print(line, flush=True)
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
