"""The source's and the sink's effect on the process they run in (samsa.spark.worker)."""

from __future__ import annotations

import gc

from samsa.spark.worker import settle_imports


def test_outside_a_spark_task_the_garbage_collector_is_left_alone() -> None:
    frozen = gc.get_freeze_count()
    settle_imports()
    assert gc.get_freeze_count() == frozen
