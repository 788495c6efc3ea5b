"""Protobuf schemas: parsing both inputs, the canonical form, references, and one of
Confluent's documented compatibility rules per test."""

from __future__ import annotations

import base64

import pytest
from google.protobuf import descriptor_pb2

from samsa.registry.compatibility import compatibility_errors
from samsa.registry.formats import Dependency, SchemaParseError, parse_schema
from samsa.registry.formats.protobuf import ProtobufSchema

PROTO3 = 'syntax = "proto3";\npackage shop;\n'


def parse(text: str, deps: list[Dependency] | None = None) -> ProtobufSchema:
    parsed = parse_schema("PROTOBUF", text, deps)
    assert isinstance(parsed, ProtobufSchema)
    return parsed


def message(body: str, header: str = PROTO3, extra: str = "") -> str:
    return f"{header}message Order {{\n{body}\n}}\n{extra}"


def errors(new: str, old: str) -> list[str]:
    """Why ``new`` cannot read what ``old`` wrote."""
    return parse(new).read_errors(parse(old))


def compatible(new: str, old: str) -> bool:
    return not errors(new, old)


# -- parsing ------------------------------------------------------------------------

FULL = """
syntax = "proto3";
package a.b;
import "other.proto";
option java_package = "com.example";
message M {
  string s = 1;
  repeated Inner inner = 2 [deprecated = true];
  map<string, int32> my_map = 3;
  oneof choice { int32 x = 4; string y = 5; }
  reserved 10, 12 to 15;
  reserved "foo";
  message Inner { E e = 1; }
  enum E { Z = 0; O = 1; }
  optional int64 opt = 6;
  other.O o = 7;
}
enum Top { T0 = 0; }
service S { rpc Get(M) returns (stream M); }
"""
OTHER = Dependency(
    "other.proto", "PROTOBUF", 'syntax = "proto3"; package other; message O { int32 v = 1; }'
)


def test_the_canonical_form_is_resolved_proto_text_that_parses_back_to_itself() -> None:
    parsed = parse(FULL, [OTHER])
    text = parsed.canonical
    assert "repeated .a.b.M.Inner inner = 2 [deprecated = true];" in text
    assert "map<string, int32> my_map = 3;" in text
    assert "optional int64 opt = 6;" in text
    assert ".other.O o = 7;" in text
    assert 'option java_package = "com.example";' in text
    assert "rpc Get(.a.b.M) returns (stream .a.b.M);" in text
    assert parse(text, [OTHER]).canonical == text


def test_a_serialized_descriptor_is_the_same_schema_as_its_text() -> None:
    parsed = parse(FULL, [OTHER])
    again = parse(parsed.serialized, [OTHER])
    assert again.canonical == parsed.canonical
    decoded = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(parsed.serialized))
    assert decoded.package == "a.b"
    assert [m.name for m in decoded.message_type] == ["M"]


def test_a_descriptor_built_by_protobuf_itself_is_accepted() -> None:
    file = descriptor_pb2.FileDescriptorProto(name="x.proto", package="p", syntax="proto3")
    msg = file.message_type.add(name="Point")
    msg.field.add(name="x", number=1, label=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT32)
    text = base64.b64encode(file.SerializeToString()).decode()
    assert "int32 x = 1;" in parse(text).canonical


def test_normalize_orders_fields_by_number() -> None:
    parsed = parse(message("int32 b = 2;\nint32 a = 1;"))
    assert parsed.normalized.index("int32 a = 1") < parsed.normalized.index("int32 b = 2")
    assert parsed.canonical.index("int32 b = 2") < parsed.canonical.index("int32 a = 1")


def test_imports_resolve_through_references_and_well_known_types_are_there() -> None:
    text = message(
        "other.O o = 1;\ngoogle.protobuf.Timestamp at = 2;\ngoogle.type.Date day = 3;",
        header=PROTO3
        + 'import "other.proto";\nimport "google/protobuf/timestamp.proto";\n'
        + 'import "google/type/date.proto";\n',
    )
    canonical = parse(text, [OTHER]).canonical
    assert ".google.protobuf.Timestamp at = 2;" in canonical
    assert ".google.type.Date day = 3;" in canonical
    with pytest.raises(SchemaParseError):
        parse(text)  # other.proto is not referenced


@pytest.mark.parametrize(
    "bad",
    [
        "message { bad",
        message("Unknown u = 1;"),
        message("int32 a = 1;\nint32 b = 1;"),  # a number used twice
        "@@@",
        "aGVsbG8=",  # base64, but not a descriptor
        'syntax = "proto4";',
        message("int32 a = 1;", extra="message Order { }"),  # declared twice
    ],
)
def test_invalid_schemas_are_refused(bad: str) -> None:
    with pytest.raises(SchemaParseError):
        parse(bad)


def test_a_reference_to_a_schema_of_another_type_is_refused() -> None:
    with pytest.raises(SchemaParseError):
        parse(message("int32 a = 1;"), [Dependency("x.avsc", "AVRO", '"string"')])


# -- compatibility: refused -----------------------------------------------------------


def test_a_syntax_change_is_incompatible() -> None:
    assert not compatible(
        message("optional int32 a = 1;", header='syntax = "proto2";\npackage shop;\n'),
        message("int32 a = 1;"),
    )


def test_a_package_change_is_incompatible() -> None:
    new = message("int32 a = 1;", header='syntax = "proto3";\npackage store;\n')
    assert any("package" in e for e in errors(new, message("int32 a = 1;")))


def test_a_removed_message_is_incompatible() -> None:
    old = message("int32 a = 1;", extra="message Line { int32 n = 1; }")
    assert any("message shop.Line was removed" in e for e in errors(message("int32 a = 1;"), old))


def test_a_message_moved_to_another_scope_is_incompatible() -> None:
    old = message("int32 a = 1;", extra="message Line { int32 n = 1; }")
    new = message("int32 a = 1;\nmessage Line { int32 n = 1; }")
    assert not compatible(new, old)


def test_a_removed_enum_is_incompatible() -> None:
    old = message("int32 a = 1;", extra="enum Status { NEW = 0; }")
    assert any("enum shop.Status was removed" in e for e in errors(message("int32 a = 1;"), old))


def test_a_field_kind_change_is_incompatible() -> None:
    old = message("int32 a = 1;", extra="message Line { int32 n = 1; }")
    new = message("Line a = 1;", extra="message Line { int32 n = 1; }")
    assert any("from a scalar to a message" in e for e in errors(new, old))


def test_a_scalar_type_change_outside_a_compatible_group_is_incompatible() -> None:
    assert not compatible(message("string a = 1;"), message("int32 a = 1;"))
    assert not compatible(message("sint32 a = 1;"), message("int32 a = 1;"))
    assert not compatible(message("double a = 1;"), message("float a = 1;"))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("int32", "int64"),
        ("uint64", "bool"),
        ("sint32", "sint64"),
        ("fixed32", "sfixed32"),
        ("fixed64", "sfixed64"),
        ("string", "bytes"),
    ],
)
def test_a_scalar_type_change_inside_a_compatible_group_is_compatible(old: str, new: str) -> None:
    assert compatible(message(f"{new} a = 1;"), message(f"{old} a = 1;"))


def test_a_change_of_the_named_type_is_incompatible() -> None:
    extra = "message A { int32 n = 1; }\nmessage B { int32 n = 1; }"
    assert not compatible(message("B x = 1;", extra=extra), message("A x = 1;", extra=extra))


def test_a_map_value_type_change_is_incompatible_and_a_renamed_map_is_not() -> None:
    old = message("map<string, int32> counts = 1;")
    assert not compatible(message("map<string, string> counts = 1;"), old)
    assert compatible(message("map<string, int32> totals = 1;"), old)


def test_a_required_field_added_or_removed_is_incompatible() -> None:
    proto2 = 'syntax = "proto2";\npackage shop;\n'
    plain = message("optional int32 a = 1;", header=proto2)
    required = message("optional int32 a = 1;\nrequired int32 b = 2;", header=proto2)
    assert any("required field b (2) was added" in e for e in errors(required, plain))
    assert any("required field b (2) was removed" in e for e in errors(plain, required))


def test_singular_to_repeated_is_incompatible_for_strings_and_messages_not_numbers() -> None:
    assert not compatible(message("repeated string a = 1;"), message("string a = 1;"))
    assert compatible(message("repeated int32 a = 1;"), message("int32 a = 1;"))


def test_a_field_removed_from_a_oneof_is_incompatible() -> None:
    old = message("oneof pay { string card = 1; string cash = 2; }")
    new = message("oneof pay { string card = 1; }")
    assert any("removed from oneof pay" in e for e in errors(new, old))


def test_a_field_moved_into_an_existing_oneof_is_incompatible() -> None:
    old = message("oneof pay { string card = 1; }\nstring cash = 2;")
    new = message("oneof pay { string card = 1; string cash = 2; }")
    assert any("existing oneof pay" in e for e in errors(new, old))


def test_several_fields_moved_into_a_new_oneof_are_incompatible_one_is_not() -> None:
    old = message("string card = 1;\nstring cash = 2;")
    assert not compatible(message("oneof pay { string card = 1; string cash = 2; }"), old)
    assert compatible(message("oneof pay { string card = 1; }\nstring cash = 2;"), old)


# -- compatibility: allowed -----------------------------------------------------------


def test_fields_added_and_removed_are_compatible() -> None:
    assert compatible(message("int32 a = 1;\nstring b = 2;"), message("int32 a = 1;"))
    assert compatible(message("int32 a = 1;"), message("int32 a = 1;\nstring b = 2;"))


def test_a_renamed_field_is_compatible() -> None:
    assert compatible(message("int32 total = 1;"), message("int32 amount = 1;"))


def test_messages_enums_and_enum_values_added_or_removed_are_compatible() -> None:
    old = message("Status s = 1;", extra="enum Status { NEW = 0; }")
    new = message(
        "Status s = 1;", extra="enum Status { NEW = 0; PAID = 1; }\nmessage Line { int32 n = 1; }"
    )
    assert compatible(new, old)
    assert compatible(old, message("Status s = 1;", extra="enum Status { NEW = 0; PAID = 1; }"))


def test_a_new_oneof_and_a_whole_oneof_removed_are_compatible() -> None:
    old = message("int32 a = 1;")
    new = message("int32 a = 1;\noneof pay { string card = 2; string cash = 3; }")
    assert compatible(new, old)
    assert compatible(old, new)


# -- through the compatibility levels ---------------------------------------------------


def test_levels_apply_the_rules_in_the_right_direction() -> None:
    old = parse(message("oneof pay { string card = 1; string cash = 2; }"))
    new = parse(message("oneof pay { string card = 1; }"))
    # removing a oneof field: the new schema reading old data is refused ...
    assert compatibility_errors("BACKWARD", new, [old])
    # ... and adding one back (the old schema reading the new) is not
    assert not compatibility_errors("FORWARD", new, [old])
    assert compatibility_errors("FULL", new, [old])
    assert not compatibility_errors("NONE", new, [old])


def test_a_transitive_level_checks_every_earlier_version() -> None:
    v1 = parse(message("int32 a = 1;"))
    v2 = parse(message("int32 b = 2;"))
    v3 = parse(message("string a = 1;"))
    assert not compatibility_errors("BACKWARD", v3, [v1, v2])
    assert compatibility_errors("BACKWARD_TRANSITIVE", v3, [v1, v2])
