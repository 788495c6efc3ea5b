"""The one owner of incremental fetch sessions (Kafka's ``FetchManager`` and ``FetchContext``).

The Fetch handler asks :meth:`FetchManager.new_context` for a request's
:class:`FetchContext` and goes through it for everything a session decides:
which partitions to read (:meth:`FetchContext.to_read`), which of those read to
answer (:meth:`FetchContext.answers`), the session id to answer
(:meth:`FetchContext.session_id`), and what to remember once the response goes out
(:meth:`FetchContext.complete`) or is withheld by a quota
(:meth:`FetchContext.withhold`). Nothing else writes a session, its cache
(:class:`~samsa.broker.replication.fetch_session.FetchSessionCache`, Kafka's
``FetchSessionCache``) or the record of which session watches which partition. The
rules (KIP-227: epochs, FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH,
FETCH_SESSION_TOPIC_ID_ERROR, the cache's slots and evictions) are written down in
:mod:`samsa.broker.replication.fetch_session`.

Kafka's ``FullFetchContext``, ``IncrementalFetchContext``, ``SessionErrorContext`` and
``SessionlessFetchContext`` are one class here, told apart by :attr:`FetchContext.error`,
:attr:`FetchContext.incremental` and whether it made or found a session.

A partition's change (``Partition.note_change``: an append, a high watermark move, a
leadership change, DeleteRecords) reaches :meth:`FetchManager.partition_changed`, which
marks it in each consumer session watching it and wakes that session's delayed fetch
(:mod:`samsa.broker.replication.delayed_fetch`), so a consumer's incremental fetch reads
only the partitions that moved.

Not thread-safe: owned by the replica manager, used on the broker's loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING

from samsa.broker.replication.fetch_session import (
    DEFAULT_SLOTS,
    EVICTION_MS,
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    CachedPartition,
    FetchSession,
    FetchSessionCache,
    PartitionKey,
    key_of,
    next_epoch,
)
from samsa.errors import ErrorCode
from samsa.protocol.fetch_response import TOPIC_IDS_FROM, FetchPartition
from samsa.storage.segment import FileRegion
from samsa.types import TopicPartition

if TYPE_CHECKING:
    from samsa.broker.replication.partition import Partition

log = logging.getLogger(__name__)

SESSIONS_FROM = 7
"""The first Fetch version with session fields."""
Read = tuple[CachedPartition, FetchPartition, int]
"""A partition read, what it answers, and the partition's leader epoch then (-2 on error)."""


class FetchManager:
    """Creates, updates, evicts and closes fetch sessions (Kafka's ``FetchManager``)."""

    def __init__(
        self,
        partition_of: Callable[[TopicPartition], Partition | None],
        *,
        wake: Callable[[Hashable], None] | None = None,
        max_slots: int = DEFAULT_SLOTS,
        eviction_ms: int = EVICTION_MS,
    ) -> None:
        self._partition_of = partition_of
        self._wake = wake
        """Wakes the delayed fetch waiting on a session (its key in the purgatory)."""
        self.cache = FetchSessionCache(max_slots, eviction_ms, on_remove=self._removed)
        self._watchers: dict[TopicPartition, dict[FetchSession, PartitionKey]] = {}
        """The consumer sessions told of each partition's changes, with their key for it."""

    def set_cache_slots(self, max_slots: int) -> None:
        """``max.incremental.fetch.session.cache.slots``: sessions beyond it are not made."""
        self.cache.max_slots = max_slots

    def new_context(
        self,
        *,
        version: int,
        session_id: int,
        session_epoch: int,
        follower: bool,
        read_committed: bool,
        partitions: list[CachedPartition],
        forgotten: Iterable[PartitionKey] = (),
        now_ms: int | None = None,
    ) -> FetchContext:
        """The context of one Fetch: ``partitions`` as the request names them (in its
        order), ``forgotten`` the partitions an incremental fetch drops from its session.

        A full fetch (epoch 0 or -1) first closes the session it names; an incremental
        one must find its session at its next epoch, or gets a context with an error.
        """
        uses_ids = version >= TOPIC_IDS_FROM
        if session_epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.cache.remove(session_id)
            wanted: list[CachedPartition] = []
            seen: set[tuple[str | None, int]] = set()
            for c in partitions:
                if (c.topic, c.partition) not in seen:  # a partition named twice is read once
                    seen.add((c.topic, c.partition))
                    wanted.append(c)
            wants_session = session_epoch == INITIAL_EPOCH and version >= SESSIONS_FROM
            return FetchContext(
                self, wanted, None, follower=follower, read_committed=read_committed,
                uses_topic_ids=uses_ids, wants_session=wants_session,
            )  # fmt: skip
        session = self.cache.get(session_id)
        if session is None:
            return FetchContext.failed(self, ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != session_epoch:
            return FetchContext.failed(self, ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_ids:
            return FetchContext.failed(self, ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        self._update(session, partitions, forgotten)
        session.epoch = next_epoch(session_epoch)
        self.cache.touch(session, now_ms)
        self.cache.incremental_fetches += 1
        return FetchContext(
            self, None, session, follower=follower, read_committed=read_committed,
            uses_topic_ids=uses_ids, wants_session=False,
        )  # fmt: skip

    def _update(
        self,
        session: FetchSession,
        partitions: list[CachedPartition],
        forgotten: Iterable[PartitionKey],
    ) -> None:
        """Apply an incremental request: forget, then add or update its partitions."""
        for key in forgotten:
            gone = session.forget(key)
            if gone is not None:
                self._unwatch(session, gone)
        ids = session.uses_topic_ids
        for c in partitions:
            key = key_of(c, ids)
            cached = session.partitions.get(key)
            if cached is None:
                session.add(key, c)
                continue
            cached.fetch_offset = c.fetch_offset
            cached.max_bytes = c.max_bytes
            cached.current_leader_epoch = c.current_leader_epoch
            cached.pending = True
            session.mark(key)

    # -- the partitions' changes ---------------------------------------------------------
    def partition_changed(self, partition: Partition) -> None:
        """``partition`` changed in a way a fetch could see: the consumer sessions holding
        it look at it in their next fetch, and their delayed fetches wake."""
        watchers = self._watchers.get(partition.tp)
        if not watchers:
            return
        wake = self._wake
        for session, key in watchers.items():
            session.mark(key)
            if wake is not None:
                wake(session)

    def _watch(
        self, session: FetchSession, c: CachedPartition, partition: Partition | None
    ) -> None:
        """Tell ``session`` of ``partition``'s changes for ``c`` (None: of none)."""
        if c.watched is partition:
            return
        self._unwatch(session, c)
        c.watched = partition
        if partition is not None and c.tp is not None:
            self._watchers.setdefault(c.tp, {})[session] = key_of(c, session.uses_topic_ids)

    def _unwatch(self, session: FetchSession, c: CachedPartition) -> None:
        if c.watched is None or c.tp is None:
            return
        c.watched = None
        watchers = self._watchers.get(c.tp)
        if watchers is not None:
            watchers.pop(session, None)
            if not watchers:
                del self._watchers[c.tp]

    def _removed(self, session: FetchSession) -> None:
        """A session was closed or evicted: it is told of nothing more, and a fetch waiting
        on it wakes (and remembers nothing in it)."""
        for c in session.partitions.values():
            self._unwatch(session, c)
        if self._wake is not None:
            self._wake(session)

    def unchanged(self, c: CachedPartition, read_committed: bool) -> bool:
        """Nothing to read nor answer for ``c``: a few comparisons, no read."""
        if c.pending or c.last_error or c.tp is None:
            return False
        partition = self._partition_of(c.tp)
        if partition is None or partition is not c.watched or not partition.is_leader:
            return False
        if partition.leader_epoch != c.served_leader_epoch:
            return False
        partition_log = partition.log
        hw = partition_log.high_watermark
        lso = partition_log.last_stable_offset
        if (
            hw != c.high_watermark
            or lso != c.last_stable_offset
            or partition_log.log_start_offset != c.log_start_offset
        ):
            return False
        return c.fetch_offset >= (lso if read_committed else hw)


class FetchContext:
    """One Fetch request's session: what it reads, answers and leaves cached (Kafka's
    ``FetchContext``)."""

    __slots__ = (
        "_created",
        "_follower",
        "_keys",
        "_looked",
        "_manager",
        "_read_committed",
        "_uses_topic_ids",
        "_wanted",
        "_wants_session",
        "error",
        "incremental",
        "session",
        "watching",
    )

    def __init__(
        self,
        manager: FetchManager,
        wanted: list[CachedPartition] | None,
        session: FetchSession | None,
        *,
        follower: bool,
        read_committed: bool,
        uses_topic_ids: bool,
        wants_session: bool,
        error: ErrorCode = ErrorCode.NONE,
    ) -> None:
        self._manager = manager
        self.session = session
        self.error = error
        """A session error (no partitions are read or answered), or NONE."""
        self.incremental = session is not None
        self.watching = self.incremental and not follower
        """A consumer's incremental fetch: it waits on its session, and reads again what
        the session was told of meanwhile (a follower's fetch waits on the partitions)."""
        self._follower = follower
        self._read_committed = read_committed
        self._uses_topic_ids = uses_topic_ids
        self._wants_session = wants_session
        self._created = False
        self._looked = False
        self._keys: set[PartitionKey] = set()
        if session is not None:
            if session.privileged:
                wanted = list(session.partitions.values())
            else:
                self._keys = session.take_attention()
                wanted = session.in_order(self._keys)
        assert wanted is not None
        self._wanted = wanted

    @classmethod
    def failed(cls, manager: FetchManager, error: ErrorCode) -> FetchContext:
        return cls(
            manager, [], None, follower=False, read_committed=False, uses_topic_ids=False,
            wants_session=False, error=error,
        )  # fmt: skip

    def to_read(self) -> list[CachedPartition]:
        """The partitions to read now, in order: a full fetch's, a follower's session whole,
        a consumer's session those it was told of. Called again after a consumer's fetch
        waited on its session, it adds those told of since; a consumer's incremental fetch
        leaves out those with nothing to read nor answer."""
        session = self.session
        if self._looked and self.watching:
            assert session is not None
            self._keys |= session.take_attention()
            self._wanted = session.in_order(self._keys)
        self._looked = True
        if not self.watching:
            return self._wanted
        unchanged = self._manager.unchanged
        committed = self._read_committed
        return [c for c in self._wanted if not unchanged(c, committed)]

    def wait_keys(self, read: list[CachedPartition]) -> list[Hashable]:
        """What a delayed fetch of ``read`` waits on: the session (a consumer's incremental
        fetch, told of its partitions' changes) or the partitions themselves."""
        if self.watching:
            assert self.session is not None
            return [self.session]
        return [c.tp for c in read if c.tp is not None]

    def answers(self, c: CachedPartition, entry: FetchPartition) -> bool:
        """Whether the response lists ``c`` as read: a full fetch lists every partition, an
        incremental one those with records, an error, or offsets other than last answered
        (Kafka's rules)."""
        if not self.incremental:
            return True
        records = entry.records
        return bool(
            entry.error_code
            or (
                records is not None
                and (len(records) if isinstance(records, bytes) else records.length)
            )
            or entry.high_watermark != c.high_watermark
            or entry.last_stable_offset != c.last_stable_offset
            or entry.log_start_offset != c.log_start_offset
        )

    def session_id(self) -> int:
        """The session id to answer: a full fetch that wants a session makes it now (of
        the partitions it read), or answers 0 when the cache has no slot for it."""
        if self.session is None and self._wants_session and not self._created:
            self._created = True
            self.session = self._manager.cache.create(
                self._wanted, privileged=self._follower, uses_topic_ids=self._uses_topic_ids
            )
            if self.session is not None:
                log.debug("fetch session %d created with %d partitions", self.session.id,
                          len(self._wanted))  # fmt: skip
        return INVALID_SESSION_ID if self.session is None else self.session.id

    def withhold(self) -> int:
        """The response is not sent (a quota throttles it): a session it made is closed (its
        id never reaches the client), an incremental one looks again next time at what it
        read. The session id to answer."""
        session = self.session
        if session is None:
            return INVALID_SESSION_ID
        if not self.incremental:
            self._manager.cache.remove(session.id)
            self.session = None
            return INVALID_SESSION_ID
        if self.watching:
            session.attention |= self._keys
        return session.id

    def complete(self, done: list[Read]) -> None:
        """The response goes out: the session caches what it answered for each partition
        read, is told of their changes, and looks again next time at those with an error
        or with data still to read; partitions that got records go to the end of its order."""
        session = self.session
        if session is None:
            return
        for c, entry, leader_epoch in done:
            c.served_leader_epoch = leader_epoch
            c.high_watermark = entry.high_watermark
            c.last_stable_offset = entry.last_stable_offset
            c.log_start_offset = entry.log_start_offset
            c.last_error = entry.error_code
            c.pending = False
        manager = self._manager
        if not session.privileged and manager.cache.get(session.id) is session:
            # An evicted session is told of nothing; a follower's is read whole.
            committed = self._read_committed
            for c, _, _ in done:
                manager._watch(session, c, None if c.tp is None else manager._partition_of(c.tp))
                limit = c.last_stable_offset if committed else c.high_watermark
                if c.last_error or c.watched is None or c.fetch_offset < limit:
                    session.mark(key_of(c, session.uses_topic_ids))
        if self.incremental:
            for c, entry, _ in done:
                if isinstance(entry.records, FileRegion) and entry.records.length:
                    session.to_end(key_of(c, session.uses_topic_ids))
