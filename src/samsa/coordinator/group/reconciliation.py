"""Moving a consumer-group member from its current assignment to its target (KIP-848).

Kafka's ``CurrentAssignmentBuilder``: a member gives partitions up before it gets new
ones, and never gets a partition another member still holds.

* **STABLE** — the member holds its target at the group's assignment epoch.
* **UNREVOKED_PARTITIONS** — the member must first give up partitions: it keeps its
  epoch, is told the partitions it keeps, and stays here until a heartbeat shows it
  no longer owns the revoked ones (or its rebalance timeout fences it).
* **UNRELEASED_PARTITIONS** — the member is at the target epoch but some partitions of
  its target are still held by other members (pending their revocation); it gets them
  once they are released.

:func:`reconcile` is pure: the member's current state, its target, and who holds
which partition (``partition_epoch``: -1 for a free partition) give its next state.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

Partitions = Mapping[uuid.UUID, frozenset[int]]


class MemberState(enum.IntEnum):
    """The member states; the values are those of Kafka's records (``State`` int8)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


@dataclass(frozen=True, slots=True)
class MemberAssignmentState:
    """Where a member stands in reconciliation."""

    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)


def _clean(parts: dict[uuid.UUID, set[int]]) -> dict[uuid.UUID, frozenset[int]]:
    return {t: frozenset(p) for t, p in parts.items() if p}


def reconcile(
    current: MemberAssignmentState,
    target_epoch: int,
    target: Partitions,
    partition_epoch: Callable[[uuid.UUID, int], int],
    owned: Partitions | None,
) -> MemberAssignmentState:
    """The member's next state; ``owned``: the partitions its heartbeat says it owns
    (None: not sent, the member is assumed to still own what it was given)."""
    if current.state == MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, current.pending_revocation):
            return current
    elif current.state == MemberState.STABLE and current.member_epoch == target_epoch:
        return current
    return _next(current, target_epoch, target, partition_epoch, owned)


def _owns_any(owned: Partitions | None, partitions: Partitions) -> bool:
    if owned is None:
        return True
    return any(owned.get(t, frozenset()) & parts for t, parts in partitions.items())


def _next(
    current: MemberAssignmentState,
    target_epoch: int,
    target: Partitions,
    partition_epoch: Callable[[uuid.UUID, int], int],
    owned: Partitions | None,
) -> MemberAssignmentState:
    kept: dict[uuid.UUID, set[int]] = {}
    revoking: dict[uuid.UUID, set[int]] = {}
    incoming: dict[uuid.UUID, set[int]] = {}
    unreleased = False
    for topic in set(target) | set(current.assigned):
        wanted = target.get(topic, frozenset())
        held = current.assigned.get(topic, frozenset())
        kept[topic] = set(held & wanted)
        revoking[topic] = set(held - wanted)
        pending_here = current.pending_revocation.get(topic, frozenset())
        for p in wanted - held:
            # A partition this member is itself still revoking is not someone else's.
            if partition_epoch(topic, p) != -1 and p not in pending_here:
                unreleased = True
            else:
                incoming.setdefault(topic, set()).add(p)
    revoking_clean = _clean(revoking)
    if revoking_clean and _owns_any(owned, revoking_clean):
        return MemberAssignmentState(
            current.member_epoch,
            current.previous_member_epoch,
            MemberState.UNREVOKED_PARTITIONS,
            _clean(kept),
            revoking_clean,
        )
    for topic, parts in incoming.items():
        kept.setdefault(topic, set()).update(parts)
    return MemberAssignmentState(
        target_epoch,
        current.member_epoch,
        MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
        _clean(kept),
        {},
    )
