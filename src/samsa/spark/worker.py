"""What the source and the sink do to the Python worker process Spark runs their tasks in.

PySpark reuses a worker for many tasks (``spark.python.worker.reuse``, on by default)
and runs a full ``gc.collect()`` in it after each task. A full collection walks every
object the garbage collector tracks, and importing samsa's client (its protocol
schemas above all) adds about 50 000 of them: 100 ms of CPU after every task, on a
2-core machine a quarter of a read task's worker CPU. Those objects live as long as
the process does, so the first task in a worker moves everything alive after its
imports to the collector's permanent generation (``gc.freeze()``), once; later
collections walk only what later tasks create.
"""

from __future__ import annotations

import functools
import gc

from pyspark import TaskContext


def settle_imports() -> None:
    """Freeze the objects alive now (modules, classes, schemas) out of later full
    collections, once per process, and only in a Spark task's worker."""
    if TaskContext.get() is not None:
        _freeze_once()


@functools.cache
def _freeze_once() -> None:
    gc.collect()  # what is garbage now is freed, not frozen
    gc.freeze()
