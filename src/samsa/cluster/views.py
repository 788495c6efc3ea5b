"""What a broker's metadata cache hands out about the cluster, whichever mode it runs in."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BrokerNode:
    """A live broker as clients are told to reach it."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionLeadership:
    """A partition's leader (-1: none), leader epoch, replicas, ISR and offline replicas."""

    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
