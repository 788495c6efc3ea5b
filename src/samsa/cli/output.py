"""How the admin tools print: tables on stdout, notes and errors on stderr.

A table goes to a terminal as a rich table. Anywhere else (a pipe, a file, a test)
it is plain text: a header line, one line per row, columns padded and separated by
at least two spaces, no cell ever wrapped or cut, and "-" for an empty cell — so
``awk``, ``cut`` or ``re.split(r"\\s{2,}", line)`` can read it. Cells hold no runs of
two spaces, which keeps that split exact.

rich is imported here only, and only when a tool prints; ``samsa serve`` never loads it.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterable, Sequence

__all__ = ["EMPTY", "cell", "note", "print_table"]

EMPTY = "-"

# Wide enough that no real table is ever wrapped.
_PLAIN_WIDTH = 1_000_000


def cell(value: object) -> str:
    """A table cell: None and '' become "-"."""
    if value is None:
        return EMPTY
    text = str(value)
    return text if text else EMPTY


def print_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    """Print a table with ``headers`` to stdout (rich on a terminal, plain columns otherwise)."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    terminal = sys.stdout.isatty()
    table = Table(
        box=box.SIMPLE_HEAD if terminal else None,
        show_edge=terminal,
        pad_edge=terminal,
        header_style="bold" if terminal else "",
        padding=(0, 1),
    )
    for header in headers:
        # Never wrapped or cut, on a terminal either: a folded UUID or member id is
        # worse than a line the terminal wraps, and copying it back must work.
        table.add_column(header, no_wrap=True, overflow="ignore")
    for row in rows:
        table.add_row(*(Text(cell(value)) for value in row))
    if terminal:
        Console(width=_PLAIN_WIDTH, highlight=False, markup=False, emoji=False).print(table)
        return
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=_PLAIN_WIDTH,
        color_system=None,
        force_terminal=False,
        highlight=False,
        markup=False,
        emoji=False,
    )
    console.print(table)
    lines = [line.rstrip() for line in buffer.getvalue().splitlines()]
    sys.stdout.write("".join(f"{line}\n" for line in lines))
    sys.stdout.flush()


def note(prog: str, message: str) -> None:
    """A remark for the person at the terminal (stderr, so stdout stays a clean table)."""
    print(f"{prog}: {message}", file=sys.stderr)
