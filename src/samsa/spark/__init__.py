"""samsa for Apache Spark: a PySpark data source named ``samsa`` (install ``samsa[spark]``).

``samsa.spark.register(spark)`` makes ``spark.read.format("samsa")``,
``readStream``, ``write`` and ``writeStream`` available, with the options and
columns of Spark's Kafka source. Only this package imports pyspark; its
options module (:mod:`samsa.spark.options`) does not, so options can be
checked without Spark.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SamsaDataSource", "register"]


def register(spark: SparkSession) -> None:
    """Register the data source with ``spark`` under the format name ``samsa``."""
    from samsa.spark.source import SamsaDataSource

    spark.dataSource.register(SamsaDataSource)


def __getattr__(name: str) -> Any:
    if name == "SamsaDataSource":
        value = importlib.import_module("samsa.spark.source").SamsaDataSource
        globals()[name] = value
        return value
    raise AttributeError(f"module 'samsa.spark' has no attribute {name!r}")
