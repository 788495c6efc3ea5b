"""The registry's operations: register, look up, check, delete, configure.

Reads answer from :class:`~samsa.registry.state.RegistryState`; writes go through
the ``_schemas`` topic (:class:`~samsa.registry.store.SchemaTopic`) one at a time
(one lock: ids and versions are decided against the state every earlier write
built), and return once the reader has applied them. Every refusal is a
:class:`~samsa.registry.errors.RegistryError` with Confluent's error code.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any

from samsa.registry import errors, records
from samsa.registry.compatibility import DEFAULT_LEVEL, LEVELS, compatibility_errors
from samsa.registry.errors import RegistryError
from samsa.registry.formats import (
    SCHEMA_TYPES,
    Dependency,
    ParsedSchema,
    SchemaParseError,
    parse_schema,
)
from samsa.registry.state import RegistryState, SchemaContent, SubjectVersion, content_of
from samsa.registry.store import SchemaTopic

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
MAX_VERSION = 2**31 - 1
MAX_REFERENCE_DEPTH = 64
_PARSED_CACHE = 1000


def parse_version(text: str) -> int | None:
    """A path's version: an int in [1, 2^31-1], or None for ``latest`` (or -1)."""
    if text in ("latest", "-1"):
        return None
    if text.isdigit() and 1 <= int(text) <= MAX_VERSION:
        return int(text)
    raise errors.invalid_version(text)


def check_subject(subject: str) -> None:
    if not subject or not subject.strip() or any(ord(c) < 32 for c in subject):
        raise RegistryError(422, errors.INVALID_SUBJECT, f"Invalid subject {subject!r}")


class RegistryService:
    def __init__(self, state: RegistryState, topic: SchemaTopic) -> None:
        self.state = state
        self.topic = topic
        self._writing = asyncio.Lock()
        self._parsed: OrderedDict[SchemaContent, ParsedSchema] = OrderedDict()

    # -- settings ------------------------------------------------------------------------

    def compatibility_level(self, subject: str | None) -> str:
        config = self.state.configs.get(subject) if subject is not None else None
        config = config or self.state.configs.get(None) or {}
        return str(config.get("compatibilityLevel", DEFAULT_LEVEL))

    def normalize_default(self, subject: str) -> bool:
        config = self.state.configs.get(subject) or self.state.configs.get(None) or {}
        return bool(config.get("normalize", False))

    def mode(self, subject: str | None) -> str:
        if subject is not None and subject in self.state.modes:
            return self.state.modes[subject]
        return self.state.modes.get(None, "READWRITE")

    # -- reading -------------------------------------------------------------------------

    def subject_version(
        self, subject: str, version: int | None, *, deleted: bool = False
    ) -> SubjectVersion:
        if subject not in self.state.subjects or not self.state.versions(subject, deleted=deleted):
            raise errors.subject_not_found(subject)
        found = self.state.versions(subject, deleted=deleted)
        if version is None:
            return found[-1]
        for entry in found:
            if entry.version == version:
                return entry
        raise errors.version_not_found(subject, version)

    def schema_by_id(self, schema_id: int) -> SchemaContent:
        content = self.state.schemas.get(schema_id)
        if content is None:
            raise errors.schema_not_found()
        return content

    def parsed(self, content: SchemaContent) -> ParsedSchema:
        found = self._parsed.get(content)
        if found is not None:
            self._parsed.move_to_end(content)
            return found
        try:
            parsed = parse_schema(
                content.schema_type, content.schema, self.dependencies(content.reference_list)
            )
        except SchemaParseError as exc:
            raise errors.invalid_schema(str(exc)) from None
        self._parsed[content] = parsed
        if len(self._parsed) > _PARSED_CACHE:
            self._parsed.popitem(last=False)
        return parsed

    def dependencies(self, references: list[dict[str, Any]]) -> list[Dependency]:
        """The schemas ``references`` name, each after its own dependencies; unknown
        references and cycles are refused as invalid schemas."""
        ordered: list[Dependency] = []
        done: set[tuple[str, int]] = set()

        def visit(refs: list[dict[str, Any]], stack: tuple[tuple[str, int], ...]) -> None:
            if len(stack) > MAX_REFERENCE_DEPTH:
                raise errors.invalid_schema("references nest too deeply")
            for ref in refs:
                name, subject, version = _reference_fields(ref)
                try:
                    entry = self.subject_version(subject, None if version == -1 else version)
                except RegistryError:
                    raise errors.invalid_schema(
                        f"reference {name!r} names subject {subject!r} version {version}, "
                        "which does not exist"
                    ) from None
                where = (entry.subject, entry.version)
                if where in stack:
                    raise errors.invalid_schema(f"reference cycle through {subject!r}")
                if where in done:
                    continue
                visit(entry.content.reference_list, (*stack, where))
                done.add(where)
                ordered.append(Dependency(name, entry.content.schema_type, entry.content.schema))

        visit(references, ())
        return ordered

    def resolved_references(self, references: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """References as stored: ``latest`` (-1) replaced by the version it is now."""
        resolved = []
        for ref in references:
            name, subject, version = _reference_fields(ref)
            if version == -1:
                version = self.subject_version(subject, None).version
            resolved.append({"name": name, "subject": subject, "version": version})
        return resolved

    async def prepare(
        self,
        subject: str,
        body: dict[str, Any],
        *,
        normalize: bool,
    ) -> tuple[SchemaContent, ParsedSchema]:
        """The content a request's schema would be stored as, and its parsed form (parsed
        on a worker thread: a large schema does not hold up the broker's loop)."""
        schema_type = body.get("schemaType") or "AVRO"
        if not isinstance(schema_type, str) or schema_type.upper() not in SCHEMA_TYPES:
            raise RegistryError(
                422, errors.INVALID_SCHEMA, f"Invalid schema type {schema_type!r}: "
                f"this registry serves {', '.join(SCHEMA_TYPES)}"
            )  # fmt: skip
        schema_type = schema_type.upper()
        text = body.get("schema")
        if not isinstance(text, str) or not text.strip():
            raise errors.invalid_schema("the request has no schema text")
        references = body.get("references") or []
        if not isinstance(references, list):
            raise errors.invalid_schema("references must be a list")
        try:
            references = self.resolved_references(references)
        except RegistryError as exc:
            raise errors.invalid_schema(exc.message) from None
        dependencies = self.dependencies(references)
        try:
            parsed = await asyncio.to_thread(parse_schema, schema_type, text, dependencies)
        except SchemaParseError as exc:
            raise errors.invalid_schema(str(exc)) from None
        stored = (
            parsed.normalized if normalize or self.normalize_default(subject) else parsed.canonical
        )
        metadata, rule_set = body.get("metadata"), body.get("ruleSet")
        for name, given in (("metadata", metadata), ("ruleSet", rule_set)):
            if given is not None and not isinstance(given, dict):
                raise errors.invalid_schema(f"{name} must be an object")
        return content_of(schema_type, stored, references, metadata, rule_set), parsed

    def latest_with_metadata(
        self, subject: str, wanted: list[tuple[str, str]], *, deleted: bool
    ) -> SubjectVersion:
        """The latest version whose metadata properties hold every ``(key, value)``."""
        found = self.state.versions(subject, deleted=deleted)
        if not found:
            raise errors.subject_not_found(subject)
        for entry in reversed(found):
            properties = (entry.content.metadata_object or {}).get("properties") or {}
            if all(properties.get(k) == v for k, v in wanted):
                return entry
        raise errors.schema_not_found(f"No version of subject '{subject}' has that metadata")

    def lookup(self, subject: str, content: SchemaContent, *, deleted: bool) -> SubjectVersion:
        if subject not in self.state.subjects:
            raise errors.subject_not_found(subject)
        for entry in self.state.versions(subject, deleted=deleted):
            if entry.content == content:
                return entry
        raise errors.schema_not_found()

    async def check_compatibility(
        self, subject: str, parsed: ParsedSchema, version: int | None, *, all_versions: bool
    ) -> list[str]:
        """Errors of ``parsed`` against the subject's versions under its level: against
        ``version`` alone, or against what the level checks when ``all_versions`` (checked
        on a worker thread; parsed schemas are not changed by checking)."""
        level = self.compatibility_level(subject)
        live = self.state.versions(subject)
        if all_versions:
            earlier = [self.parsed(v.content) for v in live]
        else:
            earlier = [self.parsed(self.subject_version(subject, version).content)]
            level = level.removesuffix("_TRANSITIVE")
        return await asyncio.to_thread(compatibility_errors, level, parsed, earlier)

    # -- writing -------------------------------------------------------------------------

    async def register(
        self,
        subject: str,
        body: dict[str, Any],
        *,
        normalize: bool,
    ) -> SubjectVersion:
        check_subject(subject)
        mode = self.mode(subject)
        if mode in ("READONLY", "READONLY_OVERRIDE"):
            raise errors.operation_not_permitted(f"Subject {subject} is in read-only mode")
        wanted_id = body.get("id")
        wanted_version = body.get("version")
        for name, given in (("id", wanted_id), ("version", wanted_version)):
            if given is not None and (not isinstance(given, int) or isinstance(given, bool)):
                raise errors.bad_request(f"{name} must be an integer")
        if wanted_id is not None and wanted_id >= 0 and mode != "IMPORT":
            raise errors.operation_not_permitted(
                f"Subject {subject} is not in import mode: a schema id cannot be given"
            )
        content, parsed = await self.prepare(subject, body, normalize=normalize)
        async with self._writing:
            existing = [v for v in self.state.versions(subject) if v.content == content]
            if existing and (
                wanted_id is None or wanted_id < 0 or existing[0].schema_id == wanted_id
            ):
                return existing[0]
            if mode == "IMPORT" and wanted_id is not None and wanted_id >= 0:
                schema_id = wanted_id
                other = self.state.schemas.get(schema_id)
                if other is not None and other != content:
                    raise RegistryError(
                        422, errors.ID_DOES_NOT_MATCH,
                        f"Schema id {schema_id} is already used by a different schema",
                    )  # fmt: skip
            else:
                errs = await self.check_compatibility(subject, parsed, None, all_versions=True)
                if errs:
                    raise RegistryError(
                        409,
                        errors.INCOMPATIBLE_SCHEMA,
                        "Schema being registered is incompatible with an earlier schema for "
                        f'subject "{subject}", details: {errs}',
                    )
                schema_id = self.state.ids.get(content) or self.state.max_id + 1
            version = self.state.next_version(subject)
            if mode == "IMPORT" and wanted_version is not None and wanted_version > 0:
                version = wanted_version
                taken = self.state.subjects.get(subject, {}).get(version)
                if taken is not None:
                    if taken.content == content and taken.schema_id == schema_id:
                        return taken
                    raise errors.operation_not_permitted(
                        f"Version {version} of subject {subject} already holds another schema"
                    )
            await self.topic.write(
                (
                    records.schema_key(subject, version),
                    records.schema_value(
                        subject,
                        version,
                        schema_id,
                        content.schema,
                        content.schema_type,
                        content.reference_list,
                        metadata=content.metadata_object,
                        rule_set=content.rule_set_object,
                    ),
                )
            )
            return self.subject_version(subject, version)

    async def delete_version(self, subject: str, version: int | None, *, permanent: bool) -> int:
        async with self._writing:
            self._check_writable(subject)
            entry = self.subject_version(subject, version, deleted=True)
            if permanent:
                if not entry.deleted:
                    raise RegistryError(
                        404, errors.VERSION_NOT_SOFT_DELETED,
                        f"Subject '{subject}' Version {entry.version} was not deleted first "
                        "before being permanently deleted",
                    )  # fmt: skip
            elif entry.deleted:
                raise RegistryError(
                    404, errors.VERSION_SOFT_DELETED,
                    f"Subject '{subject}' Version {entry.version} was soft deleted. Set "
                    "permanent=true to delete permanently",
                )  # fmt: skip
            if self.state.referenced_by(subject, entry.version):
                raise RegistryError(
                    422, errors.REFERENCE_EXISTS,
                    f"One or more references exist to the schema {{subject={subject}, "
                    f"version={entry.version}}}",
                )  # fmt: skip
            key = records.schema_key(subject, entry.version)
            if permanent:
                await self.topic.write(
                    (records.noop_key(), records.noop_value(self.state.max_id)), (key, None)
                )
            else:
                await self.topic.write((key, self._schema_value(entry, deleted=True)))
            return entry.version

    async def delete_subject(self, subject: str, *, permanent: bool) -> list[int]:
        async with self._writing:
            self._check_writable(subject)
            every = self.state.versions(subject, deleted=True)
            if not every:
                raise errors.subject_not_found(subject)
            live = [v for v in every if not v.deleted]
            if permanent:
                if live:
                    raise RegistryError(
                        404, errors.SUBJECT_NOT_SOFT_DELETED,
                        f"Subject '{subject}' was not deleted first before being permanently "
                        "deleted",
                    )  # fmt: skip
                self._refuse_referenced(subject, every)
                await self.topic.write(
                    (records.noop_key(), records.noop_value(self.state.max_id)),
                    *[(records.schema_key(subject, e.version), None) for e in every],
                )
                return [e.version for e in every]
            if not live:
                raise RegistryError(
                    404, errors.SUBJECT_SOFT_DELETED,
                    f"Subject '{subject}' was soft deleted. Set permanent=true to delete "
                    "permanently",
                )  # fmt: skip
            self._refuse_referenced(subject, live)
            await self.topic.write(
                *[(records.schema_key(subject, e.version), self._schema_value(e, deleted=True))
                  for e in live],
                (records.delete_subject_key(subject),
                 records.delete_subject_value(subject, every[-1].version)),
            )  # fmt: skip
            return [e.version for e in live]

    async def set_config(self, subject: str | None, body: dict[str, Any]) -> dict[str, Any]:
        level = body.get("compatibility", body.get("compatibilityLevel"))
        if not isinstance(level, str) or level.upper() not in LEVELS:
            raise RegistryError(
                422, errors.INVALID_COMPATIBILITY_LEVEL,
                f"Invalid compatibility level. Valid values are none, backward, forward, full, "
                f"backward_transitive, forward_transitive, and full_transitive (got {level!r})",
            )  # fmt: skip
        normalize = body.get("normalize")
        if normalize is not None and not isinstance(normalize, bool):
            raise errors.bad_request("normalize must be true or false")
        if subject is not None:
            check_subject(subject)
        async with self._writing:
            await self.topic.write(
                (records.config_key(subject), records.config_value(level.upper(), normalize))
            )
        answer: dict[str, Any] = {"compatibility": level.upper()}
        if normalize is not None:
            answer["normalize"] = normalize
        return answer

    async def delete_config(self, subject: str | None) -> str:
        previous = self.compatibility_level(subject)
        async with self._writing:
            if subject is not None and subject not in self.state.configs:
                raise RegistryError(
                    404, errors.SUBJECT_COMPATIBILITY_NOT_CONFIGURED,
                    f"Subject '{subject}' does not have subject-level compatibility configured",
                )  # fmt: skip
            await self.topic.write((records.config_key(subject), None))
        return previous

    async def set_mode(self, subject: str | None, mode: Any, *, force: bool) -> str:
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise RegistryError(
                422, errors.INVALID_MODE,
                f"Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE and "
                f"IMPORT (got {mode!r})",
            )  # fmt: skip
        mode = mode.upper()
        if subject is not None:
            check_subject(subject)
        async with self._writing:
            if mode == "IMPORT" and not force:
                has_schemas = (
                    bool(self.state.versions(subject, deleted=True))
                    if subject is not None
                    else bool(self.state.subject_names(deleted=True))
                )
                if has_schemas:
                    raise errors.operation_not_permitted(
                        "Cannot import since found existing subjects"
                    )
            await self.topic.write((records.mode_key(subject), records.mode_value(mode)))
        return str(mode)

    async def delete_mode(self, subject: str) -> str:
        async with self._writing:
            if subject not in self.state.modes:
                raise RegistryError(
                    404, errors.SUBJECT_MODE_NOT_CONFIGURED,
                    f"Subject '{subject}' does not have subject-level mode configured",
                )  # fmt: skip
            previous = self.state.modes[subject]
            await self.topic.write((records.mode_key(subject), None))
        return previous

    def _refuse_referenced(self, subject: str, entries: list[SubjectVersion]) -> None:
        """A version another schema references may not be deleted (42206)."""
        for entry in entries:
            if self.state.referenced_by(subject, entry.version):
                raise RegistryError(
                    422, errors.REFERENCE_EXISTS,
                    f"One or more references exist to the schema {{subject={subject}, "
                    f"version={entry.version}}}",
                )  # fmt: skip

    def _check_writable(self, subject: str) -> None:
        if self.mode(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise errors.operation_not_permitted(f"Subject {subject} is in read-only mode")

    @staticmethod
    def _schema_value(entry: SubjectVersion, *, deleted: bool) -> bytes:
        return records.schema_value(
            entry.subject,
            entry.version,
            entry.schema_id,
            entry.content.schema,
            entry.content.schema_type,
            entry.content.reference_list,
            deleted=deleted,
            metadata=entry.content.metadata_object,
            rule_set=entry.content.rule_set_object,
        )


def _parse_and_store(
    schema_type: str, text: str, dependencies: list[Dependency], normalized: bool
) -> tuple[ParsedSchema, str]:
    """The parsed schema and the form it is stored in (run on a worker thread)."""
    try:
        parsed = parse_schema(schema_type, text, dependencies)
        return parsed, parsed.normalized if normalized else parsed.canonical
    except RecursionError:
        raise SchemaParseError("the schema nests too deeply") from None


def _reference_fields(ref: Any) -> tuple[str, str, int]:
    if not isinstance(ref, dict):
        raise errors.invalid_schema("a reference is an object {name, subject, version}")
    name, subject, version = ref.get("name"), ref.get("subject"), ref.get("version", -1)
    if not isinstance(name, str) or not isinstance(subject, str) or not name or not subject:
        raise errors.invalid_schema("a reference needs a name and a subject")
    if not isinstance(version, int) or isinstance(version, bool) or version == 0 or version < -1:
        raise errors.invalid_schema(f"reference {name!r} has an invalid version {version!r}")
    return name, subject, version
