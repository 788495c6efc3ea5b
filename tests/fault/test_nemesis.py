"""Faults under live workloads: three brokers and ZooKeeper as processes, every link
through a proxy, a nemesis breaking them, and the checker counting what must not happen
(samsa.testing.fault_run)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.testing.fault_run import BROKER_SETTINGS, RunSettings, print_outcome, run
from samsa.testing.nemesis import FAULTS, FaultyCluster

log = logging.getLogger(__name__)

EACH_ONCE = ("cut-link", "kill", "cut-zookeeper", "pause", "reassign", "isolate",
             "kill-controller", "restart", "elect-preferred")  # fmt: skip
SMOKE = ("cut-link", "kill-controller", "cut-zookeeper", "pause", "reassign", "isolate")
"""The smoke's faults: the network cuts, a controller failover, a freeze and a move (kills
and restarts of other brokers have tests of their own in tests/cluster)."""
SMALL_INTERNAL_TOPICS = ("offsets.topic.num.partitions=10",
                         "transaction.state.log.num.partitions=10")  # fmt: skip


@pytest.fixture
def faulty(tmp_path: Path) -> Iterator[FaultyCluster]:
    settings = (*BROKER_SETTINGS, *SMALL_INTERNAL_TOPICS)
    with FaultyCluster(tmp_path, 3, settings, session_timeout_ms=3000) as cluster:
        cluster.start()
        yield cluster


def _check(settings: RunSettings, faulty: FaultyCluster) -> None:
    outcome = run(faulty, settings, log.warning)
    print_outcome(outcome, log.warning)
    assert outcome.workload_errors == []
    assert outcome.report.anomalies == 0, outcome.report.table()
    counts = outcome.report.counts
    assert counts["faults"] >= len(settings.sequence)
    assert counts["acknowledged"] > 0 and counts["polled"] > 0
    assert counts["transactions committed"] > 0 and counts["transactions aborted"] > 0
    assert outcome.refused > 0, "no cut link refused a connection: the proxies are not in use"


def test_cuts_a_controller_failover_a_freeze_and_a_move_lose_and_duplicate_nothing(
    faulty: FaultyCluster,
) -> None:
    _check(RunSettings(seconds=0, every=4, hold=2.5, sequence=SMOKE, seed=1, rate=100), faulty)


@pytest.mark.slow
def test_three_minutes_of_random_faults_after_one_of_each_kind(faulty: FaultyCluster) -> None:
    assert set(EACH_ONCE) == set(FAULTS)
    _check(RunSettings(seconds=180, every=8, hold=4, sequence=EACH_ONCE, seed=7), faulty)
