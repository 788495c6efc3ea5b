"""DescribeLogDirs and ``samsa log-dirs --describe``: each log dir and the replicas in it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from samsa.client.admin import Admin, NewTopic
from samsa.testing import start_broker
from samsa.types import TopicPartition


def test_log_dirs_are_described_with_the_replicas_each_holds(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    broker = start_broker(first, [f"log.dirs={first},{second}"])
    try:
        with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
            admin.create_topics([NewTopic("spread", 4, 1)])
            described = admin.describe_log_dirs()
        (dirs,) = described.values()
        held = {d.path: set(d.replicas) for d in dirs}
        assert set(held) == {str(first.resolve()), str(second.resolve())}
        assert set().union(*held.values()) == {TopicPartition("spread", p) for p in range(4)}
        assert all(len(tps) == 2 for tps in held.values())  # spread over the two dirs
        assert all(d.error is None and d.usable_bytes > 0 for d in dirs)
        tool = subprocess.run(
            [sys.executable, "-m", "samsa", "log-dirs", "--bootstrap-server", broker.bootstrap,
             "--describe", "--topic-list", "spread"],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        lines = tool.stdout.splitlines()
        assert lines[:2] == [
            "Querying brokers for log directories information",
            "Received log directory information from brokers 0",
        ]
        document = json.loads(lines[2])
        partitions = sorted(
            p["partition"] for d in document["brokers"][0]["logDirs"] for p in d["partitions"]
        )
        assert partitions == [f"spread-{p}" for p in range(4)]
    finally:
        broker.stop()
