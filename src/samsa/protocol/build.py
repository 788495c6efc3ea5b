"""Build kio message objects of any version from plain values keyed by Kafka field names.

kio generates one set of frozen dataclasses per message version. Handlers
describe a response once, as dicts and lists using the field names of Kafka's
JSON schemas, and :func:`build` turns that into the exact classes of the
version being answered: fields a version lacks are dropped, fields a handler
leaves out get their schema default (or the type's zero), error codes may be
plain ints, durations plain milliseconds, and timestamps epoch milliseconds
(-1 for none). A key that no version of the message has is a mistake (a
misspelt field would otherwise be answered as its default): :func:`build`
raises :class:`UnknownFieldError` naming it.
"""

from __future__ import annotations

import datetime
import functools
import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import MISSING, fields
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.index import schema_name_map
from kio.serial._introspect import EntityField, EntityTupleField, classify_field, is_optional

_UTC = datetime.UTC


def _to_timedelta(value: Any) -> Any:
    return (
        value if isinstance(value, datetime.timedelta) else datetime.timedelta(milliseconds=value)
    )


def duration_ms(value: datetime.timedelta | int) -> int:
    """Milliseconds of a kio duration field (kio decodes int32/int64 durations as timedelta)."""
    if isinstance(value, datetime.timedelta):
        return int(value / datetime.timedelta(milliseconds=1))
    return int(value)


def _to_datetime(value: Any) -> Any:
    if value is None or isinstance(value, datetime.datetime):
        return value
    if value < 0:
        return None
    return datetime.datetime.fromtimestamp(value / 1000, tz=_UTC)


def _to_error_code(value: Any) -> Any:
    return value if isinstance(value, ErrorCode) else ErrorCode(value)


_PRIMITIVE_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "error_code": _to_error_code,
    "timedelta_i32": _to_timedelta,
    "timedelta_i64": _to_timedelta,
    "datetime_i64": _to_datetime,
}

_ZERO_BY_KAFKA_TYPE: dict[str, Any] = {
    "error_code": ErrorCode.none,
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "datetime_i64": None,
    "string": "",
    "bool": False,
    "records": None,
    "uuid": None,
    "bytes": b"",
}


class _FieldPlan:
    __slots__ = ("convert", "default", "name", "nested", "nested_tuple")

    def __init__(self, f: Any) -> None:
        self.name: str = f.name
        kind = classify_field(f)
        self.nested: type | None = None
        self.nested_tuple = False
        self.convert: Callable[[Any], Any] | None = None
        if isinstance(kind, EntityTupleField):
            self.nested, self.nested_tuple = kind.type_, True
        elif isinstance(kind, EntityField):
            self.nested = kind.type_
        else:
            kafka_type = f.metadata.get("kafka_type", "")
            self.convert = _PRIMITIVE_CONVERTERS.get(kafka_type)
        if f.default is not MISSING:
            self.default: Any = f.default
        elif f.default_factory is not MISSING:
            self.default = f.default_factory()
        elif is_optional(f):
            self.default = None
        elif self.nested_tuple or getattr(kind, "is_array", False):
            self.default = ()
        elif self.nested is not None:
            self.default = None  # built from {} on demand
        else:
            self.default = _ZERO_BY_KAFKA_TYPE.get(f.metadata.get("kafka_type", ""), 0)


class UnknownFieldError(TypeError):
    """Raised by :func:`build` for a key that no version of the kio class has."""


@functools.cache
def _plan(cls: type) -> tuple[_FieldPlan, ...]:
    return tuple(_FieldPlan(f) for f in fields(cls))


_VERSIONED_MODULE = re.compile(r"kio\.schema\.(\w+)\.v\d+\.(\w+)")


@functools.cache
def _own_fields(cls: type) -> frozenset[str]:
    """The field names of ``cls`` itself: enough for nearly every call, without importing
    the other versions of its message (which :func:`known_fields` does, once per class)."""
    return frozenset(f.name for f in fields(cls))


@functools.cache
def known_fields(cls: type) -> frozenset[str]:
    """The field names ``cls`` has in any version of its message (kio has one class per
    version: a response's ``throttle_time`` is known to its v0 class, which lacks it)."""
    names = {f.name for f in fields(cls)}
    match = _VERSIONED_MODULE.fullmatch(cls.__module__)
    if match is not None:
        api, kind = match.groups()
        for version in schema_name_map.get(api, {}):
            try:
                module = importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")
            except ImportError:
                continue
            sibling = getattr(module, cls.__name__, None)
            if isinstance(sibling, type):
                names.update(f.name for f in fields(sibling))
    return frozenset(names)


def build(cls: type, values: Mapping[str, Any], *, older_fields: bool = False) -> Any:
    """An instance of kio class ``cls`` from ``values`` (nested dicts and lists allowed).

    Raises :class:`UnknownFieldError` for a key no version of ``cls`` has, unless
    ``older_fields`` (a request of a version older than kio's, read by
    :mod:`samsa.protocol.legacy`, may carry fields Kafka 4 no longer has: they are dropped).
    """
    if (
        not older_fields
        and not _own_fields(cls).issuperset(values)
        and not known_fields(cls).issuperset(values)
    ):
        unknown = sorted(set(values) - known_fields(cls))
        raise UnknownFieldError(
            f"{cls.__module__}.{cls.__name__} has no field {', '.join(map(repr, unknown))} "
            f"in any version; its fields: {', '.join(sorted(known_fields(cls)))}"
        )
    kwargs: dict[str, Any] = {}
    for plan in _plan(cls):
        if plan.name in values:
            value = values[plan.name]
            if plan.nested is not None and value is not None:
                if plan.nested_tuple:
                    nested = plan.nested
                    value = tuple(
                        item
                        if isinstance(item, nested)
                        else build(nested, item, older_fields=older_fields)
                        for item in value
                    )
                elif not isinstance(value, plan.nested):
                    value = build(plan.nested, value, older_fields=older_fields)
            elif plan.convert is not None:
                value = plan.convert(value)
            elif isinstance(value, list):
                value = tuple(value)
            kwargs[plan.name] = value
        elif plan.default is None and plan.nested is not None and not plan.nested_tuple:
            kwargs[plan.name] = build(plan.nested, {})
        else:
            kwargs[plan.name] = plan.default
    return cls(**kwargs)


def complete(cls: type, values: Mapping[str, Any]) -> Any:
    """``cls(**values)`` with the fields ``values`` lacks at their defaults (as :func:`build`
    gives them); the values are taken as they are, not converted."""
    kwargs: dict[str, Any] = {}
    for plan in _plan(cls):
        if plan.name in values:
            kwargs[plan.name] = values[plan.name]
        elif plan.default is None and plan.nested is not None and not plan.nested_tuple:
            kwargs[plan.name] = build(plan.nested, {})
        else:
            kwargs[plan.name] = plan.default
    return cls(**kwargs)


@functools.cache
def nested_entity_classes(cls: type) -> dict[str, type]:
    """The entity class of each of ``cls``'s entity fields (the item class of an array)."""
    return {plan.name: plan.nested for plan in _plan(cls) if plan.nested is not None}


def nested_class(cls: type, name: str) -> type:
    """The kio class of ``cls``'s field ``name`` (the item class of an array of entities)."""
    for plan in _plan(cls):
        if plan.name == name and plan.nested is not None:
            return plan.nested
    raise KeyError(f"{cls.__name__} has no entity field {name!r}")
