"""Start, stop and kill a real ``samsa serve`` process."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

_READY = re.compile(r"ready on (\S+):(\d+)")
_METRICS = re.compile(r"serving metrics on (http://\S+)")
_SCHEMA_REGISTRY = re.compile(r"serving the schema registry on (http://\S+)")
# A broker is ready in about a second; the deadline only detects a hang, so it is generous:
# on a machine busy with other test processes the interpreter alone can take many seconds.
READY_TIMEOUT_S = 60.0


class BrokerProcess:
    """A running broker: its bootstrap address, data dir, log file and process."""

    def __init__(self, data_dir: Path, overrides: Sequence[str] = (), port: int = 0) -> None:
        self.data_dir = data_dir
        self.overrides = list(overrides)
        self.port = port
        self.log_path = data_dir.parent / f"{data_dir.name}.broker.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.host = "127.0.0.1"
        self._log_offset = 0

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = READY_TIMEOUT_S) -> BrokerProcess:
        """Start the process and wait for its ready line (port 0 → the port it picked)."""
        self.launch()
        return self.wait_ready(timeout)

    def launch(self) -> None:
        """Start the process without waiting for it (:meth:`wait_ready` waits)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [
            sys.executable, "-m", "samsa", "serve",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "--override", f"log.dirs={self.data_dir}",
        ]  # fmt: skip
        for item in self.overrides:
            args += ["--override", item]
        log_file = open(self.log_path, "ab")  # noqa: SIM115 (handed to the child)
        self._log_offset = log_file.tell()
        try:
            self.process = subprocess.Popen(args, stdout=log_file, stderr=subprocess.STDOUT)
        finally:
            log_file.close()

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> BrokerProcess:
        """Wait for a launched process's ready line."""
        assert self.process is not None, "launch() first"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log_path.read_bytes()[self._log_offset :].decode(errors="replace")
            match = _READY.search(text)
            if match:
                self.host, self.port = match.group(1), int(match.group(2))
                return self
            if self.process.poll() is not None:
                raise RuntimeError(f"broker exited with {self.process.returncode}:\n{text}")
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"broker not ready after {timeout} s; see {self.log_path}")

    @property
    def metrics_url(self) -> str:
        """Where the running broker serves Prometheus metrics (start it with the override
        ``metrics.listeners=http://127.0.0.1:0``; the port it picked is read from its log)."""
        text = self.log_path.read_bytes()[self._log_offset :].decode(errors="replace")
        found = _METRICS.findall(text)
        if not found:
            raise RuntimeError(
                f"the broker serves no metrics (metrics.listeners); see {self.log_path}"
            )
        return str(found[-1])

    @property
    def schema_registry_url(self) -> str:
        """Where the running broker serves the schema registry (start it with the override
        ``schema.registry.listeners=http://127.0.0.1:0``, or ``schema_registry=True``;
        the port it picked is read from its log)."""
        text = self.log_path.read_bytes()[self._log_offset :].decode(errors="replace")
        found = _SCHEMA_REGISTRY.findall(text)
        if not found:
            raise RuntimeError(
                f"the broker serves no schema registry (schema.registry.listeners); see "
                f"{self.log_path}"
            )
        return str(found[-1])

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait: a clean shutdown. Returns the exit code."""
        if self.process is None:
            return 0
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            # Leave the broker's tasks and where they wait in its log, then end it.
            self.process.send_signal(signal.SIGUSR1)
            time.sleep(1)
            self.kill()
            raise RuntimeError(
                f"broker did not stop {timeout} s after SIGTERM; its tasks: {self.log_path}"
            ) from None
        self.process = None
        return code

    def kill(self) -> None:
        """SIGKILL: the crash a power cut or OOM killer would cause."""
        if self.process is not None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()
            self.process = None

    def restart(self) -> BrokerProcess:
        """Stop (if running) and start again on the same port and data dir."""
        self.stop()
        return self.start()

    def __enter__(self) -> BrokerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.stop()


SCHEMA_REGISTRY_ON = "schema.registry.listeners=http://127.0.0.1:0"
"""The override that serves the schema registry on a free loopback port."""


def start_broker(
    data_dir: Path,
    overrides: Sequence[str] = (),
    port: int = 0,
    timeout: float = READY_TIMEOUT_S,
    *,
    schema_registry: bool = False,
) -> BrokerProcess:
    """Start ``samsa serve`` on loopback with ``data_dir``; returns once it is ready.
    ``schema_registry``: serve the schema registry too (``schema_registry_url``)."""
    extra = [SCHEMA_REGISTRY_ON] if schema_registry else []
    return BrokerProcess(data_dir, [*overrides, *extra], port).start(timeout)
