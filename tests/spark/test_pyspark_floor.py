"""The lowest pyspark the ``spark`` extra admits (4.2.0) runs the data source, and the one
before it (4.1.4) stops at import with a message naming the floor.

Each pyspark is installed once with ``pip install --target`` into a cache directory
(``$SAMSA_TEST_CACHE``, else ``~/.cache/samsa-tests``), and put first on the path of a
driver process that shares the rest of this venv (pyarrow, pandas, py4j). Slow: the first
run downloads and unpacks two pyspark releases (``make test-slow``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.spark.conftest import new_topic, produce, spark_env

from samsa.spark.requirements import PYSPARK_FLOOR
from samsa.testing import BrokerProcess

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1800)]

FLOOR, BELOW_FLOOR = "4.2.0", "4.1.4"
ROOT = Path(__file__).resolve().parents[2]

DRIVER = """
import json, sys
from pyspark.sql import SparkSession
import pyspark, samsa.spark

bootstrap, topic, out = sys.argv[1:4]
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "1").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
samsa.spark.register(spark)
batch = (spark.read.format("samsa").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", topic).load().count())
query = (spark.readStream.format("samsa").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", topic).option("startingOffsets", "earliest")
         .option("maxOffsetsPerTrigger", "4").load().selectExpr("offset")
         .writeStream.format("parquet").option("path", out + "/rows")
         .option("checkpointLocation", out + "/checkpoint").trigger(availableNow=True).start())
assert query.awaitTermination(300)
sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
offsets = sorted(r.offset for r in spark.read.parquet(out + "/rows").collect())
print(json.dumps({"pyspark": pyspark.__version__, "batch": batch, "sizes": sizes,
                  "offsets": offsets}))
spark.stop()
"""


def _pyspark(version: str) -> Path:
    """A directory holding only pyspark ``version``, installed once."""
    cache = Path(os.environ.get("SAMSA_TEST_CACHE", Path.home() / ".cache" / "samsa-tests"))
    target = cache / f"pyspark-{version}"
    if not (target / ".installed").exists():
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--upgrade",
             "--target", str(target), f"pyspark=={version}"],
            check=True, timeout=1500,
        )  # fmt: skip
        (target / ".installed").touch()
    return target


def _run(version: str, *args: str) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join([str(_pyspark(version)), str(ROOT / "src"), str(ROOT)])
    env = {**os.environ, **spark_env(), "PYTHONPATH": path}
    env.pop("SPARK_HOME", None)
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=900,
        check=False,
    )  # fmt: skip


def test_the_lowest_admitted_pyspark_reads_batches_and_streams(
    samsa_broker: BrokerProcess, tmp_path: Path
) -> None:
    assert FLOOR.startswith(PYSPARK_FLOOR)
    topic = new_topic(samsa_broker.bootstrap, prefix="floor")
    produce(samsa_broker.bootstrap, topic, [b"r%02d" % i for i in range(10)])
    result = _run(FLOOR, "-c", DRIVER, samsa_broker.bootstrap, topic, str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer == {"pyspark": FLOOR, "batch": 10, "sizes": [4, 4, 2],
                      "offsets": list(range(10))}  # fmt: skip


def test_a_pyspark_below_the_floor_stops_at_import_naming_the_floor() -> None:
    result = _run(BELOW_FLOOR, "-c", "import samsa.spark.source")
    assert result.returncode == 1
    assert (
        f"ImportError: samsa.spark needs pyspark {PYSPARK_FLOOR} or later (the streaming "
        f"data-source API of pyspark.sql.streaming.datasource), but pyspark {BELOW_FLOOR} is "
        f"installed: pip install 'pyspark>={PYSPARK_FLOOR},<5' (or samsa[spark])"
    ) in result.stderr
