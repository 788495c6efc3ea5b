"""Partition reassignment (KIP-455 in Kafka's ZooKeeper mode): pure decisions the controller makes.

A reassignment moves a partition from its replicas (RS) to target replicas
(TRS). While it runs the partition's assignment lists RS and TRS together —
the target first, then the replicas that leave — with ``adding_replicas``
(TRS − RS) and ``removing_replicas`` (RS − TRS) in the topic's znode, as
Kafka writes them, so a new controller picks it up where the old one was.
The brokers in TRS − RS make the partition's log and follow its leader; once
every target replica is in the ISR the reassignment completes: the assignment
becomes TRS, the ISR keeps only TRS members, and if the leader is leaving, the
first target replica in the ISR leads (a new leader epoch). The replicas that
left stop serving the partition and remove their copy. A cancelled
reassignment goes back to RS the same way.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from samsa.cluster.zk_data import LeaderAndIsr
from samsa.errors import InvalidReplicaAssignmentError


@dataclass(frozen=True, slots=True)
class Reassignment:
    """A partition's move from ``original`` to ``target`` replicas."""

    original: tuple[int, ...]
    target: tuple[int, ...]

    @property
    def adding(self) -> tuple[int, ...]:
        return tuple(b for b in self.target if b not in self.original)

    @property
    def removing(self) -> tuple[int, ...]:
        return tuple(b for b in self.original if b not in self.target)

    @property
    def replicas(self) -> tuple[int, ...]:
        """The assignment while it runs: the target, then the replicas that leave."""
        return (*self.target, *self.removing)

    @classmethod
    def from_assignment(
        cls, replicas: Sequence[int], adding: Sequence[int], removing: Sequence[int]
    ) -> Reassignment:
        """The reassignment an assignment in ZooKeeper is in the middle of."""
        return cls(
            tuple(b for b in replicas if b not in adding),
            tuple(b for b in replicas if b not in removing),
        )


def check_target(target: Sequence[int], brokers: Collection[int]) -> tuple[int, ...]:
    """The target replicas, refused (INVALID_REPLICA_ASSIGNMENT) when empty, repeated or
    naming a broker that is not registered."""
    if not target:
        raise InvalidReplicaAssignmentError("the target replica list is empty")
    if len(set(target)) != len(target):
        raise InvalidReplicaAssignmentError(f"the target replicas {list(target)} repeat a broker")
    unknown = sorted(set(target) - set(brokers))
    if unknown:
        raise InvalidReplicaAssignmentError(
            f"the target replicas name broker {unknown[0]}, which is not registered"
        )
    return tuple(target)


def is_complete(reassignment: Reassignment, isr: Collection[int]) -> bool:
    """Every target replica has caught up: the move can finish."""
    return all(broker in isr for broker in reassignment.target)


def final_state(
    current: LeaderAndIsr,
    replicas: Sequence[int],
    live: Collection[int],
    controller_epoch: int,
) -> LeaderAndIsr:
    """The partition's state once its replicas are ``replicas`` (the target when a move
    completes, the original when it is cancelled): the ISR keeps only those, and a leader
    that is not one of them hands over to the first of them in the ISR and alive."""
    isr = tuple(b for b in current.isr if b in replicas)
    leader = current.leader
    if leader not in replicas or leader not in live:
        leader = next((b for b in replicas if b in isr and b in live), -1)
    if not isr and leader >= 0:
        isr = (leader,)
    return LeaderAndIsr(leader, current.leader_epoch + 1, isr, controller_epoch, current.zk_version)
