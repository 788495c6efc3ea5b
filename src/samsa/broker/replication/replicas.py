"""What a partition's leader tracks of its followers: their log ends, the ISR, the high watermark.

Kafka's rules (``Partition`` and ``Replica`` in its broker), with time given
by the caller so they are tested with a manual clock:

- a follower's fetch at ``fetch_offset`` says its log ends there. It counts as
  *caught up* at the time of a fetch that reached the leader's log end, or at
  the time of its previous fetch when this one reached the log end that the
  leader had then (it was caught up as of then);
- a follower in the ISR drops out once it has not been caught up for
  ``replica.lag.time.max.ms`` (and is not at the log end right now);
- a follower out of the ISR comes back once its log end reaches the high
  watermark and the offset at which this leader's epoch began (so it holds
  every record this leader has committed);
- the high watermark is the lowest log end over the ISR (the leader's
  included) and never goes back; a follower whose log end is unknown (it has
  not fetched since this broker became leader) holds it where it is;
- ``acks=all`` is satisfied once the high watermark passes the batch — and the
  ISR then had at least ``min.insync.replicas`` members, else the produce gets
  NOT_ENOUGH_REPLICAS_AFTER_APPEND.

ISR changes computed here are proposals: the partition's owner writes them
to ZooKeeper (conditionally) and applies them when the write succeeds.
Not thread-safe: one owner per partition.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass

UNKNOWN_OFFSET = -1


@dataclass(slots=True)
class FollowerState:
    """The leader's view of one follower (Kafka's ``Replica``)."""

    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_ms: int = 0

    def record_fetch(self, fetch_offset: int, leader_log_end_offset: int, now_ms: int) -> None:
        if fetch_offset >= leader_log_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset >= 0:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = leader_log_end_offset
        self.last_fetch_ms = now_ms


class LeaderReplicas:
    """The followers of a partition this broker leads, its ISR and its high watermark."""

    def __init__(
        self,
        local_id: int,
        replicas: Iterable[int],
        isr: Iterable[int],
        *,
        high_watermark: int,
        epoch_start_offset: int,
        now_ms: int,
    ) -> None:
        self.local_id = local_id
        self.isr: tuple[int, ...] = tuple(isr)
        self.joining: tuple[int, ...] = ()
        """Followers an ISR change being written adds: until it is answered the high
        watermark waits for them too (Kafka's "maximal ISR"), so that the ISR ZooKeeper
        holds never names a follower without every record below the high watermark —
        the controller may elect it leader the moment the write lands."""
        self.high_watermark = high_watermark
        self.epoch_start_offset = epoch_start_offset
        """The leader's log end when it became leader: the start of its epoch."""
        # Followers in the ISR are taken as caught up now: they get a full lag
        # window to fetch from the new leader before they can be dropped.
        self.followers: dict[int, FollowerState] = {
            broker: FollowerState(broker, last_caught_up_ms=now_ms if broker in self.isr else 0)
            for broker in replicas
            if broker != local_id
        }

    def set_replicas(self, replicas: Iterable[int], now_ms: int) -> None:
        """The partition's replicas changed (a reassignment): track the new followers from
        scratch, forget those no longer replicas."""
        wanted = {broker for broker in replicas if broker != self.local_id}
        for broker in set(self.followers) - wanted:
            del self.followers[broker]
        for broker in wanted - set(self.followers):
            self.followers[broker] = FollowerState(
                broker, last_caught_up_ms=now_ms if broker in self.isr else 0
            )

    def record_fetch(
        self, follower: int, fetch_offset: int, leader_log_end_offset: int, now_ms: int
    ) -> bool:
        """A follower fetched at ``fetch_offset``; returns whether the high watermark moved."""
        state = self.followers.get(follower)
        if state is None:
            return False  # not a replica of this partition (the assignment moved on)
        state.record_fetch(fetch_offset, leader_log_end_offset, now_ms)
        return self.maybe_increment_high_watermark(leader_log_end_offset)

    def maybe_increment_high_watermark(self, leader_log_end_offset: int) -> bool:
        """Move the high watermark to the lowest log end over the ISR and the followers
        joining it, if that is higher."""
        lowest = leader_log_end_offset
        for broker in (*self.isr, *self.joining) if self.joining else self.isr:
            if broker == self.local_id:
                continue
            state = self.followers.get(broker)
            if state is None or state.log_end_offset == UNKNOWN_OFFSET:
                return False
            lowest = min(lowest, state.log_end_offset)
        if lowest > self.high_watermark:
            self.high_watermark = lowest
            return True
        return False

    def isr_to_expand(self, barred: Container[int] = ()) -> tuple[int, ...] | None:
        """The ISR with every follower that has caught up added, but none of ``barred``
        (brokers not registered, or in a controlled shutdown: a stopped follower's last
        fetch must not bring it back); None if none has."""
        joining = [
            broker
            for broker, state in sorted(self.followers.items())
            if broker not in self.isr
            and broker not in barred
            and state.log_end_offset >= self.high_watermark
            and state.log_end_offset >= self.epoch_start_offset
        ]
        return (*self.isr, *joining) if joining else None

    def isr_to_shrink(
        self, leader_log_end_offset: int, now_ms: int, max_lag_ms: int
    ) -> tuple[int, ...] | None:
        """The ISR without the followers that lagged over ``max_lag_ms``; None if none did."""
        lagging = {
            broker
            for broker in self.isr
            if broker in self.followers
            and self.followers[broker].log_end_offset != leader_log_end_offset
            and now_ms - self.followers[broker].last_caught_up_ms > max_lag_ms
        }
        if not lagging:
            return None
        return tuple(broker for broker in self.isr if broker not in lagging)

    def apply_isr(self, isr: Iterable[int], leader_log_end_offset: int) -> bool:
        """Take a new ISR (written to ZooKeeper); returns whether the high watermark moved.

        A shrunk ISR can let the high watermark move on: the member holding it
        back is gone.
        """
        self.isr = tuple(isr)
        return self.maybe_increment_high_watermark(leader_log_end_offset)

    def reached(self, required_offset: int) -> bool:
        """Whether every ISR member holds the records below ``required_offset`` (acks=all)."""
        return self.high_watermark >= required_offset
