"""What the broker's metrics cost: request-bound workloads with metrics off and on, and scrapes.

Not a test. Each configuration runs a ``samsa serve`` process on 127.0.0.1 port 0:

- ``before``: the code of another source tree (``--baseline-src``: ``src/`` of a
  commit without metrics, e.g. ``git archive eb40346 src | tar -x -C /tmp/base``);
- ``off``: this tree, no ``metrics.listeners`` (the counters are kept all the same);
- ``on``: this tree with ``metrics.listeners`` and a client scraping ``/metrics``
  every second throughout.

Workloads, one record per request so that per-request costs show (they vanish
under 1 MB batches):

- ``produce``: confluent-kafka, ``linger.ms=0``, one batch of one 100 B record per
  Produce request, one request in flight, acks=1;
- ``fetch``: confluent-kafka reading those records back with
  ``max.partition.fetch.bytes`` (200) so small that each Fetch returns one whole
  batch (and the start of the next); with metrics on, the Fetch count scraped at
  the end shows how close to one request per record it came.

For each: wall time and the broker's CPU time (user + system, ``/proc``) per
request, over ``--rounds`` rounds that take turns between configurations (medians).

Then scrapes (``on`` only): a broker with ``--partitions`` partitions, a scrape's
wall time and size, and the round-trip time of ApiVersions requests sent while
another client scrapes back to back, against the same with no scraping (is the
loop held up by scrapes?).

    .venv/bin/python bench/metrics_bench.py --baseline-src /tmp/base/src
    .venv/bin/python bench/metrics_bench.py --quick

Results: bench/RESULTS.md, section "Metrics".
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import BrokerProcess, start_broker

CLK_TCK = os.sysconf("SC_CLK_TCK")
QUIET = {"log_level": 3}
METRICS = "metrics.listeners=http://127.0.0.1:0"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


@contextmanager
def broker_of(config: str, work: Path, baseline_src: Path | None) -> Iterator[BrokerProcess]:
    saved = os.environ.get("PYTHONPATH")
    if config == "before":
        assert baseline_src is not None
        os.environ["PYTHONPATH"] = str(baseline_src)
    try:
        broker = start_broker(
            Path(tempfile.mkdtemp(prefix=f"{config}-", dir=work)),
            [METRICS] if config == "on" else [],
            timeout=60,
        )
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    try:
        yield broker
    finally:
        broker.stop()


class Scraper:
    """Scrapes a broker's /metrics every ``interval`` seconds (0: back to back) in a thread."""

    def __init__(self, url: str, interval: float) -> None:
        self.url = url
        self.interval = interval
        self.times: list[float] = []
        self.size = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.perf_counter()
            with urllib.request.urlopen(self.url, timeout=60) as response:
                self.size = len(response.read())
            self.times.append(time.perf_counter() - started)
            self._stop.wait(self.interval)


def produce_one_per_request(broker: BrokerProcess, topic: str, n: int) -> tuple[float, float]:
    """(wall seconds, broker CPU seconds) producing ``n`` records, one per request."""
    producer = Producer({
        "bootstrap.servers": broker.bootstrap, "linger.ms": 0, "batch.num.messages": 1,
        "max.in.flight.requests.per.connection": 1, "acks": 1, "enable.idempotence": False,
        **QUIET,
    })  # fmt: skip
    producer.produce(topic, b"w" * 100)  # connect and learn the metadata first
    producer.flush(30)
    assert broker.process is not None
    cpu, started = cpu_seconds(broker.process.pid), time.perf_counter()
    for _ in range(n):
        producer.produce(topic, b"v" * 100)
        producer.poll(0)
    assert producer.flush(120) == 0
    return time.perf_counter() - started, cpu_seconds(broker.process.pid) - cpu


def fetch_one_per_request(broker: BrokerProcess, topic: str, n: int) -> tuple[float, float]:
    """(wall seconds, broker CPU seconds) reading ``n`` records, about one batch per Fetch."""
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": "metrics-bench",
        "enable.auto.commit": False, "max.partition.fetch.bytes": 200, **QUIET,
    })  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 1)])
    assert broker.process is not None
    cpu, started = cpu_seconds(broker.process.pid), time.perf_counter()
    read = 0
    while read < n:
        message = consumer.poll(5)
        read += message is not None and message.error() is None
    wall, used = time.perf_counter() - started, cpu_seconds(broker.process.pid) - cpu
    consumer.close()
    return wall, used


def requests_counted(broker: BrokerProcess) -> dict[str, float]:
    """Produce and (consumer) Fetch requests the broker counted (from its /metrics)."""
    with urllib.request.urlopen(broker.metrics_url, timeout=60) as response:
        text = response.read().decode()
    counted: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("kafka_network_requestmetrics_requests_total{"):
            request = line.split('request="', 1)[1].split('"', 1)[0]
            if request in ("Produce", "FetchConsumer"):
                counted[request] = counted.get(request, 0) + float(line.rsplit(" ", 1)[1])
    return counted


def api_versions_round_trips(broker: BrokerProcess, count: int) -> list[float]:
    """Round-trip seconds of ``count`` ApiVersions v0 requests, one at a time."""
    host, port = broker.bootstrap.rsplit(":", 1)
    client = b"bench"
    payload = struct.pack(">hhih", 18, 0, 1, len(client)) + client
    frame = struct.pack(">i", len(payload)) + payload
    times = []
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(count):
            started = time.perf_counter()
            sock.sendall(frame)
            size = struct.unpack(">i", _recv(sock, 4))[0]
            _recv(sock, size)
            times.append(time.perf_counter() - started)
    return times


def _recv(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        data += chunk
    return data


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def print_medians(
    results: dict[tuple[str, str], list[tuple[float, float]]],
    configs: list[str],
    rounds: int,
    records: int,
) -> None:
    print(f"\nmedians over {rounds} round(s), {records:,} requests each")
    print(f"{'workload':<9}{'config':<8}{'requests/s':>11}{'µs wall/req':>13}{'µs CPU/req':>12}")
    for name in ("produce", "fetch"):
        for config in configs:
            runs = results[(name, config)]
            wall = statistics.median(w for w, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            print(f"{name:<9}{config:<8}{records / wall:11,.0f}"
                  f"{wall / records * 1e6:13.1f}{cpu / records * 1e6:12.1f}")  # fmt: skip


def accounting_ns(n: int = 200_000) -> float:
    """What the connection adds per request (a Produce with one partition error counted and
    one batch appended), timed in this process: the floor under the figures above."""
    from samsa.broker.metrics.stats import (
        RequestStats,
        RequestTiming,
        TopicStats,
        note_error,
        request_timing,
    )

    stats, topic = RequestStats(), TopicStats()
    clock = time.monotonic
    started = time.perf_counter()
    for _ in range(n):
        timing = RequestTiming(clock(), clock())
        request_timing.set(timing)
        timing.api_key, timing.api_version = 0, 9
        topic.messages_in += 1
        topic.bytes_in += 170
        note_error(0)
        timing.ready = clock()
        stats.record(timing, clock())
    return (time.perf_counter() - started) / n * 1e9


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-src", type=Path, help="src/ of a tree without metrics")
    parser.add_argument("--records", type=int, default=5000, help="records per workload")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=2000, help="for the scrape figures")
    parser.add_argument("--quick", action="store_true", help="1 round, 2,000 records, 500 parts")
    parser.add_argument("--scrapes-only", action="store_true", help="only the scrape figures")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.records, args.partitions = 1, 2000, 500
    configs = (["before"] if args.baseline_src else []) + ["off", "on"]
    if args.scrapes_only:
        args.rounds = 0
    work = Path(tempfile.mkdtemp(prefix="samsa-metrics-bench-"))
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for r in range(args.rounds):
        for config in configs:
            with broker_of(config, work, args.baseline_src) as broker:
                topic = f"bench-{r}"
                admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
                admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
                scraping = Scraper(broker.metrics_url, 1.0) if config == "on" else None
                if scraping is not None:
                    scraping.__enter__()
                try:
                    for name, run in (("produce", produce_one_per_request),
                                      ("fetch", fetch_one_per_request)):  # fmt: skip
                        wall, cpu = run(broker, topic, args.records)
                        results.setdefault((name, config), []).append((wall, cpu))
                        print(f"round {r} {config:>6} {name:<8} {wall:6.2f} s wall "
                              f"{cpu / args.records * 1e6:7.1f} µs broker CPU/request",
                              flush=True)  # fmt: skip
                finally:
                    if scraping is not None:
                        scraping.__exit__()
                if config == "on":
                    print(f"round {r}     on requests counted: {requests_counted(broker)}")
    if args.rounds:
        print_medians(results, configs, args.rounds, args.records)
    print(f"\nper-request accounting in-process: {accounting_ns():.0f} ns a request")
    with broker_of("on", work, None) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
        per_topic = 100
        topics = [f"wide-{i}" for i in range(max(args.partitions // per_topic, 1))]
        for future in admin.create_topics([NewTopic(t, per_topic, 1) for t in topics]).values():
            future.result(120)
        time.sleep(1)
        quiet = api_versions_round_trips(broker, 2000)
        busy: list[float] = []
        with Scraper(broker.metrics_url, 0.0) as scraper:
            while len(scraper.times) < 10:  # requests throughout ten scrapes at least
                busy += api_versions_round_trips(broker, 500)
        print(f"\nscrapes of a broker with {len(topics) * per_topic + 50:,} partitions "
              f"(incl. __consumer_offsets): {len(scraper.times)} back to back, "
              f"median {ms(statistics.median(scraper.times))} ms, "
              f"max {ms(max(scraper.times))} ms, {scraper.size:,} bytes")  # fmt: skip
        for label, times in (("no scrape", quiet), ("scraping", busy)):
            times.sort()
            p50, p99 = times[len(times) // 2], times[int(len(times) * 0.99)]
            print(f"ApiVersions round trip, {label:<9}: median {ms(p50)} ms, "
                  f"p99 {ms(p99)} ms, max {ms(times[-1])} ms")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
