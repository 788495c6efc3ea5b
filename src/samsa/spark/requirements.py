"""The pyspark samsa's data source needs, and the message for an older one.

The stream reader is written against PySpark's streaming data-source API of Spark 4.2:
``pyspark.sql.streaming.datasource`` (read limits, ``Trigger.AvailableNow``) and the
``latestOffset(start, limit)`` planning call. Spark 4.0 and 4.1 have neither: their
engine calls ``latestOffset()`` with no arguments.
"""

from __future__ import annotations

from importlib import metadata

PYSPARK_FLOOR = "4.2"
"""The lowest pyspark the ``spark`` extra admits (``pyproject.toml``)."""


def pyspark_too_old() -> ImportError:
    """The error importing :mod:`samsa.spark`'s reader raises under a pyspark before 4.2."""
    try:
        installed = f"pyspark {metadata.version('pyspark')} is installed"
    except metadata.PackageNotFoundError:
        installed = "the pyspark found has no package metadata"
    return ImportError(
        f"samsa.spark needs pyspark {PYSPARK_FLOOR} or later (the streaming data-source API "
        f"of pyspark.sql.streaming.datasource), but {installed}: "
        f"pip install 'pyspark>={PYSPARK_FLOOR},<5' (or samsa[spark])"
    )
