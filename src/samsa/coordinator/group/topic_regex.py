"""Subscribed topic regexes of consumer groups, with RE2 semantics as Kafka's RE2/J.

Kafka compiles ``SubscribedTopicRegex`` with RE2/J and subscribes a member to every
topic whose whole name matches; this uses Google's RE2 through the ``google-re2``
binding, so a pattern means the same here (no backreferences or lookaround: such a
pattern is invalid, as in Kafka). Internal topics are never matched.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import re2  # type: ignore[import-untyped]

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a client's bad pattern is answered, not logged by RE2


class InvalidRegex(ValueError):
    """The pattern is not a valid RE2 regular expression."""


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> object:
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args else str(exc)
        raise InvalidRegex(reason) from None


def validate(pattern: str) -> None:
    """Raise :class:`InvalidRegex` unless ``pattern`` compiles."""
    _compiled(pattern)


def matching_topics(pattern: str, topics: Iterable[str]) -> frozenset[str]:
    """The topics whose whole name matches ``pattern`` (which must be valid)."""
    compiled = _compiled(pattern)
    return frozenset(t for t in topics if compiled.fullmatch(t) is not None)  # type: ignore[attr-defined]
