"""Protobuf schemas: ``.proto`` text (parsed by proto-schema-parser) or a base64
serialized ``FileDescriptorProto`` (what confluent-kafka's ProtobufSerializer
registers), resolved and checked by protobuf's ``DescriptorPool``.

Both inputs become one resolved ``FileDescriptorProto`` (type names fully
qualified, field kinds known). The canonical form is that descriptor written back
as ``.proto`` text, so a schema registered as text and the same schema registered
serialized are one schema; ``format=serialized`` hands out the descriptor in base64.
Custom options (``(name)``) and extension declarations are not kept.

Imports name other schemas through references: ``import "other.proto"`` needs a
reference named ``other.proto``. The well-known types (``google/protobuf/*.proto``)
and the common types of ``google/type/*.proto`` (googleapis-common-protos) are always
there, as Confluent's serializers do not register them.

Compatibility follows the rules Confluent documents for Protobuf, with the reader
the new schema and the writer the earlier one (BACKWARD); the check is the same
difference computed the other way round for FORWARD. Refused:

- the syntax (proto2/proto3) or the package changed;
- a message or an enum removed (or moved to another scope: its full name changed);
- a field's kind changed (scalar / message / enum), a scalar type changed outside
  the wire-compatible groups (``int32 uint32 int64 uint64 bool``, ``sint32
  sint64``, ``fixed32 sfixed32``, ``fixed64 sfixed64``, ``string bytes``), or the
  message or enum type a field names changed (map fields are compared by key and
  value types);
- a field changed between singular and repeated, unless it is numeric or an enum;
- a required field added or removed;
- a field removed from a oneof that stays, a field moved into a oneof that
  already existed, several existing fields moved into a new oneof.

Allowed: messages, enums, fields, enum values and oneofs added; fields, enum
values and whole oneofs removed; fields and enum values renamed; one field moved
into a new oneof.
"""

from __future__ import annotations

import base64
import binascii
import functools
import importlib
import json
import pkgutil
import re
from collections.abc import Iterator
from typing import Any

from google.protobuf import (
    any_pb2,
    api_pb2,
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,
    empty_pb2,
    field_mask_pb2,
    source_context_pb2,
    struct_pb2,
    timestamp_pb2,
    type_pb2,
    wrappers_pb2,
)
from google.protobuf.descriptor_pb2 import (
    DescriptorProto,
    EnumDescriptorProto,
    FieldDescriptorProto,
    FileDescriptorProto,
    ServiceDescriptorProto,
)
from google.protobuf.message import DecodeError
from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

from samsa.registry.formats.base import Dependency, ParsedSchema, SchemaParseError

_WELL_KNOWN = (
    any_pb2,
    source_context_pb2,
    type_pb2,
    api_pb2,
    descriptor_pb2,
    duration_pb2,
    empty_pb2,
    field_mask_pb2,
    struct_pb2,
    timestamp_pb2,
    wrappers_pb2,
)
_SCALARS = {
    "double": FieldDescriptorProto.TYPE_DOUBLE,
    "float": FieldDescriptorProto.TYPE_FLOAT,
    "int64": FieldDescriptorProto.TYPE_INT64,
    "uint64": FieldDescriptorProto.TYPE_UINT64,
    "int32": FieldDescriptorProto.TYPE_INT32,
    "fixed64": FieldDescriptorProto.TYPE_FIXED64,
    "fixed32": FieldDescriptorProto.TYPE_FIXED32,
    "bool": FieldDescriptorProto.TYPE_BOOL,
    "string": FieldDescriptorProto.TYPE_STRING,
    "bytes": FieldDescriptorProto.TYPE_BYTES,
    "uint32": FieldDescriptorProto.TYPE_UINT32,
    "sfixed32": FieldDescriptorProto.TYPE_SFIXED32,
    "sfixed64": FieldDescriptorProto.TYPE_SFIXED64,
    "sint32": FieldDescriptorProto.TYPE_SINT32,
    "sint64": FieldDescriptorProto.TYPE_SINT64,
}
_SCALAR_NAMES = {number: name for name, number in _SCALARS.items()}
_COMPATIBLE_SCALARS = (
    {"int32", "uint32", "int64", "uint64", "bool"},
    {"sint32", "sint64"},
    {"fixed32", "sfixed32"},
    {"fixed64", "sfixed64"},
    {"string", "bytes"},
)
_LABELS = {
    FieldDescriptorProto.LABEL_OPTIONAL: "optional",
    FieldDescriptorProto.LABEL_REQUIRED: "required",
    FieldDescriptorProto.LABEL_REPEATED: "repeated",
}
_MAX_FIELD = 536870912  # 2**29: one past the largest field number
_BASE64 = re.compile(r"^[A-Za-z0-9+/=\s]*$")
_MAIN_FILE = "schema.proto"


class ProtobufSchema:
    schema_type = "PROTOBUF"

    def __init__(self, file: FileDescriptorProto) -> None:
        self.file = file
        """The resolved descriptor: type names fully qualified, kinds set."""

    @property
    def canonical(self) -> str:
        return render(self.file)

    @property
    def normalized(self) -> str:
        return render(self.file, normalize=True)

    @property
    def serialized(self) -> str:
        """The descriptor, serialized and base64-encoded (``format=serialized``)."""
        return base64.standard_b64encode(self.file.SerializeToString()).decode("ascii")

    def read_errors(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, ProtobufSchema):
            return [f"a {writer.schema_type} schema is not a Protobuf schema"]
        return _diff(writer.file, self.file)


def parse_protobuf(text: str, dependencies: list[Dependency]) -> ProtobufSchema:
    pool = descriptor_pool.DescriptorPool()
    for serialized in _builtin_files():
        pool.AddSerializedFile(serialized)
    names = set()
    for dep in dependencies:
        if dep.schema_type != "PROTOBUF":
            raise SchemaParseError(f"reference {dep.name!r} is a {dep.schema_type} schema")
        if dep.name in names or dep.name.startswith(("google/protobuf/", "google/type/")):
            continue
        _add(pool, _descriptor(dep.text, dep.name), dep.name)
        names.add(dep.name)
    name = _MAIN_FILE
    while name in names:
        name = "_" + name
    return ProtobufSchema(_add(pool, _descriptor(text, name), name))


@functools.cache
def _builtin_files() -> tuple[bytes, ...]:
    """The serialized well-known and common types, each after its dependencies."""
    files: list[Any] = [module.DESCRIPTOR for module in _WELL_KNOWN]
    try:
        common = importlib.import_module("google.type")  # googleapis-common-protos
    except ImportError:
        pass
    else:
        for found in pkgutil.iter_modules(common.__path__):
            if found.name.endswith("_pb2"):
                module = importlib.import_module(f"google.type.{found.name}")
                files.append(module.DESCRIPTOR)
    ordered: list[bytes] = []
    seen: set[str] = set()

    def visit(file: Any) -> None:
        if file.name in seen:
            return
        seen.add(file.name)
        for dependency in file.dependencies:
            visit(dependency)
        ordered.append(file.serialized_pb)

    for file in files:
        visit(file)
    return tuple(ordered)


def _add(
    pool: descriptor_pool.DescriptorPool, file: FileDescriptorProto, name: str
) -> FileDescriptorProto:
    try:
        pool.Add(file)
        resolved = FileDescriptorProto()
        pool.FindFileByName(name).CopyToProto(resolved)
    except (TypeError, KeyError, ValueError) as exc:
        raise SchemaParseError(f"{name}: {exc}") from None
    except Exception as exc:  # the C++/upb pools raise their own errors
        raise SchemaParseError(f"{name}: {exc}") from None
    return resolved


def _descriptor(text: str, name: str) -> FileDescriptorProto:
    """``text`` as an unresolved descriptor named ``name``: base64 of a serialized
    descriptor, or ``.proto`` text."""
    if _BASE64.match(text):
        try:
            file = FileDescriptorProto.FromString(base64.standard_b64decode(text.strip()))
        except (binascii.Error, DecodeError, ValueError) as exc:
            raise SchemaParseError(f"not a serialized FileDescriptorProto: {exc}") from None
        file.name = name
        return file
    return _from_ast(_parse_text(text), name)


class _Raise:
    """An ANTLR error listener that stops at the first syntax error."""

    def syntaxError(  # noqa: PLR0917
        self, recognizer: Any, symbol: Any, line: int, column: int, msg: str, e: Any
    ) -> None:
        raise SchemaParseError(f"line {line}:{column}: {msg}")

    def reportAmbiguity(self, *args: Any) -> None:
        pass

    def reportAttemptingFullContext(self, *args: Any) -> None:
        pass

    def reportContextSensitivity(self, *args: Any) -> None:
        pass


def _strict(recognizer: Any) -> None:
    recognizer.removeErrorListeners()
    recognizer.addErrorListener(_Raise())


def _parse_text(text: str) -> ast.File:
    try:
        return Parser(setup_lexer=_strict, setup_parser=_strict).parse(text)
    except SchemaParseError:
        raise
    except RecursionError:
        raise SchemaParseError("the schema nests too deeply") from None
    except Exception as exc:
        raise SchemaParseError(f"not a .proto file: {exc}") from None


# -- .proto text to a descriptor ------------------------------------------------


def _from_ast(tree: ast.File, name: str) -> FileDescriptorProto:
    if tree.edition is not None:
        raise SchemaParseError("protobuf editions are not supported")
    syntax = tree.syntax or "proto2"
    if syntax not in ("proto2", "proto3"):
        raise SchemaParseError(f"unknown syntax {syntax!r}")
    file = FileDescriptorProto(name=name)
    if syntax == "proto3":
        file.syntax = "proto3"
    for element in tree.file_elements:
        match element:
            case ast.Package(name=package):
                file.package = package
            case ast.Import(name=imported, weak=weak, public=public):
                if public:
                    file.public_dependency.append(len(file.dependency))
                if weak:
                    file.weak_dependency.append(len(file.dependency))
                file.dependency.append(imported)
            case ast.Option():
                _set_option(file.options, element)
            case ast.Message():
                _message(file.message_type.add(), element, syntax)
            case ast.Enum():
                _enum(file.enum_type.add(), element)
            case ast.Service():
                _service(file.service.add(), element)
            case ast.Extension():
                pass  # extension declarations are not kept
    return file


def _message(out: DescriptorProto, message: ast.Message, syntax: str) -> None:
    out.name = message.name
    for element in message.elements:
        match element:
            case ast.Field():
                _field(out.field.add(), element, syntax, in_oneof=False)
            case ast.MapField():
                _map_field(out, element)
            case ast.OneOf():
                index = len(out.oneof_decl)
                out.oneof_decl.add(name=element.name)
                for member in element.elements:
                    if isinstance(member, ast.Field):
                        field = out.field.add()
                        _field(field, member, syntax, in_oneof=True)
                        field.oneof_index = index
                    elif isinstance(member, ast.Option):
                        pass
                    elif not isinstance(member, ast.Comment):
                        raise SchemaParseError(f"oneof {element.name}: groups are not supported")
            case ast.Message():
                _message(out.nested_type.add(), element, syntax)
            case ast.Enum():
                _enum(out.enum_type.add(), element)
            case ast.Reserved():
                for text in element.ranges:
                    start, end = _range(text)
                    out.reserved_range.add(start=start, end=end + 1)
                out.reserved_name.extend(element.names)
            case ast.ExtensionRange():
                for text in element.ranges:
                    start, end = _range(text)
                    out.extension_range.add(start=start, end=end + 1)
            case ast.Option():
                _set_option(out.options, element)
            case ast.Group():
                raise SchemaParseError(f"message {message.name}: groups are not supported")
    # proto3 optional fields each have a synthetic oneof, after the declared ones
    for field in out.field:
        if field.proto3_optional:
            field.oneof_index = len(out.oneof_decl)
            out.oneof_decl.add(name=_synthetic_name(field.name, out))


def _synthetic_name(field: str, message: DescriptorProto) -> str:
    taken = {o.name for o in message.oneof_decl} | {f.name for f in message.field}
    name = "_" + field
    while name in taken:
        name = "X" + name
    return name


def _field(out: FieldDescriptorProto, field: ast.Field, syntax: str, *, in_oneof: bool) -> None:
    out.name = field.name
    out.number = field.number
    match field.cardinality:
        case ast.FieldCardinality.REPEATED:
            out.label = FieldDescriptorProto.LABEL_REPEATED
        case ast.FieldCardinality.REQUIRED:
            out.label = FieldDescriptorProto.LABEL_REQUIRED
        case ast.FieldCardinality.OPTIONAL:
            out.label = FieldDescriptorProto.LABEL_OPTIONAL
            if syntax == "proto3" and not in_oneof:
                out.proto3_optional = True
        case _:
            out.label = FieldDescriptorProto.LABEL_OPTIONAL
    _set_type(out, field.type)
    for option in field.options:
        if option.name == "default":
            value = option.value
            out.default_value = (
                ("true" if value else "false") if isinstance(value, bool) else _literal(value)
            )
        elif option.name == "json_name":
            out.json_name = _literal(option.value)
        else:
            _set_option(out.options, option)


def _map_field(out: DescriptorProto, field: ast.MapField) -> None:
    entry_name = "".join(part[:1].upper() + part[1:] for part in field.name.split("_")) + "Entry"
    entry = out.nested_type.add(name=entry_name)
    entry.options.map_entry = True
    key = entry.field.add(name="key", number=1, label=FieldDescriptorProto.LABEL_OPTIONAL)
    _set_type(key, field.key_type)
    value = entry.field.add(name="value", number=2, label=FieldDescriptorProto.LABEL_OPTIONAL)
    _set_type(value, field.value_type)
    added = out.field.add(
        name=field.name,
        number=field.number,
        label=FieldDescriptorProto.LABEL_REPEATED,
        type=FieldDescriptorProto.TYPE_MESSAGE,
        type_name=entry_name,
    )
    for option in field.options:
        if option.name == "json_name":
            added.json_name = _literal(option.value)
        else:
            _set_option(added.options, option)


def _set_type(out: FieldDescriptorProto, type_name: str) -> None:
    scalar = _SCALARS.get(type_name)
    if scalar is not None:
        out.type = scalar
    else:
        out.type_name = type_name


def _enum(out: EnumDescriptorProto, enum: ast.Enum) -> None:
    out.name = enum.name
    for element in enum.elements:
        match element:
            case ast.EnumValue():
                value = out.value.add(name=element.name, number=element.number)
                for option in element.options:
                    _set_option(value.options, option)
            case ast.EnumReserved():
                for text in element.ranges:
                    start, end = _range(text)
                    out.reserved_range.add(start=start, end=end)
                out.reserved_name.extend(element.names)
            case ast.Option():
                _set_option(out.options, element)


def _service(out: ServiceDescriptorProto, service: ast.Service) -> None:
    out.name = service.name
    for element in service.elements:
        if isinstance(element, ast.Method):
            out.method.add(
                name=element.name,
                input_type=element.input_type.type,
                output_type=element.output_type.type,
                client_streaming=element.input_type.stream,
                server_streaming=element.output_type.stream,
            )
        elif isinstance(element, ast.Option):
            _set_option(out.options, element)


def _range(text: str) -> tuple[int, int]:
    """A reserved or extension range, both ends included."""
    parts = [p.strip() for p in text.split("to")]
    try:
        start = int(parts[0], 0)
        end = (
            start
            if len(parts) == 1
            else (_MAX_FIELD - 1 if parts[1] == "max" else int(parts[1], 0))
        )
    except ValueError:
        raise SchemaParseError(f"bad range {text!r}") from None
    return start, end


def _repeated(field: Any) -> bool:
    # protobuf 6.31 added is_repeated and 7 dropped label
    repeated = getattr(field, "is_repeated", None)
    if repeated is None:
        return bool(field.label == field.LABEL_REPEATED)
    return bool(repeated)


def _literal(value: Any) -> str:
    if isinstance(value, ast.Identifier):
        return value.name
    return str(value)


def _set_option(options: Any, option: ast.Option) -> None:
    """A standard option on its options message; custom options ``(name)`` are dropped."""
    if option.name.startswith("("):
        return
    field = options.DESCRIPTOR.fields_by_name.get(option.name)
    if field is None:
        raise SchemaParseError(f"unknown option {option.name!r}")
    value = option.value
    try:
        if field.enum_type is not None:
            name = _literal(value)
            setattr(options, option.name, field.enum_type.values_by_name[name].number)
        elif isinstance(value, ast.MessageLiteral) or _repeated(field):
            raise SchemaParseError(f"option {option.name!r}: unsupported value")
        else:
            setattr(options, option.name, value)
    except (KeyError, TypeError, ValueError) as exc:
        raise SchemaParseError(f"option {option.name!r}: {exc}") from None


# -- a descriptor to .proto text ------------------------------------------------


def render(file: FileDescriptorProto, *, normalize: bool = False) -> str:
    """``file`` as .proto text (``normalize``: imports and options sorted, fields by number)."""
    lines = [f'syntax = "{file.syntax or "proto2"}";']
    if file.package:
        lines.append(f"package {file.package};")
    imports = []
    for index, name in enumerate(file.dependency):
        kind = (
            "public "
            if index in file.public_dependency
            else "weak "
            if index in file.weak_dependency
            else ""
        )
        imports.append(f'import {kind}"{name}";')
    if imports:
        lines += ["", *(sorted(imports) if normalize else imports)]
    options = _options(file.options, normalize)
    if options:
        lines += ["", *(f"option {o};" for o in options)]
    proto2 = file.syntax != "proto3"
    for message in file.message_type:
        lines += ["", *_render_message(message, proto2, normalize, "")]
    for enum in file.enum_type:
        lines += ["", *_render_enum(enum, normalize, "")]
    for service in file.service:
        lines += ["", f"service {service.name} {{"]
        lines += [f"  option {o};" for o in _options(service.options, normalize)]
        for method in service.method:
            ins = "stream " if method.client_streaming else ""
            outs = "stream " if method.server_streaming else ""
            returns = f"returns ({outs}{method.output_type})"
            lines.append(f"  rpc {method.name}({ins}{method.input_type}) {returns};")
        lines.append("}")
    return "\n".join(lines) + "\n"


def _options(options: Any, normalize: bool) -> list[str]:
    found = []
    for field, value in options.ListFields():
        if field.name == "map_entry" or field.is_repeated:
            continue
        found.append(f"{field.name} = {_value(field, value)}")
    return sorted(found) if normalize else found


def _value(field: Any, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if field is not None and field.enum_type is not None:
        return str(field.enum_type.values_by_number[value].name)
    return repr(value)


def _render_message(
    message: DescriptorProto, proto2: bool, normalize: bool, indent: str
) -> list[str]:
    inner = indent + "  "
    lines = [f"{indent}message {message.name} {{"]
    lines += [f"{inner}option {o};" for o in _options(message.options, normalize)]
    entries = {n.name: n for n in message.nested_type if n.options.map_entry}
    fields = sorted(message.field, key=lambda f: f.number) if normalize else list(message.field)
    done_oneofs: set[int] = set()
    for field in fields:
        in_oneof = field.HasField("oneof_index") and not field.proto3_optional
        if not in_oneof:
            lines.append(inner + _render_field(field, proto2, entries, True))
            continue
        if field.oneof_index in done_oneofs:
            continue
        done_oneofs.add(field.oneof_index)
        lines.append(f"{inner}oneof {message.oneof_decl[field.oneof_index].name} {{")
        for member in fields:
            if member.HasField("oneof_index") and member.oneof_index == field.oneof_index:
                lines.append(inner + "  " + _render_field(member, proto2, entries, False))
        lines.append(f"{inner}}}")
    for reserved in message.reserved_range:
        lines.append(f"{inner}reserved {_render_range(reserved.start, reserved.end - 1)};")
    if message.reserved_name:
        lines.append(f"{inner}reserved {', '.join(json.dumps(n) for n in message.reserved_name)};")
    for ext in message.extension_range:
        lines.append(f"{inner}extensions {_render_range(ext.start, ext.end - 1)};")
    for nested in message.nested_type:
        if not nested.options.map_entry:
            lines += _render_message(nested, proto2, normalize, inner)
    for enum in message.enum_type:
        lines += _render_enum(enum, normalize, inner)
    lines.append(f"{indent}}}")
    return lines


def _render_range(start: int, end: int) -> str:
    if start == end:
        return str(start)
    return f"{start} to {'max' if end >= _MAX_FIELD - 1 else end}"


def _type_of(field: FieldDescriptorProto) -> str:
    if (
        field.type
        in (
            FieldDescriptorProto.TYPE_MESSAGE,
            FieldDescriptorProto.TYPE_ENUM,
            FieldDescriptorProto.TYPE_GROUP,
        )
        or not field.type
    ):
        return str(field.type_name)
    return _SCALAR_NAMES[field.type]


def _render_field(
    field: FieldDescriptorProto, proto2: bool, entries: dict[str, DescriptorProto], labelled: bool
) -> str:
    entry = entries.get(field.type_name.rsplit(".", 1)[-1]) if field.type_name else None
    if entry is not None and field.label == FieldDescriptorProto.LABEL_REPEATED:
        key, value = entry.field[0], entry.field[1]
        text = f"map<{_type_of(key)}, {_type_of(value)}> {field.name} = {field.number}"
    else:
        label = ""
        if labelled and (
            proto2 or field.label != FieldDescriptorProto.LABEL_OPTIONAL or field.proto3_optional
        ):
            label = _LABELS[field.label] + " "
        text = f"{label}{_type_of(field)} {field.name} = {field.number}"
    options = _options(field.options, False)
    if field.HasField("default_value"):
        default = field.default_value
        if field.type in (FieldDescriptorProto.TYPE_STRING, FieldDescriptorProto.TYPE_BYTES):
            default = json.dumps(default)
        options.insert(0, f"default = {default}")
    if field.HasField("json_name") and field.json_name != _default_json_name(field.name):
        options.append(f"json_name = {json.dumps(field.json_name)}")
    if options:
        text += f" [{', '.join(options)}]"
    return text + ";"


def _default_json_name(name: str) -> str:
    parts = name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def _render_enum(enum: EnumDescriptorProto, normalize: bool, indent: str) -> list[str]:
    inner = indent + "  "
    lines = [f"{indent}enum {enum.name} {{"]
    lines += [f"{inner}option {o};" for o in _options(enum.options, normalize)]
    for value in enum.value:
        options = _options(value.options, normalize)
        suffix = f" [{', '.join(options)}]" if options else ""
        lines.append(f"{inner}{value.name} = {value.number}{suffix};")
    for reserved in enum.reserved_range:
        text = (
            str(reserved.start)
            if reserved.start == reserved.end
            else f"{reserved.start} to {reserved.end}"
        )
        lines.append(f"{inner}reserved {text};")
    if enum.reserved_name:
        lines.append(f"{inner}reserved {', '.join(json.dumps(n) for n in enum.reserved_name)};")
    lines.append(f"{indent}}}")
    return lines


# -- compatibility ----------------------------------------------------------------


def _messages(
    file: FileDescriptorProto,
) -> Iterator[tuple[str, DescriptorProto]]:
    def walk(prefix: str, messages: Any) -> Iterator[tuple[str, DescriptorProto]]:
        for message in messages:
            name = f"{prefix}.{message.name}"
            yield name, message
            yield from walk(name, message.nested_type)

    yield from walk("." + file.package if file.package else "", file.message_type)


def _enums(file: FileDescriptorProto) -> set[str]:
    prefix = "." + file.package if file.package else ""
    names = {f"{prefix}.{e.name}" for e in file.enum_type}
    for name, message in _messages(file):
        names |= {f"{name}.{e.name}" for e in message.enum_type}
    return names


def _diff(original: FileDescriptorProto, update: FileDescriptorProto) -> list[str]:
    """Why ``update`` cannot read what ``original`` wrote (Confluent's Protobuf rules)."""
    errors: list[str] = []
    if (original.syntax or "proto2") != (update.syntax or "proto2"):
        errors.append(
            f"the syntax changed from {original.syntax or 'proto2'} to {update.syntax or 'proto2'}"
        )
    if original.package != update.package:
        errors.append(f"the package changed from {original.package!r} to {update.package!r}")
    old_messages = {n: m for n, m in _messages(original) if not m.options.map_entry}
    new_messages = dict(_messages(update))
    for name, message in old_messages.items():
        if name not in new_messages:
            errors.append(f"message {name.lstrip('.')} was removed")
        else:
            _diff_message(name, message, new_messages[name], new_messages, errors)
    for name in sorted(_enums(original) - _enums(update)):
        errors.append(f"enum {name.lstrip('.')} was removed")
    return errors


def _diff_message(
    name: str,
    old: DescriptorProto,
    new: DescriptorProto,
    new_messages: dict[str, DescriptorProto],
    errors: list[str],
) -> None:
    where = name.lstrip(".")
    old_fields = {f.number: f for f in old.field}
    new_fields = {f.number: f for f in new.field}
    old_entries = {f"{name}.{n.name}": n for n in old.nested_type if n.options.map_entry}
    new_entries = {f"{name}.{n.name}": n for n in new.nested_type if n.options.map_entry}
    for number, field in old_fields.items():
        if number not in new_fields and field.label == FieldDescriptorProto.LABEL_REQUIRED:
            errors.append(f"{where}: required field {field.name} ({number}) was removed")
    for number, field in new_fields.items():
        if number not in old_fields and field.label == FieldDescriptorProto.LABEL_REQUIRED:
            errors.append(f"{where}: required field {field.name} ({number}) was added")
    for number in sorted(old_fields.keys() & new_fields.keys()):
        before, after = old_fields[number], new_fields[number]
        label = f"{where}: field {after.name} ({number})"
        before_entry, after_entry = (
            old_entries.get(before.type_name),
            new_entries.get(after.type_name),
        )
        if before_entry is not None and after_entry is not None:
            for part in (0, 1):
                problem = _type_change(before_entry.field[part], after_entry.field[part])
                if problem:
                    errors.append(f"{label}: map {('key', 'value')[part]} {problem}")
        else:
            problem = _type_change(before, after)
            if problem:
                errors.append(f"{label}: {problem}")
        if (
            (before.label == FieldDescriptorProto.LABEL_REPEATED)
            != (after.label == FieldDescriptorProto.LABEL_REPEATED)
            and (
                _kind(before) != "scalar"
                or _kind(after) != "scalar"
                or before.type
                in (FieldDescriptorProto.TYPE_STRING, FieldDescriptorProto.TYPE_BYTES)
            )
            and not (_kind(before) == _kind(after) == "enum")
        ):
            errors.append(f"{label} changed between singular and repeated")
        if (before.label == FieldDescriptorProto.LABEL_REQUIRED) != (
            after.label == FieldDescriptorProto.LABEL_REQUIRED
        ):
            errors.append(f"{label}: required changed")
    _diff_oneofs(where, old, new, old_fields, errors)


def _real_oneofs(message: DescriptorProto) -> dict[str, set[int]]:
    found: dict[str, set[int]] = {}
    for field in message.field:
        if field.HasField("oneof_index") and not field.proto3_optional:
            found.setdefault(message.oneof_decl[field.oneof_index].name, set()).add(field.number)
    return found


def _diff_oneofs(
    where: str,
    old: DescriptorProto,
    new: DescriptorProto,
    old_fields: dict[int, FieldDescriptorProto],
    errors: list[str],
) -> None:
    old_oneofs, new_oneofs = _real_oneofs(old), _real_oneofs(new)
    in_old_oneof = set().union(*old_oneofs.values()) if old_oneofs else set()
    for oneof, numbers in old_oneofs.items():
        if oneof in new_oneofs:
            for number in sorted(numbers - new_oneofs[oneof]):
                errors.append(f"{where}: field {number} was removed from oneof {oneof}")
    for oneof, numbers in new_oneofs.items():
        moved = sorted(n for n in numbers if n in old_fields and n not in in_old_oneof)
        if oneof in old_oneofs and moved:
            errors.append(f"{where}: fields {moved} moved into the existing oneof {oneof}")
        elif len(moved) > 1:
            errors.append(f"{where}: several fields {moved} moved into the new oneof {oneof}")


def _kind(field: FieldDescriptorProto) -> str:
    if field.type in (FieldDescriptorProto.TYPE_MESSAGE, FieldDescriptorProto.TYPE_GROUP):
        return "message"
    if field.type == FieldDescriptorProto.TYPE_ENUM:
        return "enum"
    return "scalar"


def _type_change(before: FieldDescriptorProto, after: FieldDescriptorProto) -> str | None:
    kinds = _kind(before), _kind(after)
    if kinds[0] != kinds[1]:
        return f"changed from a {kinds[0]} to a {kinds[1]}"
    if kinds[0] == "scalar":
        old, new = _SCALAR_NAMES[before.type], _SCALAR_NAMES[after.type]
        if old != new and not any(old in g and new in g for g in _COMPATIBLE_SCALARS):
            return f"changed type from {old} to {new}"
        return None
    if before.type_name != after.type_name:
        return f"changed type from {before.type_name.lstrip('.')} to {after.type_name.lstrip('.')}"
    return None
