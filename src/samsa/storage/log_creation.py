"""Making the logs of new partitions, all or none, off the owner's loop.

:func:`build_logs` makes each new partition's directory and files and opens
its log; if any fails, every one it made is removed again. It touches nothing
but the new directories, so the owner (:class:`~samsa.storage.manager.LogManager`,
whose partition map belongs to its loop) runs it on a worker thread and
registers the result on the loop. Thread-safe in that sense: the logs it
returns belong to nobody until registered.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from samsa.errors import KafkaStorageError, StorageError
from samsa.storage.checkpoint import fsync_dir
from samsa.storage.log import Clock, Log
from samsa.storage.log_config import LogConfig
from samsa.storage.log_loader import load_log
from samsa.types import TopicPartition

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BuiltLog:
    """A log made by :func:`build_logs`, not yet served."""

    tp: TopicPartition
    directory: Path
    log: Log


def discard_built(built: Sequence[BuiltLog], made: Sequence[Path] = ()) -> None:
    """Close logs :func:`build_logs` made and remove their directories (blocking).

    ``made`` are the directories created, including any whose log failed to load.
    A directory that cannot be removed is logged; being empty of records, it is
    moved aside as a stray at the next start if no topic claims it.
    """
    for item in built:
        for segment in item.log.segments:
            segment.discard()
    paths = list(made) or [item.log.directory for item in built]
    for path in paths:
        try:
            shutil.rmtree(path)
        except OSError as exc:
            log.error("could not remove %s after a failed creation: %s", path, exc)
    for directory in {path.parent for path in paths}:
        try:
            fsync_dir(directory)
        except OSError as exc:
            log.warning("could not fsync %s after removing failed logs: %s", directory, exc)


def build_logs(
    plan: Sequence[tuple[TopicPartition, Path]], config: LogConfig, clock: Clock
) -> list[BuiltLog]:
    """Make the directories and files of new logs, all or none (blocking).

    Touches nothing but the new directories, so it may run on a worker thread;
    the owner registers the result on its loop. If any log cannot be made (no
    descriptors, no space, a directory in the way), the ones made are removed
    again and :class:`~samsa.errors.KafkaStorageError` names the first that failed.
    """
    built: list[BuiltLog] = []
    made: list[Path] = []
    path = Path()
    try:
        for tp, directory in plan:
            path = directory / str(tp)
            path.mkdir()  # fails if anything is in the way: never adopt stray files
            made.append(path)
            created = load_log(path, config, clean_shutdown=True, clock=clock)
            built.append(BuiltLog(tp, directory, created))
        for directory in {d for _, d in plan}:
            fsync_dir(directory)
    except (OSError, StorageError) as exc:
        discard_built(built, made)
        raise KafkaStorageError(f"cannot create the log {path}: {exc}") from exc
    return built
