"""A cluster whose processes and network links a test can break, and a nemesis that does.

:class:`FaultyCluster` starts ZooKeeper and brokers as real processes (a
:class:`~samsa.testing.cluster.LocalCluster`) with every link a fault may cut going
through a :class:`~samsa.testing.netproxy.LinkProxy` on loopback:

- brokers reach each other on an inter-broker listener ``REPLICATION``
  (``inter.broker.listener.name``) whose advertised address is a proxy in front of the
  broker; the proxy tells the connecting broker by the id ending its client id
  (``samsa-replica-fetcher-<id>``, ``samsa-txn-markers-<id>``), so one direction of one
  link can be cut;
- each broker reaches ZooKeeper through a proxy of its own (``zookeeper.connect``);
- clients reach brokers directly on their ``PLAINTEXT`` listener.

:class:`Nemesis` injects a fault, holds it, heals it, and records both in a
:class:`~samsa.testing.history.History`: SIGKILL a broker or the controller (healed by
starting it again), SIGSTOP one (SIGCONT), a clean restart (SIGTERM: controlled
shutdown), cut the link between two brokers both ways, isolate a broker from the
other brokers, cut a broker off ZooKeeper; and the operator's moves: reassign a
partition (one replica to a broker that holds none, or — every broker holding one —
another order of its replicas) and elect its preferred leader, or elect the
preferred leaders of every partition. At most one fault holds at a time, so a
replication factor of 3 with ``min.insync.replicas=2`` keeps a quorum of replicas
between faults.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from samsa.testing.cluster import LocalCluster
from samsa.testing.history import History
from samsa.testing.netproxy import LinkProxy, kafka_source
from samsa.testing.zookeeper import ZooKeeperServer, free_port

log = logging.getLogger(__name__)

INTER_BROKER_LISTENER = "REPLICATION"

FAULTS = (
    "kill", "kill-controller", "pause", "restart", "cut-link", "isolate", "cut-zookeeper",
    "reassign", "elect-preferred",
)  # fmt: skip
"""Every kind of fault :class:`Nemesis` injects."""


class FaultyCluster:
    """ZooKeeper, brokers ``1…n`` and a proxy on every breakable link."""

    def __init__(
        self,
        path: Path,
        brokers: int = 3,
        overrides: Sequence[str] = (),
        session_timeout_ms: int = 6000,
    ) -> None:
        self.path = path
        self.size = brokers
        self.overrides = list(overrides)
        self.session_timeout_ms = session_timeout_ms
        self.zookeeper: ZooKeeperServer | None = None
        self.zookeeper_links: dict[int, LinkProxy] = {}
        """broker id → its proxy to ZooKeeper."""
        self.broker_links: dict[int, LinkProxy] = {}
        """broker id → the proxy other brokers reach it through."""
        self._replication_ports = {b: free_port() for b in range(1, brokers + 1)}
        self._cluster: LocalCluster | None = None

    @property
    def cluster(self) -> LocalCluster:
        if self._cluster is None:
            raise RuntimeError("the cluster is not started")
        return self._cluster

    def start(self, timeout: float = 60.0) -> FaultyCluster:
        self.zookeeper = ZooKeeperServer(self.path / "zookeeper").start()
        zookeeper = ("127.0.0.1", self.zookeeper.port)
        for broker_id, port in self._replication_ports.items():
            self.zookeeper_links[broker_id] = LinkProxy(
                zookeeper, name=f"zookeeper link of broker {broker_id}"
            )
            self.broker_links[broker_id] = LinkProxy(
                ("127.0.0.1", port), kafka_source, name=f"links to broker {broker_id}"
            )
        self._cluster = LocalCluster(
            self.path,
            self.size,
            self.overrides,
            zookeeper_connect=f"{self.zookeeper.connect}/samsa",
            session_timeout_ms=self.session_timeout_ms,
            settings_of=self._settings_of,
        )
        try:
            self._cluster.start(timeout)
        except BaseException:
            self.close()
            raise
        return self

    def _settings_of(self, broker_id: int, port: int) -> list[str]:
        replication = self._replication_ports[broker_id]
        proxy = self.broker_links[broker_id].port
        zookeeper = self.zookeeper_links[broker_id].port
        return [
            f"listeners=PLAINTEXT://127.0.0.1:{port},"
            f"{INTER_BROKER_LISTENER}://127.0.0.1:{replication}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{port},"
            f"{INTER_BROKER_LISTENER}://127.0.0.1:{proxy}",
            f"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,{INTER_BROKER_LISTENER}:PLAINTEXT",
            f"inter.broker.listener.name={INTER_BROKER_LISTENER}",
            f"zookeeper.connect=127.0.0.1:{zookeeper}/samsa",
        ]

    def close(self) -> None:
        for proxy in [*self.broker_links.values(), *self.zookeeper_links.values()]:
            proxy.heal()
        if self._cluster is not None:
            self._cluster.close()
        for proxy in [*self.broker_links.values(), *self.zookeeper_links.values()]:
            proxy.close()
        if self.zookeeper is not None:
            self.zookeeper.stop()

    def __enter__(self) -> FaultyCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- links ----------------------------------------------------------------------------
    def cut_link(self, a: int, b: int) -> None:
        """Brokers ``a`` and ``b`` no longer reach each other (both directions)."""
        self.broker_links[b].cut(str(a))
        self.broker_links[a].cut(str(b))

    def heal_link(self, a: int, b: int) -> None:
        self.broker_links[b].heal(str(a))
        self.broker_links[a].heal(str(b))

    def isolate(self, broker_id: int) -> None:
        """``broker_id`` reaches no other broker and none reaches it (ZooKeeper still does)."""
        for other in self.broker_links:
            if other != broker_id:
                self.cut_link(broker_id, other)

    def cut_zookeeper(self, broker_id: int) -> None:
        self.zookeeper_links[broker_id].cut()

    def heal_zookeeper(self, broker_id: int) -> None:
        self.zookeeper_links[broker_id].heal()

    def heal_network(self) -> None:
        for proxy in [*self.broker_links.values(), *self.zookeeper_links.values()]:
            proxy.heal()

    def refused(self) -> int:
        """Connections the proxies refused while cut (0 would mean no cut ever bit)."""
        proxies = [*self.broker_links.values(), *self.zookeeper_links.values()]
        return sum(proxy.refused for proxy in proxies)


class Nemesis:
    """Faults on a schedule: one every ``every`` seconds, each held ``hold`` seconds."""

    def __init__(
        self,
        faulty: FaultyCluster,
        history: History,
        *,
        every: float = 10.0,
        hold: float = 5.0,
        kinds: Sequence[str] = FAULTS,
        seed: int | None = None,
        partitions: Sequence[tuple[str, int]] = (),
        say: Callable[[str], None] = log.info,
    ) -> None:
        """``partitions``: what ``reassign`` picks from."""
        unknown = set(kinds) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; known: {', '.join(FAULTS)}")
        self.faulty = faulty
        self.history = history
        self.every = every
        self.hold = min(hold, every)
        self.kinds = list(kinds)
        if "reassign" in self.kinds and not partitions:
            raise ValueError("reassign needs the partitions it may move")
        self.partitions = list(partitions)
        self.random = random.Random(seed)
        self.say = say
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.sequence_done = threading.Event()
        """Set once the faults of :meth:`start`'s ``sequence`` were all injected and healed."""

    def start(self, sequence: Sequence[str] | None = None) -> Nemesis:
        """Run in a thread: ``sequence``'s faults in order, then random ones of ``kinds``."""
        self._thread = threading.Thread(
            target=self._run, args=(list(sequence or []),), name="nemesis", daemon=True
        )
        self._thread.start()
        return self

    def stop(self, timeout: float = 120.0) -> None:
        """Stop after healing the fault that holds (if any); raise what the thread raised."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise RuntimeError(f"the nemesis did not stop in {timeout} s")
        if self.error is not None:
            raise self.error

    def _run(self, sequence: list[str]) -> None:
        try:
            if not sequence:
                self.sequence_done.set()
            while not self._stop.wait(self.every - self.hold):
                kind = sequence.pop(0) if sequence else self.random.choice(self.kinds)
                self.inject(kind)
                if not sequence:
                    self.sequence_done.set()
        except BaseException as exc:
            self.error = exc
            log.exception("nemesis failed")
        finally:
            self.sequence_done.set()  # (stop() raises the error, if any)

    def inject(self, kind: str) -> None:
        """One fault of ``kind``: inject, hold, heal (healing waits for a restarted broker)."""
        cluster = self.faulty.cluster
        brokers = sorted(cluster.brokers)
        target = self.random.choice(brokers)
        heal: Callable[[], None]
        if kind in ("kill", "kill-controller"):
            if kind == "kill-controller":
                target = cluster.controller() if cluster.controller() in brokers else target
            what = f"SIGKILL broker {target}"
            cluster.kill(target)
            heal = lambda: cluster.start_broker(target)  # noqa: E731
        elif kind == "pause":
            what = f"SIGSTOP broker {target}"
            cluster.pause(target)
            heal = lambda: cluster.resume(target)  # noqa: E731
        elif kind == "restart":
            what = f"restart (SIGTERM) broker {target}"
            cluster.restart(target)
            heal = lambda: None  # noqa: E731
        elif kind == "cut-link":
            other = self.random.choice([b for b in brokers if b != target])
            what = f"cut the link between brokers {target} and {other}"
            self.faulty.cut_link(target, other)
            heal = lambda: self.faulty.heal_link(target, other)  # noqa: E731
        elif kind == "isolate":
            what = f"isolate broker {target} from the other brokers"
            self.faulty.isolate(target)
            heal = self.faulty.heal_network
        elif kind == "cut-zookeeper":
            what = f"cut broker {target} off ZooKeeper"
            self.faulty.cut_zookeeper(target)
            heal = lambda: self.faulty.heal_zookeeper(target)  # noqa: E731
        elif kind == "reassign":
            what = self._reassign()
            heal = lambda: None  # noqa: E731
        elif kind == "elect-preferred":
            what = self._elect_preferred(None)
            heal = lambda: None  # noqa: E731
        else:
            raise ValueError(f"unknown fault {kind!r}")
        index = self.history.fault(what)
        self.say(f"{self.history.now():7.1f} s  {what}")
        deadline = time.monotonic() + self.hold
        while time.monotonic() < deadline and not self._stop.is_set():
            time.sleep(0.1)
        heal()
        self.history.healed(index)
        self.say(f"{self.history.now():7.1f} s  healed: {what}")

    # -- the operator's moves ---------------------------------------------------------------
    def _admin(self) -> Any:
        from samsa.client.admin import Admin

        return Admin({"bootstrap.servers": self.faulty.cluster.bootstrap})

    def _reassign(self) -> str:
        """Move one partition's replicas and elect its preferred leader; waits until done."""
        from samsa.types import TopicPartition

        cluster = self.faulty.cluster
        topic, partition = self.random.choice(self.partitions)
        current = cluster.replicas_of(topic, partition)
        outside = [b for b in sorted(cluster.brokers) if b not in current]
        if outside:
            target = list(current)
            target[self.random.randrange(len(target))] = self.random.choice(outside)
        else:
            target = current[1:] + current[:1]  # another preferred leader
        tp = TopicPartition(topic, partition)
        with self._admin() as admin:
            refused = admin.alter_partition_reassignments({tp: target})[tp]
        if refused is not None:
            return f"reassign {topic}-{partition} to {target}: refused ({refused})"
        cluster.wait_until(
            lambda: cluster.replicas_of(topic, partition) == target
            and sorted(cluster.isr_of(topic, partition)) == sorted(target),
            f"{topic}-{partition} moved to {target}", 120,
        )  # fmt: skip
        elected = self._elect_preferred([tp])
        return f"reassign {topic}-{partition} from {current} to {target}; {elected}"

    def _elect_preferred(self, partitions: list[Any] | None) -> str:
        from samsa.client.admin import ElectionType

        with self._admin() as admin:
            results = admin.elect_leaders(ElectionType.PREFERRED, partitions)
        moved = sum(1 for error in results.values() if error is None)
        return f"preferred leaders elected ({moved} of {len(results)} partitions moved)"
