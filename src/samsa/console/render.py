"""How the console shows bytes, times, sizes and long lists: record keys, values and
headers as text, pretty-printed JSON or hex; page slices of a filtered list.

Nothing here does I/O; the page modules call these while building a template's values.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Generic, TypeVar

__all__ = [
    "FORMATS",
    "Page",
    "Shown",
    "format_bytes",
    "format_duration_ms",
    "format_timestamp",
    "key_value_lines",
    "paginate",
    "parse_timestamp",
    "show_bytes",
]

T = TypeVar("T")

FORMATS = ("auto", "text", "json", "hex")
"""How to show bytes: ``auto`` picks JSON when they parse as a JSON object or array, text
when they are UTF-8, hex otherwise."""

HEX_LIMIT = 4096  # bytes shown as hex before the rest is cut (the size is still shown)


@dataclass(frozen=True, slots=True)
class Shown:
    """Bytes as the page shows them: the text and the form it is in (``null``, ``text``,
    ``json`` or ``hex``)."""

    text: str
    form: str


def show_bytes(data: bytes | None, fmt: str = "auto") -> Shown:
    """``data`` in format ``fmt`` (one of :data:`FORMATS`); what cannot be shown that
    way falls back to hex, so a page never fails on a record's bytes."""
    if data is None:
        return Shown("null", "null")
    if fmt == "hex":
        return _hex(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return _hex(data)
    if fmt in ("auto", "json"):
        stripped = text.lstrip()
        if fmt == "json" or stripped[:1] in ("{", "["):
            try:
                return Shown(json.dumps(json.loads(text), indent=2, ensure_ascii=False), "json")
            except ValueError:
                pass  # not JSON after all: shown as text
    return Shown(text, "text")


def _hex(data: bytes) -> Shown:
    cut = data[:HEX_LIMIT]
    lines = [
        f"{i:08x}  {cut[i : i + 16].hex(' ')}" for i in range(0, len(cut), 16)
    ]  # one row of 16 bytes per line, as hexdump
    if len(data) > HEX_LIMIT:
        lines.append(f"… {len(data) - HEX_LIMIT} more bytes")
    return Shown("\n".join(lines), "hex")


def format_timestamp(ms: int) -> str:
    """Epoch milliseconds as ``2026-01-31 12:00:00.000 UTC`` (negative: ``-``)."""
    if ms < 0:
        return "-"
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d} UTC"


def parse_timestamp(text: str) -> int:
    """Epoch milliseconds from digits (already epoch ms) or an ISO-8601 time, UTC unless it
    names a zone (``2026-01-31T12:00``, as a browser's datetime-local field sends).
    Raises ValueError when it is neither."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def format_bytes(size: int) -> str:
    """A size for people: ``0 B``, ``1.5 KiB``, ``12.0 MiB`` (negative: unknown, ``-``)."""
    if size < 0:
        return "-"
    if size < 1024:
        return f"{size} B"
    exponent = min(int(math.log(size, 1024)), 4)
    return f"{size / 1024**exponent:.1f} {('KiB', 'MiB', 'GiB', 'TiB')[exponent - 1]}"


def format_duration_ms(text: str | None) -> str:
    """A retention-style config in milliseconds for people: ``7 d``, ``1.5 h``, ``30 min``,
    ``forever`` for -1, ``-`` when unset; a value that is not a number is shown as is."""
    if text is None:
        return "-"
    try:
        ms = int(text)
    except ValueError:
        return text
    if ms < 0:
        return "forever"
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms >= size:
            return f"{ms / size:.4g} {unit}"
    return f"{ms} ms"


def key_value_lines(text: str, what: str) -> list[tuple[str, str]]:
    """``NAME=VALUE`` lines of a form's text area (blank lines skipped; names and values
    stripped). Raises ValueError naming ``what`` (config, header) for a line without a
    name or '='."""
    pairs: list[tuple[str, str]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        key, equals, value = line.partition("=")
        if not equals or not key.strip():
            raise ValueError(f"{what} line {line.strip()!r} is not NAME=VALUE")
        pairs.append((key.strip(), value.strip()))
    return pairs


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a list: its items, its number (from 1), how many pages and items."""

    items: Sequence[T]
    number: int
    pages: int
    total: int
    size: int

    @property
    def first(self) -> int:
        """The 1-based position of the page's first item (0 for an empty list)."""
        return (self.number - 1) * self.size + 1 if self.total else 0

    @property
    def last(self) -> int:
        return (self.number - 1) * self.size + len(self.items)


def paginate(items: Sequence[T], number: int, size: int) -> Page[T]:
    """Page ``number`` (clamped to the pages there are) of ``items``, ``size`` a page."""
    pages = max(1, math.ceil(len(items) / size))
    number = min(max(1, number), pages)
    start = (number - 1) * size
    return Page(items[start : start + size], number, pages, len(items), size)
