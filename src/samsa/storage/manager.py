"""Every partition log of a broker, across its ``log.dirs``, and their background work.

Each data directory holds ``<topic>-<partition>/`` log directories and three
files of its own: ``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint`` and, only while the broker is stopped cleanly,
``.kafka_cleanshutdown``. A ``.lock`` file held with ``flock`` keeps a second
process off the directory.

Background work runs as asyncio tasks on the owner's loop — retention every
``log.retention.check.interval.ms``, flushes by ``flush.ms`` every
``log.flush.scheduler.interval.ms``, checkpoints every minute, removal of
``.deleted`` files after ``file.delete.delay.ms`` — and every blocking disk call
they make (fsync, unlink of big files, checkpoint writes) runs on a worker
thread so the loop never waits on the disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from samsa.config import LONG_MAX
from samsa.errors import StorageError
from samsa.storage.checkpoint import (
    fsync_dir,
    read_offset_checkpoint,
    write_atomically,
    write_offset_checkpoint,
)
from samsa.storage.log import Clock, Log, wall_clock_ms
from samsa.storage.log_config import LogConfig
from samsa.storage.log_loader import load_log
from samsa.storage.segment import LogSegment
from samsa.types import TopicPartition

log = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
DELETE_DIR_SUFFIX = "-delete"


def _delete_segment_files(segments: list[LogSegment]) -> None:
    for segment in segments:
        segment.delete_files()


def parse_log_dir_name(name: str) -> TopicPartition | None:
    """``orders-3`` → ``TopicPartition("orders", 3)``; None for anything else."""
    topic, dash, partition = name.rpartition("-")
    if not dash or not topic or not partition.isdigit():
        return None
    return TopicPartition(topic, int(partition))


class LogManager:
    """Creates, loads, finds and deletes partition logs; runs retention, flush, checkpoints."""

    def __init__(
        self,
        log_dirs: Sequence[Path],
        default_config: LogConfig | None = None,
        *,
        retention_check_interval_ms: int = 300_000,
        flush_scheduler_interval_ms: int = LONG_MAX,
        checkpoint_interval_ms: int = 60_000,
        clock: Clock = wall_clock_ms,
    ) -> None:
        if not log_dirs:
            raise StorageError("log.dirs names no directory")
        self.log_dirs = [Path(d).resolve() for d in log_dirs]
        self.default_config = default_config or LogConfig()
        self.retention_check_interval_ms = retention_check_interval_ms
        self.flush_scheduler_interval_ms = flush_scheduler_interval_ms
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self.clock = clock
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._locks: list[int] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self.had_clean_shutdown: dict[Path, bool] = {}
        self._started = False

    # -- start-up ---------------------------------------------------------------
    def startup(self, topic_configs: Callable[[str], LogConfig] | None = None) -> None:
        """Lock the data directories and load every log in them (blocking; recovery may run)."""
        for directory in self.log_dirs:
            directory.mkdir(parents=True, exist_ok=True)
            self._lock(directory)
        for directory in self.log_dirs:
            self._load_dir(directory, topic_configs)
        self._started = True

    def _lock(self, directory: Path) -> None:
        fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StorageError(
                f"log directory {directory} is in use by another process; "
                "stop it or point log.dirs elsewhere"
            ) from None
        self._locks.append(fd)

    def _load_dir(self, directory: Path, topic_configs: Callable[[str], LogConfig] | None) -> None:
        marker = directory / CLEAN_SHUTDOWN_FILE
        fresh = not any(child.is_dir() for child in directory.iterdir())
        clean = marker.exists() or fresh
        self.had_clean_shutdown[directory] = clean
        recovery_points = read_offset_checkpoint(directory / RECOVERY_POINT_CHECKPOINT)
        start_offsets = read_offset_checkpoint(directory / LOG_START_OFFSET_CHECKPOINT)
        for child in sorted(directory.iterdir()):
            if not child.is_dir():
                continue
            if child.name.endswith(DELETE_DIR_SUFFIX):
                shutil.rmtree(child, ignore_errors=True)
                continue
            tp = parse_log_dir_name(child.name)
            if tp is None:
                continue
            if tp in self._logs:
                raise StorageError(
                    f"partition {tp} has logs in both {self._dir_of[tp]} and {directory}"
                )
            config = topic_configs(tp.topic) if topic_configs else self.default_config
            loaded = load_log(
                child,
                config,
                log_start_offset=start_offsets.get(tp, 0),
                recovery_point=recovery_points.get(tp, 0),
                clean_shutdown=clean,
                clock=self.clock,
            )
            self._register(tp, loaded, directory)
        if marker.exists():
            # From here on a crash must be detected: the marker returns at clean shutdown.
            marker.unlink()
            fsync_dir(directory)
        log.info(
            "loaded %d logs from %s (%s shutdown)",
            sum(1 for d in self._dir_of.values() if d == directory),
            directory,
            "new directory" if fresh else ("clean" if clean else "unclean"),
        )

    def _register(self, tp: TopicPartition, partition_log: Log, directory: Path) -> None:
        partition_log.on_roll = self._on_roll
        self._logs[tp] = partition_log
        self._dir_of[tp] = directory

    # -- logs -------------------------------------------------------------------
    def get_log(self, tp: TopicPartition) -> Log | None:
        return self._logs.get(tp)

    def all_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def get_or_create_log(self, tp: TopicPartition, config: LogConfig | None = None) -> Log:
        """The partition's log, created in the data directory holding the fewest logs."""
        existing = self._logs.get(tp)
        if existing is not None:
            return existing
        counts = {d: 0 for d in self.log_dirs}
        for d in self._dir_of.values():
            counts[d] += 1
        directory = min(self.log_dirs, key=lambda d: counts[d])
        path = directory / str(tp)
        created = load_log(
            path, config or self.default_config, clean_shutdown=True, clock=self.clock
        )
        fsync_dir(directory)
        self._register(tp, created, directory)
        return created

    def update_config(self, tp: TopicPartition, config: LogConfig) -> None:
        """Apply a changed topic configuration to a live log (retention, flush, roll…)."""
        partition_log = self._logs.get(tp)
        if partition_log is not None:
            partition_log.config = config
            for segment in partition_log.segments:
                segment.config = config

    def delete_log(self, tp: TopicPartition) -> None:
        """Forget a partition's log; its directory is renamed ``…-delete`` and removed later."""
        partition_log = self._logs.pop(tp, None)
        directory = self._dir_of.pop(tp, None)
        if partition_log is None or directory is None:
            return
        partition_log.close()
        doomed = directory / f"{tp}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        os.replace(partition_log.directory, doomed)
        fsync_dir(directory)
        self._spawn(asyncio.to_thread(shutil.rmtree, doomed, True))

    # -- durability ---------------------------------------------------------------
    async def flush_log(self, partition_log: Log, up_to: int | None = None) -> None:
        """fsync a log up to ``up_to`` on a worker thread, then advance its recovery point."""
        target, segments = partition_log.segments_to_flush(up_to)
        if segments:
            await asyncio.to_thread(Log.flush_segments, segments)
        partition_log.mark_flushed(target)

    async def maybe_flush(self, partition_log: Log) -> None:
        """Flush if ``flush.messages`` (or ``flush.ms``) says so; call after an append."""
        if partition_log.should_flush():
            await self.flush_log(partition_log)

    def _on_roll(self, partition_log: Log, new_base_offset: int) -> None:
        # Kafka flushes the segments a roll leaves behind, in the background.
        self._spawn(self.flush_log(partition_log, new_base_offset))

    def checkpoint(self) -> None:
        """Write recovery points and log start offsets of every data directory (blocking)."""
        for directory in self.log_dirs:
            mine = {tp: lg for tp, lg in self._logs.items() if self._dir_of[tp] == directory}
            write_offset_checkpoint(
                directory / RECOVERY_POINT_CHECKPOINT,
                {tp: lg.recovery_point for tp, lg in mine.items()},
            )
            write_offset_checkpoint(
                directory / LOG_START_OFFSET_CHECKPOINT,
                {tp: lg.log_start_offset for tp, lg in mine.items()},
            )

    async def checkpoint_async(self) -> None:
        await asyncio.to_thread(self.checkpoint)

    # -- retention ------------------------------------------------------------------
    async def cleanup_logs(self) -> int:
        """Apply retention to every log and remove files whose deletion delay passed."""
        deleted = 0
        doomed: list[LogSegment] = []
        for partition_log in list(self._logs.values()):
            deleted += partition_log.delete_old_segments()
            doomed += partition_log.take_purgeable_segments()
        if doomed:
            await asyncio.to_thread(_delete_segment_files, doomed)
        return deleted

    # -- background tasks ---------------------------------------------------------------
    def start_background_tasks(self) -> None:
        """Start retention, flush and checkpoint loops on the running event loop."""
        self._periodic(self.retention_check_interval_ms, self.cleanup_logs)
        self._periodic(self.checkpoint_interval_ms, self.checkpoint_async)
        self._periodic(min(self.checkpoint_interval_ms, 10_000), self._purge_due)
        if self.flush_scheduler_interval_ms < LONG_MAX:
            self._periodic(self.flush_scheduler_interval_ms, self._flush_due)

    async def _purge_due(self) -> None:
        doomed = [seg for lg in self._logs.values() for seg in lg.take_purgeable_segments()]
        if doomed:
            await asyncio.to_thread(_delete_segment_files, doomed)

    async def _flush_due(self) -> None:
        for partition_log in list(self._logs.values()):
            await self.maybe_flush(partition_log)

    def _periodic(self, interval_ms: int, job: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        async def run() -> None:
            while True:
                await asyncio.sleep(interval_ms / 1000)
                try:
                    await job()
                except Exception:
                    # A failing pass must not end the schedule; the next pass retries.
                    log.exception("background storage task %s failed", job.__name__)

        self._spawn(run())

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            coro.close()  # no loop (synchronous use): the work is skipped, shutdown catches up
            return
        task = loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- shutdown -------------------------------------------------------------------------
    async def shutdown(self) -> None:
        """Stop background work, flush every log, checkpoint, and mark a clean shutdown."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await asyncio.to_thread(self.close)

    def close(self) -> None:
        """Blocking shutdown: flush, checkpoint, close logs, write clean-shutdown markers."""
        if not self._started:
            return
        for partition_log in self._logs.values():
            partition_log.flush()
        self.checkpoint()
        for partition_log in self._logs.values():
            partition_log.close()
        for directory in self.log_dirs:
            write_atomically(directory / CLEAN_SHUTDOWN_FILE, b"")
        for fd in self._locks:
            os.close(fd)
        self._locks.clear()
        self._logs.clear()
        self._dir_of.clear()
        self._started = False
