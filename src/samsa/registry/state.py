"""The registry's state as the ``_schemas`` topic's records built it, in topic order.

:class:`RegistryState` is a pure function of the records applied to it
(:meth:`RegistryState.apply`): the reader applies every record it reads, the
registry's own writes included, so a restarted registry and a running one agree.
It holds subjects and their versions, schemas by id, configs and modes; it does
no I/O and is touched only on the broker's event loop.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from samsa.registry import records

log = logging.getLogger(__name__)

_GUID_NAMESPACE = uuid.UUID("5a3b2f1e-0c4d-4e6f-8a9b-1c2d3e4f5a6b")


@dataclass(frozen=True, slots=True)
class SchemaContent:
    """What makes two registered schemas the same schema (and so the same id)."""

    schema_type: str
    schema: str
    references: str
    """The references as compact JSON (a list of {name, subject, version})."""
    metadata: str = ""
    """Confluent's ``metadata`` (tags, properties) as compact JSON, or empty."""
    rule_set: str = ""
    """Confluent's ``ruleSet`` (data contract rules, kept, not run) as compact JSON, or empty."""

    @property
    def reference_list(self) -> list[dict[str, Any]]:
        refs: list[dict[str, Any]] = json.loads(self.references)
        return refs

    @property
    def guid(self) -> str:
        """A content-addressed id (UUID 5 of the content), the same wherever and whenever
        the schema is registered: newer clients ask for schemas by it."""
        return str(uuid.uuid5(_GUID_NAMESPACE, json.dumps(
            [self.schema_type, self.schema, self.references, self.metadata, self.rule_set]
        )))  # fmt: skip

    @property
    def metadata_object(self) -> dict[str, Any] | None:
        return json.loads(self.metadata) if self.metadata else None

    @property
    def rule_set_object(self) -> dict[str, Any] | None:
        return json.loads(self.rule_set) if self.rule_set else None


def _compact(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True) if obj else ""


def content_of(
    schema_type: str,
    schema: str,
    references: list[dict[str, Any]],
    metadata: dict[str, Any] | None = None,
    rule_set: dict[str, Any] | None = None,
) -> SchemaContent:
    return SchemaContent(
        schema_type,
        schema,
        json.dumps(references, separators=(",", ":")),
        _compact(metadata),
        _compact(rule_set),
    )


@dataclass(slots=True)
class SubjectVersion:
    subject: str
    version: int
    schema_id: int
    content: SchemaContent
    deleted: bool = False


@dataclass
class RegistryState:
    subjects: dict[str, dict[int, SubjectVersion]] = field(default_factory=dict)
    schemas: dict[int, SchemaContent] = field(default_factory=dict)
    ids: dict[SchemaContent, int] = field(default_factory=dict)
    guids: dict[str, int] = field(default_factory=dict)
    """Schema ids by :attr:`SchemaContent.guid`."""
    max_id: int = 0
    """The highest schema id ever seen (ids are given from here up, never twice)."""
    configs: dict[str | None, dict[str, Any]] = field(default_factory=dict)
    """Compatibility configs by subject (None: the global one)."""
    modes: dict[str | None, str] = field(default_factory=dict)
    """Modes by subject (None: the global one)."""

    # -- reading -------------------------------------------------------------------------

    def versions(self, subject: str, *, deleted: bool = False) -> list[SubjectVersion]:
        found = self.subjects.get(subject, {})
        return [v for _, v in sorted(found.items()) if deleted or not v.deleted]

    def subject_names(self, *, deleted: bool = False) -> list[str]:
        return sorted(s for s in self.subjects if self.versions(s, deleted=deleted))

    def next_version(self, subject: str) -> int:
        return max(self.subjects.get(subject, {}), default=0) + 1

    def usages(self, schema_id: int, *, deleted: bool = False) -> list[SubjectVersion]:
        return [v for s in sorted(self.subjects) for v in self.versions(s, deleted=deleted)
                if v.schema_id == schema_id]  # fmt: skip

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of live schemas whose references name ``subject`` at ``version``."""
        ids = set()
        for versions in self.subjects.values():
            for v in versions.values():
                if v.deleted:
                    continue
                for ref in v.content.reference_list:
                    if ref.get("subject") == subject and ref.get("version") == version:
                        ids.add(v.schema_id)
        return sorted(ids)

    # -- applying the topic's records ----------------------------------------------------

    def apply(self, key_bytes: bytes | None, value_bytes: bytes | None) -> None:
        """Apply one record of the topic (records that are not the registry's are skipped)."""
        try:
            key = records.decode(key_bytes)
            value = records.decode(value_bytes)
        except ValueError:
            log.warning("skipped a _schemas record that is not JSON")
            return
        if not isinstance(key, dict) or (value is not None and not isinstance(value, dict)):
            log.warning("skipped a _schemas record that is not a JSON object")
            return
        keytype = key.get("keytype")
        subject = key.get("subject")
        try:
            if keytype == records.SCHEMA:
                self._apply_schema(str(subject), int(key["version"]), value)
            elif keytype == records.CONFIG:
                self._apply_config(subject, value)
            elif keytype == records.MODE:
                self._apply_mode(subject, value)
            elif keytype == records.DELETE_SUBJECT and value is not None:
                self._apply_delete_subject(str(subject), int(value["version"]))
            elif keytype == records.CLEAR_SUBJECT and value is not None:
                self.subjects.pop(str(subject), None)
            elif keytype == records.NOOP:
                if value is not None and isinstance(value.get("maxSchemaId"), int):
                    self.max_id = max(self.max_id, value["maxSchemaId"])
            else:
                log.info("skipped a _schemas record of key type %r", keytype)
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("skipped a malformed _schemas %s record: %s", keytype, exc)

    def _apply_schema(self, subject: str, version: int, value: dict[str, Any] | None) -> None:
        if value is None:
            versions = self.subjects.get(subject, {})
            gone = versions.pop(version, None)
            if not versions:
                self.subjects.pop(subject, None)
            if gone is not None:
                self._forget_if_unused(gone.schema_id)
            return
        schema_id = int(value["id"])
        content = content_of(
            str(value.get("schemaType") or "AVRO"),
            str(value["schema"]),
            list(value.get("references") or []),
            value.get("metadata") if isinstance(value.get("metadata"), dict) else None,
            value.get("ruleSet") if isinstance(value.get("ruleSet"), dict) else None,
        )
        previous = self.subjects.get(subject, {}).get(version)
        self.subjects.setdefault(subject, {})[version] = SubjectVersion(
            subject, version, schema_id, content, bool(value.get("deleted", False))
        )
        self.schemas[schema_id] = content
        self.ids.setdefault(content, schema_id)
        self.guids.setdefault(content.guid, schema_id)
        self.max_id = max(self.max_id, schema_id)
        if previous is not None and previous.schema_id != schema_id:
            self._forget_if_unused(previous.schema_id)

    def _forget_if_unused(self, schema_id: int) -> None:
        if any(v.schema_id == schema_id for vs in self.subjects.values() for v in vs.values()):
            return
        content = self.schemas.pop(schema_id, None)
        if content is not None and self.ids.get(content) == schema_id:
            del self.ids[content]
        if content is not None and self.guids.get(content.guid) == schema_id:
            del self.guids[content.guid]

    def _apply_config(self, subject: Any, value: dict[str, Any] | None) -> None:
        if value is None:
            self.configs.pop(subject, None)
        elif isinstance(value.get("compatibilityLevel"), str):
            self.configs[subject] = value

    def _apply_mode(self, subject: Any, value: dict[str, Any] | None) -> None:
        if value is None:
            self.modes.pop(subject, None)
        elif isinstance(value.get("mode"), str):
            self.modes[subject] = value["mode"]

    def _apply_delete_subject(self, subject: str, up_to: int) -> None:
        for version, entry in self.subjects.get(subject, {}).items():
            if version <= up_to:
                entry.deleted = True
