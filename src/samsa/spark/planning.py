"""Turning the source's options into concrete offsets, by asking the cluster.

:class:`OffsetPlanner` finds the partitions a subscription covers now and
resolves ``earliest`` / ``latest`` / per-partition offsets / timestamps to
offsets with ListOffsets. It runs on Spark's driver (in the Python planner
process) and owns the admin client it is given; nothing here is sent to
executors.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping

from samsa.client.admin import Admin, OffsetSpec
from samsa.errors import ConfigError, SamsaError, UnknownTopicOrPartitionError
from samsa.spark.options import EARLIEST, LATEST, OffsetBound, SourceOptions
from samsa.types import TopicPartition

__all__ = ["DataLossError", "OffsetPlanner", "describe_gone"]

log = logging.getLogger(__name__)


class DataLossError(SamsaError):
    """Raised when records a query should read are gone (deleted by retention or with
    their topic, or the partition disappeared) and ``failOnDataLoss`` is true."""


def describe_gone(gone: Iterable[TopicPartition], current: Iterable[TopicPartition]) -> str:
    """``gone`` in words: whole topics that were deleted, then single partitions."""
    gone = sorted(gone)
    live_topics = {tp.topic for tp in current}
    deleted = sorted({tp.topic for tp in gone if tp.topic not in live_topics})
    parts = [f"topic {topic!r} was deleted" for topic in deleted]
    missing = [str(tp) for tp in gone if tp.topic in live_topics]
    if missing:
        parts.append(f"partition(s) {', '.join(missing)} no longer exist")
    return "; ".join(parts)


class OffsetPlanner:
    """Partitions and offsets of a subscription, from the cluster. Not thread-safe."""

    def __init__(self, options: SourceOptions, admin: Admin) -> None:
        self._options = options
        self._admin = admin

    def partitions(self) -> list[TopicPartition]:
        """The partitions the subscription covers now (topics that do not exist: none)."""
        subscription = self._options.subscription
        if subscription.kind == "assign":
            wanted = set(subscription.partitions)
            existing = self._describe({tp.topic for tp in wanted})
            return sorted(wanted & existing)
        names = self._admin.list_topics()
        if subscription.kind == "subscribe":
            topics = set(subscription.topics) & set(names)
        else:
            assert subscription.pattern is not None
            pattern = re.compile(subscription.pattern)
            topics = {name for name in names if pattern.fullmatch(name)}
        return sorted(self._describe(topics, names))

    def _describe(
        self, topics: Iterable[str], names: Iterable[str] | None = None
    ) -> set[TopicPartition]:
        """The partitions of those of ``topics`` that exist now (``names``: the cluster's
        topics, when the caller has just listed them).

        A topic deleted between the listing and the description is left out,
        as if the listing had come a moment later: the caller's check_lost
        decides what its partitions' absence means (failOnDataLoss).
        """
        if names is None:
            names = self._admin.list_topics()
        existing = sorted(set(names) & set(topics))
        if not existing:
            return set()
        try:
            descriptions = self._admin.describe_topics(existing)
        except UnknownTopicOrPartitionError:
            descriptions = {}
            for name in existing:  # one at a time, to leave out only the ones gone
                try:
                    descriptions.update(self._admin.describe_topics([name]))
                except UnknownTopicOrPartitionError:
                    log.info("topic %s was deleted while the partitions were listed", name)
        return {
            TopicPartition(name, p.partition)
            for name, description in descriptions.items()
            for p in description.partitions
        }

    def _list(self, specs: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """ListOffsets of ``specs``. A partition deleted since the caller listed them is a
        loss like any other (check_lost): an error with ``failOnDataLoss``, else left out."""
        for _attempt in range(3):
            if not specs:
                return {}
            try:
                found = self._admin.list_offsets(
                    specs, isolation_level=self._options.isolation_level
                )
            except UnknownTopicOrPartitionError:
                existing = self._describe({tp.topic for tp in specs})
                if existing >= set(specs):
                    raise
                specs = self.check_lost(specs, existing)
                continue
            return {tp: found[tp].offset for tp in specs}
        raise DataLossError("partitions kept disappearing while their offsets were listed")

    def earliest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list(dict.fromkeys(partitions, int(OffsetSpec.EARLIEST)))

    def latest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """High watermarks, or last stable offsets when reading ``read_committed``."""
        return self._list(dict.fromkeys(partitions, int(OffsetSpec.LATEST)))

    def resolve(
        self, bound: OffsetBound, partitions: Iterable[TopicPartition], *, starting: bool
    ) -> dict[TopicPartition, int]:
        """Offsets of ``partitions`` for a starting (or ending) bound.

        A partition the bound does not name starts at earliest (ends at latest). A
        timestamp with no record at or after it ends at latest; as a start it fails,
        or takes latest when ``startingOffsetsByTimestampStrategy`` is ``latest``.
        """
        partitions = sorted(partitions)
        if bound.kind in ("offsets", "timestamps"):
            unknown = sorted(str(tp) for tp in bound.offsets if tp not in set(partitions))
            if unknown:
                raise ConfigError(
                    f"option {bound.option}: no such partition(s) in the subscription: "
                    + ", ".join(unknown)
                )
        if bound.kind == "earliest":
            return self.earliest(partitions)
        if bound.kind == "latest":
            return self.latest(partitions)
        fallback = EARLIEST if starting else LATEST
        if bound.kind == "offsets":
            wanted = {tp: bound.offsets.get(tp, fallback) for tp in partitions}
            result = {tp: offset for tp, offset in wanted.items() if offset >= 0}
            result.update(self.earliest(tp for tp, o in wanted.items() if o == EARLIEST))
            result.update(self.latest(tp for tp, o in wanted.items() if o == LATEST))
            return result
        if bound.kind == "timestamp":
            assert bound.timestamp is not None
            stamps = dict.fromkeys(partitions, bound.timestamp)
        else:
            stamps = {tp: bound.offsets[tp] for tp in partitions if tp in bound.offsets}
        found = self._list(stamps)
        unmatched = [tp for tp, offset in found.items() if offset < 0]
        if unmatched and starting and self._options.starting_by_timestamp_strategy == "error":
            raise ConfigError(
                f"option {bound.option}: no record at or after the timestamp in "
                + ", ".join(str(tp) for tp in unmatched)
                + " (set startingOffsetsByTimestampStrategy=latest to start at latest there)"
            )
        result = {tp: offset for tp, offset in found.items() if offset >= 0}
        result.update(self.latest(unmatched))
        rest = [tp for tp in partitions if tp not in stamps]
        result.update(self.earliest(rest) if starting else self.latest(rest))
        return result

    def check_lost(
        self,
        start: Mapping[TopicPartition, int],
        current: Iterable[TopicPartition],
    ) -> dict[TopicPartition, int]:
        """``start`` with partitions that no longer exist removed, or DataLossError.

        Partitions of a deleted topic (or an ``assign`` partition that went away)
        cannot be read again: with ``failOnDataLoss`` that is an error, without it
        they are dropped from the query, as Spark's Kafka source does.
        """
        current = set(current)
        gone = sorted(tp for tp in start if tp not in current)
        if gone and self._options.fail_on_data_loss:
            raise DataLossError(
                describe_gone(gone, current) + "; the records not yet read from them are "
                "lost. Set failOnDataLoss=false to carry on without them."
            )
        if gone:
            log.warning("%s; carrying on without them", describe_gone(gone, current))
        return {tp: offset for tp, offset in start.items() if tp in current}
