"""Kafka's offset checkpoint files (``recovery-point-offset-checkpoint`` and friends).

Text, one entry a line after a version and a count::

    0
    2
    orders 0 1234
    orders 1 987

Written atomically: a ``.tmp`` file is written and fsynced, renamed over the
old one, and the directory fsynced, so a crash leaves the old or the new file.
Reading a damaged file (bytes that are not UTF-8, a wrong count, a line that
is not ``topic partition offset``) raises :class:`StorageError`; what a
damaged file means is the caller's decision (see :mod:`samsa.storage.manager`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from samsa.errors import StorageError
from samsa.types import TopicPartition

CHECKPOINT_VERSION = 0


def fsync_dir(directory: Path) -> None:
    """fsync a directory so renames and creations in it survive a crash."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so a crash leaves either the old or the new content."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_offset_checkpoint(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    lines = [str(CHECKPOINT_VERSION), str(len(offsets))]
    lines += [f"{tp.topic} {tp.partition} {offset}" for tp, offset in sorted(offsets.items())]
    write_atomically(path, ("\n".join(lines) + "\n").encode())


def read_offset_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """Entries of a checkpoint file; an absent file is empty; a malformed one raises."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    try:
        lines = raw.decode("utf-8").splitlines()
        if int(lines[0]) != CHECKPOINT_VERSION:
            raise StorageError(f"checkpoint {path} has unknown version {lines[0]}")
        count = int(lines[1])
        entries = lines[2:]
        if count != len(entries):
            raise StorageError(f"checkpoint {path} declares {count} entries, holds {len(entries)}")
        result: dict[TopicPartition, int] = {}
        for line in entries:
            topic, partition, offset = line.split(" ")
            result[TopicPartition(topic, int(partition))] = int(offset)
        return result
    except (IndexError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise StorageError(f"checkpoint {path} is malformed: {exc}") from exc
