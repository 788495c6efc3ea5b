"""The consumer's group membership: joining, assignment, heartbeats, offset commits.

Java's ``ConsumerCoordinator`` over the classic group protocol:

- **Joining** runs as a task that ``poll()`` waits for within its timeout (a
  poll that times out leaves it running; the next poll waits again). Before
  JoinGroup the member gives partitions up as its rebalance protocol says —
  *eager*: all of them (``on_partitions_revoked``), *cooperative*: only those of
  topics it no longer subscribes to — after committing positions when
  auto-commit is on. A member the group dropped (session or poll timeout,
  unknown member) reports its partitions *lost* instead. The leader runs the
  assignor the group chose over every member's subscription; all members get
  their share from SyncGroup. Cooperative members then revoke what moved away
  and join again, so moved partitions are never owned twice.
- **Heartbeats** go from a task of their own every ``heartbeat.interval.ms``,
  whatever the application does between polls. The same task enforces
  ``max.poll.interval.ms``: a consumer that does not poll for that long leaves
  the group (a static member just stops heartbeating), and its next poll finds
  its partitions lost and rejoins.
- **Commits** (OffsetCommit) carry the generation and member id, so the group
  rejects those of a member that was replaced; OffsetFetch asks for stable
  offsets (KIP-447) and retries UNSTABLE_OFFSET_COMMIT.

The rebalance protocol is the one every configured assignor supports
(``range`` + ``cooperative-sticky`` — Java's default — is eager until ``range``
is removed), as in Java.

Owned by one event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
import time
from collections.abc import Collection, Iterable, Mapping
from typing import Any, NamedTuple

from samsa.client.admin.types import OffsetAndMetadata
from samsa.client.cluster import COORDINATOR_ERRORS, Cluster, CoordinatorType, topic_partitions
from samsa.client.config import ClientConfig
from samsa.client.consumer.assignors import (
    Assignor,
    RebalanceProtocol,
    assignor_for,
    group_partitions,
    ungroup_partitions,
)
from samsa.client.consumer.subscription import SubscriptionMode, SubscriptionState
from samsa.client.errors import ClientTimeoutError, error_for
from samsa.errors import CorruptRecordError, ErrorCode, KafkaError
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.consumer_protocol import (
    PROTOCOL_TYPE,
    Subscription,
    encode_assignment,
    encode_subscription,
    parse_assignment,
    parse_subscription,
)
from samsa.types import TopicPartition

__all__ = ["NO_GENERATION", "ConsumerCoordinator", "Generation"]

log = logging.getLogger(__name__)

SUBSCRIPTION_VERSION = 3


class Generation(NamedTuple):
    generation_id: int
    member_id: str
    protocol: str | None


NO_GENERATION = Generation(-1, "", None)


class MemberState(enum.Enum):
    UNJOINED = "unjoined"
    REBALANCING = "rebalancing"
    STABLE = "stable"


class ConsumerCoordinator:
    """One consumer's membership in its group (see the module docstring)."""

    def __init__(
        self,
        cluster: Cluster,
        config: ClientConfig,
        subscriptions: SubscriptionState,
        *,
        on_assignment_change: Any = None,
    ) -> None:
        self.cluster = cluster
        self.subscriptions = subscriptions
        self.group_id: str = config["group.id"]
        self.instance_id: str | None = config["group.instance.id"]
        self.session_timeout_ms: int = config["session.timeout.ms"]
        self.rebalance_timeout_ms: int = config["max.poll.interval.ms"]
        self.heartbeat_interval_ms: int = config["heartbeat.interval.ms"]
        self.request_timeout_ms: int = config["request.timeout.ms"]
        self.auto_commit: bool = config["enable.auto.commit"]
        self.auto_commit_interval_s = config["auto.commit.interval.ms"] / 1000
        self.exclude_internal: bool = config["exclude.internal.topics"]
        self.rack: str | None = config["client.rack"] or None
        self.assignors: list[Assignor] = [
            assignor_for(name) for name in config["partition.assignment.strategy"]
        ]
        common = set.intersection(*(set(a.supported_protocols) for a in self.assignors))
        self.rebalance_protocol = (
            RebalanceProtocol.COOPERATIVE
            if RebalanceProtocol.COOPERATIVE in common
            else RebalanceProtocol.EAGER
        )
        self._on_assignment_change = on_assignment_change
        self.generation = NO_GENERATION
        self.member_id = ""
        self.state = MemberState.UNJOINED
        self.rejoin_needed = True
        self.attention = asyncio.Event()
        """Set when ``poll()`` has group work to do (a rejoin); poll waits on it too."""
        self._needs_join_prepare = True
        self._joined_topics: frozenset[str] = frozenset()
        self._leader_topics: frozenset[str] | None = None
        self._assigned_snapshot: dict[str, int] = {}
        self._metadata_seen = -1
        self._join_task: asyncio.Task[None] | None = None
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._commit_tasks: set[asyncio.Task[Any]] = set()
        self._fatal: KafkaError | None = None
        self._listener_error: BaseException | None = None
        self._in_listener = False
        self._listener_idle = asyncio.Event()
        self._in_poll = asyncio.Event()
        self._last_poll = time.monotonic()
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval_s
        self._closed = False

    # -- poll ------------------------------------------------------------------------------

    async def poll(self, deadline: float) -> None:
        """Group work of one ``poll()``: rejoin if needed (waiting until ``deadline``, loop
        time), auto-commit when due. Raises a fatal group error or a listener's error."""
        self._last_poll = time.monotonic()
        self._raise_pending()
        self._in_poll.set()
        try:
            await self._poll_group(deadline)
        finally:
            self._in_poll.clear()
        self.attention.clear()
        if self.auto_commit and time.monotonic() >= self._next_auto_commit:
            self._next_auto_commit = time.monotonic() + self.auto_commit_interval_s
            self.commit_in_background(self._consumed(), None)

    async def _poll_group(self, deadline: float) -> None:
        subscriptions = self.subscriptions
        if subscriptions.auto_assigned:
            self._check_subscription()
            self._ensure_heartbeat()
            if self.rejoin_needed or self.state is not MemberState.STABLE:
                task = self._join_task
                if task is None or task.done():
                    task = self._join_task = asyncio.get_running_loop().create_task(
                        self._rebalance(), name=f"samsa-join-{self.cluster.client_id}"
                    )
                remaining = deadline - asyncio.get_running_loop().time()
                await asyncio.wait([task], timeout=max(remaining, 0))
                # A listener call that started runs to its end inside this poll (a blocking
                # consumer runs it on the polling thread, so the poll must not return first).
                while self._in_listener and not task.done():
                    await self._listener_idle.wait()
                self._raise_pending()

    def _raise_pending(self) -> None:
        if self._fatal is not None:
            raise self._fatal
        error, self._listener_error = self._listener_error, None
        if error is not None:
            raise error

    @property
    def rebalancing(self) -> bool:
        return self._join_task is not None and not self._join_task.done()

    def request_rejoin(self, reason: str) -> None:
        if not self.rejoin_needed:
            log.info("%s: group %s needs a rejoin: %s", self.cluster.client_id, self.group_id,
                     reason)  # fmt: skip
        self.rejoin_needed = True
        self.attention.set()

    def _check_subscription(self) -> None:
        """Rejoin when the subscription, a pattern's matches or (leader) the partition counts
        of the group's topics changed."""
        cluster = self.cluster
        subscriptions = self.subscriptions
        if cluster.metadata_version != self._metadata_seen:
            self._metadata_seen = cluster.metadata_version
            if subscriptions.mode is SubscriptionMode.PATTERN and cluster.last_refresh:
                topics = [
                    name
                    for name, meta in cluster.topics.items()
                    if not (self.exclude_internal and meta.is_internal)
                ]
                subscriptions.match_pattern(topics)
            if self._leader_topics is not None and self.state is MemberState.STABLE:
                snapshot = self._partition_counts(self._leader_topics)
                if snapshot != self._assigned_snapshot:
                    self.request_rejoin("the partitions of the group's topics changed")
        if subscriptions.topics != self._joined_topics and self.generation != NO_GENERATION:
            self.request_rejoin("the subscription changed")
        if subscriptions.topics - cluster.tracked_topics:
            cluster.tracked_topics.update(subscriptions.topics)
            cluster.request_update()

    def _partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        counts = {}
        for topic in topics:
            partitions = self.cluster.partitions_for(topic)
            if partitions:
                counts[topic] = len(partitions)
        return counts

    # -- joining ---------------------------------------------------------------------------

    async def _rebalance(self) -> None:
        attempts = 0
        while not self._closed:
            try:
                if self._needs_join_prepare:
                    await self._on_join_prepare()
                    self._needs_join_prepare = False
                assignment = await self._join_and_sync()
                if assignment is None:
                    continue  # rejoin at once (MEMBER_ID_REQUIRED, rebalance in progress)
                # As in Java, the assignment changes (and the listener runs) inside a poll.
                await self._in_poll.wait()
                await self._on_join_complete(assignment)
                return
            except KafkaError as exc:
                if not exc.retriable:
                    log.error("%s: group %s: %s", self.cluster.client_id, self.group_id, exc)
                    self._fatal = exc
                    self.state = MemberState.UNJOINED
                    return
                attempts += 1
                log.info("%s: joining group %s failed (will retry): %s",
                         self.cluster.client_id, self.group_id, exc)  # fmt: skip
                await asyncio.sleep(self.cluster.retry_backoff.delay_ms(attempts) / 1000)

    async def _on_join_prepare(self) -> None:
        subscriptions = self.subscriptions
        if self.auto_commit and self.generation != NO_GENERATION:
            try:
                await self.commit(self._consumed(), timeout_ms=self.rebalance_timeout_ms)
            except KafkaError as exc:
                log.warning("%s: commit before rebalance failed: %s", self.cluster.client_id, exc)
        owned = subscriptions.owned()
        if not owned:
            return
        if self.generation == NO_GENERATION:
            await self._invoke("on_partitions_lost", owned)
            subscriptions.assign_from_group(())
        elif self.rebalance_protocol is RebalanceProtocol.EAGER:
            await self._invoke("on_partitions_revoked", owned)
            subscriptions.assign_from_group(())
        else:
            revoked = [tp for tp in owned if tp.topic not in subscriptions.topics]
            if revoked:
                await self._invoke("on_partitions_revoked", revoked)
                subscriptions.assign_from_group(set(owned) - set(revoked))
        self._assignment_changed()

    def _protocols(self) -> list[dict[str, Any]]:
        topics = sorted(self.subscriptions.topics)
        owned = group_partitions(self.subscriptions.owned())
        generation = self.generation.generation_id
        return [
            {
                "name": assignor.name,
                "metadata": encode_subscription(
                    Subscription(
                        SUBSCRIPTION_VERSION,
                        tuple(topics),
                        assignor.subscription_user_data(owned, generation),
                        owned,
                        generation,
                        self.rack,
                    )
                ),
            }
            for assignor in self.assignors
        ]

    async def _join_and_sync(self) -> bytes | None:
        cluster = self.cluster
        self.state = MemberState.REBALANCING
        self.rejoin_needed = False
        self._joined_topics = self.subscriptions.topics
        node = await cluster.coordinator(self.group_id, CoordinatorType.GROUP)
        join = await self._send(
            node,
            ApiKey.JOIN_GROUP,
            {
                "group_id": self.group_id,
                "session_timeout": self.session_timeout_ms,
                "rebalance_timeout": self.rebalance_timeout_ms,
                "member_id": self.member_id,
                "group_instance_id": self.instance_id,
                "protocol_type": PROTOCOL_TYPE,
                "protocols": self._protocols(),
                "reason": None,
            },
            timeout_ms=max(self.request_timeout_ms, self.rebalance_timeout_ms + 5000),
        )
        code = int(join.error_code)
        if code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = join.member_id
            return None
        if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            self._reset_generation(forget_member_id=code == ErrorCode.UNKNOWN_MEMBER_ID)
            return None
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            return None
        self._check_coordinator_error(code)
        if code:
            raise error_for(code, f"JoinGroup of group {self.group_id!r}")
        self.member_id = join.member_id
        generation = Generation(int(join.generation_id), join.member_id, join.protocol_name)
        assignments: list[dict[str, Any]] = []
        if join.leader == join.member_id and not getattr(join, "skip_assignment", False):
            assignments = await self._assign(generation.protocol, join.members)
        else:
            self._leader_topics = None
        sync = await self._send(
            node,
            ApiKey.SYNC_GROUP,
            {
                "group_id": self.group_id,
                "generation_id": generation.generation_id,
                "member_id": generation.member_id,
                "group_instance_id": self.instance_id,
                "protocol_type": PROTOCOL_TYPE,
                "protocol_name": generation.protocol,
                "assignments": assignments,
            },
        )
        code = int(sync.error_code)
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            return None
        if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            self._reset_generation(forget_member_id=code == ErrorCode.UNKNOWN_MEMBER_ID)
            return None
        self._check_coordinator_error(code)
        if code:
            raise error_for(code, f"SyncGroup of group {self.group_id!r}")
        self.generation = generation
        return bytes(sync.assignment)

    async def _send(self, node: int, api_key: int, body: Mapping[str, Any], **options: Any) -> Any:
        try:
            return await self.cluster.send(node, api_key, body, **options)
        except KafkaError as exc:
            if exc.code in (
                ErrorCode.NETWORK_EXCEPTION,
                ErrorCode.REQUEST_TIMED_OUT,
            ):  # broken or timed out: find the coordinator again
                self.cluster.invalidate_coordinator(self.group_id)
            raise

    def _check_coordinator_error(self, code: int) -> None:
        if code in COORDINATOR_ERRORS:
            self.cluster.invalidate_coordinator(self.group_id)
            raise error_for(code, f"the coordinator of group {self.group_id!r} moved")

    async def _assign(self, protocol: str | None, members: Iterable[Any]) -> list[dict[str, Any]]:
        assignor = next((a for a in self.assignors if a.name == protocol), None)
        if assignor is None:
            raise error_for(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                f"the group chose assignor {protocol!r}, which this member lacks",
            )
        subscriptions: dict[str, Subscription] = {}
        for member in members:
            try:
                subscriptions[member.member_id] = parse_subscription(bytes(member.metadata))
            except CorruptRecordError as exc:
                raise error_for(
                    ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"member {member.member_id}: {exc}"
                ) from exc
        topics = frozenset(t for s in subscriptions.values() for t in s.topics)
        await self.cluster.refresh(topics)
        counts = self._partition_counts(topics)
        self._leader_topics = topics
        self._assigned_snapshot = counts
        result = assignor.assign(counts, subscriptions)
        log.info("%s: leader of group %s assigned %d partitions to %d members with %s",
                 self.cluster.client_id, self.group_id, sum(counts.values()), len(result),
                 assignor.name)  # fmt: skip
        return [
            {"member_id": member, "assignment": encode_assignment(a)}
            for member, a in result.items()
        ]

    async def _on_join_complete(self, data: bytes) -> None:
        subscriptions = self.subscriptions
        assigned: set[TopicPartition] = set()
        if data:
            try:
                assigned = set(ungroup_partitions(parse_assignment(data).partitions))
            except CorruptRecordError as exc:
                raise error_for(
                    ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                    f"the assignment of group {self.group_id!r}: {exc}",
                ) from exc
        owned = set(subscriptions.owned())
        self.state = MemberState.STABLE
        self._needs_join_prepare = True
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval_s
        log.info("%s: joined group %s generation %d as %s with %d partitions",
                 self.cluster.client_id, self.group_id, self.generation.generation_id,
                 self.generation.member_id, len(assigned))  # fmt: skip
        if self.rebalance_protocol is RebalanceProtocol.EAGER:
            subscriptions.assign_from_group(assigned)
            self._assignment_changed()
            await self._invoke("on_partitions_assigned", sorted(assigned))
        else:
            revoked = owned - assigned
            if revoked:
                await self._invoke("on_partitions_revoked", sorted(revoked))
            subscriptions.assign_from_group(assigned)
            self._assignment_changed()
            await self._invoke("on_partitions_assigned", sorted(assigned - owned))
            if revoked:
                self.request_rejoin("partitions moved to other members were given up")
        if any(tp.topic not in subscriptions.topics for tp in assigned):
            self.request_rejoin("the assignment holds topics this member no longer subscribes to")

    def _assignment_changed(self) -> None:
        if self._on_assignment_change is not None:
            self._on_assignment_change()

    def _reset_generation(self, *, forget_member_id: bool) -> None:
        self.generation = NO_GENERATION
        if forget_member_id:
            self.member_id = ""
        self.state = MemberState.UNJOINED
        self.rejoin_needed = True
        self._needs_join_prepare = True
        self.attention.set()

    async def _invoke(self, name: str, partitions: Collection[TopicPartition]) -> None:
        listener = self.subscriptions.listener
        if listener is None:
            return
        self._in_listener = True
        self._listener_idle.clear()
        try:
            result = getattr(listener, name)(set(partitions))
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            log.error("%s: rebalance listener %s failed: %r", self.cluster.client_id, name, exc)
            self._listener_error = exc
        finally:
            self._in_listener = False
            self._listener_idle.set()

    # -- heartbeats ------------------------------------------------------------------------

    def _ensure_heartbeat(self) -> None:
        if self._heartbeat_task is None or self._heartbeat_task.done():
            self._heartbeat_task = asyncio.get_running_loop().create_task(
                self._heartbeat_loop(), name=f"samsa-heartbeat-{self.cluster.client_id}"
            )

    async def _heartbeat_loop(self) -> None:
        interval_s = self.heartbeat_interval_ms / 1000
        max_poll_s = self.rebalance_timeout_ms / 1000
        while not self._closed:
            await asyncio.sleep(interval_s)
            if self.generation == NO_GENERATION:
                continue
            if time.monotonic() - self._last_poll > max_poll_s:
                log.warning(
                    "%s: poll() was not called for max.poll.interval.ms=%d; leaving group %s "
                    "(raise max.poll.interval.ms or process fewer records per poll with "
                    "max.poll.records)",
                    self.cluster.client_id, self.rebalance_timeout_ms, self.group_id,
                )  # fmt: skip
                await self._leave("consumer poll timeout has expired")
                continue
            if self.state is not MemberState.STABLE:
                continue
            try:
                await self._heartbeat()
            except KafkaError as exc:
                log.info("%s: heartbeat failed: %s", self.cluster.client_id, exc)
                self.cluster.invalidate_coordinator(self.group_id)

    async def _heartbeat(self) -> None:
        generation = self.generation
        node = await self.cluster.coordinator(self.group_id, CoordinatorType.GROUP)
        response = await self._send(
            node,
            ApiKey.HEARTBEAT,
            {
                "group_id": self.group_id,
                "generation_id": generation.generation_id,
                "member_id": generation.member_id,
                "group_instance_id": self.instance_id,
            },
        )
        code = int(response.error_code)
        if code == ErrorCode.NONE or generation != self.generation:
            return
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            self.request_rejoin("the group is rebalancing")
        elif code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            log.info("%s: group %s dropped this member (%s)", self.cluster.client_id,
                     self.group_id, error_for(code).__class__.__name__)  # fmt: skip
            self._reset_generation(forget_member_id=code == ErrorCode.UNKNOWN_MEMBER_ID)
        elif code == ErrorCode.FENCED_INSTANCE_ID:
            self._fatal = error_for(
                code,
                f"another consumer joined group {self.group_id!r} with group.instance.id "
                f"{self.instance_id!r}: give each consumer its own",
            )
            self._reset_generation(forget_member_id=True)
        else:
            self._check_coordinator_error(code)
            raise error_for(code, "Heartbeat")

    async def _leave(self, reason: str) -> None:
        generation = self.generation
        self._reset_generation(forget_member_id=self.instance_id is None)
        if generation == NO_GENERATION or self.instance_id is not None:
            return  # a static member keeps its place until its session times out
        try:
            node = await self.cluster.coordinator(self.group_id, CoordinatorType.GROUP)
            await self._send(
                node,
                ApiKey.LEAVE_GROUP,
                {
                    "group_id": self.group_id,
                    "member_id": generation.member_id,
                    "members": [
                        {
                            "member_id": generation.member_id,
                            "group_instance_id": None,
                            "reason": reason,
                        }
                    ],
                },
            )
        except KafkaError as exc:
            log.info("%s: LeaveGroup failed: %s", self.cluster.client_id, exc)

    async def leave_group(self, reason: str) -> None:
        """Give partitions up (committing first with auto-commit) and leave the group."""
        if self._join_task is not None and not self._join_task.done():
            self._join_task.cancel()
            await asyncio.gather(self._join_task, return_exceptions=True)
        owned = self.subscriptions.owned()
        if self.auto_commit and self.generation != NO_GENERATION and owned:
            try:
                await self.commit(self._consumed(), timeout_ms=self.request_timeout_ms)
            except KafkaError as exc:
                log.warning("%s: commit before leaving failed: %s", self.cluster.client_id, exc)
        if owned:
            name = (
                "on_partitions_lost"
                if self.generation == NO_GENERATION
                else "on_partitions_revoked"
            )
            await self._invoke(name, owned)
        await self._leave(reason)
        self._joined_topics = frozenset()

    async def close(self) -> None:
        if self.subscriptions.auto_assigned:
            await self.leave_group("the consumer is closing")
        elif self.auto_commit and self.subscriptions.owned():
            try:
                await self.commit(self._consumed(), timeout_ms=self.request_timeout_ms)
            except KafkaError as exc:
                log.warning("%s: commit on close failed: %s", self.cluster.client_id, exc)
        self._closed = True
        tasks = [t for t in (self._join_task, self._heartbeat_task) if t is not None]
        tasks += list(self._commit_tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- offsets ---------------------------------------------------------------------------

    def _consumed(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return {
            tp: OffsetAndMetadata(state.position, "", state.leader_epoch)
            for tp, state in self.subscriptions.assignment.items()
            if state.position is not None
        }

    def consumed(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """The positions of the assigned partitions, as a commit of "what poll returned"."""
        return self._consumed()

    async def commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], *, timeout_ms: int
    ) -> None:
        """Commit ``offsets`` (retrying coordinator moves until ``timeout_ms``)."""
        if not offsets:
            return
        auto = self.subscriptions.auto_assigned
        generation = self.generation if auto else NO_GENERATION
        if auto and self.generation == NO_GENERATION and self.rebalancing:
            raise error_for(
                ErrorCode.REBALANCE_IN_PROGRESS,
                f"cannot commit: group {self.group_id!r} is rebalancing; call poll() to "
                "finish joining, then commit the offsets of the partitions you still own",
            )
        topics = [
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": offsets[TopicPartition(topic, p)].offset,
                        "committed_leader_epoch": offsets[TopicPartition(topic, p)].leader_epoch,
                        "committed_metadata": offsets[TopicPartition(topic, p)].metadata,
                    }
                    for p in partitions
                ],
            }
            for topic, partitions in topic_partitions(offsets).items()
        ]
        body = {
            "group_id": self.group_id,
            "generation_id_or_member_epoch": generation.generation_id,
            "member_id": generation.member_id,
            "group_instance_id": self.instance_id if auto else None,
            "retention_time": -1,
            "topics": topics,
        }

        async def attempt() -> None:
            node = await self.cluster.coordinator(self.group_id, CoordinatorType.GROUP)
            response = await self._send(node, ApiKey.OFFSET_COMMIT, body)
            codes = [int(p.error_code) for t in response.topics for p in t.partitions]
            code = next((c for c in codes if c), 0)
            self._check_coordinator_error(code)
            if code in (
                ErrorCode.UNKNOWN_MEMBER_ID,
                ErrorCode.ILLEGAL_GENERATION,
                ErrorCode.FENCED_INSTANCE_ID,
            ):
                if generation == self.generation and auto:
                    self._reset_generation(forget_member_id=code == ErrorCode.UNKNOWN_MEMBER_ID)
                raise error_for(
                    code,
                    f"commit failed: this member is no longer part of group {self.group_id!r} "
                    "(it took longer than max.poll.interval.ms between polls, or was replaced); "
                    "its partitions may belong to another member now",
                )
            if code == ErrorCode.REBALANCE_IN_PROGRESS:
                self.request_rejoin("the group is rebalancing")
                raise error_for(
                    code,
                    f"commit failed: group {self.group_id!r} is rebalancing; call poll() to "
                    "rejoin, then commit the offsets of the partitions you still own",
                )
            if code:
                raise error_for(code, f"OffsetCommit of group {self.group_id!r}")

        await self.cluster.retrying(attempt, timeout_ms=timeout_ms, what="OffsetCommit")

    def commit_in_background(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        callback: Any,
    ) -> asyncio.Task[None]:
        """Commit without waiting; ``callback(offsets, error)`` runs when it ends."""

        async def run() -> None:
            error: BaseException | None = None
            try:
                await self.commit(offsets, timeout_ms=self.request_timeout_ms)
            except KafkaError as exc:
                error = exc
                if callback is None:
                    log.warning("%s: commit failed: %s", self.cluster.client_id, exc)
            if callback is not None:
                try:
                    callback(dict(offsets), error)
                except Exception:
                    log.exception("%s: commit callback failed", self.cluster.client_id)
            if error is not None and callback is None:
                return
            if error is not None:
                raise error

        task = asyncio.get_running_loop().create_task(run())
        self._commit_tasks.add(task)
        task.add_done_callback(self._commit_done)
        return task

    def _commit_done(self, task: asyncio.Task[Any]) -> None:
        self._commit_tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: reported through the callback or the log

    async def fetch_committed(
        self, partitions: Collection[TopicPartition], *, timeout_ms: int
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets (None where nothing is committed)."""
        topics = [
            {"name": t, "partition_indexes": ps} for t, ps in topic_partitions(partitions).items()
        ]
        body = {
            "group_id": self.group_id,
            "topics": topics,
            "groups": [
                {"group_id": self.group_id, "member_id": None, "member_epoch": -1, "topics": topics}
            ],
            "require_stable": True,
        }
        result: dict[TopicPartition, OffsetAndMetadata | None] = {}

        async def attempt() -> None:
            node = await self.cluster.coordinator(self.group_id, CoordinatorType.GROUP)
            response = await self._send(node, ApiKey.OFFSET_FETCH, body)
            group = response.groups[0] if hasattr(response, "groups") else response
            code = int(getattr(group, "error_code", 0))
            self._check_coordinator_error(code)
            if code:
                raise error_for(code, f"OffsetFetch of group {self.group_id!r}")
            for topic in group.topics:
                for p in topic.partitions:
                    tp = TopicPartition(topic.name, int(p.partition_index))
                    pcode = int(p.error_code)
                    if pcode:
                        raise error_for(pcode, f"OffsetFetch of group {self.group_id!r} for {tp}")
                    offset = int(p.committed_offset)
                    result[tp] = (
                        OffsetAndMetadata(
                            offset, p.metadata or "", int(getattr(p, "committed_leader_epoch", -1))
                        )
                        if offset >= 0
                        else None
                    )

        await self.cluster.retrying(attempt, timeout_ms=timeout_ms, what="OffsetFetch")
        for tp in partitions:
            result.setdefault(tp, None)
        return result


def check_deadline(deadline: float, what: str) -> float:
    """Seconds left until ``deadline`` (loop time); raises ClientTimeoutError when none."""
    remaining = deadline - asyncio.get_running_loop().time()
    if remaining <= 0:
        raise ClientTimeoutError(f"{what} did not complete in time")
    return remaining
