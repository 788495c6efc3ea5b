"""Opening a log directory: leftovers cleaned, segments loaded, crash recovery run.

After an unclean shutdown every segment from the one holding the recovery
point onwards is scanned batch by batch (:meth:`LogSegment.recover`): the first
torn or CRC-failing batch and everything after it — in that segment and in all
later ones — is removed, and the indexes are rebuilt from what remains. After
a clean shutdown only the active segment's indexes are sanity-checked. A
segment whose index files are missing is always rebuilt. The ``.txnindex`` of
every segment from the first recovered one on is rebuilt too, by replaying the
producer state from a snapshot at or below that segment (which transactions a
segment's abort markers end depends on those open before it).

Leftovers of an interrupted log cleaner pass (see :mod:`samsa.storage.cleaner`)
are settled first: ``.cleaned`` files were never swapped in and are removed;
a ``.swap`` segment was complete and fsynced before it got that name, so it
replaces the segments whose base offsets it covers — from its own base offset
to its next offset — and takes its final name. ``.deleted`` files are removed.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from samsa.storage.checkpoint import fsync_dir
from samsa.storage.index import IndexCorruptError
from samsa.storage.log import Clock, Log, wall_clock_ms
from samsa.storage.log_config import LogConfig
from samsa.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    segment_file_name,
)

log = logging.getLogger(__name__)

_SEGMENT_FILE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex)(.*)$")
_LEFTOVER_SUFFIXES = (DELETED_SUFFIX, CLEANED_SUFFIX)
_SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


def load_log(
    directory: Path,
    config: LogConfig,
    *,
    log_start_offset: int = 0,
    recovery_point: int = 0,
    high_watermark: int | None = None,
    clean_shutdown: bool = False,
    clock: Clock = wall_clock_ms,
) -> Log:
    """Open (creating if needed) the log in ``directory``, recovering it if it crashed."""
    directory.mkdir(parents=True, exist_ok=True)
    now = clock()
    bases = _clean_and_list(directory, config, now)
    segments = [LogSegment(directory, base, config, created_ms=now) for base in bases]
    if not segments:
        segments = [LogSegment(directory, log_start_offset, config, created_ms=now)]

    kept: list[LogSegment] = []
    recover_from = _first_unflushed(segments, recovery_point) if not clean_shutdown else None
    first_recovered: int | None = None
    for i, segment in enumerate(segments):
        is_active = i == len(segments) - 1
        must_recover = not segment.indexes_existed or (
            recover_from is not None and i >= recover_from
        )
        if not must_recover and is_active:
            try:
                segment.sanity_check()
            except IndexCorruptError as exc:
                log.warning("rebuilding indexes of %s: %s", segment.log_path, exc)
                must_recover = True
        if must_recover and first_recovered is None:
            first_recovered = segment.base_offset
        if must_recover and segment.size:
            truncated = segment.recover()
            if truncated:
                log.warning(
                    "truncated %d bytes of invalid or torn data from %s; "
                    "removing the %d later segment(s)",
                    truncated, segment.log_path, len(segments) - i - 1,
                )  # fmt: skip
                kept.append(segment)
                for later in segments[i + 1 :]:
                    later.delete_files()
                break
        kept.append(segment)
    loaded = Log(
        directory,
        config,
        kept,
        log_start_offset=log_start_offset,
        recovery_point=recovery_point,
        high_watermark=high_watermark,
        clock=clock,
    )
    loaded.rebuild_producer_state(rebuild_txn_indexes_from=first_recovered)
    return loaded


def _first_unflushed(segments: list[LogSegment], recovery_point: int) -> int:
    """Index of the segment holding ``recovery_point`` (where recovery starts)."""
    first = 0
    for i, segment in enumerate(segments):
        if segment.base_offset <= recovery_point:
            first = i
    return first


def _clean_and_list(directory: Path, config: LogConfig, now: int) -> list[int]:
    """Remove leftovers and orphan indexes, complete interrupted swaps; return segment bases."""
    logs: set[int] = set()
    swaps: set[int] = set()
    others: list[tuple[int, Path]] = []
    for path in directory.iterdir():
        if path.name.endswith(_LEFTOVER_SUFFIXES):
            path.unlink(missing_ok=True)
            continue
        match = _SEGMENT_FILE.match(path.name)
        if match is None:
            continue
        base, kind, suffix = int(match.group(1)), match.group(2), match.group(3)
        if suffix == SWAP_SUFFIX:
            if kind == LOG_SUFFIX:
                swaps.add(base)
            continue
        if suffix:
            continue
        if kind == LOG_SUFFIX:
            logs.add(base)
        elif kind in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            others.append((base, path))
    for base in sorted(swaps):
        _complete_swap(directory, config, now, base, logs)
    for path in directory.glob(f"*{SWAP_SUFFIX}"):
        log.info("removing orphan swap file %s", path)  # indexes whose .log.swap is gone
        path.unlink(missing_ok=True)
    if swaps:
        fsync_dir(directory)
    for base, path in others:
        if base not in logs:
            log.info("removing orphan index %s", path)
            path.unlink(missing_ok=True)
    return sorted(logs)


def _complete_swap(directory: Path, config: LogConfig, now: int, base: int, logs: set[int]) -> None:
    """Let the ``.swap`` segment at ``base`` replace the segments it covers (updates ``logs``).

    It covers the segments based in ``[base, its next offset)`` — at least the one
    named like it, even when the cleaner emptied it. A swap segment that fails
    recovery (it was fsynced before being named ``.swap``, so only a damaged disk
    does this) is dropped if the segment it would replace is still there.
    """
    swap = LogSegment(directory, base, config, created_ms=now, suffix=SWAP_SUFFIX)
    truncated = swap.recover()
    if truncated and base in logs:
        log.warning("dropping damaged cleaner output %s; keeping the segments", swap.log_path)
        swap.delete_files()
        return
    if truncated:
        log.warning("cut %d damaged bytes from cleaner output %s, whose old segments are gone",
                    truncated, swap.log_path)  # fmt: skip
    covered_end = max(swap.read_next_offset(), base + 1)
    for old in sorted(b for b in logs if base <= b < covered_end):
        for suffix in _SEGMENT_SUFFIXES:
            (directory / segment_file_name(old, suffix)).unlink(missing_ok=True)
        logs.discard(old)
    swap.rename_suffix(SWAP_SUFFIX, "")
    swap.close()
    logs.add(base)
    log.info("completed the swap of cleaned segment %s", swap.log_path)
