"""Apache Kafka itself, started beside samsa: the reference broker for differential tests
and the anchor of the benchmarks.

Kafka runs from the jars that ``compat/jvm`` (one Maven project) brings into Maven's local
cache; ``make jvm`` writes their classpath to ``compat/jvm/target/classpath.txt``, which
:func:`kafka_classpath` reads (``SAMSA_KAFKA_CLASSPATH`` overrides it). Each node is KRaft
in combined mode (``process.roles=broker,controller``) on free loopback ports, its storage
formatted in a directory of its own with ``kafka.tools.StorageTool`` and its log4j output
(warnings and errors) in ``<directory>/kafka.log``. :class:`KafkaCluster` starts one node
or three (a three-voter quorum, replication factor 3 for the internal topics).

Start-up costs what the JVM costs: one JVM formats every node's storage, then one JVM a
node runs it (about 3–6 s for one node on this project's 2-core machines). ``heap`` and
``jvm_options`` are the knobs; benchmarks keep the JIT's defaults, tests may pass
``QUICK_START`` (C1 only), which starts faster and runs slower.

As a command: ``python -m samsa.testing.kafka --port 9092 [--nodes 3]`` runs until Ctrl-C.
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import signal
import socket
import struct
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from samsa.testing.zookeeper import free_port, terminate

__all__ = [
    "QUICK_START",
    "KafkaCluster",
    "KafkaNode",
    "KafkaUnavailableError",
    "kafka_classpath",
    "start_kafka",
]

QUICK_START = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto")
"""JVM options that start Kafka sooner (C1 only, serial GC); not for benchmarks."""

_CLASSPATH_FILE = Path("compat") / "jvm" / "target" / "classpath.txt"
_LOG4J = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d{{HH:mm:ss.SSS}}] %-5p %c{{1}}: %m%n
rootLogger.level = warn
rootLogger.appenderRef.file.ref = FILE
"""


class KafkaUnavailableError(RuntimeError):
    """Raised when Kafka's jars or a Java runtime are missing (``make jvm`` brings them)."""


def kafka_classpath() -> str:
    """The classpath of Kafka's broker and tools: ``SAMSA_KAFKA_CLASSPATH``, or the file
    ``make jvm`` writes under ``compat/jvm/target`` (looked for from the working directory
    and from this package's source tree upwards)."""
    given = os.environ.get("SAMSA_KAFKA_CLASSPATH")
    if given:
        return given
    candidates = [Path.cwd(), *Path(__file__).resolve().parents]
    for base in candidates:
        path = base / _CLASSPATH_FILE
        if path.is_file():
            classpath = path.read_text().strip()
            if classpath:
                return classpath
    raise KafkaUnavailableError(
        f"Kafka's jars are not resolved: run `make jvm` (it writes {_CLASSPATH_FILE}) "
        "or set SAMSA_KAFKA_CLASSPATH"
    )


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise KafkaUnavailableError("no `java` on PATH: Kafka needs a Java 17+ runtime")
    return java


def _cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (Kafka's Uuid)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class KafkaNode:
    """One KRaft node (broker and controller in one JVM): its ports, directory and process."""

    def __init__(self, node_id: int, directory: Path, port: int, controller_port: int) -> None:
        self.node_id = node_id
        self.directory = directory
        self.port = port
        self.controller_port = controller_port
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.directory / "kafka.log"

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    def write_config(self, voters: str, overrides: Mapping[str, str]) -> None:
        replication = str(min(3, len(voters.split(","))))
        config = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},"
            f"CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.directory / "data"),
            "num.partitions": "1",
            "offsets.topic.replication.factor": replication,
            "transaction.state.log.replication.factor": replication,
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": replication,
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            **overrides,
        }
        self.directory.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
        (self.directory / "log4j2.properties").write_text(_LOG4J.format(log=self.log_path))

    def launch(self, classpath: str, heap: str, jvm_options: Sequence[str]) -> None:
        args = [
            _java(), f"-Xms{heap}", f"-Xmx{heap}", *jvm_options,
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.directory / 'log4j2.properties'}",
            "-cp", classpath, "kafka.Kafka", str(self.config_path),
        ]  # fmt: skip
        out = open(self.directory / "kafka.out", "ab")  # noqa: SIM115 (handed to the child)
        try:
            self.process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        finally:
            out.close()

    def serves(self) -> bool:
        """Whether the node answers a Metadata request listing itself (it has joined)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
                return self.node_id in _metadata_brokers(sock)
        except OSError:
            return False

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (Kafka's controlled shutdown) and wait; SIGKILL past ``timeout``."""
        if self.process is not None:
            terminate(self.process, timeout)
        self.process = None

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


class KafkaCluster:
    """One to three Kafka nodes in KRaft combined mode, formatted and started together."""

    def __init__(
        self,
        directory: Path,
        nodes: int = 1,
        *,
        port: int = 0,
        overrides: Mapping[str, str] | None = None,
        heap: str = "512m",
        jvm_options: Sequence[str] = (),
    ) -> None:
        if not 1 <= nodes <= 9:
            raise ValueError("a Kafka cluster here has 1 to 9 nodes")
        self.directory = directory
        self.overrides = dict(overrides or {})
        self.heap = heap
        self.jvm_options = tuple(jvm_options)
        self.cluster_id = _cluster_id()
        self.nodes = [
            KafkaNode(
                node_id,
                directory / f"kafka-{node_id}",
                port + node_id - 1 if port else free_port(),
                free_port(),
            )
            for node_id in range(1, nodes + 1)
        ]

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    def start(self, timeout: float = 90.0) -> KafkaCluster:
        """Format every node's storage, start them and wait until each serves Metadata."""
        classpath = kafka_classpath()
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        for node in self.nodes:
            node.write_config(voters, self.overrides)
        self._format(classpath)
        for node in self.nodes:
            node.launch(classpath, self.heap, self.jvm_options)
        deadline = time.monotonic() + timeout
        waiting = list(self.nodes)
        while waiting:
            for node in list(waiting):
                assert node.process is not None
                if node.process.poll() is not None:
                    self.stop()
                    raise RuntimeError(
                        f"Kafka node {node.node_id} exited with {node.process.returncode}; "
                        f"see {node.directory / 'kafka.out'} and {node.log_path}"
                    )
                if node.serves():
                    waiting.remove(node)
            if waiting and time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"Kafka not serving after {timeout} s; see {self.directory}")
            if waiting:
                time.sleep(0.2)
        return self

    def _format(self, classpath: str) -> None:
        """Format each node's log directory with the cluster's id: one StorageTool JVM per
        node (it takes one config at a time), all at once."""
        running = [
            (node, subprocess.Popen(
                [
                    _java(), *QUICK_START, "-cp", classpath,
                    f"-Dlog4j2.configurationFile={node.directory / 'log4j2.properties'}",
                    "kafka.tools.StorageTool", "format",
                    # one argument: a cluster id may start with "-"
                    f"--cluster-id={self.cluster_id}",
                    "--config", str(node.config_path), "--ignore-formatted",
                ],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            ))
            for node in self.nodes
        ]  # fmt: skip
        failures = []
        for node, process in running:
            output, _ = process.communicate(timeout=120)
            if process.returncode != 0:
                failures.append(f"formatting Kafka node {node.node_id} failed:\n{output}")
        if failures:
            raise RuntimeError("\n".join(failures))

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM to every node at once (a node stopping alone would wait for a quorum the
        others have left), then wait; SIGKILL past ``timeout``."""
        for node in self.nodes:
            if node.process is not None:
                node.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for node in self.nodes:
            if node.process is None:
                continue
            try:
                node.process.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                node.kill()
            node.process = None

    def __enter__(self) -> KafkaCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_kafka(
    directory: Path, nodes: int = 1, *, overrides: Mapping[str, str] | None = None
) -> KafkaCluster:
    """A started Kafka of ``nodes`` nodes, quick-start JVM options (for tests)."""
    return KafkaCluster(directory, nodes, overrides=overrides, jvm_options=QUICK_START).start()


def _metadata_brokers(sock: socket.socket) -> set[int]:
    """The broker ids of a Metadata v1 answer for no topics (a hand-made request: this
    module must not depend on the broker's protocol package)."""
    client_id = b"samsa-kafka-probe"
    body = struct.pack(">hhih", 3, 1, 7, len(client_id)) + client_id + struct.pack(">i", 0)
    sock.sendall(struct.pack(">i", len(body)) + body)
    size = struct.unpack(">i", _read(sock, 4))[0]
    if not 0 < size < 1 << 20:
        return set()
    data = _read(sock, size)
    (count,) = struct.unpack_from(">i", data, 4)  # after the correlation id
    offset, brokers = 8, set()
    for _ in range(count):
        node_id, host_length = struct.unpack_from(">ih", data, offset)
        offset += 6 + host_length + 4  # host, port
        (rack_length,) = struct.unpack_from(">h", data, offset)
        offset += 2 + max(rack_length, 0)
        brokers.add(node_id)
    return brokers


def _read(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise OSError("connection closed")
        chunks += chunk
    return bytes(chunks)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m samsa.testing.kafka",
        description="Run Apache Kafka (KRaft) beside samsa until Ctrl-C.",
    )
    parser.add_argument("--port", type=int, default=9192, help="first node's port")
    parser.add_argument("--nodes", type=int, default=1, choices=(1, 3))
    parser.add_argument("--data", type=Path, default=Path("data-kafka"))
    args = parser.parse_args(argv)
    shutil.rmtree(args.data, ignore_errors=True)
    cluster = KafkaCluster(args.data, args.nodes, port=args.port)
    started = time.monotonic()
    cluster.start()
    print(f"Kafka ({args.nodes} node(s)) serving on {cluster.bootstrap} "
          f"after {time.monotonic() - started:.1f} s; Ctrl-C stops it", flush=True)  # fmt: skip
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
