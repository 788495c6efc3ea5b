"""The admin client's plumbing: start/close, retries, and where each request goes.

Topic changes go to the controller, group calls to the group's coordinator,
ListOffsets and DeleteRecords to each partition's leader (:meth:`AdminBase._by_leader`).
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Self, TypeVar

from samsa.client.cluster import COORDINATOR_ERRORS, Cluster, CoordinatorType
from samsa.client.config import ClientConfig, admin_config
from samsa.client.errors import error_for
from samsa.errors import ErrorCode, KafkaError
from samsa.protocol.api_keys import ApiKey
from samsa.types import TopicPartition

__all__ = ["AdminBase"]

T = TypeVar("T")
K = TypeVar("K")

INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")
ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}

_admin_ids = itertools.count(1)


def item_error(code: int, what: str, message: str | None = None) -> KafkaError | None:
    if not code:
        return None
    return error_for(code, f"{what}: {message}" if message else what)


def finish(results: dict[K, KafkaError | None], raise_on_error: bool) -> dict[K, KafkaError | None]:
    if raise_on_error:
        for error in results.values():
            if error is not None:
                raise error
    return results


def raise_first(errors: Iterable[KafkaError | None]) -> None:
    for error in errors:
        if error is not None:
            raise error


class AdminBase:
    """Connection, retries and routing shared by the admin operations."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config: ClientConfig = admin_config(config)
        client_id = self.config["client.id"] or f"samsa-admin-{next(_admin_ids)}"
        self._cluster = Cluster(self.config, client_id=client_id)
        self._started = False

    @property
    def client_id(self) -> str:
        return self._cluster.client_id

    async def start(self) -> None:
        """Connect to a bootstrap server and fetch the cluster's metadata."""
        if not self._started:
            await self._cluster.start()
            self._started = True

    async def close(self) -> None:
        """Close every connection. The client cannot be used afterwards."""
        await self._cluster.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- plumbing --------------------------------------------------------------------------

    async def _retrying(
        self, operation: Callable[[], Awaitable[T]], what: str, timeout_ms: int | None
    ) -> T:
        async def started() -> T:
            await self.start()
            return await operation()

        return await self._cluster.retrying(
            started,
            timeout_ms=self.config["default.api.timeout.ms"] if timeout_ms is None else timeout_ms,
            what=what,
            retries=self.config["retries"],
        )

    def _request_timeout(self, timeout_ms: int | None) -> int:
        """The broker-side timeout a request carries (topic creation, deletion…)."""
        return self.config["request.timeout.ms"] if timeout_ms is None else timeout_ms

    async def _to_controller(
        self, api_key: int, body: dict[str, Any], what: str, timeout_ms: int | None
    ) -> Any:
        async def attempt() -> Any:
            cluster = self._cluster
            target = cluster.controller_id if cluster.controller_id in cluster.nodes else None
            response = await cluster.send(target, api_key, body)
            codes = [int(getattr(r, "error_code", 0)) for r in _items(response)]
            if ErrorCode.NOT_CONTROLLER in codes:
                raise error_for(ErrorCode.NOT_CONTROLLER, f"{what}: the controller moved")
            return response

        return await self._retrying(attempt, what, timeout_ms)

    async def _to_coordinator(
        self,
        group_id: str,
        api_key: int,
        body: dict[str, Any],
        error_of: Callable[[Any], int],
        timeout_ms: int | None,
    ) -> Any:
        async def attempt() -> Any:
            cluster = self._cluster
            response = await cluster.send_to_coordinator(
                group_id, CoordinatorType.GROUP, api_key, body
            )
            code = error_of(response)
            if code in COORDINATOR_ERRORS:
                cluster.invalidate_coordinator(group_id, CoordinatorType.GROUP)
                raise error_for(code, f"group {group_id!r}")
            return response

        return await self._retrying(attempt, f"api {api_key} for group {group_id!r}", timeout_ms)

    async def _metadata(self, topics: Sequence[str] | None) -> Any:
        return await self._cluster.send(
            None,
            ApiKey.METADATA,
            {
                "topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": False,
            },
        )

    async def _by_leader(
        self,
        partitions: Iterable[TopicPartition],
        send: Callable[[int, list[TopicPartition]], Awaitable[dict[TopicPartition, tuple[int, T]]]],
        what: str,
        timeout_ms: int | None,
    ) -> dict[TopicPartition, T]:
        """Send ``partitions`` to their leaders; retry those whose leader moved."""
        remaining = set(partitions)
        results: dict[TopicPartition, T] = {}
        errors: dict[TopicPartition, KafkaError] = {}

        async def attempt() -> None:
            cluster = self._cluster
            await cluster.refresh({tp.topic for tp in remaining})
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in sorted(remaining):
                known = cluster.partitions_for(tp.topic)
                if tp.topic in cluster.topic_errors or (
                    known is not None and not 0 <= tp.partition < len(known)
                ):
                    code = cluster.topic_errors.get(tp.topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    errors[tp] = error_for(code, f"{what} {tp}")
                    remaining.discard(tp)
                    continue
                leader = cluster.leader_for(tp)
                if leader is not None:
                    by_leader.setdefault(leader, []).append(tp)
            for leader, tps in by_leader.items():
                for tp, (code, value) in (await send(leader, tps)).items():
                    error = item_error(code, f"{what} {tp}")
                    if error is None:
                        results[tp] = value
                    elif not (error.retriable and error.invalid_metadata):
                        errors[tp] = error
                    else:
                        continue
                    remaining.discard(tp)
            if remaining:
                tp = min(remaining)
                raise error_for(ErrorCode.LEADER_NOT_AVAILABLE, f"{what} {tp}: no leader known yet")

        await self._retrying(attempt, what, timeout_ms)
        raise_first(errors[tp] for tp in sorted(errors))
        return results


def _items(response: Any) -> list[Any]:
    for name in ("topics", "responses", "results"):
        items = getattr(response, name, None)
        if items is not None:
            return list(items)
    return []
