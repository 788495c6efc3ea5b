"""A shared local[2] SparkSession with the samsa data source registered, and helpers."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql import SparkSession

import samsa.spark
from samsa import Admin, Producer
from samsa.client.admin import NewTopic


def spark_env() -> dict[str, str]:
    """What a PySpark driver needs here: executors on this venv's python, loopback only."""
    return {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1"}  # fmt: skip


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ.update(spark_env())
    session = (
        SparkSession.builder.master("local[2]")
        .appName("samsa-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    samsa.spark.register(session)
    try:
        yield session
    finally:
        session.stop()


def new_topic(bootstrap: str, partitions: int = 1, prefix: str = "spark") -> str:
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions)])
    return topic


def produce(
    bootstrap: str, topic: str, values: list[bytes], partition: int | None = None, **extra: Any
) -> None:
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **extra}) as producer:
        for value in values:
            producer.send(topic, value, key=value, partition=partition)
        producer.flush()
