"""The ``_schemas`` topic's records: JSON keys and values as Confluent Schema Registry
and Karapace write them, so a registry's topic can move between them and samsa.

Keys (compact JSON, fields in this order; compaction keeps the last value per key,
so the bytes must be the same for the same key)::

    {"keytype":"SCHEMA","subject":"s","version":1,"magic":1}
    {"keytype":"CONFIG","subject":"s"|null,"magic":0}
    {"keytype":"MODE","subject":"s"|null,"magic":0}
    {"keytype":"DELETE_SUBJECT","subject":"s","magic":0}
    {"keytype":"CLEAR_SUBJECT","subject":"s","magic":0}
    {"keytype":"NOOP","magic":0}

Values::

    SCHEMA          {"subject","version","id","schema","deleted"[,"schemaType"][,"references"]
                    [,"metadata"][,"ruleSet"]}
                    (``schemaType`` absent: AVRO); a tombstone (no value) is a hard delete
    CONFIG          {"compatibilityLevel": "BACKWARD"[, "normalize": true]}; no value: removed
    MODE            {"mode": "READONLY"}; no value: removed
    DELETE_SUBJECT  {"subject","version"}: versions up to ``version`` are soft-deleted
    CLEAR_SUBJECT   {"subject"}: versions are gone (hard delete)
    NOOP            null for Confluent; samsa writes {"maxSchemaId": N} there when it hard
                    deletes, so that the highest id ever given survives compaction and
                    ids are never given twice

A record that is not JSON, or a key type this module does not know, is skipped
by the reader (logged), as the other registries do.
"""

from __future__ import annotations

import json
from typing import Any

SCHEMA = "SCHEMA"
CONFIG = "CONFIG"
MODE = "MODE"
DELETE_SUBJECT = "DELETE_SUBJECT"
CLEAR_SUBJECT = "CLEAR_SUBJECT"
NOOP = "NOOP"


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _dumps({"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1})


def config_key(subject: str | None) -> bytes:
    return _dumps({"keytype": CONFIG, "subject": subject, "magic": 0})


def mode_key(subject: str | None) -> bytes:
    return _dumps({"keytype": MODE, "subject": subject, "magic": 0})


def delete_subject_key(subject: str) -> bytes:
    return _dumps({"keytype": DELETE_SUBJECT, "subject": subject, "magic": 0})


def noop_key() -> bytes:
    return _dumps({"keytype": NOOP, "magic": 0})


def schema_value(  # noqa: PLR0917 (the value's fields, in the record's order)
    subject: str,
    version: int,
    schema_id: int,
    schema: str,
    schema_type: str,
    references: list[dict[str, Any]],
    *,
    deleted: bool = False,
    metadata: dict[str, Any] | None = None,
    rule_set: dict[str, Any] | None = None,
) -> bytes:
    value: dict[str, Any] = {
        "subject": subject,
        "version": version,
        "id": schema_id,
        "schema": schema,
        "deleted": deleted,
    }
    if schema_type != "AVRO":
        value["schemaType"] = schema_type
    if references:
        value["references"] = references
    if metadata:
        value["metadata"] = metadata
    if rule_set:
        value["ruleSet"] = rule_set
    return _dumps(value)


def config_value(level: str, normalize: bool | None = None) -> bytes:
    value: dict[str, Any] = {"compatibilityLevel": level}
    if normalize is not None:
        value["normalize"] = normalize
    return _dumps(value)


def mode_value(mode: str) -> bytes:
    return _dumps({"mode": mode})


def delete_subject_value(subject: str, version: int) -> bytes:
    return _dumps({"subject": subject, "version": version})


def noop_value(max_schema_id: int) -> bytes:
    return _dumps({"maxSchemaId": max_schema_id})


def decode(data: bytes | None) -> Any:
    """A key or value as JSON (None for no value or an empty one); ValueError if not JSON."""
    if data is None or not data.strip():
        return None
    return json.loads(data)
