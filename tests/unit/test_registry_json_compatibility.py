"""JSON Schema compatibility: one of Confluent's documented rules per test."""

from __future__ import annotations

import json
from typing import Any

import pytest

from samsa.registry.compatibility import compatibility_errors
from samsa.registry.formats import SchemaParseError, parse_schema
from samsa.registry.formats.json_schema import JsonSchema


def reads(reader: Any, writer: Any) -> bool:
    """Whether every document ``writer`` accepts is one ``reader`` accepts."""
    parsed_reader = parse_schema("JSON", json.dumps(reader))
    return not parsed_reader.read_errors(parse_schema("JSON", json.dumps(writer)))


def obj(closed: bool = False, required: tuple[str, ...] = (), **props: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if closed:
        schema["additionalProperties"] = False
    if required:
        schema["required"] = list(required)
    return schema


def test_a_changed_type_is_incompatible() -> None:
    assert not reads({"type": "string"}, {"type": "integer"})


def test_integer_widens_to_number_but_number_does_not_narrow_to_integer() -> None:
    assert reads({"type": "number"}, {"type": "integer"})
    assert not reads({"type": "integer"}, {"type": "number"})


def test_a_reader_accepting_more_types_reads_a_writer_of_fewer() -> None:
    assert reads({"type": ["string", "null"]}, {"type": "string"})
    assert not reads({"type": "string"}, {"type": ["string", "null"]})


def test_an_optional_property_added_to_a_closed_content_model_is_compatible() -> None:
    writer = obj(closed=True, id={"type": "integer"})
    reader = obj(closed=True, id={"type": "integer"}, note={"type": "string"})
    assert reads(reader, writer)


def test_a_property_added_to_an_open_content_model_is_incompatible() -> None:
    writer = obj(id={"type": "integer"})
    reader = obj(id={"type": "integer"}, note={"type": "string"})
    assert not reads(reader, writer)


def test_a_newly_required_property_is_incompatible_unless_it_has_a_default() -> None:
    writer = obj(True, ("id",), id={"type": "integer"}, note={"type": "string"})
    required = obj(True, ("id", "note"), id={"type": "integer"}, note={"type": "string"})
    assert not reads(required, writer)
    with_default = obj(
        True, ("id", "note"), id={"type": "integer"}, note={"type": "string", "default": ""}
    )
    assert reads(with_default, writer)


def test_removing_a_property_breaks_a_closed_reader_not_an_open_one() -> None:
    writer = obj(id={"type": "integer"}, note={"type": "string"})
    assert reads(obj(id={"type": "integer"}), writer)
    assert not reads(obj(closed=True, id={"type": "integer"}), writer)


def test_closing_the_content_model_is_incompatible_and_opening_it_is_not() -> None:
    open_model = obj(id={"type": "integer"})
    closed_model = obj(closed=True, id={"type": "integer"})
    assert not reads(closed_model, open_model)
    assert reads(open_model, closed_model)


@pytest.mark.parametrize(
    ("keyword", "writer_value", "narrower"),
    [("maxLength", 10, 5), ("minLength", 1, 3), ("maximum", 100, 50), ("minimum", 0, 10),
     ("maxItems", 5, 2), ("minItems", 0, 1)],
)  # fmt: skip
def test_narrowing_a_bound_is_incompatible_and_widening_it_is_not(
    keyword: str, writer_value: int, narrower: int
) -> None:
    kind = "array" if "Items" in keyword else "string" if "Length" in keyword else "number"
    writer = {"type": kind, keyword: writer_value}
    assert not reads({"type": kind, keyword: narrower}, writer)
    assert reads({"type": kind}, writer)


def test_adding_a_pattern_is_incompatible() -> None:
    assert not reads({"type": "string", "pattern": "^a"}, {"type": "string"})


def test_an_enum_may_grow_but_not_shrink() -> None:
    assert reads({"enum": ["a", "b", "c"]}, {"enum": ["a", "b"]})
    assert not reads({"enum": ["a"]}, {"enum": ["a", "b"]})


def test_array_items_are_compared() -> None:
    assert reads({"type": "array", "items": {"type": "number"}},
                 {"type": "array", "items": {"type": "integer"}})  # fmt: skip
    assert not reads({"type": "array", "items": {"type": "string"}},
                     {"type": "array", "items": {"type": "integer"}})  # fmt: skip


def test_a_oneof_reader_must_read_every_writer_branch() -> None:
    two = {"oneOf": [{"type": "string"}, {"type": "integer"}]}
    three = {"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "boolean"}]}
    assert reads(three, two)
    assert not reads(two, three)


def test_local_refs_are_followed() -> None:
    def with_ref(kind: str) -> dict[str, Any]:
        return {
            "definitions": {"id": {"type": kind}},
            "type": "object",
            "properties": {"id": {"$ref": "#/definitions/id"}},
        }

    assert reads(with_ref("number"), with_ref("integer"))
    assert not reads(with_ref("string"), with_ref("integer"))


def test_nested_objects_are_compared_recursively() -> None:
    writer = obj(address=obj(closed=True, street={"type": "string"}))
    reader = obj(address=obj(closed=True, street={"type": "integer"}))
    assert not reads(reader, writer)


def test_invalid_json_schemas_are_parse_errors() -> None:
    for text in ('{"type": "nonsense"}', '{"minimum": "ten"}', "[1]", "{", '"x"'):
        with pytest.raises(SchemaParseError):
            parse_schema("JSON", text)


def test_schemas_too_deep_to_compare_are_reported_incompatible_not_raised() -> None:
    def nested(leaf: str) -> JsonSchema:
        schema: dict[str, Any] = {"type": leaf}
        for _ in range(5000):
            schema = {"type": "object", "properties": {"n": schema}}
        return JsonSchema(schema, {})

    assert compatibility_errors("BACKWARD", nested("string"), [nested("integer")]) == [
        "the schemas nest too deeply to be compared"
    ]
