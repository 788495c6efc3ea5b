"""Partition reassignment: moves between brokers through ``samsa reassign-partitions`` and the
admin API, with the data following and the old replicas gone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from confluent_kafka import Producer
from tests.cluster.conftest import replica_records
from tests.rawclient import exchange

from samsa.client.admin import Admin
from samsa.testing.cluster import LocalCluster
from samsa.types import TopicPartition

QUIET = {"log_level": 3}
CREATE_TOPICS = 19


def _create_on(cluster: LocalCluster, topic: str, assignment: list[list[int]]) -> None:
    response = exchange(f"127.0.0.1:{cluster.brokers[1].port}", CREATE_TOPICS, 5, {
        "topics": [{"name": topic, "num_partitions": -1, "replication_factor": -1,
                    "assignments": [{"partition_index": i, "broker_ids": r}
                                    for i, r in enumerate(assignment)],
                    "configs": []}],
        "timeout": 30_000, "validate_only": False,
    })  # fmt: skip
    assert response.topics[0].error_code == 0
    for partition, replicas in enumerate(assignment):
        cluster.wait_until(
            lambda p=partition, r=replicas: sorted(cluster.isr_of(topic, p)) == sorted(r),  # type: ignore[misc]
            f"{topic}-{partition} in sync",
        )


def _produce(cluster: LocalCluster, topic: str, count: int, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", **QUIET})
    for i in range(start, start + count):
        producer.produce(topic, b"record-%d" % i, partition=0)
    assert producer.flush(30) == 0


def _tool(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "samsa", "reassign-partitions", "--bootstrap-server",
         cluster.bootstrap, *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def _plan_file(tmp_path: Path, topic: str, replicas: list[int]) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": replicas}]}))  # fmt: skip
    return path


def test_a_partition_moves_to_other_brokers_with_its_records(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    _create_on(cluster, "moved", [[1, 2]])
    _produce(cluster, "moved", 500)
    plan = _plan_file(tmp_path, "moved", [2, 3])
    started = _tool(cluster, "--execute", "--reassignment-json-file", str(plan))
    assert started.returncode == 0, started.stderr
    assert '"replicas":[1,2]' in started.stdout  # the current assignment, to roll back
    assert "Successfully started partition reassignments for moved-0" in started.stdout
    _produce(cluster, "moved", 500, start=500)  # writes go on during the move
    cluster.wait_until(
        lambda: _tool(cluster, "--verify", "--reassignment-json-file", str(plan)).returncode == 0,
        "the move completes",
    )
    verified = _tool(cluster, "--verify", "--reassignment-json-file", str(plan))
    assert "Reassignment of partition moved-0 is completed." in verified.stdout
    assert cluster.replicas_of("moved", 0) == [2, 3]
    assert cluster.wait_for_leader("moved", 0) in (2, 3)
    cluster.wait_until(lambda: sorted(cluster.isr_of("moved", 0)) == [2, 3], "new ISR")
    cluster.wait_until(
        lambda: not (cluster.brokers[1].data_dir / "moved-0").exists(), "broker 1's copy gone"
    )
    for broker_id in cluster.alive():
        cluster.stop(broker_id)
    on_2, on_3 = (replica_records(cluster, b, "moved", 0) for b in (2, 3))
    assert on_2 == on_3
    assert [v for _, v in on_3] == [b"record-%d" % i for i in range(1000)]


def test_generate_proposes_a_spread_over_the_brokers_given(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    _create_on(cluster, "spread", [[1, 2], [2, 3], [3, 1]])
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "spread"}]}))
    proposal = _tool(cluster, "--generate", "--topics-to-move-json-file", str(topics),
                     "--broker-list", "1,2")  # fmt: skip
    assert proposal.returncode == 0, proposal.stderr
    lines = proposal.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert lines[3] == "Proposed partition reassignment configuration"
    proposed = json.loads(lines[4])["partitions"]
    assert len(proposed) == 3
    assert all(sorted(p["replicas"]) == [1, 2] for p in proposed)  # broker 3 decommissioned


def test_a_move_that_cannot_finish_is_listed_and_can_be_cancelled(
    patient_cluster: LocalCluster,
) -> None:
    cluster = patient_cluster
    # The frozen broker is not the controller (which must answer the admin requests).
    frozen = max(b for b in cluster.brokers if b != cluster.controller())
    kept, leaving = sorted(b for b in cluster.brokers if b != frozen)
    _create_on(cluster, "stuck", [[kept, leaving]])
    _produce(cluster, "stuck", 100)
    cluster.pause(frozen)  # the new replica never catches up, but stays registered
    try:
        reachable = ",".join(f"127.0.0.1:{cluster.brokers[b].port}" for b in (kept, leaving))
        with Admin({"bootstrap.servers": reachable}) as admin:
            tp = TopicPartition("stuck", 0)
            assert admin.alter_partition_reassignments({tp: [kept, frozen]}) == {tp: None}
            moving = admin.list_partition_reassignments()
            assert set(moving) == {tp}
            assert (moving[tp].adding, moving[tp].removing) == ((frozen,), (leaving,))
            assert sorted(cluster.replicas_of("stuck", 0)) == [1, 2, 3]
            assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
            assert admin.list_partition_reassignments() == {}
    finally:
        cluster.resume(frozen)
    assert cluster.replicas_of("stuck", 0) == [kept, leaving]
    cluster.wait_until(lambda: sorted(cluster.isr_of("stuck", 0)) == [kept, leaving],
                       "back as it was")  # fmt: skip


def test_another_order_of_the_same_replicas_is_complete_at_once(cluster: LocalCluster) -> None:
    _create_on(cluster, "reordered", [[1, 2, 3]])
    _produce(cluster, "reordered", 10)
    tp = TopicPartition("reordered", 0)
    with Admin({"bootstrap.servers": cluster.bootstrap}) as admin:
        assert admin.alter_partition_reassignments({tp: [3, 1, 2]}) == {tp: None}
        assert admin.list_partition_reassignments() == {}
        assert cluster.replicas_of("reordered", 0) == [3, 1, 2]
        assert sorted(cluster.isr_of("reordered", 0)) == [1, 2, 3]
        admin.elect_leaders(partitions=[tp])  # the new first replica is preferred
    cluster.wait_for_leader("reordered", 0, not_in=[1, 2])
