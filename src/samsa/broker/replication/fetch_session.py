"""Incremental fetch sessions (KIP-227): the partitions a fetcher reads, remembered here.

A consumer of thousands of partitions need not send them all in every Fetch
nor receive them all back: it asks for a session with a full fetch
(``session_id`` 0, ``session_epoch`` 0), and then sends only what changed.

The rules, as Kafka's ``FetchSession``/``FetchSessionCache``:

- ``session_id`` 0, epoch 0: a full fetch that wants a session. The broker
  creates one (a random non-zero int32 id), answers its id and every
  partition. When the cache has no slot to give, the fetch is answered with
  session id 0: a sessionless full fetch.
- ``session_id`` 0, epoch -1 (``FINAL_EPOCH``): a sessionless full fetch.
  A non-zero id with epoch 0 or -1 first closes that session.
- ``session_id`` S, epoch N > 0: an incremental fetch. N must be the session's
  next epoch (INVALID_FETCH_SESSION_EPOCH otherwise; an unknown S is
  FETCH_SESSION_ID_NOT_FOUND; a session made with topic names asked with
  topic ids or the reverse is FETCH_SESSION_TOPIC_ID_ERROR). The request's
  partitions are added to the session or update its cached fetch offset and
  limits; ``forgotten_topics_data`` leave it. The response lists only the
  partitions with records, an error, or a high watermark, last stable offset
  or log start offset other than last answered. Partitions that got records
  move to the end of the session's order, so every partition gets its turn
  under ``max_bytes``.
- The epoch after ``2**31 - 1`` is 1.

The cache holds at most ``max.incremental.fetch.session.cache.slots``
sessions. A new session takes a free slot; when none is left it may evict
the least recently used session if that was idle longer than
:data:`EVICTION_MS`, or else the lowest-priority session — a consumer's
rather than a follower's (followers are privileged), then the one with
fewest partitions — when the newcomer outranks it (privileged, or more
partitions). Otherwise no session is made.

Each cached partition keeps what was last answered for it, and a consumer's
session is told when its partitions change (an append, a high watermark move,
a leadership change, DeleteRecords: ``Partition.note_change`` reaches
:meth:`FetchManager.partition_changed
<samsa.broker.replication.fetch_manager.FetchManager.partition_changed>`).
So an incremental fetch looks only at the
partitions that changed, that the client named, that answered an error or
still have data below the high watermark — work in proportion to those, not
to the session's size; and reads a log only when what it would answer moved.
Every :data:`SWEEP_MS` a fetch looks at every partition of its session once,
which catches what no partition reports (a log start moved by retention).
A follower's session is read whole on every fetch, as Kafka does: each read
tells the leader the follower is still caught up.

These are the sessions' data; one owner changes them:
:class:`~samsa.broker.replication.fetch_manager.FetchManager`, which the Fetch handler
asks. Not thread-safe: used on the broker's loop.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from samsa.types import TopicPartition

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INVALID_SESSION_ID = 0
EVICTION_MS = 120_000
"""A session idle this long may be evicted by any new one (Kafka's ``evictionMs``)."""
DEFAULT_SLOTS = 1000
SWEEP_MS = 10_000
"""How often a consumer's incremental fetch looks at every partition of its session."""
INT32_MAX = 2**31 - 1

PartitionKey = tuple[str | uuid.UUID | None, int]
"""A session's partitions are keyed by topic id (v13+) or topic name, and index."""


def next_epoch(epoch: int) -> int:
    """The epoch expected after ``epoch`` (wraps to 1, never back to 0)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == INT32_MAX else epoch + 1


@dataclass(slots=True)
class CachedPartition:
    """One partition of a fetch: what the fetcher asked, and what it was last answered."""

    topic: str | None
    """None: a topic id no topic has (answered UNKNOWN_TOPIC_ID)."""
    topic_id: uuid.UUID | None
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    served_leader_epoch: int = -2
    """The partition's leader epoch when it was last read (-2: never read)."""
    last_error: int = 0
    pending: bool = True
    """The client added or changed it since it was last read: read it."""
    tp: TopicPartition | None = None
    watched: object | None = None
    """The ``Partition`` whose changes the session is told of (None: none yet); a new
    partition object for the same topic partition (deleted and made again) is read."""
    order: int = 0
    """Its place in the session's order (larger: later)."""

    def __post_init__(self) -> None:
        if self.topic is not None:
            self.tp = TopicPartition(self.topic, self.partition)


@dataclass(slots=True, eq=False)
class FetchSession:
    """A fetcher's partitions and the epoch its next incremental fetch must carry."""

    id: int
    privileged: bool
    uses_topic_ids: bool
    partitions: OrderedDict[PartitionKey, CachedPartition] = field(default_factory=OrderedDict)
    epoch: int = 1
    last_used_ms: int = 0
    attention: set[PartitionKey] = field(default_factory=set)
    """Partitions to look at in the next fetch (changed, named, errored or owed data)."""
    last_sweep_ms: int = 0
    _next_order: int = 0

    def add(self, key: PartitionKey, p: CachedPartition) -> None:
        self.partitions[key] = p
        self.to_end(key)
        self.attention.add(key)

    def to_end(self, key: PartitionKey) -> None:
        """Move ``key`` to the end of the session's order."""
        if key not in self.partitions:
            return
        self.partitions.move_to_end(key)
        self.partitions[key].order = self._next_order
        self._next_order += 1

    def forget(self, key: PartitionKey) -> CachedPartition | None:
        self.attention.discard(key)
        return self.partitions.pop(key, None)

    def mark(self, key: PartitionKey) -> None:
        """A partition of the session changed: look at it in the next fetch."""
        self.attention.add(key)

    def take_attention(self, now_ms: int | None = None) -> set[PartitionKey]:
        """The partitions to look at now (all of them once per :data:`SWEEP_MS`)."""
        now = _now_ms() if now_ms is None else now_ms
        if now - self.last_sweep_ms >= SWEEP_MS:
            self.last_sweep_ms = now
            self.attention.clear()
            return set(self.partitions)
        taken, self.attention = self.attention, set()
        return taken

    def in_order(self, keys: Iterable[PartitionKey]) -> list[CachedPartition]:
        """The cached partitions of ``keys`` (those still in the session), in its order."""
        found = [p for k in keys if (p := self.partitions.get(k)) is not None]
        if len(found) * 4 >= len(self.partitions):
            wanted = {id(p) for p in found}
            return [p for p in self.partitions.values() if id(p) in wanted]
        found.sort(key=lambda p: p.order)
        return found


class FetchSessionCache:
    """The broker's fetch sessions, bounded by ``max_slots``, least recently used first."""

    def __init__(
        self,
        max_slots: int = DEFAULT_SLOTS,
        eviction_ms: int = EVICTION_MS,
        *,
        on_remove: Callable[[FetchSession], None] | None = None,
    ) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self.on_remove = on_remove
        """Called with each session removed (closed or evicted)."""
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self.evictions = 0
        self.sessions_created = 0
        self.incremental_fetches = 0
        """Incremental fetches accepted (a session found at its expected epoch)."""

    def __len__(self) -> int:
        return len(self._sessions)

    @property
    def partitions_cached(self) -> int:
        return sum(len(s.partitions) for s in self._sessions.values())

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def touch(self, session: FetchSession, now_ms: int | None = None) -> None:
        session.last_used_ms = _now_ms() if now_ms is None else now_ms
        self._sessions.move_to_end(session.id)

    def remove(self, session_id: int) -> FetchSession | None:
        session = self._sessions.pop(session_id, None)
        if session is not None and self.on_remove is not None:
            self.on_remove(session)
        return session

    def create(
        self,
        partitions: list[CachedPartition],
        *,
        privileged: bool,
        uses_topic_ids: bool,
        now_ms: int | None = None,
    ) -> FetchSession | None:
        """A new session of ``partitions``, or None when no slot can be had for it."""
        now = _now_ms() if now_ms is None else now_ms
        if self.max_slots <= 0:
            return None
        if len(self._sessions) >= self.max_slots and not self._evict_for(
            privileged, len(partitions), now
        ):
            return None
        session_id = self._new_id()
        session = FetchSession(
            session_id, privileged, uses_topic_ids, last_used_ms=now, last_sweep_ms=now
        )
        for p in partitions:
            session.add(key_of(p, uses_topic_ids), p)
        session.attention.clear()
        self._sessions[session_id] = session
        self.sessions_created += 1
        return session

    def _evict_for(self, privileged: bool, size: int, now: int) -> bool:
        oldest = next(iter(self._sessions.values()))
        if now - oldest.last_used_ms > self.eviction_ms:
            victim = oldest
        else:
            victim = min(self._sessions.values(), key=lambda s: (s.privileged, len(s.partitions)))
            outranks = (privileged and not victim.privileged) or (
                privileged == victim.privileged and size > len(victim.partitions)
            )
            if not outranks:
                return False
        self.remove(victim.id)
        self.evictions += 1
        return True

    def _new_id(self) -> int:
        while True:
            session_id = random.randint(1, INT32_MAX)
            if session_id not in self._sessions:
                return session_id


def key_of(p: CachedPartition, uses_topic_ids: bool) -> PartitionKey:
    return (p.topic_id if uses_topic_ids else p.topic, p.partition)


def _now_ms() -> int:
    return int(time.monotonic() * 1000)
