"""Bounds check of a kio entity's wire bytes, run before kio's native reader sees them.

kio's Rust reader reserves memory for an array from its count before reading a
single element (``Vec::with_capacity(count)``, 8 bytes per element). A five-byte
compact count of 2**32 or more makes that allocation fail, and the process dies
with SIGABRT — no Python exception, nothing to catch. So every request body is
walked here first, using the layout kio's own dataclasses describe
(``kafka_type`` metadata, field tags, ``__flexible__``), and rejected when:

- an array count is larger than the bytes that remain (every element takes at
  least one byte, so such a count can only be a lie);
- a string, bytes or records length, or a tagged field's size, runs past the end;
- a length or count is negative other than the null marker -1;
- a varint runs longer than five bytes;
- a tagged field has a tag kio does not know (kio would raise ``KeyError``), or
  its value does not fill exactly the size its header declares (kio ignores the
  size and would read the value by schema from a different place);
- a nullable struct's marker is neither -1 (null) nor 1 (present);
- an array, string or bytes field the schema does not declare nullable (at
  this version) is sent null. kio would decode it as None where handlers
  expect a value; Kafka's generated readers refuse it ("non-nullable field
  ... was serialized as null"), and the broker closes the connection.

The walk only skips: records are passed over by their length, fixed-size fields
and arrays of fixed-size elements by arithmetic. Walkers are built once per class
and cached. Nothing here allocates from a count taken off the wire.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import Field, fields
from functools import cache
from typing import Any, TypeAlias

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from samsa.errors import SamsaError

__all__ = ["GuardError", "check_entity"]


class GuardError(SamsaError):
    """Raised when an entity's bytes would make kio allocate from a count the bytes cannot back,
    or do not follow the entity's layout (lengths past the end, unknown tags, bad sizes)."""


Data: TypeAlias = bytes | memoryview
# A walker reads the field (or entity) starting at a position and returns the position after it.
Walker: TypeAlias = Callable[[Data, int], int]
# A layout is either a fixed size in bytes or a walker for a variable-size part.
Layout: TypeAlias = int | Walker

_FIXED_SIZES: dict[str, int] = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
# Legacy (non-flexible) length prefixes: strings carry an int16, bytes and records an int32.
_LEGACY_LENGTH_SIZES: dict[str, int] = {"string": 2, "bytes": 4, "records": 4}

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_MAX_VARINT_BYTES = 5

_walkers: dict[type, Walker] = {}


def check_entity(cls: type, data: bytes | memoryview, offset: int = 0) -> int:
    """Walk ``cls``'s wire layout in ``data`` from ``offset`` and return the offset where it ends.

    Raises :class:`GuardError` when the bytes are truncated or hostile (see the module
    docstring). Passing the check means kio's reader can be run on the same bytes
    without allocating more than a small multiple of ``len(data)``.
    """
    walk = _walkers.get(cls)
    if walk is None:
        walk = _walkers[cls] = _as_walker(_entity_layout(cls, nullable=False))
    try:
        end = walk(data, offset)
    except (IndexError, struct.error):
        raise GuardError(f"{cls.__name__} is truncated") from None
    # Fixed-size fields are skipped without a bounds check; reads past the end raise
    # above, and a skip past the end is caught here.
    if end > len(data):
        raise GuardError(f"{cls.__name__} is truncated")
    return end


def _read_uvarint(data: Data, position: int) -> tuple[int, int]:
    byte = data[position]
    value = byte & 0x7F
    shift = 7
    while byte >= 0x80:
        if shift == 7 * _MAX_VARINT_BYTES:
            raise GuardError("unsigned varint longer than 5 bytes")
        position += 1
        byte = data[position]
        value |= (byte & 0x7F) << shift
        shift += 7
    return value, position + 1


def _skip(size: int) -> Walker:
    def walk(data: Data, position: int) -> int:
        return position + size

    return walk


def _as_walker(layout: Layout) -> Walker:
    return _skip(layout) if isinstance(layout, int) else layout


def _compact_bytes(nullable: bool, kafka_type: str) -> Walker:
    """A compact string or bytes: uvarint length + 1 (0 is null), then the bytes."""

    def walk(data: Data, position: int) -> int:
        length = data[position]
        if length < 0x80:
            position += 1
        else:
            length, position = _read_uvarint(data, position)
        if length == 0:
            if not nullable:
                raise GuardError(f"non-nullable {kafka_type} is null")
            return position
        end = position + length - 1
        if end > len(data):
            raise GuardError(f"compact length {length - 1} runs past the end")
        return end

    return walk


def _legacy_bytes(prefix: struct.Struct, nullable: bool, kafka_type: str) -> Walker:
    """A legacy string (int16 length) or bytes/records (int32 length); -1 is null."""
    prefix_size = prefix.size

    def walk(data: Data, position: int) -> int:
        length: int = prefix.unpack_from(data, position)[0]
        position += prefix_size
        if length < 0:
            if length == -1 and nullable:
                return position
            if length == -1:
                raise GuardError(f"non-nullable {kafka_type} is null")
            raise GuardError(f"negative length {length}")
        end = position + length
        if end > len(data):
            raise GuardError(f"length {length} runs past the end")
        return end

    return walk


def _primitive_layout(
    kafka_type: str, flexible: bool, legacy_string: bool, nullable: bool
) -> Layout:
    size = _FIXED_SIZES.get(kafka_type)
    if size is not None:
        return size
    if kafka_type not in _LEGACY_LENGTH_SIZES:
        raise NotImplementedError(f"no guard for kafka_type {kafka_type!r}")
    if flexible and not legacy_string:
        return _compact_bytes(nullable, kafka_type)
    prefix = _INT16 if _LEGACY_LENGTH_SIZES[kafka_type] == 2 else _INT32
    return _legacy_bytes(prefix, nullable, kafka_type)


def _compact_count(data: Data, position: int) -> tuple[int, int]:
    """A compact array count (uvarint count + 1; 0 is null) checked against the bytes left."""
    count = data[position]
    if count < 0x80:
        position += 1
    else:
        count, position = _read_uvarint(data, position)
    count -= 1
    if count > len(data) - position:
        raise GuardError(f"array count {count} exceeds the {len(data) - position} bytes left")
    return count, position


def _legacy_count(data: Data, position: int) -> tuple[int, int]:
    """A legacy int32 array count (-1 is a null array) checked against the bytes left."""
    (count,) = _INT32.unpack_from(data, position)
    position += 4
    if count < -1:
        raise GuardError(f"negative array count {count}")
    if count > len(data) - position:
        raise GuardError(f"array count {count} exceeds the {len(data) - position} bytes left")
    return count, position


def _array_walker(item: Layout, flexible: bool, nullable: bool, name: str) -> Walker:
    counted = _compact_count if flexible else _legacy_count
    if nullable:
        read_count = counted
    else:

        def read_count(data: Data, position: int) -> tuple[int, int]:
            count, position = counted(data, position)
            if count < 0:
                raise GuardError(f"non-nullable array {name} is null")
            return count, position

    if isinstance(item, int):
        item_size = item

        def walk_fixed_items(data: Data, position: int) -> int:
            count, position = read_count(data, position)
            return position + count * item_size if count > 0 else position

        return walk_fixed_items

    walk_item = item

    def walk_items(data: Data, position: int) -> int:
        count, position = read_count(data, position)
        for _ in range(count):
            position = walk_item(data, position)
        return position

    return walk_items


def _tagged_fields_walker(tagged: dict[int, Walker], entity_name: str) -> Walker:
    def walk(data: Data, position: int) -> int:
        count = data[position]
        if count == 0:
            return position + 1
        count, position = _read_uvarint(data, position)
        if count > len(data) - position:
            raise GuardError(f"{count} tagged fields exceed the bytes left")
        for _ in range(count):
            tag, position = _read_uvarint(data, position)
            size, position = _read_uvarint(data, position)
            end = position + size
            if end > len(data):
                raise GuardError(f"tagged field {tag} of {entity_name} runs past the end")
            walk_value = tagged.get(tag)
            if walk_value is None:
                raise GuardError(f"unknown tagged field {tag} in {entity_name}")
            if walk_value(data, position) != end:
                raise GuardError(f"tagged field {tag} of {entity_name} does not fill its size")
            position = end
        return position

    return walk


def _field_layout(
    field: Field[Any], flexible: bool, in_request_header: bool, tagged: bool
) -> Layout:
    field_class = classify_field(field)
    item: Layout
    if isinstance(field_class, EntityField | EntityTupleField):
        # Only a plain (untagged) single struct carries KIP-893's nullable marker.
        nullable = isinstance(field_class, EntityField) and not tagged and is_optional(field)
        item = _entity_layout(field_class.type_, nullable)
    else:
        # Kafka keeps RequestHeader.client_id a legacy string even in flexible header v2.
        legacy_string = in_request_header and field.name == "client_id"
        # An array's elements are never null; the array itself may be (is_optional).
        item_nullable = is_optional(field) and not field_class.is_array
        item = _primitive_layout(
            field.metadata["kafka_type"], flexible, legacy_string, item_nullable
        )
    if field_class.is_array:
        return _array_walker(item, flexible, is_optional(field), field.name)
    return item


@cache
def _entity_layout(cls: type, nullable: bool) -> Layout:
    flexible: bool = cls.__flexible__  # type: ignore[attr-defined]
    in_request_header = cls.__name__ == "RequestHeader"
    # Each step is (bytes of fixed-size fields to skip first, walker of a variable-size field).
    steps: list[tuple[int, Walker]] = []
    fixed = 0
    tagged: dict[int, Walker] = {}
    for field in fields(cls):
        tag = get_field_tag(field)
        layout = _field_layout(field, flexible, in_request_header, tag is not None)
        if tag is not None:
            tagged[int(tag)] = _as_walker(layout)
        elif isinstance(layout, int):
            fixed += layout
        else:
            steps.append((fixed, layout))
            fixed = 0
    if not steps and not flexible and not nullable:
        return fixed
    walk_tags = _tagged_fields_walker(tagged, cls.__name__) if flexible else None
    return _entity_walker(steps, fixed, walk_tags, nullable, cls.__name__)


def _entity_walker(
    steps: list[tuple[int, Walker]],
    fixed_tail: int,
    walk_tags: Walker | None,
    nullable: bool,
    entity_name: str,
) -> Walker:
    def walk(data: Data, position: int) -> int:
        for fixed, step in steps:
            position = step(data, position + fixed)
        position += fixed_tail
        if walk_tags is None:
            return position
        if data[position] == 0:  # no tagged fields: the common case, without a call
            return position + 1
        return walk_tags(data, position)

    if not nullable:
        return walk

    def walk_nullable(data: Data, position: int) -> int:
        (marker,) = _INT8.unpack_from(data, position)
        if marker == -1:
            return position + 1
        if marker != 1:
            raise GuardError(f"nullable {entity_name} has marker {marker}, not -1 or 1")
        return walk(data, position + 1)

    return walk_nullable
