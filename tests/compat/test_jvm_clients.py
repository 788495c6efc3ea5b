"""Kafka's Java client (kafka-clients 4.x: KafkaProducer, KafkaConsumer, Admin) against samsa.

``compat/jvm/src/main/java/io/samsa/compat/ClientsCheck.java`` runs every check below in
one JVM against one broker and prints ``PASS name`` or ``FAIL name: reason`` for each; each
test here is one of those lines. The program runs once per test session: under
pytest-xdist the first worker to need it runs it and the others read what it printed.

What samsa answers differently from Kafka is in ``compat/FINDINGS.md``; each such check is
an expected failure that turns into a failure the day samsa is fixed (strict xfail), so the
mark and the finding go together.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import uuid

import pytest
from tests.compat.jvm import java_command

pytestmark = pytest.mark.timeout(300)

PROGRAM = "io.samsa.compat.ClientsCheck"
RUN_TIMEOUT_S = 240


def finding(number: int, what: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, reason=f"compat/FINDINGS.md #{number}: {what}")


# Every check ClientsCheck runs, in its order; a known failure carries its finding.
CHECKS = {
    "producer.idempotent": None,
    "consumer.group-range": None,
    "consumer.group-cooperative-sticky": None,
    "consumer.static-membership": None,
    "consumer.group-protocol-consumer": None,
    "transactions.commit-abort-read-committed": None,
    "transactions.fenced-zombie": None,
    "transactions.send-offsets": None,
    "admin.create-topics": None,
    "admin.describe-topics": None,
    "admin.describe-topics-by-id": None,
    "admin.create-partitions": None,
    "admin.incremental-alter-configs": None,
    "admin.describe-configs-broker": None,
    "admin.list-offsets": None,
    "admin.delete-records": None,
    "admin.describe-cluster": None,
    "admin.describe-producers": None,
    "admin.consumer-groups": None,
    "admin.consumer-group-offsets": None,
    "admin.describe-log-dirs": None,
    "admin.describe-transactions": None,
    "admin.elect-leaders": None,
    "admin.list-partition-reassignments": None,
    "admin.describe-acls-without-authorizer": None,
    "admin.describe-client-quotas": None,
    "admin.describe-user-scram-credentials": None,
    "admin.describe-features": None,
    "admin.delete-topics": None,
}


def run_clients_check(request: pytest.FixtureRequest) -> dict[str, str | None]:
    """Run the program against this process's broker: each check's failure, None if it passed."""
    broker = request.getfixturevalue("jvm_broker")
    command = java_command(PROGRAM, broker.bootstrap, f"java-{uuid.uuid4().hex[:8]}")
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
    )
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and "DONE" in lines, (
        f"{PROGRAM} exited with {done.returncode} before its last check:\n"
        f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    )
    results: dict[str, str | None] = {}
    for line in lines:
        verdict, _, rest = line.partition(" ")
        if verdict == "PASS":
            results[rest] = None
        elif verdict == "FAIL":
            name, _, reason = rest.partition(": ")
            results[name] = reason
    return results


@pytest.fixture(scope="module")
def clients_check(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str | None]:
    """What ClientsCheck printed, run once for the whole test session."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return run_clients_check(request)
    shared = tmp_path_factory.getbasetemp().parent / "java-clients-check.json"
    with open(f"{shared}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if shared.exists():
            results: dict[str, str | None] = json.loads(shared.read_text())
            return results
        results = run_clients_check(request)
        shared.write_text(json.dumps(results))
        return results


def test_clients_check_runs_exactly_the_checks_listed_here(
    clients_check: dict[str, str | None],
) -> None:
    assert list(clients_check) == list(CHECKS)


@pytest.mark.parametrize(
    "check",
    [pytest.param(name, marks=() if mark is None else mark) for name, mark in CHECKS.items()],
)
def test_kafka_java_client_passes_check(clients_check: dict[str, str | None], check: str) -> None:
    assert check in clients_check, f"ClientsCheck printed nothing for {check}"
    failure = clients_check[check]
    assert failure is None, failure
