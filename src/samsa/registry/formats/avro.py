"""AVRO schemas: parsed by fastavro, compatibility by Avro's schema resolution rules.

A reader schema can read what a writer schema wrote when resolution (Avro's
specification, "Schema Resolution") succeeds:

- the same primitive, or a promotion: int → long, float, double; long → float,
  double; float → double; string ↔ bytes;
- records of the same name (or a reader alias of the writer's name): every reader
  field is found in the writer (by name or reader alias) and reads its type, or
  has a default; writer fields the reader lacks are skipped;
- enums of the same name: every writer symbol is a reader symbol, unless the
  reader has a default symbol;
- fixed of the same name and size; arrays and maps by their items and values;
- a writer union: the reader reads every branch; a reader union: some branch reads
  the writer.

Names are compared without their namespaces, as Avro's Java checker does.
Recursive types are checked once per (reader, writer) pair.
"""

from __future__ import annotations

import json
from typing import Any

from fastavro.schema import parse_schema

from samsa.registry.formats.base import Dependency, ParsedSchema, SchemaParseError

_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
_PROMOTIONS = {
    ("int", "long"),
    ("int", "float"),
    ("int", "double"),
    ("long", "float"),
    ("long", "double"),
    ("float", "double"),
    ("string", "bytes"),
    ("bytes", "string"),
}
_NAMED = {"record", "error", "enum", "fixed"}


class AvroSchema:
    schema_type = "AVRO"

    def __init__(self, raw: Any, parsed: Any, named: dict[str, Any]) -> None:
        self.raw = raw
        self.parsed = parsed
        self.named = named

    @property
    def canonical(self) -> str:
        return json.dumps(self.raw, separators=(",", ":"))

    @property
    def normalized(self) -> str:
        return json.dumps(_normalize(self.raw), separators=(",", ":"), sort_keys=True)

    def read_errors(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, AvroSchema):
            return [f"a {writer.schema_type} schema is not an AVRO schema"]
        checker = _Checker(self.named, writer.named)
        checker.check(self.parsed, writer.parsed, "/")
        return checker.errors


def parse_avro(text: str, dependencies: list[Dependency]) -> AvroSchema:
    named: dict[str, Any] = {}
    for dep in dependencies:
        if dep.schema_type != "AVRO":
            raise SchemaParseError(f"reference {dep.name!r} is a {dep.schema_type} schema")
        _parse(dep.text, named)
    raw, parsed = _parse(text, named)
    return AvroSchema(raw, parsed, named)


def _parse(text: str, named: dict[str, Any]) -> tuple[Any, Any]:
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise SchemaParseError(f"not JSON: {exc}") from None
    if not isinstance(raw, (str, dict, list)):
        raise SchemaParseError("an Avro schema is a JSON string, object or array")
    _check_unions(raw)
    try:
        parsed = parse_schema(raw, named_schemas=named, _write_hint=False)
    except RecursionError:
        raise SchemaParseError("the schema nests too deeply") from None
    except Exception as exc:  # fastavro raises ValueError, TypeError, KeyError… on bad input
        raise SchemaParseError(str(exc) or type(exc).__name__) from None
    return raw, parsed


def _check_unions(raw: Any) -> None:
    """fastavro accepts an empty union; Avro does not."""
    if isinstance(raw, list):
        if not raw:
            raise SchemaParseError("a union needs at least one branch")
        for branch in raw:
            _check_unions(branch)
    elif isinstance(raw, dict):
        for key in ("type", "items", "values"):
            if key in raw and not isinstance(raw[key], str):
                _check_unions(raw[key])
        for field in raw.get("fields", []) if isinstance(raw.get("fields"), list) else []:
            if isinstance(field, dict) and "type" in field:
                _check_unions(field["type"])


def _normalize(raw: Any) -> Any:
    if isinstance(raw, list):
        return [_normalize(b) for b in raw]
    if isinstance(raw, dict):
        if set(raw) == {"type"} and raw["type"] in _PRIMITIVES:
            return raw["type"]
        return {k: (_normalize(v) if k in ("type", "items", "values", "fields") else v)
                for k, v in raw.items()}  # fmt: skip
    return raw


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


class _Checker:
    def __init__(self, reader_named: dict[str, Any], writer_named: dict[str, Any]) -> None:
        self.reader_named = reader_named
        self.writer_named = writer_named
        self.errors: list[str] = []
        self._seen: set[tuple[int, int]] = set()

    def _resolve(self, schema: Any, named: dict[str, Any]) -> Any:
        if isinstance(schema, str) and schema not in _PRIMITIVES:
            return named.get(schema, schema)
        if isinstance(schema, dict) and schema.get("type") in _PRIMITIVES and len(schema) >= 1:
            return schema["type"]
        return schema

    def check(self, reader: Any, writer: Any, path: str) -> None:
        reader = self._resolve(reader, self.reader_named)
        writer = self._resolve(writer, self.writer_named)
        if isinstance(writer, list):
            for i, branch in enumerate(writer):
                self.check(reader, branch, f"{path}{i}/")
            return
        if isinstance(reader, list):
            for branch in reader:
                probe = _Checker(self.reader_named, self.writer_named)
                probe._seen = set(self._seen)
                probe.check(branch, writer, path)
                if not probe.errors:
                    return
            self.errors.append(f"{path}: the reader's union has no branch for {_name(writer)}")
            return
        if isinstance(reader, str) or isinstance(writer, str):
            if (
                isinstance(reader, str)
                and isinstance(writer, str)
                and (reader == writer or (writer, reader) in _PROMOTIONS)
            ):
                return
            self.errors.append(
                f"{path}: type mismatch, the reader's {_name(reader)} cannot read "
                f"the writer's {_name(writer)}"
            )
            return
        r_type, w_type = reader.get("type"), writer.get("type")
        if r_type != w_type and not ({r_type, w_type} <= {"record", "error"}):
            self.errors.append(f"{path}: type mismatch, {r_type} cannot read {w_type}")
            return
        if r_type in _NAMED:
            aliases = {_short(a) for a in reader.get("aliases", [])}
            if _short(writer["name"]) != _short(reader["name"]) and (
                _short(writer["name"]) not in aliases
            ):
                self.errors.append(
                    f"{path}: name mismatch, expected {reader['name']}, found {writer['name']}"
                )
                return
        key = (id(reader), id(writer))
        if key in self._seen:
            return
        self._seen.add(key)
        if r_type in ("record", "error"):
            self._record(reader, writer, path)
        elif r_type == "enum":
            missing = [s for s in writer["symbols"] if s not in reader["symbols"]]
            if missing and "default" not in reader:
                self.errors.append(f"{path}symbols: the reader lacks the symbols {missing}")
        elif r_type == "fixed":
            if reader["size"] != writer["size"]:
                self.errors.append(
                    f"{path}size: fixed size mismatch, expected {reader['size']}, "
                    f"found {writer['size']}"
                )
        elif r_type == "array":
            self.check(reader["items"], writer["items"], f"{path}items/")
        elif r_type == "map":
            self.check(reader["values"], writer["values"], f"{path}values/")

    def _record(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> None:
        written = {f["name"]: f for f in writer["fields"]}
        for i, field in enumerate(reader["fields"]):
            names = [field["name"], *field.get("aliases", [])]
            source = next((written[n] for n in names if n in written), None)
            if source is None:
                if "default" not in field:
                    self.errors.append(
                        f"{path}fields/{i}: the reader's field {field['name']!r} has no "
                        "default and the writer has no such field"
                    )
                continue
            self.check(field["type"], source["type"], f"{path}fields/{i}/type/")


def _name(schema: Any) -> str:
    if isinstance(schema, str):
        return schema
    if isinstance(schema, dict):
        return str(schema.get("name") or schema.get("type"))
    return "union"
