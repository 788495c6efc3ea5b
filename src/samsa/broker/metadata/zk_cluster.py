"""This broker's part in a ZooKeeper cluster: session, registration, controller, replication.

With ``zookeeper.connect`` set, :class:`ZkCluster` is the broker's link to the
others, as Kafka's ZooKeeper-mode ``KafkaServer`` had it:

- a ZooKeeper session (``zookeeper.session.timeout.ms``) and the cluster id in
  ``/cluster/id`` (the first broker writes it; ``meta.properties`` must agree);
- the ephemeral ``/brokers/ids/<id>`` registration with the advertised
  endpoints and ``broker.rack``. A broker restarted right after a crash may
  find its previous session's registration still there: it waits for that
  session to expire (at most ``zookeeper.session.timeout.ms``) and registers;
- a :class:`~samsa.cluster.controller.Controller` taking part in the election;
- the metadata cache (:class:`~samsa.cluster.zk_metadata.ZkMetadataCache`), whose
  changes it hands to the replica manager — lead, follow, stop serving a
  deleted topic, apply a topic's config — and to the replica fetchers;
- a leader's ISR changes, written to the partition's state znode conditionally
  on the version it read (a lost race is read again, never overwritten), and
  the periodic check that drops lagging followers from the ISRs;
- producer id blocks taken from ``/latest_producer_id_block``
  (:class:`ZkProducerIds`);
- before it registers, the replicas it lost: partitions whose ISR in ZooKeeper
  names it while its data directories hold no log of them (wiped, replaced,
  moved aside while it was down). It logs them at ERROR (and, loudly, a data
  directory new to this start while ZooKeeper places replicas here), lists
  them in its registration so that the controller neither elects it nor keeps
  it in their ISRs, and leads none of them on a state written before it came
  back. The claim ends once the partition's ISR no longer names it (it catches
  up as any follower) or an election made knowing it (an unclean one) names it
  leader.

A lost session (expired while the broker was cut off or paused) takes the
registration, the watches and the controllership with it: once a new session
opens, the broker registers again and reads everything afresh.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from pathlib import Path

from samsa.broker.api import request_listener
from samsa.broker.config import BrokerConfig, Listener
from samsa.broker.replication.partition import LeaderAndIsrState, Partition
from samsa.broker.replication.replica_fetcher import Endpoint, FetcherConfig, ReplicaFetcherManager
from samsa.broker.replication.replica_manager import ReplicaManager
from samsa.cluster.controller import Controller
from samsa.cluster.controller_admin import LeaderRebalance
from samsa.cluster.kafka_zk import KafkaZk
from samsa.cluster.zk_client import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    ZkClient,
    is_expected_zk_error,
)
from samsa.cluster.zk_data import NO_LEADER, BrokerRegistration, LeaderAndIsr
from samsa.cluster.zk_data import Endpoint as ZkEndpoint
from samsa.cluster.zk_metadata import ZkMetadataCache
from samsa.errors import ConfigError, CoordinatorLoadInProgressError
from samsa.types import TopicPartition

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK_SIZE = 1000
_REGISTRATION_RETRY_S = 0.5


class ZkProducerIds:
    """Producer ids from blocks of ``/latest_producer_id_block`` (one writer: the loop).

    The next block is taken in the background once the current one is nine
    tenths used, so :meth:`allocate` does not wait on ZooKeeper; if none is at
    hand it raises COORDINATOR_LOAD_IN_PROGRESS (retriable), as Kafka's
    ``RPCProducerIdManager`` does.
    """

    def __init__(self, zk: KafkaZk, broker_id: int) -> None:
        self._zk = zk
        self._broker_id = broker_id
        self._next = 0
        self._end = 0  # exclusive
        self._prefetched: tuple[int, int] | None = None
        self._fetching: asyncio.Task[None] | None = None

    async def start(self) -> None:
        block = await self._zk.allocate_producer_id_block(self._broker_id, PRODUCER_ID_BLOCK_SIZE)
        self._next, self._end = block.block_start, block.block_end + 1

    def allocate(self) -> int:
        if self._next >= self._end:
            if self._prefetched is None:
                self._prefetch()
                raise CoordinatorLoadInProgressError("a new producer id block is on its way")
            self._next, self._end = self._prefetched
            self._prefetched = None
        producer_id = self._next
        self._next += 1
        if self._end - self._next < PRODUCER_ID_BLOCK_SIZE // 10:
            self._prefetch()
        return producer_id

    def _prefetch(self) -> None:
        if self._prefetched is not None or self._fetching is not None:
            return

        async def fetch() -> None:
            try:
                block = await self._zk.allocate_producer_id_block(
                    self._broker_id, PRODUCER_ID_BLOCK_SIZE
                )
                self._prefetched = (block.block_start, block.block_end + 1)
            except Exception as exc:  # ZooKeeper unreachable: the next allocation retries
                log.warning("could not take a producer id block: %s", exc,
                            exc_info=not is_expected_zk_error(exc))  # fmt: skip
            finally:
                self._fetching = None

        self._fetching = asyncio.get_running_loop().create_task(fetch())


class ZkCluster:
    """The broker's session, registration, controller and replication in a ZooKeeper cluster."""

    def __init__(
        self,
        config: BrokerConfig,
        advertised: Callable[[], tuple[Listener, ...]],
        *,
        on_partitions_deleted: Callable[[list[TopicPartition]], Awaitable[object]],
    ) -> None:
        self.config = config
        self.node_id = config.node_id
        self._advertised = advertised
        self._on_partitions_deleted = on_partitions_deleted
        self.client = ZkClient(
            config["zookeeper.connect"], session_timeout_ms=config["zookeeper.session.timeout.ms"]
        )
        self.zk = KafkaZk(self.client)
        listener_name = config.advertised_listeners[0].name
        self.cache = ZkMetadataCache(self.zk, self, listener_name)
        self.cache.current_listener = request_listener.get
        self.controller = Controller(
            self.zk,
            self.node_id,
            unclean_leader_election=config["unclean.leader.election.enable"],
            rebalance=LeaderRebalance(
                config["auto.leader.rebalance.enable"],
                config["leader.imbalance.check.interval.seconds"],
                config["leader.imbalance.per.broker.percentage"],
            ),
        )
        self.producer_ids = ZkProducerIds(self.zk, self.node_id)
        self._tasks: set[asyncio.Task[None]] = set()
        self._isr_check: asyncio.Task[None] | None = None
        self._session_lost = False
        self._leaving = False
        self.new_data_dirs: list[Path] = []
        """Data directories whose meta.properties this start wrote (the broker sets it)."""
        self.lost_replicas: dict[TopicPartition, int] = {}
        """Partitions whose ISR named this broker, with no log here, when it started: each
        with the leader epoch it read then (a state no newer is from before the loss)."""

    def attach(self, replica_manager: ReplicaManager) -> None:
        """Drive ``replica_manager``: leadership from the cache, fetchers, ISR writes."""
        config = self.config
        self.replica_manager = replica_manager
        self.fetchers = ReplicaFetcherManager(
            self.node_id,
            self.endpoint_of,
            FetcherConfig(
                wait_max_ms=config["replica.fetch.wait.max.ms"],
                min_bytes=config["replica.fetch.min.bytes"],
                max_bytes=config["replica.fetch.max.bytes"],
                response_max_bytes=config["replica.fetch.response.max.bytes"],
                backoff_ms=config["replica.fetch.backoff.ms"],
                socket_timeout_ms=config["replica.socket.timeout.ms"],
                security=config.inter_broker_security,
            ),
            lambda partition: replica_manager.log_manager.maybe_flush(partition.log),
        )
        replica_manager.fetching = self.fetchers
        replica_manager.write_isr = self.write_isr
        replica_manager.barred_from_isr = self.cache.barred_from_isr
        replica_manager.replica_lag_time_max_ms = config["replica.lag.time.max.ms"]

    # -- start and stop -------------------------------------------------------------------
    async def connect(self, proposed_cluster_id: str) -> str:
        """Open the session and agree on the cluster id (``proposed`` if this broker is
        first); raises ConfigError if ZooKeeper cannot be reached."""
        timeout_ms = (
            self.config["zookeeper.connection.timeout.ms"]
            or self.config["zookeeper.session.timeout.ms"]
        )
        timeout_s = timeout_ms / 1000
        try:
            await self.client.start(timeout=timeout_s)
        except Exception as exc:
            with contextlib.suppress(Exception):
                await self.client.close()
            raise ConfigError(
                f"cannot reach ZooKeeper at {self.config['zookeeper.connect']} within "
                f"{timeout_s:.0f} s (zookeeper.connection.timeout.ms): {exc}"
            ) from exc
        await self.zk.create_top_level_paths()
        cluster_id = await self.zk.get_or_create_cluster_id(proposed_cluster_id)
        self.cache.cluster_id = cluster_id
        return cluster_id

    async def start(self) -> None:
        """Register, join the controller election and take this broker's partitions."""
        await self.producer_ids.start()
        await self._find_lost_replicas()
        await self._register()
        self.client.add_state_listener(self._on_session_state)
        self.controller.start()
        await self.cache.start()
        self._isr_check = asyncio.get_running_loop().create_task(self._check_isrs())

    async def _find_lost_replicas(self) -> None:
        """Compare the replicas ZooKeeper places here with the logs on disk (loaded by now):
        partitions whose ISR names this broker and whose log is missing are lost."""
        held = self.replica_manager.log_manager.all_logs()
        hosted = 0
        for topic in await self.zk.get_topics():
            assignment = await self.zk.get_topic(topic)
            if assignment is None:
                continue
            for partition, replicas in assignment.partitions.items():
                if self.node_id not in replicas:
                    continue
                hosted += 1
                tp = TopicPartition(topic, partition)
                if tp in held:
                    continue
                state = await self.zk.get_partition_state(tp)
                if state is not None and self.node_id in state.isr:
                    self.lost_replicas[tp] = state.leader_epoch
        if self.new_data_dirs and hosted:
            log.error(
                "data director%s %s %s new (this start wrote %s meta.properties), but "
                "ZooKeeper places %d replica%s on broker %d: not here. If the "
                "directory was wiped or replaced by mistake, stop this broker and restore it; "
                "otherwise its replicas are copied again from the other brokers",
                "y" if len(self.new_data_dirs) == 1 else "ies",
                ", ".join(map(str, self.new_data_dirs)),
                "is" if len(self.new_data_dirs) == 1 else "are",
                "its" if len(self.new_data_dirs) == 1 else "their",
                hosted,
                "" if hosted == 1 else "s",
                self.node_id,
            )
        if self.lost_replicas:
            names = sorted(map(str, self.lost_replicas))
            shown = ", ".join(names[:10]) + (", …" if len(names) > 10 else "")
            log.error(
                "broker %d is in the ISR of %d partition%s whose log%s not in its data "
                "directories (%s): it will lead none of them and leaves their ISRs; one "
                "with no other in-sync replica stays offline until its data is restored or "
                "an unclean election is run",
                self.node_id, len(names), "" if len(names) == 1 else "s",
                " is" if len(names) == 1 else "s are", shown,
            )  # fmt: skip

    def _checked_state(self, tp: TopicPartition, state: LeaderAndIsr) -> LeaderAndIsr:
        """``state`` of a partition whose log this broker lost, as it acts on it: never
        leader on a state from before the loss; the claim ends once the ISR no longer
        names this broker, or a newer election (made knowing it) names it leader."""
        before = self.lost_replicas[tp]
        if self.node_id in state.isr and state.leader != self.node_id:
            return state
        if self.node_id in state.isr and state.leader_epoch <= before:
            log.error(
                "%s: ZooKeeper names broker %d leader (epoch %d) from before its log was "
                "lost: not leading it from an empty log",
                tp, self.node_id, state.leader_epoch,
            )  # fmt: skip
            return replace(state, leader=NO_LEADER)
        del self.lost_replicas[tp]
        if state.leader == self.node_id:
            log.warning("%s: elected leader without its old log (an unclean election): "
                        "the records it lacks are lost", tp)  # fmt: skip
        else:
            log.info("%s: out of the ISR: its log is copied again from the leader", tp)
        self._spawn(self._update_registration())
        return state

    async def _update_registration(self) -> None:
        # Without a session, registering again writes the claims as they are then.
        with contextlib.suppress(NoNodeError):
            await self.zk.update_broker(self._registration())

    def unknown_logs(self) -> list[TopicPartition]:
        """Logs on disk that ZooKeeper does not place here: of topics deleted, or of
        partitions reassigned to other brokers, while this broker was away."""
        return [
            tp
            for tp in self.replica_manager.log_manager.all_logs()
            if self.node_id not in self.cache.replicas_of(tp)
        ]

    async def stop(self) -> None:
        if self._isr_check is not None:
            self._isr_check.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._isr_check
        for task in list(self._tasks):
            task.cancel()
        await self.fetchers.shutdown()
        await self.controller.stop()
        await self.cache.stop()
        with contextlib.suppress(Exception):
            await self.client.close()

    # -- registration ---------------------------------------------------------------------
    def _registration(self) -> BrokerRegistration:
        endpoints = tuple(
            ZkEndpoint(listener.name, listener.host, listener.port, listener.protocol)
            for listener in self._advertised()
        )
        return BrokerRegistration(
            self.node_id, endpoints, self.config["broker.rack"], frozenset(self.lost_replicas)
        )

    async def _register(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config["zookeeper.session.timeout.ms"] / 1000 + 5
        waited = False
        while True:
            try:
                await self.zk.register_broker(self._registration())
                break
            except NodeExistsError:
                if loop.time() >= deadline:
                    raise ConfigError(
                        f"broker id {self.node_id} is registered in ZooKeeper by another "
                        "live broker; give this one another broker.id"
                    ) from None
                if not waited:
                    log.info("broker id %d is still registered by an earlier session; "
                             "waiting for it to expire", self.node_id)  # fmt: skip
                    waited = True
                await asyncio.sleep(_REGISTRATION_RETRY_S)
        log.info("registered as broker %d in ZooKeeper", self.node_id)

    def _on_session_state(self, state: str) -> None:
        if state == "LOST":
            self._session_lost = True
            if not self.client.closing:  # not when this broker ends its session to stop
                log.warning("broker %d lost its ZooKeeper session", self.node_id)
        elif state == "CONNECTED" and self._session_lost:
            self._session_lost = False
            self._spawn(self._rejoin())

    async def _rejoin(self) -> None:
        log.info("broker %d: new ZooKeeper session: registering and reading again", self.node_id)
        if not self._leaving:
            await self._register()
        await self.cache.resync()

    # -- controlled shutdown --------------------------------------------------------------
    async def controlled_shutdown(self) -> None:
        """Move this broker's leaderships to other ISR members before it stops (Kafka's
        controlled shutdown, ``controlled.shutdown.enable``).

        The broker announces it (an ephemeral ``/samsa/controlled_shutdown/<id>``) and
        goes on serving: the controller elects a new leader among the other ISR members
        of each partition it led and drops it from every ISR, leaders take it into none
        again, and the clients follow the new leaders (their requests here get
        NOT_LEADER_OR_FOLLOWER, which they retry). Its registration stays, so clients'
        metadata lists it until it stops: a group coordinator that moves away is never,
        meanwhile, a broker the metadata does not know. It returns once this broker leads
        nothing with another live ISR member to lead instead, or after
        ``controlled.shutdown.timeout.ms``; stopping ends the session, which takes the
        registration and the announcement.
        """
        if not self.config["controlled.shutdown.enable"]:
            return
        self._leaving = True
        started = asyncio.get_running_loop().time()
        try:
            await self.zk.announce_shutdown(self.node_id)
        except Exception as exc:
            log.warning("controlled shutdown: cannot announce it in ZooKeeper: %s", exc,
                        exc_info=not is_expected_zk_error(exc))  # fmt: skip
            return

        def moved() -> bool:
            return not any(
                partition.is_leader and len(partition.isr) > 1
                for partition in self.replica_manager.partitions()
            )

        timeout_s = self.config["controlled.shutdown.timeout.ms"] / 1000
        done = await self.cache.wait_until(moved, timeout_s)
        log.info(
            "controlled shutdown: %s in %.0f ms",
            "leadership moved" if done else "leadership still here after the timeout",
            (asyncio.get_running_loop().time() - started) * 1000,
        )

    def _spawn(self, coro: Awaitable[None]) -> None:
        async def run() -> None:
            try:
                await coro
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("broker %d: cluster work failed", self.node_id)

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- the metadata cache's listener ----------------------------------------------------
    def on_brokers_changed(self, brokers: Mapping[int, BrokerRegistration]) -> None:
        self.fetchers.brokers_changed(set(brokers))

    def on_partition_changed(
        self,
        tp: TopicPartition,
        replicas: tuple[int, ...],
        state: LeaderAndIsr,
        topic_id: uuid.UUID,
    ) -> None:
        if tp in self.lost_replicas:
            state = self._checked_state(tp, state)
        self.replica_manager.apply_leadership(
            tp,
            LeaderAndIsrState(
                state.leader, state.leader_epoch, state.isr, replicas, state.zk_version
            ),
        )

    def on_topic_deleted(self, topic: str) -> None:
        """Stop serving the topic and remove its logs here, served or not; every group this
        broker coordinates forgets its offsets."""
        info = self.cache.get(topic)  # still there while the listener runs
        gone = [tp for tp in self.lost_replicas if tp.topic == topic]
        for tp in gone:
            del self.lost_replicas[tp]
        if gone:
            self._spawn(self._update_registration())
        rm = self.replica_manager
        rm.remove_topic(topic)
        log_manager = rm.log_manager
        for tp in [tp for tp in log_manager.all_logs() if tp.topic == topic]:
            log_manager.delete_log(tp)
        count = info.partitions if info is not None else 0
        log.info("topic %s deleted", topic)
        self._spawn(self._partitions_deleted([TopicPartition(topic, p) for p in range(count)]))

    async def _partitions_deleted(self, partitions: list[TopicPartition]) -> None:
        await self._on_partitions_deleted(partitions)

    def on_config_changed(self, topic: str) -> None:
        self.replica_manager.apply_config(topic)

    def endpoint_of(self, broker_id: int) -> Endpoint | None:
        """Where brokers reach broker ``broker_id`` (``inter.broker.listener.name``)."""
        registration = self.cache.brokers.get(broker_id)
        if registration is None:
            return None
        name = self.config["inter.broker.listener.name"] or self.cache.listener_name
        endpoint = registration.endpoint(name) or (
            registration.endpoints[0] if registration.endpoints else None
        )
        return None if endpoint is None else (endpoint.host, endpoint.port)

    # -- ISR changes ----------------------------------------------------------------------
    async def write_isr(self, partition: Partition, isr: tuple[int, ...]) -> int | None:
        """Write ``partition``'s new ISR as its leader; the new znode version, or None if
        the state moved on meanwhile (it is read again through the watch)."""
        current = self.cache.states.get(partition.tp)
        controller_epoch = current.controller_epoch if current is not None else 0
        state = LeaderAndIsr(
            partition.leader_id, partition.leader_epoch, isr, controller_epoch, partition.zk_version
        )
        try:
            return await self.zk.update_partition_state(partition.tp, state)
        except (BadVersionError, NoNodeError):
            return None

    async def _check_isrs(self) -> None:
        interval_s = max(self.config["replica.lag.time.max.ms"] / 2000, 0.05)
        while True:
            await asyncio.sleep(interval_s)
            try:
                self.replica_manager.shrink_isrs()
            except Exception:
                log.exception("the ISR check failed")
