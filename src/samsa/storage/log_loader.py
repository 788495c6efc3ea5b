"""Opening a log directory: leftovers cleaned, segments loaded, crash recovery run.

After an unclean shutdown every segment from the one holding the recovery
point onwards is scanned batch by batch (:meth:`LogSegment.recover`): the log
ends before the first torn or CRC-failing batch, and the indexes are rebuilt
from what remains. Nothing is deleted on the way: the bytes cut from that
segment are first copied beside it to ``<segment>.log.cut-at-<position>.corrupt``
(fsynced before the cut), and every later segment's ``.log`` is renamed
``<segment>.log.corrupt`` (its indexes, derived data, are removed). One ERROR
line names the partition, the byte range and offsets cut and where they are
kept. The names keep Kafka's layout (``.log`` files are segments, nothing else
is); an operator reads a kept file with ``samsa dump-log`` after copying it to
a name ending ``.log`` (the first batch of a ``cut-at`` file is the damaged
one) and produces what is wanted again.
Kafka's LogLoader truncates the segment and deletes the later segments, with a
WARN; a flipped byte in an old segment would then cost every record after it. After
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
import os
import re
from collections.abc import Callable
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
CORRUPT_SUFFIX = ".corrupt"
"""Bytes recovery cut from a log, kept for an operator (never loaded, never deleted)."""
_COPY_CHUNK = 1 << 20


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
            cut: list[tuple[int, int, Path]] = []
            truncated = segment.recover(_keeper(segment.log_path, cut))
            if truncated:
                kept.append(segment)
                _report_cut(directory, segment, cut, _move_aside(segments[i + 1 :]))
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
    if first_recovered is not None:
        loaded.recover_leader_epochs(first_recovered)
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
    kept_at: list[tuple[int, int, Path]] = []
    # Only needed when the old segments are gone; otherwise they still hold the records.
    truncated = swap.recover(_keeper(swap.log_path, kept_at) if base not in logs else None)
    if truncated and base in logs:
        log.warning("dropping damaged cleaner output %s; keeping the segments", swap.log_path)
        swap.delete_files()
        return
    if truncated:
        log.error("cut %d damaged bytes from cleaner output %s, whose old segments are gone; "
                  "they are kept in %s", truncated, swap.log_path, kept_at[0][2])  # fmt: skip
    covered_end = max(swap.read_next_offset(), base + 1)
    for old in sorted(b for b in logs if base <= b < covered_end):
        for suffix in _SEGMENT_SUFFIXES:
            (directory / segment_file_name(old, suffix)).unlink(missing_ok=True)
        logs.discard(old)
    swap.rename_suffix(SWAP_SUFFIX, "")
    swap.close()
    logs.add(base)
    log.info("completed the swap of cleaned segment %s", swap.log_path)


def _aside_path(path: Path, tag: str) -> Path:
    """``<path><tag>.corrupt`` beside ``path``, numbered if an earlier one is there."""
    candidate = path.with_name(f"{path.name}{tag}{CORRUPT_SUFFIX}")
    number = 1
    while candidate.exists():
        candidate = path.with_name(f"{path.name}{tag}.{number}{CORRUPT_SUFFIX}")
        number += 1
    return candidate


def _keeper(log_path: Path, into: list[tuple[int, int, Path]]) -> Callable[[int, int], None]:
    """A ``before_cut`` for :meth:`LogSegment.recover` that keeps the bytes and notes where."""

    def keep(start: int, end: int) -> None:
        into.append((start, end, _keep_cut_bytes(log_path, start, end)))

    return keep


def _keep_cut_bytes(log_path: Path, start: int, end: int) -> Path:
    """Copy bytes ``[start, end)`` of a segment file beside it, durably; return the copy."""
    target = _aside_path(log_path, f".cut-at-{start}")
    with open(log_path, "rb") as source, open(target, "xb") as copy:
        source.seek(start)
        remaining = end - start
        while remaining > 0:
            chunk = source.read(min(remaining, _COPY_CHUNK))
            if not chunk:
                break
            copy.write(chunk)
            remaining -= len(chunk)
        copy.flush()
        os.fsync(copy.fileno())
    fsync_dir(log_path.parent)
    return target


def _move_aside(later: list[LogSegment]) -> list[tuple[LogSegment, int | None, Path]]:
    """Rename each segment's ``.log`` to ``….corrupt``; drop its indexes (derived data).

    Returns each segment with the offset after its last batch, when it can be
    read, and the kept file.
    """
    moved: list[tuple[LogSegment, int | None, Path]] = []
    for segment in later:
        try:
            end: int | None = segment.read_next_offset()
        except Exception:  # only for the report: a damaged segment still moves aside
            end = None
        target = _aside_path(segment.log_path, "")
        os.replace(segment.log_path, target)
        segment.delete_files()  # the .log is gone already: this removes the indexes
        moved.append((segment, end, target))
    if later:
        fsync_dir(later[0].directory)
    return moved


def _report_cut(
    directory: Path,
    segment: LogSegment,
    cut: list[tuple[int, int, Path]],
    moved: list[tuple[LogSegment, int | None, Path]],
) -> None:
    parts = [
        f"bytes {start}-{end} of {segment.log_path.name} (offsets {segment.read_next_offset()} "
        f"and after) kept in {kept.name}"
        for start, end, kept in cut
    ]
    for later, end, kept in moved:
        offsets = f"{later.base_offset}-{end - 1}" if end is not None else f"{later.base_offset}-?"
        parts.append(f"segment {later.log_path.name} (offsets {offsets}) kept as {kept.name}")
    log.error(
        "partition %s: a damaged batch ends the log at offset %d; cut aside, not deleted: %s "
        "(in %s)",
        directory.name, segment.read_next_offset(), "; ".join(parts), directory,
    )  # fmt: skip
