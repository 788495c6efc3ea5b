"""The data source on a Spark standalone cluster: a master and two workers started from
pyspark's own scripts, executors in JVMs of their own, a driver process, a real broker.

Slow (a minute or more to start the cluster and run each query): ``make test-slow``.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyspark
import pytest
from tests.spark.conftest import new_topic, produce

from samsa import Admin, Consumer
from samsa.client.admin import OffsetSpec
from samsa.testing import BrokerProcess
from samsa.testing.waiting import wait_until
from samsa.types import TopicPartition

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).parent
START_TIMEOUT_S = 180
QUERY_TIMEOUT_S = 480
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


def _wait_for(
    what: str, condition: Callable[[], bool], timeout: float, log: Path | None = None
) -> None:
    """:func:`wait_until`, its failure ending with the tail of ``log`` (a JVM's output)."""

    def described() -> str:
        text = "" if log is None or not log.exists() else log.read_text()[-4000:]
        return f"{what}\n{text}"

    wait_until(condition, described, timeout=timeout, interval=0.2)


@dataclass
class Daemon:
    """A master or worker JVM (``spark-class`` execs java, so the pid is the JVM's)."""

    process: subprocess.Popen[bytes]
    log: Path
    work_dir: Path | None = None

    def log_text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def executor_pids(self) -> list[int]:
        """The executor JVMs this worker started (its children running the executor's class)."""
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            if parent == self.process.pid and EXECUTOR_CLASS.encode() in cmdline:
                pids.append(int(entry.name))
        return pids

    def stop(self) -> None:
        """SIGKILL for the JVM and what it started in its process group (its executors)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


@dataclass
class Standalone:
    master_url: str
    master: Daemon
    workers: list[Daemon] = field(default_factory=list)


def _spark_env(tmp: Path) -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(tmp / "logs"),
        "SPARK_PID_DIR": str(tmp / "pids"),
        "SPARK_DAEMON_MEMORY": "256m",
        # Spark's standalone REST server listens on fixed port 6066 unless turned off.
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}",
    }


def _start(tmp: Path, name: str, args: list[str]) -> Daemon:
    log = tmp / f"{name}.log"
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            env=_spark_env(tmp), cwd=tmp,
        )  # fmt: skip
    return Daemon(process, log)


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    """A standalone master and two workers of one core each, on loopback, free ports."""
    tmp = tmp_path_factory.mktemp("spark-standalone")
    master = _start(tmp, "master", ["org.apache.spark.deploy.master.Master",
                    "--host", "127.0.0.1", "--port", "0", "--webui-port", "0"])  # fmt: skip
    cluster: Standalone | None = None
    try:
        _wait_for("the master to start", lambda: "spark://" in master.log_text(),
                  START_TIMEOUT_S, master.log)  # fmt: skip
        found = re.search(r"Starting Spark master at (spark://127\.0\.0\.1:\d+)", master.log_text())
        assert found, master.log_text()
        cluster = Standalone(found.group(1), master)
        for i in (1, 2):
            work_dir = tmp / f"worker-{i}"
            work_dir.mkdir()
            worker = _start(tmp, f"worker-{i}", ["org.apache.spark.deploy.worker.Worker",
                            "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
                            "--cores", "1", "--memory", "768m", "--work-dir", str(work_dir),
                            cluster.master_url])  # fmt: skip
            worker.work_dir = work_dir
            cluster.workers.append(worker)
        for worker in cluster.workers:
            _wait_for("a worker to register with the master",
                      lambda w=worker: "Successfully registered with master" in w.log_text(),
                      START_TIMEOUT_S, worker.log)  # fmt: skip
        yield cluster
    finally:
        for worker in [] if cluster is None else cluster.workers:
            worker.stop()
        master.stop()


def _driver(
    cluster: Standalone, tmp: Path, args: list[str]
) -> tuple[subprocess.Popen[bytes], Path]:
    """tests/spark/cluster_driver.py against the cluster, in its own process group."""
    log = tmp / "driver.log"
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.spark.cluster_driver", cluster.master_url, "2", *args],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            env=_spark_env(tmp), cwd=ROOT,
        )  # fmt: skip
    return process, log


def _finish(driver: subprocess.Popen[bytes], log: Path) -> None:
    try:
        code = driver.wait(QUERY_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
        raise AssertionError(f"the driver did not finish in {QUERY_TIMEOUT_S} s\n"
                             + log.read_text()[-4000:]) from None  # fmt: skip
    assert code == 0, log.read_text()[-4000:]


def _read_committed(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    """Every value of ``topic`` a read_committed consumer reads up to the last stable offset."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    config = {"bootstrap.servers": bootstrap, "isolation.level": "read_committed"}
    with Consumer(config) as consumer:
        consumer.assign(tps)
        consumer.seek_to_beginning(tps)
        ends = consumer.end_offsets(tps)
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, "read_committed did not reach the end offsets"
            values += [r.value for r in consumer.poll(0.5) if r.value is not None]
    return sorted(values)


def test_a_batch_read_on_a_standalone_cluster_returns_every_record_of_the_topic(
    standalone: Standalone, samsa_broker: BrokerProcess, tmp_path: Path
) -> None:
    bootstrap = samsa_broker.bootstrap
    topic = new_topic(bootstrap, partitions=3)
    values = [b"%04d" % i for i in range(900)]
    produce(bootstrap, topic, values)
    out = tmp_path / "values.txt"
    driver, log = _driver(standalone, tmp_path, ["read", bootstrap, topic, str(out)])
    _finish(driver, log)
    assert sorted(bytes.fromhex(line) for line in out.read_text().split()) == values


def _sink_end(bootstrap: str, sink: str, partitions: int) -> int:
    """Offsets written to ``sink``, committed, open or aborted."""
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        found = admin.list_offsets(
            {TopicPartition(sink, p): int(OffsetSpec.LATEST) for p in range(partitions)}
        )
    return sum(r.offset for r in found.values())


def test_an_executor_killed_mid_query_leaves_the_streaming_copy_exactly_once(
    standalone: Standalone, samsa_broker: BrokerProcess, tmp_path: Path
) -> None:
    bootstrap = samsa_broker.bootstrap
    source = new_topic(bootstrap, partitions=4)
    sink = new_topic(bootstrap, partitions=4)
    values = [b"%05d" % i for i in range(2000)]
    produce(bootstrap, source, values)
    driver, log = _driver(
        standalone, tmp_path, ["copy", bootstrap, source, sink, str(tmp_path / "checkpoint")]
    )
    victim = standalone.workers[0]
    _wait_for("rows in the sink", lambda: _sink_end(bootstrap, sink, 4) >= 400,
              QUERY_TIMEOUT_S, log)  # fmt: skip
    executors = victim.executor_pids()
    assert executors, "the first worker runs no executor\n" + victim.log_text()[-4000:]
    assert driver.poll() is None, "the query finished before the kill"
    for pid in executors:
        os.kill(pid, signal.SIGKILL)
    _wait_for("the killed executor to be gone",
              lambda: not set(executors) & set(victim.executor_pids()), 60)  # fmt: skip
    _finish(driver, log)
    assert "Lost executor" in log.read_text(), "Spark did not notice the killed executor"
    written = _read_committed(bootstrap, sink, 4)
    assert len(written) == len(set(written)), "duplicates"
    assert written == values, "gaps"
