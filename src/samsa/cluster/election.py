"""Leader election and ISR shrinking for one partition: pure functions the controller calls.

Kafka's rules (``PartitionLeaderElectionAlgorithms`` and the controller's
``removeReplicasFromIsr``):

- **offline election** (the leader died, or a partition is new): the first
  replica *in assignment order* that is alive and in the ISR leads; the ISR
  keeps only live members. With ``unclean.leader.election.enable`` and no live
  ISR member, the first live replica leads with an ISR of itself — records it
  never had are lost, which is why it is off by default.
- **no live candidate**: the partition is offline (``leader = -1``) and its
  ISR stays as it was, so that one of those brokers, and only one of them,
  leads again when it returns: each holds every acknowledged record. (Kafka
  keeps only the last member it removed; keeping all of them is as safe and
  comes back sooner.)
- **a replica goes offline** while the leader lives: it leaves the ISR.
- **a controlled shutdown** (Kafka's ``ControlledShutdownLeaderElection``): the
  broker hands each partition it leads to the first other live ISR member in
  assignment order, never outside the ISR; a partition with none stays led by
  it until it stops. Where it follows, it leaves the ISR.

- **a replica that came back without its log** (its broker registered listing
  the partition as lost: it was in the ISR, and its data directory no longer
  holds the partition — wiped, replaced, moved) is not a candidate and leaves
  the ISR, as Kafka 4's eligible leader replicas (KIP-966) keep a broker that
  lost its data out of the leadership: it would lead from an empty log and
  its followers would truncate every acknowledged record to match. When it
  was the last ISR member, the partition stays offline (its ISR kept as it
  was) until the operator chooses: an unclean election (which prefers a live
  replica that did not lose its log) or restoring the data. Passed as
  ``lost``: brokers among ``live`` that lost this partition's log.

Each new leader or ISR bumps ``leader_epoch`` (a new ISR with the same leader
does too, as Kafka's ZooKeeper-era controller did), so replicas and clients
can tell old state from new.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from samsa.cluster.zk_data import NO_LEADER, LeaderAndIsr
from samsa.errors import ErrorCode


def initial_state(
    replicas: Sequence[int], live: Collection[int], controller_epoch: int
) -> LeaderAndIsr:
    """The state of a new partition: the first live replica leads, live replicas are the ISR."""
    isr = tuple(broker for broker in replicas if broker in live)
    leader = isr[0] if isr else NO_LEADER
    return LeaderAndIsr(leader, 0, isr, controller_epoch)


def elect_offline_leader(
    replicas: Sequence[int],
    current: LeaderAndIsr,
    live: Collection[int],
    controller_epoch: int,
    *,
    unclean: bool = False,
    lost: Collection[int] = (),
) -> LeaderAndIsr | None:
    """A new leader for a partition whose leader is gone (or lost its log); None when
    nothing changes.

    The result has the next leader epoch and the znode version of ``current``
    (the write is conditional on it).
    """
    eligible = [broker for broker in live if broker not in lost]
    if current.leader in eligible:
        return None  # its leader lives: nothing to elect
    live_isr = tuple(broker for broker in current.isr if broker in eligible)
    leader = next((broker for broker in replicas if broker in live_isr), None)
    isr: tuple[int, ...] = live_isr
    if leader is None and unclean:
        # Records the ISR had are lost; fewer with a replica that kept its log.
        leader = next((broker for broker in replicas if broker in eligible), None)
        if leader is None:
            leader = next((broker for broker in replicas if broker in live), None)
        isr = () if leader is None else (leader,)
    if leader is None:
        if current.leader == NO_LEADER:
            return None  # already offline
        # Offline: the ISR stays what it was, so one of its members — each holds
        # every acknowledged record — leads again when it returns.
        leader, isr = NO_LEADER, current.isr
    if leader == current.leader and isr == current.isr:
        return None
    return LeaderAndIsr(leader, current.leader_epoch + 1, isr, controller_epoch, current.zk_version)


def remove_replica_from_isr(
    replicas: Sequence[int],
    current: LeaderAndIsr,
    broker: int,
    live: Collection[int],
    controller_epoch: int,
    *,
    unclean: bool = False,
    controlled: bool = False,
    lost: Collection[int] = (),
) -> LeaderAndIsr | None:
    """The state after ``broker`` went offline; None when it changes nothing.

    If it led, a new leader is elected from the rest of the ISR; if it was the
    last ISR member, the partition goes offline and the ISR keeps it. When it is
    only stopping (``controlled``), a partition it leads with no other live ISR
    member stays as it is.
    """
    if current.leader == NO_LEADER or (broker not in current.isr and broker != current.leader):
        return None  # offline partitions keep their ISR (see elect_offline_leader)
    if broker == current.leader and controlled:
        return move_leadership_away(replicas, current, live, controller_epoch)
    if broker == current.leader:
        return elect_offline_leader(
            replicas,
            current,
            [b for b in live if b != broker],
            controller_epoch,
            unclean=unclean,
            lost=lost,
        )
    isr = tuple(member for member in current.isr if member != broker)
    if not isr:
        return None
    return LeaderAndIsr(
        current.leader, current.leader_epoch + 1, isr, controller_epoch, current.zk_version
    )


def move_leadership_away(
    replicas: Sequence[int], current: LeaderAndIsr, live: Collection[int], controller_epoch: int
) -> LeaderAndIsr | None:
    """The state with a leader in a controlled shutdown replaced by the first live ISR
    member in assignment order (``live`` excludes the stopping brokers), the ISR keeping
    only live members; None when there is no such member: it leads until it stops."""
    leader = next((b for b in replicas if b in live and b in current.isr), None)
    if leader is None:
        return None
    isr = tuple(member for member in current.isr if member in live)
    return LeaderAndIsr(leader, current.leader_epoch + 1, isr, controller_epoch, current.zk_version)


def drop_offline_from_isr(
    current: LeaderAndIsr, live: Collection[int], controller_epoch: int
) -> LeaderAndIsr | None:
    """The state without the ISR members that are offline, when the leader lives (a new
    controller finds brokers that died while there was none); None when nothing changes."""
    if current.leader not in live:
        return None
    isr = tuple(member for member in current.isr if member in live)
    if isr == current.isr or not isr:
        return None
    return LeaderAndIsr(
        current.leader, current.leader_epoch + 1, isr, controller_epoch, current.zk_version
    )


class ElectionRefused(Exception):
    """An election asked for (ElectLeaders) that cannot or need not happen, with the
    Kafka error code that says why."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def elect_preferred_leader(
    replicas: Sequence[int], current: LeaderAndIsr, live: Collection[int], controller_epoch: int
) -> LeaderAndIsr:
    """The preferred replica (the first of the assignment) as leader, when it is alive and
    in the ISR (Kafka's ``PreferredReplicaPartitionLeaderElectionStrategy``)."""
    preferred = replicas[0] if replicas else NO_LEADER
    if current.leader == preferred:
        raise ElectionRefused(ErrorCode.ELECTION_NOT_NEEDED, f"broker {preferred} already leads")
    if preferred not in live or preferred not in current.isr:
        raise ElectionRefused(
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
            f"the preferred leader {preferred} is not alive and in the ISR {list(current.isr)}",
        )
    return LeaderAndIsr(
        preferred, current.leader_epoch + 1, current.isr, controller_epoch, current.zk_version
    )


def elect_unclean_leader(
    replicas: Sequence[int],
    current: LeaderAndIsr,
    live: Collection[int],
    controller_epoch: int,
    *,
    lost: Collection[int] = (),
) -> LeaderAndIsr:
    """A leader for an offline partition, taken outside the ISR if no ISR member is alive
    with its log (records the ISR had and it lacks are lost: an operator's choice,
    ElectLeaders UNCLEAN)."""
    if current.leader in live and current.leader not in lost:
        raise ElectionRefused(ErrorCode.ELECTION_NOT_NEEDED, f"broker {current.leader} leads")
    elected = elect_offline_leader(
        replicas, current, live, controller_epoch, unclean=True, lost=lost
    )
    if elected is None or elected.leader == NO_LEADER:
        raise ElectionRefused(
            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
            f"none of the replicas {list(replicas)} is alive",
        )
    return elected


def imbalanced_partitions(
    assignments: dict[object, Sequence[int]],
    leaders: dict[object, int],
    isrs: dict[object, Sequence[int]],
    live: Collection[int],
    max_imbalance_percentage: int,
) -> list[object]:
    """Partitions to give back to their preferred leader, broker by broker, where a broker
    leads less than ``100 - max_imbalance_percentage`` % of the partitions it prefers
    (Kafka's ``auto.leader.rebalance.enable`` check); only those whose preferred replica is
    alive and in the ISR."""
    preferred_of: dict[int, list[object]] = {}
    for partition, replicas in assignments.items():
        if replicas:
            preferred_of.setdefault(replicas[0], []).append(partition)
    chosen: list[object] = []
    for broker, partitions in sorted(preferred_of.items()):
        if broker not in live:
            continue
        not_led = [p for p in partitions if leaders.get(p) != broker]
        if not_led and len(not_led) * 100 / len(partitions) > max_imbalance_percentage:
            chosen += [p for p in not_led if broker in isrs.get(p, ())]
    return chosen
