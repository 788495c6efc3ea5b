"""The benchmarks' C load generator (bench/loadgen) builds and moves records through a broker.

Slow suite: ``make test-slow`` installs gcc and librdkafka-dev (Debian) first; where they
are missing the tests skip. The generator is built from a copy of its directory, so a
benchmark using ``bench/loadgen/loadgen`` at the same time is not disturbed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from samsa.testing import BrokerProcess

SOURCE = Path(__file__).resolve().parents[2] / "bench" / "loadgen"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def loadgen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("gcc") is None or not Path("/usr/include/librdkafka/rdkafka.h").exists():
        pytest.skip("gcc or librdkafka-dev missing: `make test-slow` installs them")
    build = tmp_path_factory.mktemp("loadgen")
    for name in ("loadgen.c", "Makefile"):
        shutil.copy(SOURCE / name, build / name)
    subprocess.run(["make", "-s", "-C", str(build)], check=True, timeout=120)
    return build / "loadgen"


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)


def run(loadgen: Path, broker: BrokerProcess, *args: str) -> dict[str, Any]:
    assert broker.process is not None
    done = subprocess.run(
        [str(loadgen), *args, "-b", broker.bootstrap, "--broker-pid", str(broker.process.pid)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_two_producer_processes_deliver_1000_records_that_two_consumers_count(
    samsa_broker: BrokerProcess, loadgen: Path
) -> None:
    create_topic(samsa_broker.bootstrap, "loadgen-smoke", 4)
    produced = run(
        loadgen, samsa_broker, "produce", "-t", "loadgen-smoke", "-P", "2", "-s", "100",
        "-a", "all", "-n", "1000",
    )  # fmt: skip
    assert (produced["records"], produced["bytes"], produced["errors"]) == (1000, 100_000, 0)
    consumed = run(loadgen, samsa_broker, "consume", "-t", "loadgen-smoke", "-P", "2")
    assert (consumed["records"], consumed["bytes"], consumed["errors"]) == (1000, 100_000, 0)
    assert [p["records"] for p in consumed["per_process"]] == [500, 500]
    assert samsa_broker.process is not None
    assert consumed["broker_cpu"]["pid"] == samsa_broker.process.pid


def test_raw_mode_appends_whole_batches_that_a_consumer_reads_back(
    samsa_broker: BrokerProcess, loadgen: Path
) -> None:
    create_topic(samsa_broker.bootstrap, "loadgen-raw", 1)
    # 100 records of 100 B fill a batch of 11,261 bytes: 61 of batch header, 112 a record
    produced = run(
        loadgen, samsa_broker, "produce", "--raw", "-t", "loadgen-raw", "-s", "100",
        "-B", "11261", "-n", "1000",
    )  # fmt: skip
    assert (produced["records"], produced["errors"]) == (1000, 0)
    consumed = run(loadgen, samsa_broker, "consume", "-t", "loadgen-raw", "-X", "check.crcs=true")
    assert (consumed["records"], consumed["bytes"], consumed["errors"]) == (1000, 100_000, 0)
