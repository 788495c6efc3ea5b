"""What TLS costs: fetch and produce over PLAINTEXT (zero-copy ``sendfile``) and over SSL.

Not a test. The script makes a CA and a broker certificate (``cryptography``), starts one
broker with a PLAINTEXT and an SSL listener, produces N records of 1 KiB through each
(confluent-kafka), then reads the whole topic back through each with a consumer that
assigns the partition from offset 0. Reported per path: MB/s (payload, 10^6 B) and the
broker's CPU-seconds per GB, so the figures mean something on a shared machine.

    .venv/bin/python bench/tls_bench.py            # default run: 200,000 records (~200 MB)
    .venv/bin/python bench/tls_bench.py --quick    # 50,000 records

Results: bench/RESULTS.md, section "TLS".
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from tests.security.certs import make_pki  # noqa: E402

from samsa.testing.broker import BrokerProcess  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
SIZE = 1024


def cpu_s(broker: BrokerProcess) -> float:
    assert broker.process is not None
    fields = Path(f"/proc/{broker.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def produce(config: dict[str, object], topic: str, count: int) -> float:
    producer = Producer(
        {**config, "linger.ms": 10, "batch.size": 1_000_000, "acks": 1,
         "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 1_048_576}
    )  # fmt: skip
    value = b"x" * SIZE
    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    return time.perf_counter() - started


def consume(config: dict[str, object], topic: str, count: int) -> float:
    consumer = Consumer(
        {**config, "group.id": f"bench-{time.monotonic_ns()}", "enable.auto.commit": False,
         "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760}
    )  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    read = 0
    started = time.perf_counter()
    while read < count:
        read += len([m for m in consumer.consume(10_000, 5) if m.error() is None])
    elapsed = time.perf_counter() - started
    consumer.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--records", type=int, default=None)
    args = parser.parse_args()
    count = args.records or (50_000 if args.quick else 200_000)
    with tempfile.TemporaryDirectory() as tmp:
        pki = make_pki(Path(tmp) / "pki")
        broker = BrokerProcess(
            Path(tmp) / "data",
            [
                "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                f"ssl.keystore.location={pki.broker_keystore}",
                "log.segment.bytes=1073741824",
            ],
        ).start()
        ports = ports_of_two(broker)
        paths = {
            "PLAINTEXT": {"bootstrap.servers": f"127.0.0.1:{ports[0]}"},
            "SSL": {"bootstrap.servers": f"127.0.0.1:{ports[1]}", "security.protocol": "SSL",
                    "ssl.ca.location": str(pki.ca)},
        }  # fmt: skip
        mb = count * SIZE / 1e6
        print(f"{count:,} records of {SIZE} B ({mb:.0f} MB) per path")
        print(
            f"{'path':<10} {'produce MB/s':>13} {'CPU-s/GB':>9} {'fetch MB/s':>11} {'CPU-s/GB':>9}"
        )
        try:
            for name, config in paths.items():
                topic = f"tls-bench-{name.lower()}"
                before = cpu_s(broker)
                produce_s = produce(config, topic, count)
                produce_cpu = cpu_s(broker) - before
                before = cpu_s(broker)
                fetch_s = consume(config, topic, count)
                fetch_cpu = cpu_s(broker) - before
                print(
                    f"{name:<10} {mb / produce_s:>13.0f} {produce_cpu / (mb / 1000):>9.2f} "
                    f"{mb / fetch_s:>11.0f} {fetch_cpu / (mb / 1000):>9.2f}"
                )
        finally:
            broker.stop()


def ports_of_two(broker: BrokerProcess) -> list[int]:
    text = broker.log_path.read_text()
    addresses = text.rsplit("ready on ", 1)[1].split(" (cluster", 1)[0].split(",")
    return [int(a.strip().rpartition(":")[2]) for a in addresses]


if __name__ == "__main__":
    main()
