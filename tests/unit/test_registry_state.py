"""The registry's state rebuilt from ``_schemas`` records as Confluent and Karapace write them."""

from __future__ import annotations

import json
from typing import Any

from samsa.registry import records
from samsa.registry.state import RegistryState


def key(keytype: str, subject: str | None = None, version: int | None = None) -> bytes:
    found: dict[str, Any] = {"keytype": keytype}
    if keytype != "NOOP":
        found["subject"] = subject
    if version is not None:
        found["version"] = version
    found["magic"] = 1 if keytype == "SCHEMA" else 0
    return json.dumps(found).encode()


def schema(subject: str, version: int, schema_id: int, **extra: Any) -> bytes:
    value = {"subject": subject, "version": version, "id": schema_id, "schema": '"string"',
             "deleted": False, **extra}  # fmt: skip
    return json.dumps(value).encode()


def replay(*items: tuple[bytes | None, bytes | None]) -> RegistryState:
    state = RegistryState()
    for k, v in items:
        state.apply(k, v)
    return state


def test_schema_records_build_subjects_versions_and_ids() -> None:
    state = replay(
        (key("SCHEMA", "a", 1), schema("a", 1, 1)),
        (key("SCHEMA", "a", 2), schema("a", 2, 2, schemaType="JSON", schema="{}")),
    )
    assert [v.version for v in state.versions("a")] == [1, 2]
    assert state.schemas[1].schema_type == "AVRO"
    assert state.schemas[2].schema_type == "JSON"
    assert state.max_id == 2


def test_delete_subject_soft_deletes_the_versions_up_to_its_version() -> None:
    state = replay(
        (key("SCHEMA", "a", 1), schema("a", 1, 1)),
        (key("SCHEMA", "a", 2), schema("a", 2, 2)),
        (key("DELETE_SUBJECT", "a"), json.dumps({"subject": "a", "version": 1}).encode()),
    )
    assert [v.version for v in state.versions("a")] == [2]
    assert [v.version for v in state.versions("a", deleted=True)] == [1, 2]


def test_a_tombstone_hard_deletes_a_version_and_an_unused_id() -> None:
    state = replay(
        (key("SCHEMA", "a", 1), schema("a", 1, 1, deleted=True)),
        (key("SCHEMA", "a", 1), None),
    )
    assert state.subject_names(deleted=True) == []
    assert 1 not in state.schemas


def test_the_noop_record_keeps_the_highest_id_after_its_schema_is_compacted_away() -> None:
    # What compaction leaves of: schema id 7 registered, then hard deleted.
    state = replay(
        (records.noop_key(), records.noop_value(7)),
        (key("SCHEMA", "a", 1), None),
    )
    assert state.max_id == 7


def test_configs_and_modes_are_set_and_removed_by_empty_values() -> None:
    state = replay(
        (key("CONFIG", None), json.dumps({"compatibilityLevel": "FULL"}).encode()),
        (key("CONFIG", "a"), json.dumps({"compatibilityLevel": "NONE"}).encode()),
        (key("CONFIG", "a"), b""),  # Karapace removes a config with an empty value
        (key("MODE", "b"), json.dumps({"mode": "READONLY"}).encode()),
        (key("MODE", "c"), json.dumps({"mode": "IMPORT"}).encode()),
        (key("MODE", "c"), None),
    )
    assert state.configs == {None: {"compatibilityLevel": "FULL"}}
    assert state.modes == {"b": "READONLY"}


def test_records_that_are_not_the_registrys_are_skipped() -> None:
    state = replay(
        (b"not json", b"{}"),
        (b"[1, 2]", b"{}"),
        (key("SCHEMA", "a", 1), b'{"subject": "a"}'),  # no id
        (json.dumps({"keytype": "KEK", "magic": 0}).encode(), b"{}"),
        (key("SCHEMA", "b", 1), schema("b", 1, 3)),
    )
    assert state.subject_names() == ["b"]


def test_records_written_by_this_module_use_the_canonical_key_bytes() -> None:
    assert records.schema_key("s", 1) == b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}'
    assert records.config_key(None) == b'{"keytype":"CONFIG","subject":null,"magic":0}'
    assert (
        records.delete_subject_key("s") == b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}'
    )
    assert records.noop_key() == b'{"keytype":"NOOP","magic":0}'
