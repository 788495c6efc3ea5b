"""JSON schemas (drafts 4 to 2020-12, checked by jsonschema), and their compatibility.

The reader can read what the writer wrote when every document valid under the
writer is valid under the reader. The rules follow the ones Confluent documents
for JSON Schema, checked structurally:

- ``type``: the reader accepts every writer type (``integer`` is read as ``number``);
- objects: a property the reader adds is refused when the writer's content model
  is open (old data may carry that name with any value) and allowed when it is
  closed (``additionalProperties: false``); a property the reader removes is
  refused when the reader is closed; a property the reader newly requires is
  refused unless it has a default; closing the content model is refused, opening
  it allowed; properties both have are compared recursively;
- narrowing a bound is refused: a larger ``minimum``/``minLength``/``minItems``/
  ``minProperties``/``exclusiveMinimum``, a smaller ``maximum``/``maxLength``/
  ``maxItems``/``maxProperties``/``exclusiveMaximum``, a ``pattern`` or
  ``multipleOf`` added or changed;
- ``enum``: the reader's must contain the writer's values; ``const`` must match;
- arrays by ``items``; ``oneOf``/``anyOf``: each writer branch must be read by a
  reader branch; ``allOf`` compared branch by branch;
- ``not`` changed, or a schema replaced by ``false``, is refused;
- ``$ref``s are followed: local pointers (``#/definitions/…``, ``#/$defs/…``) and
  the names of referenced schemas.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for

from samsa.registry.formats.base import Dependency, ParsedSchema, SchemaParseError

_LOWER_BOUNDS = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
_UPPER_BOUNDS = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
_ALL_TYPES = {"null", "boolean", "object", "array", "number", "integer", "string"}


class JsonSchema:
    schema_type = "JSON"

    def __init__(self, raw: Any, documents: dict[str, Any]) -> None:
        self.raw = raw
        self.documents = documents
        """Referenced schemas by the name references give them."""

    @property
    def canonical(self) -> str:
        return json.dumps(self.raw, separators=(",", ":"))

    @property
    def normalized(self) -> str:
        return json.dumps(self.raw, separators=(",", ":"), sort_keys=True)

    def read_errors(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, JsonSchema):
            return [f"a {writer.schema_type} schema is not a JSON schema"]
        checker = _Checker(self, writer)
        checker.check(self.raw, writer.raw, "#", self.raw, writer.raw)
        return checker.errors


def parse_json_schema(text: str, dependencies: list[Dependency]) -> JsonSchema:
    documents: dict[str, Any] = {}
    for dep in dependencies:
        if dep.schema_type != "JSON":
            raise SchemaParseError(f"reference {dep.name!r} is a {dep.schema_type} schema")
        documents[dep.name] = _load(dep.text)
    return JsonSchema(_load(text), documents)


def _load(text: str) -> Any:
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise SchemaParseError(f"not JSON: {exc}") from None
    except RecursionError:
        raise SchemaParseError("the schema nests too deeply") from None
    if not isinstance(raw, (dict, bool)):
        raise SchemaParseError("a JSON schema is an object or a boolean")
    try:
        validator_for(raw).check_schema(raw)
    except SchemaError as exc:
        raise SchemaParseError(exc.message) from None
    except RecursionError:
        raise SchemaParseError("the schema nests too deeply") from None
    return raw


def _types(schema: dict[str, Any]) -> set[str] | None:
    found = schema.get("type")
    if found is None:
        return None
    return {found} if isinstance(found, str) else {t for t in found if isinstance(t, str)}


class _Checker:
    def __init__(self, reader: JsonSchema, writer: JsonSchema) -> None:
        self.reader = reader
        self.writer = writer
        self.errors: list[str] = []
        self._seen: set[tuple[int, int]] = set()

    def _deref(self, schema: Any, root: Any, documents: dict[str, Any]) -> tuple[Any, Any]:
        hops = 0
        while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and hops < 32:
            hops += 1
            doc_name, _, pointer = schema["$ref"].partition("#")
            if doc_name:
                if doc_name not in documents:
                    return schema, root
                root = documents[doc_name]
            target = root
            for part in [p for p in pointer.split("/") if p]:
                part = part.replace("~1", "/").replace("~0", "~")
                if isinstance(target, dict) and part in target:
                    target = target[part]
                else:
                    return schema, root
            schema = target
        return schema, root

    def check(self, reader: Any, writer: Any, path: str, r_root: Any, w_root: Any) -> None:
        reader, r_root = self._deref(reader, r_root, self.reader.documents)
        writer, w_root = self._deref(writer, w_root, self.writer.documents)
        if reader is True or reader == {}:
            return
        if writer is False:
            return
        if reader is False:
            self.errors.append(f"{path}: the reader accepts nothing")
            return
        if writer is True or writer == {}:
            writer = {}
        if not isinstance(reader, dict) or not isinstance(writer, dict):
            return
        key = (id(reader), id(writer))
        if key in self._seen:
            return
        self._seen.add(key)
        self._combined(reader, writer, path, r_root, w_root)
        r_types, w_types = _types(reader), _types(writer)
        if r_types is not None:
            written = w_types if w_types is not None else _ALL_TYPES
            missing = {t for t in written if t not in r_types
                       and not (t == "integer" and "number" in r_types)}  # fmt: skip
            if missing:
                self.errors.append(f"{path}/type: the reader does not accept {sorted(missing)}")
                return
        for bound in _LOWER_BOUNDS:
            if bound in reader and (bound not in writer or writer[bound] < reader[bound]):
                self.errors.append(f"{path}/{bound}: narrowed to {reader[bound]}")
        for bound in _UPPER_BOUNDS:
            if bound in reader and (bound not in writer or writer[bound] > reader[bound]):
                self.errors.append(f"{path}/{bound}: narrowed to {reader[bound]}")
        for keyword in ("pattern", "multipleOf", "const", "format"):
            if keyword in reader and reader.get(keyword) != writer.get(keyword):
                self.errors.append(f"{path}/{keyword}: changed or added")
        if "enum" in reader:
            if "enum" not in writer:
                self.errors.append(f"{path}/enum: added")
            else:
                lost = [v for v in writer["enum"] if v not in reader["enum"]]
                if lost:
                    self.errors.append(f"{path}/enum: narrowed, {lost} no longer allowed")
        if "not" in reader and reader["not"] != writer.get("not"):
            self.errors.append(f"{path}/not: changed or added")
        self._object(reader, writer, path, r_root, w_root)
        self._array(reader, writer, path, r_root, w_root)

    def _object(
        self, reader: dict[str, Any], writer: dict[str, Any], path: str, r_root: Any, w_root: Any
    ) -> None:
        r_props: dict[str, Any] = reader.get("properties", {})
        w_props: dict[str, Any] = writer.get("properties", {})
        if not isinstance(r_props, dict) or not isinstance(w_props, dict):
            return
        r_additional = reader.get("additionalProperties", True)
        w_additional = writer.get("additionalProperties", True)
        w_closed = w_additional is False
        for name, schema in r_props.items():
            if name in w_props:
                self.check(schema, w_props[name], f"{path}/properties/{name}", r_root, w_root)
            elif not w_closed:
                if isinstance(w_additional, dict):
                    self.check(schema, w_additional, f"{path}/properties/{name}", r_root, w_root)
                elif schema not in (True, {}):
                    self.errors.append(f"{path}/properties/{name}: added to an open content model")
        for name, schema in w_props.items():
            if name in r_props:
                continue
            if r_additional is False:
                self.errors.append(f"{path}/properties/{name}: removed from a closed content model")
            elif isinstance(r_additional, dict):
                self.check(r_additional, schema, f"{path}/properties/{name}", r_root, w_root)
        if r_additional is False and w_additional is not False:
            self.errors.append(f"{path}/additionalProperties: the content model was closed")
        elif isinstance(r_additional, dict) and isinstance(w_additional, dict):
            self.check(r_additional, w_additional, f"{path}/additionalProperties", r_root, w_root)
        elif isinstance(r_additional, dict) and w_additional is True:
            self.errors.append(f"{path}/additionalProperties: narrowed")
        w_required = set(writer.get("required", []))
        for name in reader.get("required", []):
            if name in w_required:
                continue
            prop = r_props.get(name)
            if not (isinstance(prop, dict) and "default" in prop):
                self.errors.append(f"{path}/required/{name}: required without a default")

    def _array(
        self, reader: dict[str, Any], writer: dict[str, Any], path: str, r_root: Any, w_root: Any
    ) -> None:
        r_items, w_items = reader.get("items"), writer.get("items")
        if isinstance(r_items, dict | bool) and r_items is not None:
            w_each = w_items if isinstance(w_items, dict | bool) else {}
            self.check(r_items, w_each, f"{path}/items", r_root, w_root)
        elif isinstance(r_items, list):
            w_list = w_items if isinstance(w_items, list) else []
            for i, item in enumerate(r_items):
                w_item = (
                    w_list[i] if i < len(w_list) else (w_items if isinstance(w_items, dict) else {})
                )
                self.check(item, w_item, f"{path}/items/{i}", r_root, w_root)
        r_prefix, w_prefix = reader.get("prefixItems"), writer.get("prefixItems")
        if isinstance(r_prefix, list):
            w_plist = w_prefix if isinstance(w_prefix, list) else []
            for i, item in enumerate(r_prefix):
                self.check(item, w_plist[i] if i < len(w_plist) else {}, f"{path}/prefixItems/{i}",
                           r_root, w_root)  # fmt: skip
        if reader.get("uniqueItems") is True and writer.get("uniqueItems") is not True:
            self.errors.append(f"{path}/uniqueItems: added")

    def _combined(
        self, reader: dict[str, Any], writer: dict[str, Any], path: str, r_root: Any, w_root: Any
    ) -> None:
        for keyword in ("oneOf", "anyOf"):
            r_branches = reader.get(keyword)
            if not isinstance(r_branches, list):
                continue
            w_branches = writer.get(keyword) or writer.get("oneOf") or writer.get("anyOf")
            if not isinstance(w_branches, list):
                w_branches = [{k: v for k, v in writer.items() if k not in ("oneOf", "anyOf")}]
            for i, w_branch in enumerate(w_branches):
                if not any(self._reads(r, w_branch, r_root, w_root) for r in r_branches):
                    self.errors.append(f"{path}/{keyword}/{i}: no reader branch reads it")
        r_all = reader.get("allOf")
        if isinstance(r_all, list):
            found = writer.get("allOf")
            w_all: list[Any] = found if isinstance(found, list) else []
            for i, branch in enumerate(r_all):
                w_branch = w_all[i] if i < len(w_all) else {}
                self.check(branch, w_branch, f"{path}/allOf/{i}", r_root, w_root)

    def _reads(self, reader: Any, writer: Any, r_root: Any, w_root: Any) -> bool:
        probe = _Checker(self.reader, self.writer)
        probe._seen = set(self._seen)
        probe.check(reader, writer, "", r_root, w_root)
        return not probe.errors
