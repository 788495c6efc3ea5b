"""What an operator reads from a cluster: `make cluster` (samsa.testing.run_cluster) reports
a broker that dies, with how to start it again, and restarts it on ``restart N``; a clean
stop says nothing of a lost ZooKeeper session; a broker started before its ZooKeeper
listens prints none of kazoo's refused connections."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from samsa.testing.broker import BrokerProcess
from samsa.testing.zookeeper import ZooKeeperServer, free_port

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
LINE_TIMEOUT_S = 120


class _Lines:
    """The lines a process prints, read on a thread of their own."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.seen: list[str] = []
        self._lines: queue.Queue[str] = queue.Queue()
        assert process.stdout is not None
        stdout = process.stdout
        threading.Thread(target=lambda: [self._lines.put(x) for x in stdout], daemon=True).start()

    def until(self, pattern: str) -> re.Match[str]:
        while True:
            line = self._lines.get(timeout=LINE_TIMEOUT_S)
            self.seen.append(line)
            match = re.search(pattern, line)
            if match:
                return match


def test_make_cluster_reports_a_dead_broker_and_restarts_it_on_request(tmp_path: Path) -> None:
    data = tmp_path / "data-cluster"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    process = subprocess.Popen(
        [sys.executable, "-m", "samsa.testing.run_cluster", "--brokers", "1",
         "--port", str(free_port()), "--data", str(data)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=env, cwd=tmp_path,
    )  # fmt: skip
    assert process.stdin is not None
    lines = _Lines(process)
    try:
        pid = int(lines.until(r"^broker 1: \S+  pid (\d+)").group(1))
        lines.until(r"^bootstrap\.servers=")
        os.kill(pid, signal.SIGKILL)
        lines.until(r"^broker 1 exited with code -9 .*type 'restart 1' and Enter")
        process.stdin.write("restart 1\n")
        process.stdin.flush()
        lines.until(r"^broker 1: running again on 127\.0\.0\.1:\d+")
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 0, "".join(lines.seen)
    log = (data / "broker-1.broker.log").read_text()
    assert log.count("samsa broker 1 ready") == 2  # started, and started again
    assert "lost its ZooKeeper session" not in log and "Traceback" not in log


def test_a_broker_started_before_zookeeper_listens_prints_no_refused_connections(
    tmp_path: Path,
) -> None:
    port = free_port()
    broker = BrokerProcess(tmp_path / "broker-1", ["broker.id=1",
                           f"zookeeper.connect=127.0.0.1:{port}/samsa",
                           "zookeeper.connection.timeout.ms=120000"])  # fmt: skip
    zookeeper = ZooKeeperServer(tmp_path / "zookeeper", port)
    broker.launch()
    try:
        zookeeper.start()
        broker.wait_ready(120)
        assert broker.stop() == 0
    finally:
        broker.kill()
        zookeeper.stop()
    log = broker.log_path.read_text()
    assert "samsa broker 1 ready" in log
    assert "Connection refused" not in log and "lost its ZooKeeper session" not in log
