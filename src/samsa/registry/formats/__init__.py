"""Schema formats the registry serves: parsing, the stored form, and compatibility.

A format turns schema text (and the schemas its references name, dependencies
first) into a :class:`ParsedSchema`, or raises :class:`SchemaParseError`. A parsed
schema knows its stored form (``canonical``: what the registry keeps, compares
and hands out), its ``normalized`` form (``?normalize=true``) and whether it, as
the reader, can read what another schema of its format wrote
(:meth:`ParsedSchema.read_errors`, empty when it can).

AVRO (:mod:`.avro`, parsed by fastavro), JSON (:mod:`.json_schema`, checked by
jsonschema) and PROTOBUF (:mod:`.protobuf`, parsed by proto-schema-parser and
resolved by protobuf's descriptor pool) are served.
"""

from __future__ import annotations

from samsa.registry.formats.base import Dependency, ParsedSchema, SchemaParseError

__all__ = ["SCHEMA_TYPES", "Dependency", "ParsedSchema", "SchemaParseError", "parse_schema"]


SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")


def parse_schema(
    schema_type: str, text: str, dependencies: list[Dependency] | None = None
) -> ParsedSchema:
    """Parse ``text`` as ``schema_type``; ``dependencies`` are what its references name,
    each after its own dependencies."""
    deps = dependencies or []
    if schema_type == "AVRO":
        from samsa.registry.formats.avro import parse_avro

        return parse_avro(text, deps)
    if schema_type == "JSON":
        from samsa.registry.formats.json_schema import parse_json_schema

        return parse_json_schema(text, deps)
    if schema_type == "PROTOBUF":
        from samsa.registry.formats.protobuf import parse_protobuf

        return parse_protobuf(text, deps)
    raise SchemaParseError(f"unsupported schema type {schema_type!r}")
