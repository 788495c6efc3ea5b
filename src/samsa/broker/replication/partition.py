"""One partition on this broker: its log and its part in replication (Kafka's ``Partition``).

A partition is *leader* here or *follower* of another broker, as the newest
state it was given says (a leader epoch only moves forward; an older state is
ignored):

- as **leader** it takes appends, tracks its followers' log ends
  (:class:`~samsa.broker.replication.replicas.LeaderReplicas`), moves the high watermark to
  the lowest log end over the ISR, and completes the ``acks=all`` appends
  waiting for it (Kafka's ``DelayedProduce``) — or fails them when leadership
  moves on. Becoming leader records the new epoch at the log end (Kafka's
  ``maybeAssignEpochStartOffset``), so followers can ask where it began;
- as **follower** it takes the leader's batches unchanged and keeps the high
  watermark the leader reports (never past its own log end).

A single node is a cluster of one: the partition leads with itself as its
only replica and ISR, so the high watermark follows every append at once.

Not thread-safe: one owner (the replica manager, on the broker's loop).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass

from samsa.broker.metrics.stats import TopicStats
from samsa.broker.replication.replicas import LeaderReplicas
from samsa.errors import (
    ErrorCode,
    FencedLeaderEpochError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
)
from samsa.storage import AppendInfo, Log
from samsa.storage.validator import AppendOrigin
from samsa.types import TopicPartition

NO_LEADER = -1
NO_EPOCH = -1


def now_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass(frozen=True, slots=True)
class LeaderAndIsrState:
    """A partition's leadership as the controller (or a single node) decided it."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    zk_version: int = -1
    """The version of the state znode it was read from (a leader's ISR write is
    conditional on it); -1 on a single node."""


class Partition:
    """A partition's log, its leadership, and the waits that depend on them."""

    def __init__(
        self,
        tp: TopicPartition,
        log: Log,
        local_id: int,
        stats: TopicStats | None = None,
        *,
        on_change: Callable[[Partition], None] | None = None,
    ) -> None:
        self.tp = tp
        self.log = log
        self.local_id = local_id
        self.stats = TopicStats() if stats is None else stats
        """Its topic's counters (shared by the topic's partitions): appends count here."""
        self.leader_id = NO_LEADER
        self.leader_epoch = NO_EPOCH
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.zk_version = -1
        self.leader_replicas: LeaderReplicas | None = None
        self.isr_change_in_flight = False
        """An ISR write of this leader is on its way to ZooKeeper (one at a time)."""
        self.on_change = on_change
        """Told of every change a fetch could see (:meth:`note_change`): the replica
        manager wakes the delayed fetches and fetch sessions watching the partition."""
        self._acks: list[tuple[int, int, asyncio.Future[None]]] = []
        """``acks=all`` appends waiting for the high watermark to reach an offset: a heap
        of ``(offset, arrival, future)``, so a high watermark move costs what it completes,
        not what still waits (thousands of appends wait when followers fall behind)."""
        self._arrivals = itertools.count()
        self.storage_error_logged_at: float | None = None
        self.storage_errors_not_logged = 0

    def __repr__(self) -> str:
        role = "leader" if self.is_leader else f"follower of {self.leader_id}"
        return f"Partition({self.tp}, {role}, epoch {self.leader_epoch}, isr {list(self.isr)})"

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_id and self.leader_replicas is not None

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    # -- leadership changes -------------------------------------------------------------
    def make_leader(self, state: LeaderAndIsrState, now: int | None = None) -> bool:
        """Lead from ``state`` on; False if it is older than what this partition has.

        A newer state with this broker still leading in the same epoch only
        updates the ISR (a leader's own ISR change, read back).
        """
        if state.leader_epoch < self.leader_epoch:
            return False
        if state.leader_epoch == self.leader_epoch and self.is_leader:
            self._take_isr(state)
            return True
        self.leader_id = self.local_id
        self.leader_epoch = state.leader_epoch
        self.replicas = state.replicas
        self.isr = state.isr
        self.zk_version = state.zk_version
        self.isr_change_in_flight = False
        log = self.log
        if state.leader_epoch > log.latest_epoch:
            log.leader_epoch_cache.assign(state.leader_epoch, log.log_end_offset)
        self.leader_replicas = LeaderReplicas(
            self.local_id,
            state.replicas,
            state.isr,
            high_watermark=log.high_watermark,
            epoch_start_offset=log.log_end_offset,
            now_ms=now_ms() if now is None else now,
        )
        self._high_watermark_moved()
        self.note_change()
        return True

    def make_follower(self, state: LeaderAndIsrState) -> bool:
        """Follow ``state.leader`` from ``state`` on; False if ``state`` is older or changes
        neither the leader nor its epoch (the fetching goes on as it is)."""
        if state.leader_epoch < self.leader_epoch:
            return False
        changed = state.leader_epoch != self.leader_epoch or state.leader != self.leader_id
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.replicas = state.replicas
        self.isr = state.isr
        self.zk_version = state.zk_version
        if self.leader_replicas is not None:
            self.leader_replicas = None
            self.isr_change_in_flight = False
            self._fail_acks(NotLeaderOrFollowerError(f"{self.tp} is no longer led here"))
        self.note_change()
        return changed

    def stop(self) -> None:
        """This broker no longer serves the partition (deleted, moved away, shutting down)."""
        self.leader_replicas = None
        self.leader_id = NO_LEADER
        self._fail_acks(NotLeaderOrFollowerError(f"{self.tp} is no longer served here"))
        self.note_change()

    def _take_isr(self, state: LeaderAndIsrState) -> None:
        self.isr = state.isr
        if state.replicas != self.replicas and self.leader_replicas is not None:
            self.leader_replicas.set_replicas(state.replicas, now_ms())
        self.replicas = state.replicas
        self.zk_version = state.zk_version
        lr = self.leader_replicas
        if (
            lr is not None
            and lr.isr != state.isr
            and lr.apply_isr(state.isr, self.log.log_end_offset)
        ):
            self._high_watermark_moved()

    def begin_isr_change(self, isr: tuple[int, ...]) -> None:
        """This leader is writing ``isr`` to ZooKeeper: no other change until it is
        answered, and the high watermark waits for the followers it adds meanwhile."""
        self.isr_change_in_flight = True
        lr = self.leader_replicas
        if lr is not None:
            lr.joining = tuple(broker for broker in isr if broker not in lr.isr)

    def end_isr_change(self) -> None:
        """The write :meth:`begin_isr_change` started was answered (and applied, if it
        succeeded): the high watermark follows the ISR alone again."""
        self.isr_change_in_flight = False
        lr = self.leader_replicas
        if lr is not None and lr.joining:
            lr.joining = ()
            if lr.maybe_increment_high_watermark(self.log.log_end_offset):
                self._high_watermark_moved()

    def apply_isr(self, isr: Iterable[int], zk_version: int) -> None:
        """A new ISR this leader wrote to ZooKeeper (at ``zk_version``)."""
        self._take_isr(
            LeaderAndIsrState(
                self.leader_id, self.leader_epoch, tuple(isr), self.replicas, zk_version
            )
        )

    # -- checks ---------------------------------------------------------------------------
    def check_leader(self, current_leader_epoch: int = NO_EPOCH) -> None:
        """Raise unless this broker leads the partition in ``current_leader_epoch`` (-1: any).

        Kafka's fencing (KIP-320): a client with an older epoch gets FENCED_LEADER_EPOCH,
        one with a newer epoch than this broker knows UNKNOWN_LEADER_EPOCH.
        """
        if current_leader_epoch >= 0:
            if current_leader_epoch < self.leader_epoch:
                raise FencedLeaderEpochError(
                    f"{self.tp}: epoch {current_leader_epoch} is older than {self.leader_epoch}"
                )
            if current_leader_epoch > self.leader_epoch:
                raise UnknownLeaderEpochError(
                    f"{self.tp}: epoch {current_leader_epoch} is newer than {self.leader_epoch}"
                )
        if not self.is_leader:
            raise NotLeaderOrFollowerError(
                f"this broker ({self.local_id}) is not the leader of {self.tp}"
                + (f" (broker {self.leader_id} is)" if self.leader_id >= 0 else "")
            )

    def check_min_insync(self) -> None:
        min_insync = self.log.config.min_insync_replicas
        if len(self.isr) < min_insync:
            raise NotEnoughReplicasError(
                f"{self.tp} has {len(self.isr)} in-sync replica(s) ({list(self.isr)}); "
                f"min.insync.replicas is {min_insync}"
            )

    # -- leader: appends and the high watermark -------------------------------------------
    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        *,
        required_acks: int,
        origin: AppendOrigin,
    ) -> AppendInfo:
        """Append as leader (the storage errors of :meth:`Log.append_as_leader` pass through)."""
        self.check_leader()
        if required_acks == -1:
            self.check_min_insync()
        info = self.log.append_as_leader(records, leader_epoch=self.leader_epoch, origin=origin)
        self.stats.messages_in += info.record_count
        self.stats.bytes_in += info.valid_bytes
        self.after_leader_append()
        return info

    def append_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        *,
        transaction_version: int,
    ) -> AppendInfo:
        self.check_leader()
        self.check_min_insync()
        info = self.log.append_marker(
            producer_id,
            producer_epoch,
            commit,
            coordinator_epoch,
            leader_epoch=self.leader_epoch,
            transaction_version=transaction_version,
        )
        self.after_leader_append()
        return info

    def after_leader_append(self) -> None:
        lr = self.leader_replicas
        if lr is not None and lr.maybe_increment_high_watermark(self.log.log_end_offset):
            self._high_watermark_moved()  # tells of the change
        else:
            self.note_change()

    def record_follower_fetch(self, follower: int, fetch_offset: int, now: int) -> None:
        """A follower fetched at ``fetch_offset`` (its log end): the high watermark may move."""
        lr = self.leader_replicas
        if lr is None:
            return
        if lr.record_fetch(follower, fetch_offset, self.log.log_end_offset, now):
            self._high_watermark_moved()

    def _high_watermark_moved(self) -> None:
        lr = self.leader_replicas
        if lr is None:
            return
        hw = self.log.update_high_watermark(lr.high_watermark)
        acks = self._acks
        while acks and acks[0][0] <= hw:
            future = heapq.heappop(acks)[2]
            if not future.done():  # done: timed out, or its request went away
                future.set_result(None)
        self.note_change()

    async def wait_for_acks(self, required_offset: int, timeout_s: float) -> ErrorCode:
        """Wait until the high watermark reaches ``required_offset`` (every ISR member holds
        the records below it): NONE, NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank
        below ``min.insync.replicas`` meanwhile, REQUEST_TIMED_OUT after ``timeout_s``, or
        NOT_LEADER_OR_FOLLOWER if leadership moved on first."""
        done = self.acks_done(required_offset)
        if done is not None:
            return done
        if self.log.high_watermark < required_offset:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            heapq.heappush(self._acks, (required_offset, next(self._arrivals), future))
            try:
                await asyncio.wait_for(future, timeout_s)
            except TimeoutError:
                return ErrorCode.REQUEST_TIMED_OUT
            except NotLeaderOrFollowerError:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if len(self.isr) < self.log.config.min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    def acks_done(self, required_offset: int) -> ErrorCode | None:
        """What :meth:`wait_for_acks` would answer at once, or None if it would wait (the
        high watermark is below ``required_offset``): an append the ISR already holds —
        always, on a partition with no other replica in its ISR — needs no waiting."""
        if self.log.high_watermark < required_offset:
            return None
        if len(self.isr) < self.log.config.min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    def _fail_acks(self, error: Exception) -> None:
        for _, _, future in self._acks:
            if not future.done():
                future.set_exception(error)
        self._acks = []

    # -- leader: the ISR ------------------------------------------------------------------
    def isr_to_expand(self, barred: Container[int] = ()) -> tuple[int, ...] | None:
        lr = self.leader_replicas
        if lr is None or self.isr_change_in_flight:
            return None
        return lr.isr_to_expand(barred)

    def isr_to_shrink(self, now: int, max_lag_ms: int) -> tuple[int, ...] | None:
        lr = self.leader_replicas
        if lr is None or self.isr_change_in_flight:
            return None
        return lr.isr_to_shrink(self.log.log_end_offset, now, max_lag_ms)

    # -- follower -------------------------------------------------------------------------
    def append_as_follower(
        self, records: bytes | bytearray | memoryview, leader_high_watermark: int
    ) -> AppendInfo | None:
        """Append the leader's batches (offsets as it assigned them) and take its high
        watermark, capped at this log's end; None when there were no batches."""
        info = self.log.append_as_follower(records) if len(records) else None
        self.stats.replication_bytes_in += len(records)
        self.log.update_high_watermark(min(leader_high_watermark, self.log.log_end_offset))
        return info

    # -- waiting fetches ------------------------------------------------------------------
    def note_change(self) -> None:
        """Something a fetch could see changed (an append, the high watermark, the
        leadership, the log start): tell whoever waits on it."""
        on_change = self.on_change
        if on_change is not None:
            on_change(self)
