"""``make pipeline``: a broker, the click generator, the Spark job, and the counts arriving.

Starts ``samsa serve`` on 127.0.0.1:9092 (or uses ``PIPELINE_BOOTSTRAP`` when set),
creates the topics ``clicks`` and ``page-counts``, generates about 200 clicks a
second, runs the job in a local[2] Spark, and prints each window count as it
arrives on ``page-counts`` (read_committed). Runs ``PIPELINE_SECONDS`` (default
150) seconds, then lists the Parquet output; Ctrl-C stops it sooner.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from examples.pipeline import generator, job

from samsa import Admin
from samsa.client.admin import NewTopic
from samsa.client.consumer import Consumer
from samsa.errors import KafkaError
from samsa.testing import BrokerProcess, start_broker
from samsa.types import TopicPartition


def _topics(bootstrap: str) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        existing = set(admin.list_topics())
        wanted = [NewTopic(t, 2) for t in ("clicks", "page-counts") if t not in existing]
        if wanted:
            admin.create_topics(wanted)


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    seconds = float(os.environ.get("PIPELINE_SECONDS", "150"))
    work_dir = Path(tempfile.mkdtemp(prefix="samsa-pipeline-"))
    broker: BrokerProcess | None = None
    bootstrap = os.environ.get("PIPELINE_BOOTSTRAP")
    if bootstrap is None:
        broker = start_broker(work_dir / "broker", port=9092)
        bootstrap = broker.bootstrap
    print(f"broker {bootstrap}; work dir {work_dir}", flush=True)
    _topics(bootstrap)
    stop = threading.Event()
    feeder = threading.Thread(
        target=generator.run_live, args=(bootstrap, "clicks", 200, stop), daemon=True
    )
    feeder.start()

    from pyspark.sql import SparkSession

    import samsa.spark

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("click-counts")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    samsa.spark.register(spark)
    queries = job.start(spark, bootstrap, "clicks", "page-counts", work_dir)
    print("job started; window counts (UTC) as they arrive on page-counts:", flush=True)
    consumer = Consumer({"bootstrap.servers": bootstrap, "isolation.level": "read_committed",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition("page-counts", p) for p in range(2)])
    consumer.seek_to_beginning()
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            for record in consumer.poll(1.0):
                count = json.loads(record.value)
                print(f"  {count['window']}  {count['page']:<9} {count['clicks']:>5}", flush=True)
    except KeyboardInterrupt:
        pass
    except KafkaError as e:
        print(f"reading page-counts failed: {e}", file=sys.stderr)
    finally:
        stop.set()
        consumer.close()
        for query in queries:
            query.stop()
        files = sorted((work_dir / "parquet").glob("*.parquet"))
        print(f"{len(files)} Parquet file(s) of closed windows in {work_dir / 'parquet'}")
        if files:
            spark.read.parquet(str(work_dir / "parquet")).orderBy("window_start", "page").show(
                20, truncate=False
            )
        spark.stop()
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
