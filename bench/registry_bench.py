"""Schema registry benchmark: registrations/s and lookups/s over HTTP keep-alive.

Not a test. The script starts its own ``samsa serve`` with the registry on a free
loopback port (data in a temporary directory) and, over one keep-alive connection
per client thread (``http.client``, no retries, no client-side cache):

1. **registrations**: ``POST /subjects/{s}/versions`` of distinct AVRO records (each
   one is a new id and a record appended to ``_schemas`` with ``acks=all``, answered
   once the registry's reader has applied it);
2. **lookups by id**: ``GET /schemas/ids/{id}`` (what a deserializer asks once per id);
3. **lookups by schema**: ``POST /subjects/{s}`` (what a serializer asks once per schema).

    .venv/bin/python bench/registry_bench.py               # 2,000 registrations, 1 and 4 threads
    .venv/bin/python bench/registry_bench.py --count 500   # quicker

Prints one line per phase: requests, seconds, requests/s, and the broker's CPU
seconds per 1,000 requests (user + system from /proc/<pid>/stat).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

from samsa.testing import start_broker

CONTENT_TYPE = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
Request = Callable[[http.client.HTTPConnection, int], None]


def schema(i: int) -> str:
    fields = [{"name": "id", "type": "long"}, {"name": f"f{i}", "type": "string", "default": ""}]
    return json.dumps({"type": "record", "name": f"Bench{i}", "fields": fields})


def broker_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(name: str, url: str, pid: int, count: int, threads: int, request: Request) -> None:  # noqa: PLR0917
    parts = urlsplit(url)

    def worker(indexes: range) -> None:
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)
        for i in indexes:
            request(conn, i)
        conn.close()

    share = count // threads
    chunks = [range(t * share, (t + 1) * share) for t in range(threads)]
    cpu_before = broker_cpu_s(pid)
    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(worker, chunks))
    seconds = time.perf_counter() - started
    cpu = broker_cpu_s(pid) - cpu_before
    done = share * threads
    print(
        f"{name:<20} threads {threads}  {done:>6} requests  {seconds:7.2f} s  "
        f"{done / seconds:8.0f} /s  broker CPU {cpu / done * 1000:6.2f} s per 1,000"
    )


def call(conn: http.client.HTTPConnection, method: str, path: str, body: str | None) -> bytes:
    conn.request(method, path, body=body, headers=CONTENT_TYPE if body else {})
    response = conn.getresponse()
    answer = response.read()
    if response.status != 200:
        raise RuntimeError(f"{method} {path}: HTTP {response.status} {answer[:200]!r}")
    return answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=2000, help="registrations per run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        broker = start_broker(Path(tmp) / "data", schema_registry=True)
        try:
            assert broker.process is not None
            url, pid = broker.schema_registry_url, broker.process.pid
            setup = http.client.HTTPConnection(urlsplit(url).hostname or "", urlsplit(url).port)
            call(setup, "PUT", "/config", json.dumps({"compatibility": "NONE"}))
            ids: dict[int, int] = {}

            def registrar(offset: int) -> Request:
                def register(conn: http.client.HTTPConnection, i: int) -> None:
                    n = offset + i
                    body = json.dumps({"schema": schema(n)})
                    ids[n] = json.loads(call(conn, "POST", f"/subjects/bench-{n % 10}/versions",
                                             body))["id"]  # fmt: skip

                return register

            for threads, offset in ((1, 0), (4, args.count)):
                run("registrations", url, pid, args.count, threads, registrar(offset))
            every = sorted(ids)

            def by_id(conn: http.client.HTTPConnection, i: int) -> None:
                call(conn, "GET", f"/schemas/ids/{ids[every[i % len(every)]]}", None)

            def by_schema(conn: http.client.HTTPConnection, i: int) -> None:
                n = every[i % len(every)]
                call(conn, "POST", f"/subjects/bench-{n % 10}", json.dumps({"schema": schema(n)}))

            for threads in (1, 4):
                run("lookups by id", url, pid, args.count * 5, threads, by_id)
                run("lookups by schema", url, pid, args.count * 2, threads, by_schema)
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
