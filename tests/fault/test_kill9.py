"""kill -9 of a process appending to logs: every acknowledged batch survives the restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import read_log

from samsa.storage import LogManager
from samsa.types import TopicPartition

WRITER = r"""
import sys
from pathlib import Path
from samsa.records import RecordBatchBuilder
from samsa.storage import LogConfig, LogManager
from samsa.types import TopicPartition
from tests.conftest import read_log

manager = LogManager([Path(sys.argv[1])], LogConfig.from_props({"segment.bytes": 20000}))
manager.startup()
logs = [manager.get_or_create_log(TopicPartition("t", p)) for p in range(2)]
i = 0
while True:
    b = RecordBatchBuilder()
    for j in range(5):
        b.append(f"{i}-{j}".encode() * 10, key=str(i).encode())
    info = logs[i % 2].append_as_leader(bytearray(b.build()))
    # The ack: the batch's bytes were handed to the OS with os.write.
    sys.stdout.write(f"{i % 2} {info.last_offset}\n")
    sys.stdout.flush()
    i += 1
"""


def _surviving_offsets(directory: Path) -> dict[int, list[int]]:
    manager = LogManager([directory])
    manager.startup()
    found: dict[int, list[int]] = {}
    for partition in range(2):
        log = manager.get_log(TopicPartition("t", partition))
        assert log is not None
        found[partition] = [record.offset for record in read_log(log)]
    manager.close()
    return found


def test_kill_9_mid_append_loses_no_acknowledged_batch(tmp_path: Path) -> None:
    for round_number in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        acked: dict[int, int] = {}
        deadline = time.monotonic() + 30
        while len(acked) < 2 or min(acked.values()) < 300 * (round_number + 1):
            line = proc.stdout.readline()
            assert line, "writer exited early"
            partition, last = map(int, line.split())
            acked[partition] = last
            assert time.monotonic() < deadline
        os.kill(proc.pid, signal.SIGKILL)
        # Anything printed before the kill was acknowledged too.
        for line in proc.stdout:
            if line.endswith("\n"):
                partition, last = map(int, line.split())
                acked[partition] = last
        proc.wait()
        survived = _surviving_offsets(tmp_path)
        for partition, last in acked.items():
            offsets = survived[partition]
            assert offsets == list(range(len(offsets))), "offsets must be contiguous"
            assert offsets[-1] >= last, f"acknowledged offset {last} lost"
