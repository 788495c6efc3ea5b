"""AVRO compatibility, one rule of Avro's schema resolution per test, and the levels."""

from __future__ import annotations

import json
from typing import Any

import pytest

from samsa.registry.compatibility import compatibility_errors
from samsa.registry.formats import Dependency, SchemaParseError, parse_schema


def avro(schema: Any, deps: list[Dependency] | None = None) -> Any:
    return parse_schema("AVRO", json.dumps(schema), deps)


def record(*fields: dict[str, Any], name: str = "R", **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


def reads(reader: Any, writer: Any) -> bool:
    return not avro(reader).read_errors(avro(writer))


@pytest.mark.parametrize(
    ("writer", "reader"),
    [("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"),
     ("long", "double"), ("float", "double"), ("string", "bytes"), ("bytes", "string")],
)  # fmt: skip
def test_a_writer_primitive_is_promoted_to_a_wider_reader_primitive(
    writer: str, reader: str
) -> None:
    assert reads(reader, writer)


@pytest.mark.parametrize(
    ("writer", "reader"),
    [("long", "int"), ("double", "float"), ("string", "int"), ("boolean", "null")],
)
def test_a_narrower_or_other_reader_primitive_cannot_read(writer: str, reader: str) -> None:
    assert not reads(reader, writer)


def test_a_reader_field_with_a_default_reads_data_without_it() -> None:
    old = record({"name": "a", "type": "int"})
    new = record({"name": "a", "type": "int"}, {"name": "b", "type": "string", "default": ""})
    assert reads(new, old)


def test_a_reader_field_without_a_default_cannot_read_data_without_it() -> None:
    old = record({"name": "a", "type": "int"})
    new = record({"name": "a", "type": "int"}, {"name": "b", "type": "string"})
    assert not reads(new, old)


def test_a_writer_field_the_reader_lacks_is_skipped() -> None:
    writer = record({"name": "a", "type": "int"}, {"name": "b", "type": "string"})
    assert reads(record({"name": "a", "type": "int"}), writer)


def test_a_reader_field_alias_finds_the_writer_field_renamed() -> None:
    writer = record({"name": "old_name", "type": "int"})
    reader = record({"name": "new_name", "type": "int", "aliases": ["old_name"]})
    assert reads(reader, writer)


def test_records_of_other_names_do_not_read_each_other_unless_aliased() -> None:
    assert not reads(
        record({"name": "a", "type": "int"}, name="B"), record({"name": "a", "type": "int"})
    )
    aliased = record({"name": "a", "type": "int"}, name="B", aliases=["R"])
    assert reads(aliased, record({"name": "a", "type": "int"}))


def test_an_enum_reader_needs_every_writer_symbol_unless_it_has_a_default() -> None:
    small = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
    large = {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}
    assert reads(large, small)
    assert not reads(small, large)
    assert reads({**small, "default": "A"}, large)


def test_fixed_sizes_must_match() -> None:
    assert reads(
        {"type": "fixed", "name": "F", "size": 4}, {"type": "fixed", "name": "F", "size": 4}
    )
    assert not reads(
        {"type": "fixed", "name": "F", "size": 8}, {"type": "fixed", "name": "F", "size": 4}
    )


def test_arrays_and_maps_are_checked_by_their_items_and_values() -> None:
    assert reads({"type": "array", "items": "long"}, {"type": "array", "items": "int"})
    assert not reads({"type": "array", "items": "int"}, {"type": "array", "items": "long"})
    assert reads({"type": "map", "values": "double"}, {"type": "map", "values": "float"})
    assert not reads({"type": "map", "values": "int"}, {"type": "map", "values": "string"})


def test_a_reader_union_reads_a_writer_type_one_of_its_branches_reads() -> None:
    assert reads(["null", "string"], "string")
    assert not reads(["null", "int"], "string")


def test_a_writer_union_needs_every_branch_read() -> None:
    assert reads(["null", "long", "string"], ["null", "int"])
    assert not reads(["null", "string"], ["null", "string", "int"])
    assert not reads("string", ["null", "string"])


def test_recursive_records_are_checked_without_looping() -> None:
    node = record(
        {"name": "value", "type": "int"},
        {"name": "next", "type": ["null", "Node"], "default": None},
        name="Node",
    )
    wider = record(
        {"name": "value", "type": "long"},
        {"name": "next", "type": ["null", "Node"], "default": None},
        name="Node",
    )
    assert reads(wider, node)
    assert not reads(node, wider)


def test_named_types_from_references_are_resolved() -> None:
    address_schema = record({"name": "street", "type": "string"}, name="Address", namespace="acme")
    address = Dependency("acme.Address", "AVRO", json.dumps(address_schema))
    person = record({"name": "home", "type": "acme.Address"}, name="Person", namespace="acme")
    parsed = avro(person, [address])
    assert parsed.read_errors(avro(person, [address])) == []


def test_invalid_avro_is_a_parse_error() -> None:
    for text in ('{"type": "record"}', '{"type": "nope"}', "[]", '{"type": "enum", "name": "E", '
                 '"symbols": ["A", "A"]}', "not json", "3"):  # fmt: skip
        with pytest.raises(SchemaParseError):
            parse_schema("AVRO", text)


V1 = record({"name": "a", "type": "int"})
V2 = record({"name": "a", "type": "int", "default": 0}, {"name": "b", "type": "int", "default": 0})
V3 = record({"name": "b", "type": "int", "default": 0})


def errors_at(level: str, new: Any, *earlier: Any) -> list[str]:
    return compatibility_errors(level, avro(new), [avro(e) for e in earlier])


def test_backward_checks_the_new_schema_reading_the_latest() -> None:
    assert errors_at("BACKWARD", V2, V1) == []
    assert errors_at("BACKWARD", record({"name": "c", "type": "int"}), V1) != []


def test_forward_checks_the_latest_reading_the_new_schema() -> None:
    assert errors_at("FORWARD", V2, V1) == []
    # V1 reading what V3 writes: a has no default and V3 has no a
    assert errors_at("FORWARD", V3, V1) != []


def test_full_needs_both_directions() -> None:
    assert errors_at("FULL", V2, V1) == []
    assert errors_at("FULL", record({"name": "a", "type": "int"}, {"name": "z", "type": "int"}), V1)


def test_plain_levels_check_only_the_latest_and_transitive_ones_every_version() -> None:
    assert errors_at("FORWARD", V3, V1, V2) == []
    assert errors_at("FORWARD_TRANSITIVE", V3, V1, V2) != []
    assert errors_at("BACKWARD_TRANSITIVE", V2, V1, V2) == []
    assert errors_at("FULL_TRANSITIVE", V3, V1, V2) != []


def test_none_checks_nothing() -> None:
    assert errors_at("NONE", "string", V1) == []
