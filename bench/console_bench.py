"""Web console benchmark: how long its pages take with 1,000 topics.

Not a test. The script starts its own ``samsa serve`` (127.0.0.1 port 0, data in a
temporary directory), creates ``--topics`` one-partition topics plus ``orders`` (3
partitions, 1,000 records) with a consumer group that committed half of them, starts
``samsa console`` on it, and times GET requests of each page over one HTTP connection
(urllib, so the time is the server's: the cluster requests it makes and the template it
renders, plus loopback). Each page is fetched ``--runs`` times after one warm-up; the
median and the slowest are printed.

    .venv/bin/python bench/console_bench.py              # 1,000 topics, 10 runs a page
    .venv/bin/python bench/console_bench.py --topics 5000 --runs 5

Results: bench/RESULTS.md, section "Web console".
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.console.console_process import ConsoleProcess

from samsa import Admin, Producer
from samsa.client.admin import NewTopic
from samsa.testing import start_broker
from samsa.types import TopicPartition

PAGES = [
    ("overview", "/"),
    ("topics, page 1", "/topics"),
    ("topics, page 20", "/topics?page=20"),
    ("topics, search", "/topics?q=bulk-0999"),
    ("topic orders", "/topics/orders"),
    ("messages, newest 50", "/topics/orders/messages"),
    ("messages, filter", "/topics/orders/messages?filter=order-999"),
    ("groups", "/groups"),
    ("group", "/groups/readers"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=10)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        broker = start_broker(Path(tmp) / "data")
        try:
            started = time.monotonic()
            with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
                admin.create_topics([NewTopic("orders", 3)])
                admin.create_topics(
                    [NewTopic(f"bulk-{i:04d}", 1) for i in range(options.topics)],
                    timeout_ms=600_000,
                )
                print(f"created {options.topics} topics in {time.monotonic() - started:.1f} s")
                with Producer({"bootstrap.servers": broker.bootstrap}) as producer:
                    for i in range(1000):
                        producer.send("orders", b'{"order": %d}' % i, key=b"order-%d" % i)
                admin.alter_group_offsets(
                    "readers", {TopicPartition("orders", p): 150 for p in range(3)}
                )
            console = ConsoleProcess(broker.bootstrap, Path(tmp) / "console.log")
            try:
                print(f"{'page':<22} {'median':>8} {'slowest':>8}  (ms, {options.runs} runs)")
                for name, path in PAGES:
                    times = []
                    for run in range(options.runs + 1):
                        t0 = time.perf_counter()
                        with urllib.request.urlopen(console.url + path, timeout=120) as reply:
                            reply.read()
                        if run:  # the first is a warm-up
                            times.append((time.perf_counter() - t0) * 1000)
                    print(f"{name:<22} {statistics.median(times):>8.0f} {max(times):>8.0f}")
            finally:
                console.stop()
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
