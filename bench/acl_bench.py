"""ACL benchmark: the cost of one authorizer decision, and of the checks on Produce.

Not a test. Two measurements:

1. **Decisions.** ``Authorizer.authorize`` in this process, with 1,000 LITERAL topic
   ACLs and 0, 100 or 1,000 PREFIXED ones, for a topic named by a literal ACL
   and for one only prefixes could match; the best of three timeit runs.
2. **Produce round trips.** A ``samsa serve`` started three ways — no authorizer;
   the authorizer with an ACL allowing WRITE on the topic; the same with 1,000
   other ACLs and 100 prefixed ones — and one connection sending Produce v9 (one
   record, acks=1) one request at a time for ``--seconds``; requests per second.

    .venv/bin/python bench/acl_bench.py              # ~30 s
    .venv/bin/python bench/acl_bench.py --seconds 2  # quicker

Results: bench/RESULTS.md, section "ACLs".
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.acls import AUTHORIZER, create_acl
from tests.rawclient import exchange, read_response, request_frame

from samsa.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from samsa.broker.security.authorizer import Authorizer
from samsa.records import RecordBatchBuilder
from samsa.testing import start_broker

ALLOW_READ = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)


def decisions() -> None:
    print("1. authorize() per decision (best of 3):")
    for prefixed in (0, 100, 1000):
        authorizer = Authorizer(frozenset(), False, store=None)  # type: ignore[arg-type]
        for i in range(1000):
            authorizer.set_acls(ResourcePattern(ResourceType.TOPIC, f"t{i}"),
                                frozenset({ALLOW_READ}))  # fmt: skip
        for i in range(prefixed):
            authorizer.set_acls(
                ResourcePattern(ResourceType.TOPIC, f"p{i}-", PatternType.PREFIXED),
                frozenset({ALLOW_READ}),
            )
        for name in ("t500", "orders-events-eu"):
            n = 50_000
            best = min(timeit.repeat(
                lambda name=name, authorizer=authorizer: authorizer.authorize(  # type: ignore[misc]
                    "User:alice", "127.0.0.1", AclOperation.READ, ResourceType.TOPIC, name),
                number=n, repeat=3))  # fmt: skip
            print(f"   1,000 literal + {prefixed:5,} prefixed ACLs, topic {name:17}"
                  f" {best / n * 1e6:6.2f} µs")  # fmt: skip


def produce_rate(bootstrap: str, seconds: float) -> float:
    builder = RecordBatchBuilder()
    builder.append(b"x" * 100)
    frame = request_frame(0, 9, {
        "transactional_id": None, "acks": 1, "timeout": 5000,
        "topic_data": [{"name": "bench", "partition_data": [
            {"index": 0, "records": bytes(builder.build())}]}],
    })  # fmt: skip
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port))) as sock:
        count = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            sock.sendall(frame)
            response = read_response(sock, 0, 9)
            assert response.responses[0].partition_responses[0].error_code == 0
            count += 1
    return count / seconds


def produce(seconds: float) -> None:
    print(f"2. Produce v9 round trips, one connection, {seconds:.0f} s each:")
    for label, authorizing, extra in (
        ("no authorizer", False, False),
        ("authorizer, 1 ACL", True, False),
        ("authorizer, 1 + 1,100 ACLs", True, True),
    ):
        with tempfile.TemporaryDirectory() as tmp:
            overrides = [AUTHORIZER, "allow.everyone.if.no.acl.found=true"] if authorizing else []
            with start_broker(Path(tmp) / "data", overrides) as broker:
                exchange(broker.bootstrap, 19, 7, {"topics": [{
                    "name": "bench", "num_partitions": 1, "replication_factor": 1,
                    "assignments": [], "configs": []}], "timeout": 5000})  # fmt: skip
                if authorizing:
                    create_acl(broker.bootstrap, ResourceType.TOPIC, "bench", AclOperation.WRITE)
                if extra:
                    for i in range(1000):
                        create_acl(broker.bootstrap, ResourceType.TOPIC, f"t{i}",
                                   AclOperation.READ, principal="User:alice")  # fmt: skip
                    for i in range(100):
                        create_acl(broker.bootstrap, ResourceType.TOPIC, f"b{i}-",
                                   AclOperation.READ, principal="User:alice",
                                   pattern_type=PatternType.PREFIXED)  # fmt: skip
                rate = produce_rate(broker.bootstrap, seconds)
        print(f"   {label:28} {rate:8,.0f} requests/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    decisions()
    produce(args.seconds)


if __name__ == "__main__":
    main()
