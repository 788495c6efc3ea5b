"""Start and stop a real ZooKeeper server for a samsa cluster (tests, ``make cluster``).

It runs Debian's ``zookeeper`` package (ZooKeeper 3.8) as a standalone server
on a loopback port, with its data and ``zoo.cfg`` in a directory of its own:
``java -cp /usr/share/java/zookeeper.jar …QuorumPeerMain zoo.cfg``. The
four-letter words and the admin server are off, so readiness is a client
session that opens. ``SAMSA_ZOOKEEPER_CLASSPATH`` points elsewhere for a
ZooKeeper installed another way.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

DEBIAN_CLASSPATH = "/usr/share/java/zookeeper.jar"
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


class ZooKeeperUnavailableError(RuntimeError):
    """Raised when no Java runtime or ZooKeeper jar is installed to start a server with."""


def zookeeper_classpath() -> str:
    """The classpath of the installed ZooKeeper server, or a clear error if there is none."""
    classpath = os.environ.get("SAMSA_ZOOKEEPER_CLASSPATH", DEBIAN_CLASSPATH)
    if shutil.which("java") is None:
        raise ZooKeeperUnavailableError("no java on PATH: ZooKeeper needs a Java runtime")
    if not any(Path(part).exists() for part in classpath.split(":") if "*" not in part):
        raise ZooKeeperUnavailableError(
            f"no ZooKeeper at {classpath}: install Debian's package "
            "(apt-get install zookeeper) or set SAMSA_ZOOKEEPER_CLASSPATH"
        )
    return classpath


def terminate(process: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM ``process`` and wait for it; SIGKILL if it has not ended in ``timeout``."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ZooKeeperServer:
    """One standalone ZooKeeper on ``127.0.0.1:port`` with its data under ``directory``."""

    def __init__(self, directory: Path, port: int = 0, tick_time_ms: int = 500) -> None:
        self.directory = directory
        self.port = port or free_port()
        self.tick_time_ms = tick_time_ms
        self.log_path = directory / "zookeeper.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def connect(self) -> str:
        """The ``zookeeper.connect`` string of this server."""
        return f"127.0.0.1:{self.port}"

    def _write_config(self) -> Path:
        data_dir = self.directory / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        config = self.directory / "zoo.cfg"
        # Session timeouts may range from 2 to 20 ticks by default; a short tick
        # lets tests use sessions of a few seconds, as brokers do.
        config.write_text(
            f"tickTime={self.tick_time_ms}\n"
            f"dataDir={data_dir}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n"
            "maxClientCnxns=0\n"
            f"maxSessionTimeout={max(20 * self.tick_time_ms, 30_000)}\n"
        )
        return config

    def start(self, timeout: float = 30.0) -> ZooKeeperServer:
        """Start the server and return once a client session opens on it."""
        classpath = zookeeper_classpath()
        config = self._write_config()
        log_file = open(self.log_path, "ab")  # noqa: SIM115 (handed to the child)
        try:
            self.process = subprocess.Popen(
                ["java", "-Xmx256m", "-cp", classpath, MAIN_CLASS, str(config)],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log_file.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                text = self.log_path.read_text(errors="replace")
                raise RuntimeError(f"ZooKeeper exited with {self.process.returncode}:\n{text}")
            if self._session_opens():
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"ZooKeeper not serving after {timeout} s; see {self.log_path}")

    def _session_opens(self) -> bool:
        from kazoo.client import KazooClient
        from kazoo.handlers.threading import KazooTimeoutError

        client = KazooClient(hosts=self.connect, timeout=2.0)
        try:
            client.start(timeout=1.0)
        except KazooTimeoutError:
            return False
        finally:
            client.stop()
            client.close()
        return True

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM and wait (SIGKILL if it does not end in ``timeout``)."""
        if self.process is not None:
            terminate(self.process, timeout)
        self.process = None

    def __enter__(self) -> ZooKeeperServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_zookeeper(directory: Path, port: int = 0, timeout: float = 30.0) -> ZooKeeperServer:
    """Start a ZooKeeper server with its files in ``directory``; returns once it serves."""
    return ZooKeeperServer(directory, port).start(timeout)
