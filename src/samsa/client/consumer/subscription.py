"""What a consumer reads: its subscription or assignment, and each partition's position.

Java's ``SubscriptionState``. A consumer either *subscribes* (to topics or a
pattern; the group assigns the partitions) or *assigns* partitions itself; the
two cannot mix. Every assigned partition has a :class:`PartitionState`: the
position (next offset to fetch and return), a pending reset (``earliest`` /
``latest`` after ``seek_to_*`` or when no committed offset exists), whether the
user paused it, and the watermarks from the last fetch.

``epoch`` counts changes that invalidate fetched-but-unreturned records (a
seek, a new assignment): the fetcher stamps each fetch with the position it
asked for and drops what no longer matches.

Owned by one event loop; not thread-safe.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Collection, Iterable

from samsa.client.consumer.types import RebalanceListener
from samsa.client.errors import IllegalStateError
from samsa.types import TopicPartition

__all__ = ["PartitionState", "SubscriptionMode", "SubscriptionState"]


class SubscriptionMode(enum.Enum):
    NONE = "none"
    TOPICS = "topics"
    PATTERN = "pattern"
    ASSIGNED = "assigned"


class PartitionState:
    """One assigned partition (see the module docstring)."""

    __slots__ = (
        "high_watermark",
        "last_stable_offset",
        "leader_epoch",
        "log_start_offset",
        "paused",
        "position",
        "reset",
    )

    def __init__(self) -> None:
        self.position: int | None = None
        self.leader_epoch = -1
        self.reset: str | None = None
        """``earliest`` or ``latest`` when the position is to be looked up (None: from the
        committed offset, then ``auto.offset.reset``)."""
        self.paused = False
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1

    @property
    def fetchable(self) -> bool:
        return self.position is not None and not self.paused


class SubscriptionState:
    """The consumer's subscription, assignment and positions."""

    def __init__(self, default_reset: str) -> None:
        self.default_reset = default_reset
        self.mode = SubscriptionMode.NONE
        self.topics: frozenset[str] = frozenset()
        """Subscribed topics (for a pattern: the topics it matched last)."""
        self.pattern: re.Pattern[str] | None = None
        self.listener: RebalanceListener | None = None
        self.assignment: dict[TopicPartition, PartitionState] = {}
        self.epoch = 0

    # -- subscription ----------------------------------------------------------------------

    def _set_mode(self, mode: SubscriptionMode) -> None:
        if self.mode not in (SubscriptionMode.NONE, mode):
            raise IllegalStateError(
                "subscribe() and assign() cannot be mixed: call unsubscribe() first"
            )
        self.mode = mode

    def subscribe(self, topics: Iterable[str], listener: RebalanceListener | None) -> bool:
        """Subscribe to ``topics``; True if the set changed."""
        topics = frozenset(topics)
        for topic in topics:
            if not isinstance(topic, str) or not topic.strip():
                raise ValueError(f"topic names must be non-empty strings, not {topic!r}")
        if not topics:
            self.unsubscribe()
            return True
        self._set_mode(SubscriptionMode.TOPICS)
        self.listener = listener
        changed = topics != self.topics
        self.topics = topics
        return changed

    def subscribe_pattern(
        self, pattern: re.Pattern[str], listener: RebalanceListener | None
    ) -> None:
        self._set_mode(SubscriptionMode.PATTERN)
        self.listener = listener
        self.pattern = pattern
        self.topics = frozenset()

    def match_pattern(self, topics: Iterable[str]) -> bool:
        """Set the subscribed topics to those of ``topics`` the pattern matches; True if
        that changed them."""
        assert self.pattern is not None
        matched = frozenset(t for t in topics if self.pattern.fullmatch(t))
        changed = matched != self.topics
        self.topics = matched
        return changed

    def unsubscribe(self) -> None:
        self.mode = SubscriptionMode.NONE
        self.topics = frozenset()
        self.pattern = None
        self.listener = None
        self._replace_assignment(())

    @property
    def auto_assigned(self) -> bool:
        """The group assigns the partitions (subscribe by topics or pattern)."""
        return self.mode in (SubscriptionMode.TOPICS, SubscriptionMode.PATTERN)

    # -- assignment ------------------------------------------------------------------------

    def assign_from_user(self, partitions: Iterable[TopicPartition]) -> None:
        partitions = [TopicPartition(*tp) for tp in partitions]
        if not partitions:
            self.unsubscribe()
            return
        self._set_mode(SubscriptionMode.ASSIGNED)
        self.topics = frozenset(tp.topic for tp in partitions)
        self._replace_assignment(partitions)

    def assign_from_group(self, partitions: Iterable[TopicPartition]) -> None:
        """The group's assignment (positions of partitions kept are kept)."""
        if not self.auto_assigned:
            raise IllegalStateError("an assignment arrived for a consumer that is not subscribed")
        self._replace_assignment(partitions)

    def _replace_assignment(self, partitions: Iterable[TopicPartition]) -> None:
        old = self.assignment
        self.assignment = {tp: old.get(tp) or PartitionState() for tp in sorted(partitions)}
        self.epoch += 1

    def state(self, tp: TopicPartition) -> PartitionState:
        state = self.assignment.get(tp)
        if state is None:
            raise IllegalStateError(f"partition {tp} is not assigned to this consumer")
        return state

    def owned(self) -> list[TopicPartition]:
        return list(self.assignment)

    # -- positions -------------------------------------------------------------------------

    def seek(self, tp: TopicPartition, offset: int, leader_epoch: int = -1) -> None:
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(f"seek offset must be an int >= 0, not {offset!r}")
        state = self.state(tp)
        state.position = offset
        state.leader_epoch = leader_epoch
        state.reset = None
        self.epoch += 1

    def request_reset(self, partitions: Collection[TopicPartition], strategy: str) -> None:
        for tp in partitions:
            state = self.state(tp)
            state.position = None
            state.reset = strategy
        self.epoch += 1

    def missing_positions(self) -> list[TopicPartition]:
        return [tp for tp, s in self.assignment.items() if s.position is None]

    def fetchable(self) -> list[TopicPartition]:
        return [tp for tp, s in self.assignment.items() if s.fetchable]

    def positions(self) -> dict[TopicPartition, int]:
        """Positions of the partitions that have one (what a commit of "consumed" sends)."""
        return {tp: s.position for tp, s in self.assignment.items() if s.position is not None}

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.state(tp).paused = True

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.state(tp).paused = False

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, s in self.assignment.items() if s.paused}
