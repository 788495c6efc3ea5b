"""Compatibility levels: which earlier versions a new schema is checked against, and how.

- BACKWARD: the new schema reads what the latest version wrote;
- FORWARD: the latest version reads what the new schema writes;
- FULL: both;
- the ``_TRANSITIVE`` variants: the same against every live version, not only the
  latest;
- NONE: no check.
"""

from __future__ import annotations

from samsa.registry.formats import ParsedSchema

LEVELS = (
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
    "NONE",
)
DEFAULT_LEVEL = "BACKWARD"


def compatibility_errors(level: str, new: ParsedSchema, earlier: list[ParsedSchema]) -> list[str]:
    """Why ``new`` may not follow ``earlier`` (oldest first) under ``level`` (empty: it may)."""
    if level == "NONE" or not earlier:
        return []
    against = earlier if level.endswith("_TRANSITIVE") else earlier[-1:]
    base = level.removesuffix("_TRANSITIVE")
    errors: list[str] = []
    try:
        _check(base, new, against, errors)
    except RecursionError:
        errors.append("the schemas nest too deeply to be compared")
    return errors


def _check(base: str, new: ParsedSchema, against: list[ParsedSchema], errors: list[str]) -> None:
    for old in reversed(against):
        if base in ("BACKWARD", "FULL"):
            errors += [f"{e} (reading what the earlier schema wrote)" for e in new.read_errors(old)]
        if base in ("FORWARD", "FULL"):
            errors += [f"{e} (the earlier schema reading)" for e in old.read_errors(new)]
