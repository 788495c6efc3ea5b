"""A local samsa cluster: a real ZooKeeper and several ``samsa serve`` processes.

:func:`start_cluster` starts ZooKeeper (Debian's package, :mod:`samsa.testing.zookeeper`)
and ``brokers`` brokers on loopback, each with its data in ``<path>/broker-<id>``;
the returned :class:`LocalCluster` kills (SIGKILL), pauses (SIGSTOP), resumes,
stops and restarts brokers by id and says who leads what, reading ZooKeeper.
``python -m samsa.testing.run_cluster`` (``make cluster``) runs one until Ctrl-C.

Each broker keeps its port across restarts. The internal topics get as many
replicas as there are brokers, up to three (``offsets.topic.replication.factor``,
``transaction.state.log.replication.factor``), and ``transaction.state.log.min.isr``
one less, at least one.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Sequence
from pathlib import Path

from samsa.protocol.api_keys import ApiKey
from samsa.testing.broker import SCHEMA_REGISTRY_ON, BrokerProcess
from samsa.testing.waiting import wait_until
from samsa.testing.zookeeper import ZooKeeperServer, free_port

DEFAULT_SESSION_TIMEOUT_MS = 6000


class LocalCluster:
    """ZooKeeper and brokers ``1…n`` as processes; see the module docstring."""

    def __init__(
        self,
        path: Path,
        brokers: int = 3,
        overrides: Sequence[str] = (),
        *,
        zookeeper_connect: str | None = None,
        ports: Sequence[int] | None = None,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        settings_of: Callable[[int, int], Sequence[str]] | None = None,
        schema_registry: bool = False,
    ) -> None:
        """``settings_of(broker_id, port)``: settings of one broker, applied last (its
        listeners, the ZooKeeper address it uses…). ``schema_registry``: broker 1 serves
        the schema registry (one registry per cluster: its ``schema_registry_url``)."""
        self.path = path
        self.size = brokers
        self.overrides = list(overrides)
        self.session_timeout_ms = session_timeout_ms
        self.zookeeper: ZooKeeperServer | None = None
        self._zookeeper_connect = zookeeper_connect
        chosen = list(ports) if ports is not None else [free_port() for _ in range(brokers)]
        self.brokers: dict[int, BrokerProcess] = {}
        for broker_id, port in zip(range(1, brokers + 1), chosen, strict=True):
            self.brokers[broker_id] = BrokerProcess(
                path / f"broker-{broker_id}", self._broker_overrides(broker_id), port
            )
        if schema_registry:
            self.brokers[1].overrides.append(SCHEMA_REGISTRY_ON)
        self._paused: set[int] = set()
        self._kazoo: object | None = None
        self._settings_of = settings_of

    @property
    def zookeeper_connect(self) -> str:
        if self._zookeeper_connect is None:
            raise RuntimeError("the cluster is not started")
        return self._zookeeper_connect

    def _broker_overrides(self, broker_id: int) -> list[str]:
        replicas = min(self.size, 3)
        return [
            f"broker.id={broker_id}",
            f"zookeeper.session.timeout.ms={self.session_timeout_ms}",
            f"offsets.topic.replication.factor={replicas}",
            f"transaction.state.log.replication.factor={replicas}",
            f"transaction.state.log.min.isr={max(replicas - 1, 1)}",
            *self.overrides,
        ]

    @property
    def bootstrap(self) -> str:
        """``host:port,…`` of every broker (clients find the live ones)."""
        return ",".join(f"127.0.0.1:{broker.port}" for broker in self.brokers.values())

    # -- lifecycle ------------------------------------------------------------------------
    def start(self, timeout: float = 60.0, *, controller: int | None = None) -> LocalCluster:
        """Start ZooKeeper (unless given one) and every broker; ``controller``: a broker
        started alone first, so that it is the controller, before the others."""
        if self._zookeeper_connect is None:
            self.zookeeper = ZooKeeperServer(self.path / "zookeeper").start()
            self._zookeeper_connect = f"{self.zookeeper.connect}/samsa"
        for broker_id, broker in self.brokers.items():
            broker.overrides.append(f"zookeeper.connect={self._zookeeper_connect}")
            if self._settings_of is not None:
                broker.overrides += self._settings_of(broker_id, broker.port)
        try:
            if controller is not None:
                self.brokers[controller].start(timeout)
                self.wait_until(lambda: self.controller() == controller,
                                f"broker {controller} is the controller", timeout)  # fmt: skip
            for broker in self.brokers.values():  # side by side: their start-ups overlap
                if broker.process is None:
                    broker.launch()
            for broker in self.brokers.values():
                broker.wait_ready(timeout)
            self.wait_until(self._all_known, "every broker sees every other", timeout)
        except BaseException:
            self.close()
            raise
        return self

    def _all_known(self) -> bool:
        """Every running broker's Metadata lists every running broker (their caches have
        seen the registrations: a topic created now is placed over all of them)."""
        import asyncio

        from samsa.client.connection import BrokerConnection

        running = sorted(self.alive())

        async def brokers_of(port: int) -> list[int]:
            connection = BrokerConnection("127.0.0.1", port, node_id=-1, client_id="cluster")
            await connection.open()
            try:
                body = {"topics": [], "allow_auto_topic_creation": False}
                response = await connection.request(ApiKey.METADATA, body)
                return sorted(int(b.node_id) for b in response.brokers)
            finally:
                await connection.close()

        return all(asyncio.run(brokers_of(self.brokers[b].port)) == running for b in running)

    def close(self) -> None:
        """Stop every broker (SIGCONT first if paused), then ZooKeeper."""
        for broker_id in list(self._paused):
            self.resume(broker_id)
        for broker in self.brokers.values():
            if broker.process is not None:
                try:
                    broker.stop(30)
                except Exception:
                    broker.kill()
        self._close_kazoo()
        if self.zookeeper is not None:
            self.zookeeper.stop()

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- faults ---------------------------------------------------------------------------
    def kill(self, broker_id: int) -> None:
        """SIGKILL the broker (its ZooKeeper session lives on until it times out)."""
        self._paused.discard(broker_id)
        self.brokers[broker_id].kill()

    def stop(self, broker_id: int, timeout: float = 30.0) -> int:
        """SIGTERM: a clean shutdown. Returns the exit code."""
        return self.brokers[broker_id].stop(timeout)

    def pause(self, broker_id: int) -> None:
        """SIGSTOP: the process hangs (as in a long GC pause or a frozen VM)."""
        process = self.brokers[broker_id].process
        if process is not None:
            os.kill(process.pid, signal.SIGSTOP)
            self._paused.add(broker_id)

    def resume(self, broker_id: int) -> None:
        process = self.brokers[broker_id].process
        if process is not None:
            os.kill(process.pid, signal.SIGCONT)
        self._paused.discard(broker_id)

    def start_broker(self, broker_id: int, timeout: float = 60.0) -> None:
        """Start a stopped or killed broker again, on its port and data."""
        broker = self.brokers[broker_id]
        if broker.process is None:
            broker.start(timeout)

    def restart(self, broker_id: int, timeout: float = 60.0) -> None:
        """Stop the broker (cleanly, if it runs) and start it again."""
        broker = self.brokers[broker_id]
        if broker_id in self._paused:
            self.resume(broker_id)
        if broker.process is not None:
            broker.stop()
        broker.start(timeout)

    def alive(self) -> list[int]:
        return [b for b, p in self.brokers.items() if p.process is not None]

    @property
    def paused(self) -> set[int]:
        """Brokers stopped with :meth:`pause` and not resumed."""
        return set(self._paused)

    # -- what ZooKeeper says --------------------------------------------------------------
    def _zk(self) -> object:
        from kazoo.client import KazooClient

        if self._kazoo is None:
            client = KazooClient(hosts=self.zookeeper_connect, timeout=10.0)
            client.start(timeout=10.0)
            self._kazoo = client
        return self._kazoo

    def _close_kazoo(self) -> None:
        if self._kazoo is not None:
            client = self._kazoo
            self._kazoo = None
            client.stop()  # type: ignore[attr-defined]
            client.close()  # type: ignore[attr-defined]

    def _read_json(self, path: str) -> dict[str, object] | None:
        from kazoo.exceptions import NoNodeError

        try:
            data, _ = self._zk().get(path)  # type: ignore[attr-defined]
        except NoNodeError:
            return None
        value = json.loads(data)
        return value if isinstance(value, dict) else None

    def partition_state(self, topic: str, partition: int) -> dict[str, object] | None:
        """The partition's state znode: ``leader``, ``leader_epoch``, ``isr``…"""
        return self._read_json(f"/brokers/topics/{topic}/partitions/{partition}/state")

    def leader_of(self, topic: str, partition: int = 0) -> int:
        """The partition's leader (-1: none)."""
        state = self.partition_state(topic, partition)
        leader = state.get("leader", -1) if state else -1
        return leader if isinstance(leader, int) else -1

    def isr_of(self, topic: str, partition: int = 0) -> list[int]:
        state = self.partition_state(topic, partition)
        isr = state.get("isr", []) if state else []
        return [b for b in isr if isinstance(b, int)] if isinstance(isr, list) else []

    def replicas_of(self, topic: str, partition: int = 0) -> list[int]:
        """The partition's assigned replicas, the preferred leader first."""
        assignment = self._read_json(f"/brokers/topics/{topic}")
        partitions = assignment.get("partitions", {}) if assignment else {}
        replicas = partitions.get(str(partition), []) if isinstance(partitions, dict) else []
        return [b for b in replicas if isinstance(b, int)]

    def replica_records(
        self, broker_id: int, topic: str, partition: int
    ) -> list[tuple[int, bytes | None]]:
        """Every data record of a replica's segment files, in offset order:
        ``(offset, value)`` (control records left out)."""
        from samsa.records import iter_batches, iter_records

        directory = self.brokers[broker_id].data_dir / f"{topic}-{partition}"
        records: list[tuple[int, bytes | None]] = []
        for segment in sorted(directory.glob("*.log")):
            data = segment.read_bytes()
            for batch in iter_batches(memoryview(data)):
                if not batch.is_control:
                    records += [(r.offset, r.value) for r in iter_records(batch)]
        return records

    def controller(self) -> int:
        """The active controller's broker id (-1: none)."""
        value = self._read_json("/controller")
        broker = value.get("brokerid", -1) if value else -1
        return broker if isinstance(broker, int) else -1

    def _broker_ids_under(self, path: str) -> list[int]:
        from kazoo.exceptions import NoNodeError

        try:
            children = self._zk().get_children(path)  # type: ignore[attr-defined]
        except NoNodeError:
            return []
        return sorted(int(c) for c in children)

    def registered(self) -> list[int]:
        """Broker ids with a live ZooKeeper session."""
        return self._broker_ids_under("/brokers/ids")

    def shutting_down(self) -> list[int]:
        """Broker ids in a controlled shutdown (announced, not yet stopped)."""
        return self._broker_ids_under("/samsa/controlled_shutdown")

    def wait_until(self, check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
        """Return once ``check()`` holds; raise :class:`~samsa.testing.waiting.WaitTimeout` (a
        ``TimeoutError``) naming ``what`` after ``timeout``."""
        wait_until(check, what, timeout=timeout)

    def wait_for_leader(
        self, topic: str, partition: int = 0, *, not_in: Sequence[int] = (), timeout: float = 60.0
    ) -> int:
        """Wait until the partition has a live leader outside ``not_in``; return it."""

        def led() -> bool:
            leader = self.leader_of(topic, partition)
            return leader >= 0 and leader not in not_in and leader in self.registered()

        self.wait_until(led, f"{topic}-{partition} led by a live broker not in {list(not_in)}",
                        timeout)  # fmt: skip
        return self.leader_of(topic, partition)


def start_cluster(
    path: Path,
    brokers: int = 3,
    overrides: Sequence[str] = (),
    *,
    zookeeper_connect: str | None = None,
    timeout: float = 60.0,
    schema_registry: bool = False,
) -> LocalCluster:
    """Start ZooKeeper (unless ``zookeeper_connect`` names one) and ``brokers`` brokers;
    ``schema_registry``: broker 1 serves the schema registry."""
    return LocalCluster(
        path,
        brokers,
        overrides,
        zookeeper_connect=zookeeper_connect,
        schema_registry=schema_registry,
    ).start(timeout)
