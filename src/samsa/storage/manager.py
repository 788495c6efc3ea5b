"""Every partition log of a broker, across its ``log.dirs``, and their background work.

Each data directory holds ``<topic>-<partition>/`` log directories and files
of its own: ``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``cleaner-offset-checkpoint`` (the first dirty
offset of each compacted log) and, only while the broker is stopped cleanly,
``.kafka_cleanshutdown``. A ``.lock`` file held with ``flock`` keeps a second
process off the directory.

A damaged checkpoint never stops start-up and never loses data. Kafka's
LogManager, on a recovery-point or log-start-offset checkpoint it cannot read,
warns and goes on as if the file were absent (recovery point 0, log start at
the first segment). We do the same, and more safely: a damaged recovery-point
checkpoint makes the whole directory count as crashed, so every log in it is
recovered from its first segment even if the clean-shutdown marker is there.
A damaged log-start-offset checkpoint puts each log start back at its first
segment (records below an old DeleteRecords point reappear: none is lost); a
damaged cleaner checkpoint makes every compacted log dirty from its start.
Each is logged at ERROR, naming the file.

A log directory nothing accounts for (its topic is not in the topic table) is
never deleted: :meth:`LogManager.move_aside_stray` renames it
``<topic>-<partition>.<id>-stray``, Kafka's convention for stray logs, and it
is never loaded again; an operator can rename it back.

A directory holding ``meta.properties`` is another broker's data directory
nested in this one (``make cluster`` once kept ``broker-N`` under the single
broker's ``./data``, and ``broker-1`` reads as partition 1 of topic
``broker``): it is never a partition, never loaded and never moved; start-up
warns, naming it.

Background work runs as asyncio tasks on the owner's loop — retention every
``log.retention.check.interval.ms``, flushes by ``flush.ms`` every
``log.flush.scheduler.interval.ms``, checkpoints every minute, removal of
``.deleted`` files after ``file.delete.delay.ms``, and the log cleaner, which
cleans the dirtiest compacted log, then the next, and sleeps
``log.cleaner.backoff.ms`` when none is dirty enough — and every blocking disk
call they make (fsync, unlink of big files, checkpoint writes, the cleaning
itself) runs on a worker thread so the loop never waits on the disk. The
owner may time them: :attr:`LogManager.on_flushed` and
:attr:`LogManager.on_cleaned` are called after each flush and cleaner pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import itertools
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
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
from samsa.storage.cleaner import (
    CleanResult,
    LogCleaner,
    effective_first_dirty_offset,
    measure_dirty,
)
from samsa.storage.log import Clock, Log, wall_clock_ms
from samsa.storage.log_config import LogConfig
from samsa.storage.log_creation import BuiltLog, build_logs
from samsa.storage.log_loader import load_log
from samsa.storage.segment import LogSegment
from samsa.types import TopicPartition

log = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
DELETE_DIR_SUFFIX = "-delete"
STRAY_DIR_SUFFIX = "-stray"
_MAX_DIR_NAME = 255


def _renamed(tp: TopicPartition, suffix: str) -> str:
    """``<topic>-<partition>.<id><suffix>``, the topic cut short so the name fits in 255
    bytes (a 249-character topic's would not), as Kafka names such directories."""
    tail = f"-{tp.partition}.{uuid.uuid4().hex}{suffix}"
    return tp.topic[: _MAX_DIR_NAME - len(tail)] + tail


META_PROPERTIES = "meta.properties"


def _delete_segment_files(segments: list[LogSegment]) -> None:
    for segment in segments:
        segment.delete_files()


def _read_checkpoint(path: Path, consequence: str) -> dict[TopicPartition, int] | None:
    """A checkpoint's entries; None (logged at ERROR) if the file is damaged."""
    try:
        return read_offset_checkpoint(path)
    except StorageError as exc:
        log.error("%s; treating it as absent: %s", exc, consequence)
        return None


def _flush(segments: list[LogSegment], write_epochs: Callable[[], None] | None) -> None:
    if write_epochs is not None:
        write_epochs()
    Log.flush_segments(segments)


def is_data_dir(path: Path) -> bool:
    """Whether ``path`` is a broker's data directory (it holds ``meta.properties``)."""
    return (path / META_PROPERTIES).is_file()


def parse_log_dir_name(name: str) -> TopicPartition | None:
    """``orders-3`` → ``TopicPartition("orders", 3)``; None for anything else."""
    topic, dash, partition = name.rpartition("-")
    if not dash or not topic or not partition.isdigit():
        return None
    return TopicPartition(topic, int(partition))


class LogManager:
    """Creates, loads, finds and deletes partition logs; runs retention, flush, cleaning."""

    def __init__(
        self,
        log_dirs: Sequence[Path],
        default_config: LogConfig | None = None,
        *,
        retention_check_interval_ms: int = 300_000,
        flush_scheduler_interval_ms: int = LONG_MAX,
        checkpoint_interval_ms: int = 60_000,
        cleaner_enabled: bool = True,
        cleaner_backoff_ms: int = 15_000,
        cleaner_dedupe_buffer_size: int = 134_217_728,
        recovery_threads_per_data_dir: int = 2,
        clock: Clock = wall_clock_ms,
    ) -> None:
        if not log_dirs:
            raise StorageError("log.dirs names no directory")
        self.log_dirs = [Path(d).resolve() for d in log_dirs]
        self.default_config = default_config or LogConfig()
        self.retention_check_interval_ms = retention_check_interval_ms
        self.flush_scheduler_interval_ms = flush_scheduler_interval_ms
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self.cleaner_enabled = cleaner_enabled
        self.cleaner_backoff_ms = cleaner_backoff_ms
        self.cleaner = LogCleaner(cleaner_dedupe_buffer_size)
        self.recovery_threads_per_data_dir = max(recovery_threads_per_data_dir, 1)
        self.clock = clock
        self._cleaner_offsets: dict[TopicPartition, int] = {}
        self._uncleanable: set[TopicPartition] = set()
        self._delete_horizons: dict[TopicPartition, int] = {}
        self._cleaning = asyncio.Lock()
        self._cleaner_checkpoint_lock = threading.Lock()
        self._cleaner_checkpoint_versions = itertools.count(1)
        self._cleaner_checkpoint_written: dict[Path, int] = {}
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._reserved: dict[TopicPartition, Path] = {}
        self._locks: list[int] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self.had_clean_shutdown: dict[Path, bool] = {}
        self._started = False
        self.on_flushed: Callable[[float], None] | None = None
        """Called with the seconds each flush of a log took (fsync on a worker thread)."""
        self.on_cleaned: Callable[[float, CleanResult], None] | None = None
        """Called with the seconds a cleaner pass took and what it did."""

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
        recovery_points = _read_checkpoint(
            directory / RECOVERY_POINT_CHECKPOINT,
            "every log in the directory is recovered from its first segment",
        )
        if recovery_points is None:
            clean, recovery_points = False, {}
        self.had_clean_shutdown[directory] = clean
        start_offsets = _read_checkpoint(
            directory / LOG_START_OFFSET_CHECKPOINT,
            "each log starts at its first segment",
        )
        cleaner_offsets = _read_checkpoint(
            directory / CLEANER_OFFSET_CHECKPOINT,
            "compacted logs are cleaned again from their start",
        )
        found: list[tuple[TopicPartition, Path, LogConfig]] = []
        for child in sorted(directory.iterdir()):
            if not child.is_dir():
                continue
            if child.name.endswith(DELETE_DIR_SUFFIX):
                shutil.rmtree(child, ignore_errors=True)
                continue
            if is_data_dir(child):
                log.warning(
                    "%s holds %s: it is a broker's data directory inside %s, not a partition; "
                    "left as it is, not loaded. Give each broker log.dirs of its own, not "
                    "nested in another's",
                    child, META_PROPERTIES, directory,
                )  # fmt: skip
                continue
            tp = parse_log_dir_name(child.name)
            if tp is None:
                continue
            if tp in self._logs:
                raise StorageError(
                    f"partition {tp} has logs in both {self._dir_of[tp]} and {directory}"
                )
            config = topic_configs(tp.topic) if topic_configs else self.default_config
            found.append((tp, child, config))

        def load(item: tuple[TopicPartition, Path, LogConfig]) -> Log:
            tp, child, config = item
            return load_log(
                child,
                config,
                log_start_offset=(start_offsets or {}).get(tp, 0),
                recovery_point=recovery_points.get(tp, 0),
                clean_shutdown=clean,
                clock=self.clock,
            )

        # Logs are independent: num.recovery.threads.per.data.dir load them at once
        # (recovery waits on the disk; the GIL is released in every read and fsync).
        with ThreadPoolExecutor(self.recovery_threads_per_data_dir) as pool:
            for (tp, _, _), loaded in zip(found, pool.map(load, found), strict=True):
                self._register(tp, loaded, directory)
                if cleaner_offsets and tp in cleaner_offsets:
                    self._cleaner_offsets[tp] = cleaner_offsets[tp]
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

        def on_truncate(_: Log, offset: int) -> None:
            # Offsets at and above a truncation point hold new records: dirty again.
            first_dirty = self._cleaner_offsets.get(tp)
            if first_dirty is not None and first_dirty > offset:
                self._cleaner_offsets[tp] = offset

        partition_log.on_truncate = on_truncate
        self._logs[tp] = partition_log
        self._dir_of[tp] = directory

    # -- logs -------------------------------------------------------------------
    def get_log(self, tp: TopicPartition) -> Log | None:
        return self._logs.get(tp)

    def all_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def logs_by_dir(self) -> dict[Path, dict[TopicPartition, Log]]:
        """Every log dir (``log.dirs``) and the logs it holds."""
        found: dict[Path, dict[TopicPartition, Log]] = {d: {} for d in self.log_dirs}
        for tp, partition_log in self._logs.items():
            found[self._dir_of[tp]][tp] = partition_log
        return found

    def get_or_create_log(self, tp: TopicPartition, config: LogConfig | None = None) -> Log:
        """The partition's log, created in the data directory holding the fewest logs."""
        existing = self._logs.get(tp)
        if existing is not None:
            return existing
        try:
            built = self.build_logs(self.assign_dirs([tp]), config or self.default_config)
        finally:
            self.release([tp])
        self.register_built(built)
        return built[0].log

    # -- creating logs, all or none ------------------------------------------------
    def assign_dirs(self, tps: Sequence[TopicPartition]) -> list[tuple[TopicPartition, Path]]:
        """Reserve new logs for ``tps``, each in the data directory holding the fewest logs.

        The reservation lasts until :meth:`register_built` or :meth:`release`; a
        log that exists or is reserved raises :class:`~samsa.errors.StorageError`.
        """
        taken = [tp for tp in tps if tp in self._logs or tp in self._reserved]
        if taken:
            raise StorageError(f"logs of {', '.join(map(str, taken[:3]))} exist or are being made")
        counts = {d: 0 for d in self.log_dirs}
        for d in itertools.chain(self._dir_of.values(), self._reserved.values()):
            counts[d] += 1
        plan: list[tuple[TopicPartition, Path]] = []
        for tp in tps:
            directory = min(self.log_dirs, key=lambda d: counts[d])
            counts[directory] += 1
            self._reserved[tp] = directory
            plan.append((tp, directory))
        return plan

    def release(self, tps: Iterable[TopicPartition]) -> None:
        """End reservations of :meth:`assign_dirs` whose logs were not registered."""
        for tp in tps:
            self._reserved.pop(tp, None)

    def build_logs(
        self, plan: Sequence[tuple[TopicPartition, Path]], config: LogConfig
    ) -> list[BuiltLog]:
        """:func:`~samsa.storage.log_creation.build_logs` with this manager's clock (blocking)."""
        return build_logs(plan, config, self.clock)

    def register_built(self, built: Iterable[BuiltLog]) -> None:
        """Serve logs made by :meth:`build_logs` (on the owner's loop)."""
        for item in built:
            self._reserved.pop(item.tp, None)
            self._register(item.tp, item.log, item.directory)

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
        doomed = directory / _renamed(tp, DELETE_DIR_SUFFIX)
        os.replace(partition_log.directory, doomed)
        fsync_dir(directory)
        self._spawn(asyncio.to_thread(shutil.rmtree, doomed, True))
        self._uncleanable.discard(tp)
        self._delete_horizons.pop(tp, None)
        if self._cleaner_offsets.pop(tp, None) is not None:
            self._spawn(asyncio.to_thread(self._cleaner_checkpoint_writer(directory)))

    def move_aside_stray(self, tp: TopicPartition) -> Path | None:
        """Close a log nothing accounts for and rename its directory ``…-stray`` (kept, unloaded).

        Returns the new path (None if there is no such log). Logged at ERROR: an
        operator decides whether the records are wanted.
        """
        partition_log = self._logs.pop(tp, None)
        directory = self._dir_of.pop(tp, None)
        if partition_log is None or directory is None:
            return None
        start, end = partition_log.log_start_offset, partition_log.log_end_offset
        partition_log.close()
        stray = directory / _renamed(tp, STRAY_DIR_SUFFIX)
        os.replace(partition_log.directory, stray)
        fsync_dir(directory)
        self._uncleanable.discard(tp)
        self._delete_horizons.pop(tp, None)
        self._cleaner_offsets.pop(tp, None)
        log.error(
            "log %s (offsets %d to %d) belongs to no topic in the topic table; "
            "moved aside, not deleted, to %s: rename it back to %s to serve it again once "
            "its topic exists, or remove it if its records are not wanted",
            tp, start, end, stray, tp,
        )  # fmt: skip
        return stray

    # -- durability ---------------------------------------------------------------
    async def flush_log(self, partition_log: Log, up_to: int | None = None) -> None:
        """fsync a log up to ``up_to`` on a worker thread, then advance its recovery point.

        The leader-epoch checkpoint is written first: the recovery point never passes
        an epoch the file does not hold (after a crash, only what follows the
        recovery point is re-read from the batches).
        """
        target, segments = partition_log.segments_to_flush(up_to)
        write_epochs = partition_log.leader_epoch_cache.writer()
        if segments or write_epochs is not None:
            started = time.monotonic()
            await asyncio.to_thread(_flush, segments, write_epochs)
            if self.on_flushed is not None:
                self.on_flushed(time.monotonic() - started)
        partition_log.mark_flushed(target)

    async def maybe_flush(self, partition_log: Log) -> None:
        """Flush if ``flush.messages`` (or ``flush.ms``) says so; call after an append."""
        if partition_log.should_flush():
            await self.flush_log(partition_log)

    def _on_roll(self, partition_log: Log, new_base_offset: int) -> None:
        # Kafka flushes the segments a roll leaves behind, in the background.
        self._spawn(self.flush_log(partition_log, new_base_offset))

    def checkpoint(self) -> None:
        """Write recovery points, log start and cleaner offsets of every data dir (blocking)."""
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
            self._cleaner_checkpoint_writer(directory)()

    def _cleaner_checkpoint_writer(self, directory: Path) -> Callable[[], None]:
        """A blocking writer of ``directory``'s cleaner checkpoint as it is now.

        The entries are taken now, on the caller's thread; writers that run late
        skip if a newer snapshot of the same directory was already written.
        """
        version = next(self._cleaner_checkpoint_versions)
        entries = {
            tp: offset
            for tp, offset in list(self._cleaner_offsets.items())
            if self._dir_of.get(tp) == directory
        }

        def write() -> None:
            with self._cleaner_checkpoint_lock:
                if self._cleaner_checkpoint_written.get(directory, 0) > version:
                    return
                write_offset_checkpoint(directory / CLEANER_OFFSET_CHECKPOINT, entries)
                self._cleaner_checkpoint_written[directory] = version

        return write

    async def checkpoint_async(self) -> None:
        await asyncio.to_thread(self.checkpoint)

    # -- compaction -------------------------------------------------------------------
    @property
    def uncleanable_count(self) -> int:
        """Compacted logs whose cleaning failed, left uncleaned until restart."""
        return len(self._uncleanable)

    def cleaner_first_dirty_offset(self, tp: TopicPartition) -> int | None:
        """Where ``tp``'s dirty section starts (None: not cleaned yet, or no such log)."""
        partition_log = self._logs.get(tp)
        if partition_log is None:
            return None
        if tp not in self._cleaner_offsets:
            return None
        return effective_first_dirty_offset(partition_log, self._cleaner_offsets[tp])

    async def clean_log(self, tp: TopicPartition) -> CleanResult | None:
        """Clean ``tp`` now, whatever its dirty ratio (tests, benchmarks, tools).

        Even with nothing dirty the cleanable segments are copied again (expired
        tombstones go). Returns None if ``tp`` is not a compacted log or has no
        cleanable segment.
        """
        partition_log = self._logs.get(tp)
        if partition_log is None or not partition_log.config.compact:
            return None
        async with self._cleaning:
            return await self._clean(tp, partition_log, force=True)

    async def clean_once(self) -> TopicPartition | None:
        """Clean the dirtiest cleanable compacted log; return it, or None if none is.

        Cleanable: its dirty ratio reaches ``min.cleanable.dirty.ratio`` or its
        oldest dirty record is older than ``max.compaction.lag.ms``. When no log
        is, one whose kept tombstones' delete horizon has passed is cleaned to
        drop them (the horizons are known from the passes since start-up). A log
        whose pass failed is skipped until restart (Kafka marks it uncleanable).
        """
        async with self._cleaning:
            best: tuple[float, TopicPartition, Log] | None = None
            expired: tuple[int, TopicPartition, Log] | None = None
            for tp, partition_log in self._logs.items():
                config = partition_log.config
                if not config.compact or tp in self._uncleanable:
                    continue
                horizon = self._delete_horizons.get(tp)
                if (
                    horizon is not None
                    and horizon <= partition_log.clock()
                    and (expired is None or horizon < expired[0])
                ):
                    expired = (horizon, tp, partition_log)
                first_dirty = effective_first_dirty_offset(
                    partition_log, self._cleaner_offsets.get(tp)
                )
                dirtiness = measure_dirty(partition_log, first_dirty, partition_log.clock())
                if not dirtiness.is_cleanable(config.min_cleanable_dirty_ratio):
                    continue
                if best is None or dirtiness.dirty_ratio > best[0]:
                    best = (dirtiness.dirty_ratio, tp, partition_log)
            if best is not None:
                _, tp, partition_log = best
            elif expired is not None:
                _, tp, partition_log = expired
            else:
                return None
            try:
                result = await self._clean(tp, partition_log, force=best is None)
            except Exception:
                if self._logs.get(tp) is not partition_log:
                    return None  # deleted or closed under the pass: nothing to mark
                self._uncleanable.add(tp)
                log.exception("cleaning %s failed; it will not be cleaned again until restart", tp)
                return None
            if result is None and best is None:
                self._delete_horizons.pop(tp, None)  # nothing to clean after all: stop asking
            if result is None or result.next_dirty_offset <= result.first_dirty_offset:
                return None  # no progress: back off rather than spin
            return tp

    async def _clean(
        self, tp: TopicPartition, partition_log: Log, *, force: bool = False
    ) -> CleanResult | None:
        started = time.monotonic()
        result = await self.cleaner.clean(
            partition_log,
            self._cleaner_offsets.get(tp),
            force=force,
            still_current=lambda: self._logs.get(tp) is partition_log,
        )
        if result is not None and self.on_cleaned is not None:
            self.on_cleaned(time.monotonic() - started, result)
        directory = self._dir_of.get(tp)
        if result is None or directory is None:
            return result
        if result.earliest_delete_horizon is None:
            self._delete_horizons.pop(tp, None)
        else:
            self._delete_horizons[tp] = result.earliest_delete_horizon
        self._cleaner_offsets[tp] = result.next_dirty_offset
        await asyncio.to_thread(self._cleaner_checkpoint_writer(directory))
        return result

    async def _run_cleaner(self) -> None:
        """Kafka's cleaner thread: clean while some log is dirty enough, else back off."""
        while True:
            try:
                cleaned = await self.clean_once()
            except Exception:
                # A failing pass must not end the cleaner; it backs off and retries.
                log.exception("log cleaner pass failed")
                cleaned = None
            await asyncio.sleep(0 if cleaned is not None else self.cleaner_backoff_ms / 1000)

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
        """Start retention, flush, checkpoint and cleaner loops on the running event loop."""
        self._periodic(self.retention_check_interval_ms, self.cleanup_logs)
        self._periodic(self.checkpoint_interval_ms, self.checkpoint_async)
        self._periodic(min(self.checkpoint_interval_ms, 10_000), self._purge_due)
        if self.flush_scheduler_interval_ms < LONG_MAX:
            self._periodic(self.flush_scheduler_interval_ms, self._flush_due)
        if self.cleaner_enabled:
            self._spawn(self._run_cleaner())

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
        try:
            threads = self.recovery_threads_per_data_dir * len(self.log_dirs)
            with ThreadPoolExecutor(threads) as pool:
                # As Kafka, the recovery threads flush at shutdown (mostly fsync waits).
                list(pool.map(Log.flush, self._logs.values()))
            self.checkpoint()
        except OSError as exc:
            # No clean-shutdown marker is written: the next start recovers the logs.
            raise StorageError(
                f"flushing the logs and writing the checkpoints at shutdown failed: {exc}; "
                "the data directories are not marked clean, so the next start recovers "
                "their logs"
            ) from exc
        for partition_log in self._logs.values():
            partition_log.close()
        for directory in self.log_dirs:
            write_atomically(directory / CLEAN_SHUTDOWN_FILE, b"")
        for fd in self._locks:
            os.close(fd)
        self._locks.clear()
        self._logs.clear()
        self._dir_of.clear()
        self._cleaner_offsets.clear()
        self._started = False
