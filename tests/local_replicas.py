"""A single node's replica manager over a temporary directory, with no broker and no
sockets, and a consumer's read of a fetch's partitions through it (the Fetch handler's
read, without the response encoding): for unit tests of fetch sessions and delayed
fetches."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from samsa.broker.replication.fetch_manager import Read
from samsa.broker.replication.fetch_session import CachedPartition
from samsa.broker.replication.replica_manager import ReplicaManager
from samsa.cluster.local import LocalMetadataStore
from samsa.errors import KafkaError
from samsa.protocol.fetch_response import FetchPartition
from samsa.storage import LogConfig, LogManager

TOPIC = "events"
T0 = 1_700_000_000_000
"""A timestamp for the records the tests append."""


@contextlib.contextmanager
def local_replica_manager(directory: Path, topics: dict[str, int]) -> Iterator[ReplicaManager]:
    """A replica manager leading every partition of ``topics`` (name: partitions)."""
    log_manager = LogManager([directory])
    log_manager.startup()
    metadata = LocalMetadataStore((directory,), 0)
    metadata.load()
    for name, partitions in topics.items():
        metadata.create_topic(name, partitions)
    manager = ReplicaManager(log_manager, metadata, LogConfig())
    manager.load()
    try:
        yield manager
    finally:
        manager.shutdown()
        log_manager.close()


@dataclass
class Outcome:
    """What a consumer's read of some partitions found."""

    total: int = 0
    failed: bool = False
    done: list[Read] = field(default_factory=list)

    @property
    def partitions(self) -> list[int]:
        return [c.partition for c, _, _ in self.done]


def read(replicas: ReplicaManager, wanted: list[CachedPartition]) -> Outcome:
    """Read each of ``wanted`` from its fetch offset, as a consumer (read_uncommitted)."""
    outcome = Outcome()
    for c in wanted:
        assert c.tp is not None
        entry = FetchPartition(c.partition)
        try:
            result = replicas.read(
                c.tp, c.fetch_offset, c.max_bytes, read_committed=False, min_one_message=True
            )
        except KafkaError as exc:
            entry.error_code = exc.code
            outcome.failed = True
        else:
            entry.high_watermark = result.high_watermark
            entry.last_stable_offset = result.last_stable_offset
            entry.log_start_offset = result.log_start_offset
            if result.data is not None and result.data.region.length:
                entry.records = result.data.region
                outcome.total += result.data.region.length
        outcome.done.append((c, entry, replicas.leader_epoch_of(c.tp)))
    return outcome
