"""What operators ask the controller for: leader elections and partition reassignments.

The :class:`~samsa.cluster.controller.Controller`'s share of the admin APIs,
each run as an event of its one queue (so it sees and changes the view in order
with everything else): ElectLeaders (preferred and unclean elections, and the
periodic ``auto.leader.rebalance.enable`` check) and
AlterPartitionReassignments / ListPartitionReassignments (KIP-455; the
decisions are :mod:`samsa.cluster.reassignment`'s). Every decision is made on
partition states read afresh from ZooKeeper: leaders change their ISRs
themselves.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from samsa.cluster import election, reassignment, zk_data
from samsa.cluster.controller_context import ControllerContext, Event
from samsa.cluster.kafka_zk import ControllerMovedError, KafkaZk
from samsa.cluster.reassignment import Reassignment
from samsa.cluster.zk_client import ZkSet
from samsa.cluster.zk_data import LeaderAndIsr, TopicAssignment
from samsa.errors import ErrorCode, KafkaError
from samsa.types import TopicPartition

log = logging.getLogger(__name__)

Results = dict[TopicPartition, tuple[ErrorCode, str | None]]
"""Each partition's error code and message."""


@dataclass(frozen=True, slots=True)
class LeaderRebalance:
    """``auto.leader.rebalance.enable`` and its two settings, as Kafka names them."""

    enabled: bool = False
    check_interval_s: float = 300.0
    """``leader.imbalance.check.interval.seconds``"""
    max_imbalance_percentage: int = 10
    """``leader.imbalance.per.broker.percentage``"""


@dataclass(frozen=True, slots=True)
class _ElectionRequest:
    partitions: list[TopicPartition] | None
    unclean: bool
    result: asyncio.Future[Results | None]


@dataclass(frozen=True, slots=True)
class _ReassignRequest:
    targets: dict[TopicPartition, tuple[int, ...] | None]
    result: asyncio.Future[Results | None]


@dataclass
class AdminState:
    """The requests waiting for the controller's queue, and the moves under way."""

    elections: deque[_ElectionRequest] = field(default_factory=deque)
    reassign_requests: deque[_ReassignRequest] = field(default_factory=deque)
    reassignments: dict[TopicPartition, Reassignment] = field(default_factory=dict)


class ControllerAdmin:
    """Elections and reassignments: mixed into the Controller, whose queue runs them."""

    zk: KafkaZk
    context: ControllerContext | None
    rebalance: LeaderRebalance
    admin: AdminState
    _rebalancer: asyncio.Task[None] | None

    def _enqueue(self, event: Event, topic: str = "") -> None:
        raise NotImplementedError

    async def _change_state(
        self,
        context: ControllerContext,
        tp: TopicPartition,
        decide: Callable[..., LeaderAndIsr | None],
    ) -> None:
        raise NotImplementedError

    async def _fresh_state(self, context: ControllerContext, tp: TopicPartition) -> None:
        fresh = await self.zk.get_partition_state(tp)
        if fresh is not None:
            context.states[tp] = fresh

    # -- leader elections on request (ElectLeaders) and the periodic rebalance ------------

    async def elect_leaders(
        self, partitions: list[TopicPartition] | None, *, unclean: bool
    ) -> Results | None:
        """Run a preferred (or unclean) election for ``partitions`` (None: every partition)
        as one controller event; each partition's error code and message, or None when
        this broker is not the active controller."""
        if self.context is None:
            return None
        result: asyncio.Future[Results | None] = asyncio.get_running_loop().create_future()
        self.admin.elections.append(_ElectionRequest(partitions, unclean, result))
        self._enqueue(Event.ELECT_LEADERS)
        return await result

    async def _run_election(self) -> None:
        request = self.admin.elections.popleft()
        context = self.context
        if context is None:
            request.result.set_result(None)
            return
        try:
            outcome = await self._elect_each(context, request.partitions, request.unclean)
        except ControllerMovedError:
            request.result.set_result(None)
            raise
        except Exception as exc:
            request.result.set_exception(exc)
            return
        request.result.set_result(outcome)

    async def _elect_each(
        self, context: ControllerContext, partitions: list[TopicPartition] | None, unclean: bool
    ) -> Results:
        outcome: Results = {}
        live = set(context.live_brokers)
        for tp in context.partitions() if partitions is None else partitions:
            if tp.topic in context.topics:
                # Leaders change their ISRs themselves: decide on the state as it is now.
                await self._fresh_state(context, tp)
            if tp not in context.states:
                outcome[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp} does not exist")
                continue
            # A broker that came back without the partition's log is a candidate of an
            # unclean election only, and only when no replica kept its log.
            lost = context.lost(tp)
            decide = (
                functools.partial(
                    election.elect_unclean_leader, context.replicas(tp), live=live,
                    controller_epoch=context.epoch.epoch, lost=lost,
                )
                if unclean
                else functools.partial(
                    election.elect_preferred_leader, context.replicas(tp), live=live - lost,
                    controller_epoch=context.epoch.epoch,
                )
            )  # fmt: skip
            try:
                await self._change_state(context, tp, decide)
            except election.ElectionRefused as refused:
                outcome[tp] = (refused.code, str(refused))
            else:
                outcome[tp] = (ErrorCode.NONE, None)
        return outcome

    async def _check_balance(self) -> None:
        while True:
            await asyncio.sleep(self.rebalance.check_interval_s)
            self._enqueue(Event.REBALANCE)

    async def _rebalance_leaders(self, context: ControllerContext) -> None:
        """Give partitions back to their preferred leaders where a broker leads too few of
        the ones it prefers (``auto.leader.rebalance.enable``)."""
        partitions = context.partitions()
        for tp in partitions:
            await self._fresh_state(context, tp)
        chosen = election.imbalanced_partitions(
            {tp: context.replicas(tp) for tp in partitions},
            {tp: state.leader for tp, state in context.states.items()},
            {tp: state.isr for tp, state in context.states.items()},
            set(context.live_brokers),
            self.rebalance.max_imbalance_percentage,
        )
        if chosen:
            log.info("leader imbalance: giving %d partitions back to their preferred leaders",
                     len(chosen))  # fmt: skip
            await self._elect_each(context, [tp for tp in partitions if tp in chosen], False)

    # -- partition reassignments (AlterPartitionReassignments, KIP-455) -----------------

    async def alter_reassignments(
        self, targets: dict[TopicPartition, tuple[int, ...] | None]
    ) -> Results | None:
        """Move each partition to its target replicas (None: cancel its move); each
        partition's error code and message, or None when this broker is not the controller."""
        if self.context is None:
            return None
        result: asyncio.Future[Results | None] = asyncio.get_running_loop().create_future()
        self.admin.reassign_requests.append(_ReassignRequest(targets, result))
        self._enqueue(Event.REASSIGN)
        return await result

    def list_reassignments(
        self, partitions: list[TopicPartition] | None
    ) -> dict[TopicPartition, Reassignment] | None:
        """The moves under way (of ``partitions``, or all); None when not the controller."""
        if self.context is None:
            return None
        moves = self.admin.reassignments
        if partitions is None:
            return dict(moves)
        return {tp: moves[tp] for tp in partitions if tp in moves}

    async def _run_reassignments(self) -> None:
        request = self.admin.reassign_requests.popleft()
        context = self.context
        if context is None:
            request.result.set_result(None)
            return
        outcome: Results = {}
        try:
            for tp, target in request.targets.items():
                try:
                    await self._reassign_one(context, tp, target)
                    outcome[tp] = (ErrorCode.NONE, None)
                except KafkaError as exc:
                    outcome[tp] = (exc.code, str(exc))
        except ControllerMovedError:
            request.result.set_result(None)
            raise
        except Exception as exc:
            request.result.set_exception(exc)
            return
        request.result.set_result(outcome)

    async def _reassign_one(
        self, context: ControllerContext, tp: TopicPartition, target: tuple[int, ...] | None
    ) -> None:
        from samsa.errors import NoReassignmentInProgressError, UnknownTopicOrPartitionError

        if tp.topic not in context.topics or tp not in context.states:
            raise UnknownTopicOrPartitionError(f"{tp} does not exist")
        ongoing = self.admin.reassignments.get(tp)
        if target is None:
            if ongoing is None:
                raise NoReassignmentInProgressError(f"{tp} is not being reassigned")
            await self._finish(context, tp, ongoing, ongoing.original, "cancelled")
            return
        target = reassignment.check_target(target, context.live_brokers)
        original = ongoing.original if ongoing is not None else context.replicas(tp)
        move = Reassignment(tuple(original), target)
        if not move.adding and not move.removing:
            # The same replicas: nothing to copy. In another order (another preferred
            # leader) the move is complete at once, as Kafka's; back to where a move
            # under way started, it is cancelled.
            if ongoing is None and target == tuple(context.replicas(tp)):
                return
            back = ongoing is not None and target == tuple(ongoing.original)
            await self._finish(context, tp, ongoing or move, target,
                               "cancelled" if back else "completed")  # fmt: skip
            return
        await self._write_assignment(context, tp, move.replicas, move.adding, move.removing)
        self.admin.reassignments[tp] = move
        log.info("%s: reassigning from %s to %s", tp, list(move.original), list(move.target))
        await self._check_progress(context, tp)

    async def _check_progress(self, context: ControllerContext, tp: TopicPartition) -> None:
        """Complete the move of ``tp`` if every target replica is in sync; else watch its
        state (the leader adds followers to the ISR as they catch up)."""
        move = self.admin.reassignments.get(tp)
        if move is None or tp.topic not in context.topics:
            return
        state = await self.zk.get_partition_state(
            tp, watch=lambda: self._enqueue(Event.REASSIGNMENT_PROGRESS, str(tp))
        )
        if state is None:
            return
        context.states[tp] = state
        if reassignment.is_complete(move, state.isr):
            await self._finish(context, tp, move, move.target, "completed")

    async def _on_reassignment_progress(self, context: ControllerContext, name: str) -> None:
        topic, _, partition = name.rpartition("-")
        await self._check_progress(context, TopicPartition(topic, int(partition)))

    async def _finish(
        self,
        context: ControllerContext,
        tp: TopicPartition,
        move: Reassignment,
        replicas: tuple[int, ...],
        how: str,
    ) -> None:
        """End a move with ``replicas`` as the partition's replicas (the target: completed;
        the original: cancelled): its state first (leader, ISR), then its assignment."""
        live = set(context.live_brokers)
        await self._fresh_state(context, tp)
        await self._change_state(
            context,
            tp,
            lambda current: reassignment.final_state(current, replicas, live, context.epoch.epoch),
        )
        await self._write_assignment(context, tp, replicas, (), ())
        self.admin.reassignments.pop(tp, None)
        log.info("%s: reassignment %s; replicas %s", tp, how, list(replicas))

    async def _write_assignment(
        self,
        context: ControllerContext,
        tp: TopicPartition,
        replicas: tuple[int, ...],
        adding: tuple[int, ...],
        removing: tuple[int, ...],
    ) -> None:
        current = context.topics[tp.topic]
        updated = TopicAssignment(
            tp.topic,
            current.topic_id,
            {**current.partitions, tp.partition: replicas},
            _set(current.adding_replicas, tp.partition, adding),
            _set(current.removing_replicas, tp.partition, removing),
        )
        op = ZkSet(zk_data.topic_path(tp.topic), zk_data.encode_topic(updated))
        await self.zk.fenced(context.epoch, [op])
        context.topics[tp.topic] = updated

    def _restore_reassignments(self, context: ControllerContext) -> list[TopicPartition]:
        """The moves a previous controller left under way (from the topics' znodes)."""
        found = []
        for topic, assignment in context.topics.items():
            for partition, adding in assignment.adding_replicas.items():
                tp = TopicPartition(topic, partition)
                self.admin.reassignments[tp] = Reassignment.from_assignment(
                    assignment.partitions.get(partition, ()),
                    adding,
                    assignment.removing_replicas.get(partition, ()),
                )
                found.append(tp)
            for partition, removing in assignment.removing_replicas.items():
                tp = TopicPartition(topic, partition)
                if tp not in self.admin.reassignments:
                    self.admin.reassignments[tp] = Reassignment.from_assignment(
                        assignment.partitions.get(partition, ()), (), removing
                    )
                    found.append(tp)
        return found


def _set(
    by_partition: Any, partition: int, replicas: tuple[int, ...]
) -> dict[int, tuple[int, ...]]:
    updated = {p: r for p, r in dict(by_partition).items() if p != partition}
    if replicas:
        updated[partition] = replicas
    return updated
