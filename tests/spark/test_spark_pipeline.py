"""The example pipeline (examples/pipeline) on a known input: its window counts are right."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from examples.pipeline import generator, job
from pyspark.sql import SparkSession
from tests.spark.conftest import new_topic

from samsa.testing import BrokerProcess

pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]

START_MS = 1_767_225_600_000  # 2026-01-01 00:00:00 UTC, a minute boundary


def test_pipeline_counts_clicks_per_page_in_one_minute_windows(
    spark: SparkSession, samsa_broker: BrokerProcess, tmp_path: Path
) -> None:
    clicks = new_topic(samsa_broker.bootstrap, partitions=2, prefix="clicks")
    counts = new_topic(samsa_broker.bootstrap, partitions=1, prefix="page-counts")
    events = generator.click_events(seed=7, start_ms=START_MS, count=600, spacing_ms=500)
    generator.produce_events(samsa_broker.bootstrap, clicks, events)
    expected = Counter(((e["ts"] - START_MS) // 60_000, e["page"]) for e in events)

    for query in job.start(
        spark, samsa_broker.bootstrap, clicks, counts, tmp_path, available_now=True
    ):
        query.awaitTermination(120)
        assert query.exception() is None

    # Both outputs get the windows the watermark closed (all but the last), once each.
    last_minute = max(minute for minute, _ in expected)
    closed_windows = {k: v for k, v in expected.items() if k[0] < last_minute}
    rows = (
        spark.read.format("samsa")
        .option("kafka.bootstrap.servers", samsa_broker.bootstrap)
        .option("subscribe", counts)
        .option("kafka.isolation.level", "read_committed")
        .load()
        .orderBy("offset")
        .collect()
    )
    in_topic: dict[tuple[int, str], int] = {}
    for row in rows:
        value = json.loads(row.value)
        minute = int(value["window"][-2:])  # "2026-01-01 00:MM"
        in_topic[(minute, value["page"])] = value["clicks"]
        assert bytes(row.key).decode() == value["page"]
    assert len(in_topic) == len(rows)
    assert in_topic == closed_windows

    in_parquet = spark.read.parquet(str(tmp_path / "parquet")).collect()
    got = {(r.window_start.minute, r.page): r.clicks for r in in_parquet}
    assert len(got) == len(in_parquet)
    assert got == closed_windows
