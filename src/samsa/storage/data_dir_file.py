"""A small JSON document kept whole in every data directory: the newest copy wins.

Broker metadata that is not a log — dynamic configs, ACLs, SCRAM credentials of a
single node — is one JSON document with a ``sequence`` number, written
atomically (:func:`~samsa.storage.checkpoint.write_atomically`) to each of
``log.dirs``. At start the copy with the highest sequence wins, so the order of
``log.dirs`` does not matter and a directory missed by a crash mid-write is
outvoted. A copy that cannot be read or parsed stops start-up with a message
naming the file and what removing it would drop — carrying on without it could
silently lose what it holds (a retention setting, an ACL, every user's login).

Not thread-safe: one owner loads it at start and saves it (off the event loop).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from samsa.errors import ConfigError
from samsa.storage.checkpoint import write_atomically

__all__ = ["DataDirFile"]

T = TypeVar("T")


class DataDirFile:
    """The file ``name`` in each of ``directories``; ``removal_drops`` says what removing a
    broken copy would lose (it ends the error message)."""

    def __init__(self, directories: Sequence[Path], name: str, removal_drops: str) -> None:
        self.directories = tuple(directories)
        self.name = name
        self.removal_drops = removal_drops
        self.sequence = 0
        """The sequence of the newest copy loaded or saved (0: none yet)."""

    def load(self, parse: Callable[[Mapping[str, Any]], T]) -> T | None:
        """``parse`` of the newest copy (None when no directory has one). ``parse`` raises
        ValueError, KeyError or TypeError for a document it cannot read."""
        newest: tuple[int, T] | None = None
        for directory in self.directories:
            path = directory / self.name
            try:
                raw = json.loads(path.read_bytes())
                stored = (int(raw["sequence"]), parse(raw))
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
            except (ValueError, KeyError, TypeError) as exc:
                raise ConfigError(
                    f"{path} is malformed ({exc}): repair it, or remove it, which drops "
                    f"{self.removal_drops}"
                ) from exc
            if newest is None or stored[0] > newest[0]:
                newest = stored
        if newest is None:
            return None
        self.sequence = newest[0]
        return newest[1]

    def encode_next(self, document: Mapping[str, Any]) -> tuple[int, bytes]:
        """The next sequence and the bytes of ``document`` stamped with it (version 1)."""
        sequence = self.sequence + 1
        body = {"version": 1, "sequence": sequence, **document}
        return sequence, json.dumps(body, indent=1, sort_keys=True).encode()

    def save(self, sequence: int, data: bytes) -> None:
        """Write ``data`` (from :meth:`encode_next`) to every directory (blocking; raises
        OSError), then take its sequence."""
        for directory in self.directories:
            write_atomically(directory / self.name, data)
        self.sequence = sequence
