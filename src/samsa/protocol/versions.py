"""One class per API for handlers: requests up-converted to the newest version kio has,
responses written down to the version asked (no I/O).

kio has one class per message version. A typed handler (see
:func:`samsa.broker.typed_api.serve`) is written against the newest version's classes, as
Kafka's handlers are written against the one generated class of every version:

- a request of an older version is *up-converted* once: fields the old version lacks
  get the newest schema's defaults (the value Kafka's generated class holds when
  reading that version). An entity whose fields are the newest one's (most of them:
  versions usually only add fields) is kept as it was read, so up-conversion costs
  nothing where there is nothing to add;
- the handler builds the newest response with keyword arguments (a misspelt field is
  a type error), and the response is *down-converted* as it is written: the writer
  of the version asked reads the fields that version has from the newest object and
  leaves the others out, so down-conversion costs nothing either.

This is sound only where every field an old version has is also in the newest (with
a type the old writer accepts). :func:`missing_fields` lists the fields that are not
(FindCoordinator v0–3's single ``key``, OffsetFetch v0–7's single group…): an API
with any serves those versions through a hand-written conversion, or the old way.
"""

from __future__ import annotations

import functools
from dataclasses import fields
from typing import Any, TypeVar

from samsa.protocol.build import complete, nested_entity_classes

T = TypeVar("T")


@functools.cache
def missing_fields(old: type, new: type) -> tuple[str, ...]:
    """Dotted names of the fields entity class ``old`` has that ``new`` lacks (or holds as an
    entity where ``old`` holds a value, or the reverse), nested entities included."""
    new_fields = {f.name: f for f in fields(new)}
    missing: list[str] = []
    old_nested = nested_entity_classes(old)
    new_nested = nested_entity_classes(new)
    for f in fields(old):
        if f.name not in new_fields or (f.name in old_nested) != (f.name in new_nested):
            missing.append(f.name)
        elif f.name in old_nested:
            inner = missing_fields(old_nested[f.name], new_nested[f.name])
            missing.extend(f"{f.name}.{name}" for name in inner)
    return tuple(missing)


@functools.cache
def _same_fields(old: type, new: type) -> bool:
    """Whether an ``old`` object reads as a ``new`` one: the same field names, nested
    entities included (then it is kept as read)."""
    if old is new:
        return True
    if [f.name for f in fields(old)] != [f.name for f in fields(new)]:
        return False
    old_nested, new_nested = nested_entity_classes(old), nested_entity_classes(new)
    return old_nested.keys() == new_nested.keys() and all(
        _same_fields(old_nested[name], new_nested[name]) for name in old_nested
    )


def upgrade(message: Any, newest: type[T]) -> T:
    """``message`` (a kio entity of any version) as a ``newest``: fields it lacks take
    their schema defaults. Kept as it is when its fields are ``newest``'s."""
    cls: type = newest
    old: type = type(message)
    if _same_fields(old, cls):
        return message  # type: ignore[no-any-return]
    return complete(cls, _values(message, cls))  # type: ignore[no-any-return]


def _values(message: Any, newest: type) -> dict[str, Any]:
    nested = nested_entity_classes(newest)
    present = {f.name for f in fields(newest)}
    values: dict[str, Any] = {}
    for f in fields(message):
        if f.name not in present:
            continue  # an old field the newest version dropped: see missing_fields
        value = getattr(message, f.name)
        inner = nested.get(f.name)
        if inner is not None and value is not None:
            if isinstance(value, tuple):
                value = tuple(upgrade(item, inner) for item in value)
            else:
                value = upgrade(value, inner)
        values[f.name] = value
    return values
