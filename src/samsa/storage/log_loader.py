"""Opening a log directory: leftovers cleaned, segments loaded, crash recovery run.

After an unclean shutdown every segment from the one holding the recovery
point onwards is scanned batch by batch (:meth:`LogSegment.recover`): the first
torn or CRC-failing batch and everything after it — in that segment and in all
later ones — is removed, and the indexes are rebuilt from what remains. After
a clean shutdown only the active segment's indexes are sanity-checked. A
segment whose index files are missing is always rebuilt.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from samsa.storage.index import IndexCorruptError
from samsa.storage.log import Clock, Log, wall_clock_ms
from samsa.storage.log_config import LogConfig
from samsa.storage.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
)

log = logging.getLogger(__name__)

_SEGMENT_FILE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex)(.*)$")
_LEFTOVER_SUFFIXES = (DELETED_SUFFIX, ".cleaned", ".swap")


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
    bases = _clean_and_list(directory)
    now = clock()
    segments = [LogSegment(directory, base, config, created_ms=now) for base in bases]
    if not segments:
        segments = [LogSegment(directory, log_start_offset, config, created_ms=now)]

    kept: list[LogSegment] = []
    recover_from = _first_unflushed(segments, recovery_point) if not clean_shutdown else None
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
    loaded.rebuild_producer_state()
    return loaded


def _first_unflushed(segments: list[LogSegment], recovery_point: int) -> int:
    """Index of the segment holding ``recovery_point`` (where recovery starts)."""
    first = 0
    for i, segment in enumerate(segments):
        if segment.base_offset <= recovery_point:
            first = i
    return first


def _clean_and_list(directory: Path) -> list[int]:
    """Remove leftovers of interrupted deletions and orphan indexes; return segment bases."""
    logs: set[int] = set()
    others: list[tuple[int, Path]] = []
    for path in directory.iterdir():
        if path.name.endswith(_LEFTOVER_SUFFIXES):
            path.unlink(missing_ok=True)
            continue
        match = _SEGMENT_FILE.match(path.name)
        if match is None or match.group(3):
            continue
        base = int(match.group(1))
        if match.group(2) == LOG_SUFFIX:
            logs.add(base)
        elif match.group(2) in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            others.append((base, path))
    for base, path in others:
        if base not in logs:
            log.info("removing orphan index %s", path)
            path.unlink(missing_ok=True)
    return sorted(logs)
