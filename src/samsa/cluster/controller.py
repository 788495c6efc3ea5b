"""The cluster controller: one broker, elected through ZooKeeper, decides leaders and ISRs.

Every broker runs a :class:`Controller`; the one that creates the ephemeral
``/controller`` znode is *active* and bumps ``/controller_epoch``. Only the
active controller writes partition leadership: new topics' first states,
a new leader when a broker's session ends, topic deletions. Every write is
fenced by its epoch (:meth:`KafkaZk.fenced`), so a controller that was cut off
and replaced writes nothing more. When ``/controller`` goes (its broker died
or resigned), every broker runs the election again.

One owner, one queue (:class:`~samsa.cluster.events.EventQueue`, Kafka's
controller event manager): ZooKeeper watches and session changes only enqueue
events; a single task processes them in order and alone reads and changes the
controller's view
(:class:`ControllerContext`). Watches are one-shot: each handler reads again and
sets the next watch in the same read, so no change between two reads is missed.

Brokers learn what the controller decided from ZooKeeper itself: they watch
the partition-state znodes of the topics they hold (``cluster/zk_metadata``) —
no controller-to-broker requests. A broker that came back without the log of a
partition whose ISR names it says so in its registration (``lost_replicas``,
watched): it is then no candidate to lead that partition and leaves its ISR;
a partition left with no other ISR member stays offline, logged at ERROR with
the operator's choices (see :mod:`samsa.cluster.election`). ISR changes while a leader lives are the
leader's own conditional writes of the same znodes; a write that loses a race
(a stale ``zk_version``) is read again and recomputed, on either side.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable

from samsa.cluster import election, zk_data
from samsa.cluster.controller_admin import AdminState, ControllerAdmin, LeaderRebalance
from samsa.cluster.controller_context import ControllerContext, Event
from samsa.cluster.events import EventQueue
from samsa.cluster.kafka_zk import ControllerMovedError, KafkaZk
from samsa.cluster.zk_client import BadVersionError, NodeExistsError, ZkOp
from samsa.cluster.zk_data import LeaderAndIsr, TopicAssignment
from samsa.types import TopicPartition

log = logging.getLogger(__name__)

UNCLEAN_ELECTION = "unclean.leader.election.enable"
_STALE_STATE_RETRIES = 5


class Controller(ControllerAdmin):
    """This broker's part in controller election, and the controller's work when it wins."""

    def __init__(
        self,
        zk: KafkaZk,
        broker_id: int,
        *,
        unclean_leader_election: bool = False,
        on_change: Callable[[], None] | None = None,
        rebalance: LeaderRebalance | None = None,
    ) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.unclean_default = unclean_leader_election
        self.on_change = on_change
        self.rebalance = rebalance or LeaderRebalance()
        self.admin = AdminState()
        self._rebalancer: asyncio.Task[None] | None = None
        """Called after each event the active controller processed (tests, metrics)."""
        self.context: ControllerContext | None = None
        self._watched_registrations: set[int] = set()
        """Brokers whose registration a watch of this controller waits on (one each)."""
        self._reported_lost: dict[TopicPartition, tuple[int, ...]] = {}
        """Offline partitions whose live ISR members lost their logs, as last logged."""
        self._events: EventQueue[tuple[Event, str]] = EventQueue(
            f"controller-{broker_id}", self._process_one
        )

    @property
    def is_active(self) -> bool:
        return self.context is not None

    @property
    def epoch(self) -> int | None:
        return None if self.context is None else self.context.epoch.epoch

    def start(self) -> None:
        self.zk.client.add_state_listener(self._on_session_state)
        self._events.start()
        self._enqueue(Event.ELECT)

    async def stop(self) -> None:
        """Stop processing and give up ``/controller`` if this broker holds it."""
        if self._rebalancer is not None:
            self._rebalancer.cancel()
        await self._events.stop()
        waiting = [r.result for r in self.admin.elections]
        waiting += [r.result for r in self.admin.reassign_requests]
        for result in waiting:
            if not result.done():
                result.set_result(None)
        if self.context is not None:
            self.context = None
            with contextlib.suppress(Exception):  # the session may be gone already
                await self.zk.resign_controller(self.broker_id)

    async def wait_idle(self) -> None:
        """Return once every event enqueued so far has been processed (tests)."""
        await self._events.wait_idle()

    # -- event plumbing -----------------------------------------------------------------

    def _enqueue(self, event: Event, topic: str = "") -> None:
        self._events.put((event, topic))

    def _on_session_state(self, state: str) -> None:
        if state == "LOST":
            self._enqueue(Event.SESSION_LOST)
        elif state == "CONNECTED" and self.context is None:
            self._enqueue(Event.ELECT)

    async def _process_one(self, item: tuple[Event, str]) -> None:
        event, topic = item
        try:
            await self._process(event, topic)
        except ControllerMovedError as exc:
            log.warning("broker %d is no longer the controller: %s", self.broker_id, exc)
            self.context = None
            self._enqueue(Event.ELECT)
            return
        if self.on_change is not None and self.context is not None:
            self.on_change()

    async def _process(self, event: Event, topic: str) -> None:
        if event is Event.ELECT_LEADERS:
            await self._run_election()
        elif event is Event.REASSIGN:
            await self._run_reassignments()
        elif event is Event.ELECT:
            await self._elect()
        elif event is Event.SESSION_LOST:
            if self.context is not None and not self.zk.client.closing:
                log.warning("broker %d lost its ZooKeeper session: resigning", self.broker_id)
            self.context = None
            self._enqueue(Event.ELECT)
        elif self.context is None:
            return  # a watch set while this broker was the controller
        elif event is Event.BROKERS_CHANGED:
            await self._on_brokers_changed(self.context)
        elif event is Event.TOPICS_CHANGED:
            await self._on_topics_changed(self.context)
        elif event is Event.PARTITIONS_CHANGED:
            await self._on_partitions_changed(self.context, topic)
        elif event is Event.DELETIONS_QUEUED:
            await self._on_deletions(self.context)
        elif event is Event.REBALANCE:
            await self._rebalance_leaders(self.context)
        elif event is Event.REASSIGNMENT_PROGRESS:
            await self._on_reassignment_progress(self.context, topic)

    # -- election -----------------------------------------------------------------------

    async def _elect(self) -> None:
        if not self.zk.client.connected:
            return  # CONNECTED enqueues ELECT again
        controller = await self.zk.get_controller_id()
        if self.context is not None and controller == self.broker_id:
            await self._watch_controller()
            return
        self.context = None
        epoch = await self.zk.try_become_controller(self.broker_id)
        if epoch is None:
            if not await self._watch_controller():
                self._enqueue(Event.ELECT)  # it went between our create and the watch
            return
        log.info("broker %d is the controller (epoch %d)", self.broker_id, epoch.epoch)
        self.context = ControllerContext(epoch)
        await self._watch_controller()
        await self._on_failover(self.context)
        if self.rebalance.enabled and self._rebalancer is None:
            self._rebalancer = asyncio.get_running_loop().create_task(self._check_balance())

    async def _watch_controller(self) -> bool:
        return await self.zk.client.exists(
            zk_data.CONTROLLER, watch=lambda: self._enqueue(Event.ELECT)
        )

    async def _on_failover(self, context: ControllerContext) -> None:
        """Rebuild the view from ZooKeeper, then bring every partition to a live leader."""
        await self.zk.create_top_level_paths()
        await self._read_brokers(context)
        for topic in await self._read_topic_names():
            await self._read_topic(context, topic)
        # A leader listing the partition as lost may have been elected so (unclean) or be
        # named from before it lost it: which, a new controller cannot tell; deposed, the
        # first is an unclean election to run again, while the second would lead nothing.
        await self._depose_lost_leaders(context, set(context.live_brokers))
        await self._bring_online(context, context.partitions())
        await self._on_deletions(context)
        self.admin.reassignments.clear()
        for tp in self._restore_reassignments(context):
            await self._check_progress(context, tp)

    # -- brokers ------------------------------------------------------------------------

    async def _read_brokers(
        self, context: ControllerContext
    ) -> tuple[set[int], set[int], set[int]]:
        """Read the registered brokers and those in a controlled shutdown (watching both);
        the live ones, for the controller, are the registered ones not shutting down:
        they lose their leaderships and ISR places as if gone, while clients still see
        them until they stop (Kafka's ``liveBrokerIds`` next to ``liveOrShuttingDown``)."""
        await self.zk.get_broker_ids(watch=lambda: self._enqueue(Event.BROKERS_CHANGED))
        leaving = await self.zk.get_shutting_down(
            watch=lambda: self._enqueue(Event.BROKERS_CHANGED)
        )
        registered = await self.zk.get_brokers(watch=self._registration_watch)
        live_before = set(context.live_brokers)
        registered_before = live_before | context.shutting_down
        context.live_brokers = {b: r for b, r in registered.items() if b not in leaving}
        context.shutting_down = leaving & registered.keys()
        return (
            set(context.live_brokers) - live_before,
            registered_before - set(registered),
            set(context.shutting_down & live_before),
        )

    def _registration_watch(self, broker_id: int) -> Callable[[], None] | None:
        """A watch on ``broker_id``'s registration (its lost replicas change while it
        lives), unless one is set already: one per registration, not one per read."""
        if broker_id in self._watched_registrations:
            return None
        self._watched_registrations.add(broker_id)

        def changed() -> None:
            self._watched_registrations.discard(broker_id)
            self._enqueue(Event.BROKERS_CHANGED)

        return changed

    async def _on_brokers_changed(self, context: ControllerContext) -> None:
        before = {b: r.lost_replicas for b, r in context.live_brokers.items()}
        added, removed, stopping = await self._read_brokers(context)
        lost_changed = {
            broker
            for broker, registration in context.live_brokers.items()
            if registration.lost_replicas != before.get(broker, frozenset())
        }
        if added or removed or stopping:
            log.info(
                "brokers changed: live %s (added %s, gone %s, shutting down %s)",
                sorted(context.live_brokers),
                sorted(added),
                sorted(removed),
                sorted(stopping),
            )
        live = set(context.live_brokers)
        partitions = [tp for tp in context.partitions() if tp in context.states]
        for broker in sorted(stopping):
            leave = functools.partial(
                self._leave_isr, context, broker=broker, live=live, controlled=True
            )
            await _each(partitions, leave)
        for broker in sorted(removed):
            leave = functools.partial(self._leave_isr, context, broker=broker, live=live)
            await _each(partitions, leave)
        await self._depose_lost_leaders(context, lost_changed)
        if added or lost_changed:
            await self._bring_online(context, context.partitions())

    async def _depose_lost_leaders(self, context: ControllerContext, brokers: set[int]) -> None:
        """A broker that registered again without the log of a partition ZooKeeper still
        names it leader of (it came back before this controller saw it go) leads it no
        more: the partition gets another leader from its ISR, or goes offline."""
        live = set(context.live_brokers)
        for broker in sorted(brokers):
            lost = context.live_brokers[broker].lost_replicas
            for tp in sorted(lost):
                state = context.states.get(tp)
                if state is None or state.leader != broker or tp.topic not in context.topics:
                    continue
                await self._change_state(
                    context,
                    tp,
                    functools.partial(
                        election.elect_offline_leader,
                        context.replicas(tp),
                        live=live,
                        controller_epoch=context.epoch.epoch,
                        unclean=context.unclean.get(tp.topic, self.unclean_default),
                        lost=context.lost(tp) | {broker},
                    ),
                )

    async def _leave_isr(
        self,
        context: ControllerContext,
        tp: TopicPartition,
        *,
        broker: int,
        live: set[int],
        controlled: bool = False,
    ) -> None:
        """``broker`` is gone, or stopping (``controlled``): out of ``tp``'s ISR, and a new
        leader if it led (when it is stopping, only one from the rest of the ISR).

        The decision is taken on the state as ZooKeeper has it now: leaders write their
        own ISR changes, so the one this controller last wrote or read may lack a
        follower taken back since — and a decision of "nothing to do" on it would not be
        written, so no failed conditional write would tell that it was stale.
        """
        if broker in context.replicas(tp):
            await self._fresh_state(context, tp)
        await self._change_state(
            context,
            tp,
            functools.partial(
                election.remove_replica_from_isr,
                context.replicas(tp),
                broker=broker,
                live=live,
                controller_epoch=context.epoch.epoch,
                unclean=context.unclean.get(tp.topic, self.unclean_default),
                controlled=controlled,
                lost=context.lost(tp),
            ),
        )

    # -- topics -------------------------------------------------------------------------

    async def _read_topic_names(self) -> list[str]:
        return await self.zk.get_topics(watch=lambda: self._enqueue(Event.TOPICS_CHANGED))

    async def _read_topic(self, context: ControllerContext, topic: str) -> TopicAssignment | None:
        assignment = await self.zk.get_topic(
            topic, watch=lambda: self._enqueue(Event.PARTITIONS_CHANGED, topic)
        )
        if assignment is None:
            context.topics.pop(topic, None)
            return None
        context.topics[topic] = assignment
        config = await self.zk.get_topic_config(topic)
        if UNCLEAN_ELECTION in config:
            context.unclean[topic] = config[UNCLEAN_ELECTION].strip().lower() == "true"
        for partition in assignment.partitions:
            tp = TopicPartition(topic, partition)
            state = await self.zk.get_partition_state(tp)
            if state is not None:
                context.states[tp] = state
        return assignment

    async def _on_topics_changed(self, context: ControllerContext) -> None:
        names = set(await self._read_topic_names())
        for topic in set(context.topics) - names:
            self._forget_topic(context, topic)
        new = sorted(names - set(context.topics))
        for topic in new:
            await self._read_topic(context, topic)
        await self._bring_online(context, context.partitions(new))

    async def _on_partitions_changed(self, context: ControllerContext, topic: str) -> None:
        if topic not in context.topics:
            return  # a deleted topic's last watch
        assignment = await self._read_topic(context, topic)
        if assignment is not None:
            await self._bring_online(context, context.partitions([topic]))

    async def _on_deletions(self, context: ControllerContext) -> None:
        queued = await self.zk.get_topics_to_delete(
            watch=lambda: self._enqueue(Event.DELETIONS_QUEUED)
        )
        for topic in queued:
            log.info("deleting topic %s", topic)
            await self.zk.delete_topic_znodes(context.epoch, topic)
            self._forget_topic(context, topic)

    def _forget_topic(self, context: ControllerContext, topic: str) -> None:
        context.topics.pop(topic, None)
        context.unclean.pop(topic, None)
        for tp in [tp for tp in context.states if tp.topic == topic]:
            del context.states[tp]

    # -- partition states ---------------------------------------------------------------

    async def _bring_online(
        self, context: ControllerContext, partitions: list[TopicPartition]
    ) -> None:
        """Create missing partition states, elect leaders for offline partitions and drop
        offline brokers from the ISRs of the others."""
        live = set(context.live_brokers)
        stopping = context.shutting_down
        for topic in sorted({tp.topic for tp in partitions if tp not in context.states}):
            await self.zk.ensure_partitions_path(topic)

        async def online(tp: TopicPartition) -> None:
            replicas = context.replicas(tp)
            if tp not in context.states:
                await self._create_state(context, tp, replicas, live)
                return
            await self._change_state(
                context,
                tp,
                functools.partial(
                    _elect_or_shrink,
                    replicas,
                    live=live,
                    stopping=stopping,
                    controller_epoch=context.epoch.epoch,
                    unclean=context.unclean.get(tp.topic, self.unclean_default),
                    lost=context.lost(tp),
                ),
            )
            self._report_lost(context, tp)

        await _each(partitions, online)

    def _report_lost(self, context: ControllerContext, tp: TopicPartition) -> None:
        """Log at ERROR, once, a partition kept offline because the live members of its
        ISR came back without its log: only the operator can choose what happens."""
        state = context.states.get(tp)
        stranded: tuple[int, ...] = ()
        if state is not None and state.leader == zk_data.NO_LEADER:
            stranded = tuple(b for b in state.isr if b in context.lost(tp))
        if not stranded:
            self._reported_lost.pop(tp, None)
            return
        if self._reported_lost.get(tp) == stranded:
            return
        self._reported_lost[tp] = stranded
        brokers = ", ".join(map(str, stranded))
        log.error(
            "%s stays offline: its last in-sync replica%s (broker %s) came back without its "
            "log, and leading from an empty log would make every other replica truncate the "
            "acknowledged records. Restore the data directory of broker %s and restart it, "
            "or accept losing records with an unclean election: set "
            "unclean.leader.election.enable=true on topic %s, or run samsa leader-election "
            "--election-type unclean --topic %s --partition %d (a replica that kept its log "
            "is preferred)",
            tp, "s" if len(stranded) > 1 else "", brokers, brokers, tp.topic, tp.topic,
            tp.partition,
        )  # fmt: skip

    async def _create_state(
        self,
        context: ControllerContext,
        tp: TopicPartition,
        replicas: tuple[int, ...],
        live: set[int],
    ) -> None:
        state = election.initial_state(replicas, live, context.epoch.epoch)
        if state.leader == zk_data.NO_LEADER:
            # Kafka leaves such a partition new: its state is written once a
            # replica is alive (the next broker change brings it online).
            log.warning("%s: none of its replicas %s is alive", tp, list(replicas))
            return
        try:
            await self.zk.fenced(context.epoch, self.zk.create_partition_state_ops(tp, state))
        except NodeExistsError:
            # Written by an earlier controller after our read: take it as it is.
            existing = await self.zk.get_partition_state(tp)
            if existing is not None:
                context.states[tp] = existing
            return
        context.states[tp] = LeaderAndIsr(
            state.leader, state.leader_epoch, state.isr, state.controller_epoch, 0
        )
        log.info("%s: new partition, leader %d, isr %s", tp, state.leader, list(state.isr))

    async def _change_state(
        self,
        context: ControllerContext,
        tp: TopicPartition,
        decide: Callable[..., LeaderAndIsr | None],
    ) -> None:
        """Write ``decide(current)`` conditionally; on a lost race, read again and decide again."""
        for _ in range(_STALE_STATE_RETRIES):
            current = context.states.get(tp)
            if current is None:
                return
            wanted = decide(current=current)
            if wanted is None:
                return
            ops: list[ZkOp] = [self.zk.update_partition_state_op(tp, wanted)]
            try:
                await self.zk.fenced(context.epoch, ops)
            except BadVersionError:
                fresh = await self.zk.get_partition_state(tp)
                if fresh is None:
                    context.states.pop(tp, None)
                    return
                context.states[tp] = fresh
                continue
            context.states[tp] = LeaderAndIsr(
                wanted.leader,
                wanted.leader_epoch,
                wanted.isr,
                wanted.controller_epoch,
                wanted.zk_version + 1,
            )
            log.info(
                "%s: leader %d (epoch %d), isr %s",
                tp,
                wanted.leader,
                wanted.leader_epoch,
                list(wanted.isr),
            )
            return
        raise BadVersionError(f"{tp}: its state kept changing under the controller")


def _elect_or_shrink(
    replicas: tuple[int, ...],
    current: LeaderAndIsr,
    live: set[int],
    controller_epoch: int,
    *,
    stopping: Collection[int],
    unclean: bool,
    lost: Collection[int] = (),
) -> LeaderAndIsr | None:
    """A new leader if the partition's is offline or stopping (``stopping``: brokers in a
    controlled shutdown, which keep a partition no live ISR member can take), else its
    ISR without offline or stopping brokers, nor brokers that lost its log (``lost``)."""
    eligible = {broker for broker in live if broker not in lost}
    if current.leader in stopping:
        return election.move_leadership_away(replicas, current, eligible, controller_epoch)
    elected = election.elect_offline_leader(
        replicas, current, live, controller_epoch, unclean=unclean, lost=lost
    )
    if elected is not None or current.leader not in live:
        return elected
    return election.drop_offline_from_isr(current, eligible, controller_epoch)


_WRITES_AT_ONCE = 32


async def _each(
    items: Iterable[TopicPartition], work: Callable[[TopicPartition], Awaitable[None]]
) -> None:
    """``work`` for every partition, a few dozen at a time: their ZooKeeper writes are
    independent, and one after another they take a round trip each (a broker leading a
    hundred partitions took seconds to be replaced)."""
    pending = list(items)
    for start in range(0, len(pending), _WRITES_AT_ONCE):
        await asyncio.gather(*(work(tp) for tp in pending[start : start + _WRITES_AT_ONCE]))
