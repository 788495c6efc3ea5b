"""Confluent Schema Registry's REST API v1 over :class:`~samsa.registry.service.RegistryService`.

Routes (path segments are percent-decoded after splitting, so a subject may hold
``/`` as ``%2F``)::

    GET    /  /subjects  /subjects/{s}/versions  /subjects/{s}/versions/{v}
    GET    /subjects/{s}/versions/{v}/schema  /subjects/{s}/versions/{v}/referencedby
    GET    /subjects/{s}/metadata?key=k&value=v (the latest version with that metadata)
    POST   /subjects/{s}/versions (register)  /subjects/{s} (lookup)
    DELETE /subjects/{s}  /subjects/{s}/versions/{v}     (?permanent=true: hard)
    GET    /schemas/types  /schemas/ids/{id}[/schema|/subjects|/versions]  /contexts
    GET    /schemas/guids/{guid}[/ids|/schema|/subjects|/versions]
    GET|PUT|DELETE /config  /config/{s}     GET|PUT /mode   GET|PUT|DELETE /mode/{s}
    POST   /compatibility/subjects/{s}/versions[/{v}]

Bodies are JSON (``application/vnd.schemaregistry.v1+json``,
``application/vnd.schemaregistry+json``, ``application/json``; others 415), answers
``application/vnd.schemaregistry.v1+json`` unless the client accepts only
``application/json``. Errors are ``{"error_code", "message"}``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import unquote

from samsa.registry import errors
from samsa.registry.errors import RegistryError
from samsa.registry.formats import SCHEMA_TYPES
from samsa.registry.http import Request, Response
from samsa.registry.service import RegistryService, check_subject, parse_version
from samsa.registry.state import SchemaContent, SubjectVersion

V1_JSON = "application/vnd.schemaregistry.v1+json"
_PARSE_INLINE_BYTES = 256 * 1024
"""Bodies larger than this are decoded on a worker thread."""
_ACCEPTED_BODIES = (
    "application/vnd.schemaregistry.v1+json",
    "application/vnd.schemaregistry+json",
    "application/json",
    "application/octet-stream",
)


def _flag(query: dict[str, str], name: str) -> bool:
    return query.get(name, "").lower() == "true"


def _int_param(query: dict[str, str], name: str, default: int) -> int:
    text = query.get(name)
    if text is None or text == "":
        return default
    try:
        return int(text)
    except ValueError:
        raise errors.bad_request(f"{name} must be an integer") from None


def _page(items: list[Any], query: dict[str, str]) -> list[Any]:
    offset = max(_int_param(query, "offset", 0), 0)
    limit = _int_param(query, "limit", -1)
    return items[offset:] if limit < 0 else items[offset : offset + limit]


class RegistryApi:
    def __init__(self, service: RegistryService) -> None:
        self.service = service

    async def handle(self, request: Request) -> Response:
        content_type = V1_JSON
        if "application/json" in request.headers.get("accept", "") and (
            "schemaregistry" not in request.headers.get("accept", "")
        ):
            content_type = "application/json"
        try:
            result = await self._route(request)
        except RegistryError as exc:
            return Response(exc.status, exc.body(), content_type)
        if isinstance(result, Response):
            return result
        return Response(200, json.dumps(result).encode(), content_type)

    async def _body(self, request: Request) -> dict[str, Any]:
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media and media not in _ACCEPTED_BODIES:
            raise RegistryError(415, 415, f"HTTP 415 Unsupported Media Type ({media})")
        try:
            body = (
                await asyncio.to_thread(json.loads, request.body)
                if len(request.body) > _PARSE_INLINE_BYTES
                else json.loads(request.body)
                if request.body.strip()
                else {}
            )
        except (ValueError, RecursionError) as exc:
            raise RegistryError(400, 400, f"Unparseable JSON body: {exc}") from None
        if not isinstance(body, dict):
            raise RegistryError(422, 422, "the body must be a JSON object")
        return body

    async def _route(self, request: Request) -> Any:
        parts = (
            [unquote(p) for p in request.path.strip("/").split("/")]
            if request.path.strip("/")
            else []
        )
        method = "GET" if request.method == "HEAD" else request.method
        q = request.query
        match (method, parts):
            case ("GET", []):
                return {}
            case ("GET", ["subjects"]):
                deleted = _flag(q, "deleted") or _flag(q, "deleted_only")
                names = self.service.state.subject_names(deleted=deleted)
                if _flag(q, "deleted_only"):
                    live = set(self.service.state.subject_names())
                    names = [n for n in names if n not in live]
                prefix = q.get("subjectPrefix", "")
                return _page([n for n in names if n.startswith(prefix)], q)
            case ("GET", ["subjects", subject, "versions"]):
                found = self.service.state.versions(subject, deleted=_flag(q, "deleted"))
                if not found:
                    raise errors.subject_not_found(subject)
                return _page([v.version for v in found], q)
            case ("GET", ["subjects", subject, "metadata"]):
                keys = [unquote(v) for k, v in request.query_pairs if k == "key"]
                values = [unquote(v) for k, v in request.query_pairs if k == "value"]
                if len(keys) != len(values):
                    raise errors.bad_request("key and value parameters must come in pairs")
                entry = self.service.latest_with_metadata(
                    subject, list(zip(keys, values, strict=True)), deleted=_flag(q, "deleted")
                )
                return self._describe(entry, q)
            case ("GET", ["subjects", subject, "versions", version]):
                entry = self._version(subject, version, q)
                return self._describe(entry, q)
            case ("GET", ["subjects", subject, "versions", version, "schema"]):
                entry = self._version(subject, version, q)
                return Response(200, self._text(entry.content, q).encode(), V1_JSON)
            case ("GET", ["subjects", subject, "versions", version, "referencedby"]):
                entry = self._version(subject, version, q)
                return _page(self.service.state.referenced_by(subject, entry.version), q)
            case ("POST", ["subjects", subject, "versions"]):
                body = await self._body(request)
                entry = await self.service.register(subject, body, normalize=_flag(q, "normalize"))
                return {
                    "id": entry.schema_id,
                    "version": entry.version,
                    "guid": entry.content.guid,
                }
            case ("POST", ["subjects", subject]):
                body = await self._body(request)
                content, _ = await self.service.prepare(
                    subject, body, normalize=_flag(q, "normalize")
                )
                entry = self.service.lookup(subject, content, deleted=_flag(q, "deleted"))
                return self._describe(entry, q)
            case ("DELETE", ["subjects", subject]):
                return await self.service.delete_subject(subject, permanent=_flag(q, "permanent"))
            case ("DELETE", ["subjects", subject, "versions", version]):
                return await self.service.delete_version(
                    subject, parse_version(version), permanent=_flag(q, "permanent")
                )
            case ("GET", ["contexts"]):
                return ["."]  # the default context only: contexts are not served
            case ("GET", ["schemas", "types"]):
                return list(SCHEMA_TYPES)
            case ("GET", ["schemas", "ids", schema_id, *rest]) if len(rest) <= 1:
                return self._schema_by_id(schema_id, rest[0] if rest else None, q)
            case ("GET", ["schemas", "guids", guid, *rest]) if len(rest) <= 1:
                found_id = self.service.state.guids.get(guid)
                if found_id is None:
                    raise errors.schema_not_found()
                if rest == ["ids"]:
                    return [found_id]
                return self._schema_by_id(str(found_id), rest[0] if rest else None, q)
            case ("POST", ["compatibility", "subjects", subject, "versions", *rest]) if (
                len(rest) <= 1
            ):
                return await self._compatibility(subject, rest[0] if rest else None, request)
            case ("GET", ["config"]):
                return {"compatibilityLevel": self.service.compatibility_level(None)}
            case ("PUT", ["config"]):
                return await self.service.set_config(None, await self._body(request))
            case ("DELETE", ["config"]):
                return {"compatibilityLevel": await self.service.delete_config(None)}
            case ("GET", ["config", subject]):
                config = self.service.state.configs.get(subject)
                if config is None and not _flag(q, "defaultToGlobal"):
                    raise RegistryError(
                        404, errors.SUBJECT_COMPATIBILITY_NOT_CONFIGURED,
                        f"Subject '{subject}' does not have subject-level compatibility "
                        "configured",
                    )  # fmt: skip
                return {"compatibilityLevel": self.service.compatibility_level(subject)}
            case ("PUT", ["config", subject]):
                return await self.service.set_config(subject, await self._body(request))
            case ("DELETE", ["config", subject]):
                return {"compatibilityLevel": await self.service.delete_config(subject)}
            case ("GET", ["mode"]):
                return {"mode": self.service.mode(None)}
            case ("PUT", ["mode"]):
                body = await self._body(request)
                mode = await self.service.set_mode(None, body.get("mode"), force=_flag(q, "force"))
                return {"mode": mode}
            case ("GET", ["mode", subject]):
                if subject not in self.service.state.modes and not _flag(q, "defaultToGlobal"):
                    raise RegistryError(
                        404, errors.SUBJECT_MODE_NOT_CONFIGURED,
                        f"Subject '{subject}' does not have subject-level mode configured",
                    )  # fmt: skip
                return {"mode": self.service.mode(subject)}
            case ("PUT", ["mode", subject]):
                body = await self._body(request)
                mode = await self.service.set_mode(
                    subject, body.get("mode"), force=_flag(q, "force")
                )
                return {"mode": mode}
            case ("DELETE", ["mode", subject]):
                return {"mode": await self.service.delete_mode(subject)}
            case (_, ["subjects" | "schemas" | "config" | "mode" | "compatibility", *_]) if (
                _known_path(parts)
            ):
                raise RegistryError(405, 405, "HTTP 405 Method Not Allowed")
        raise RegistryError(404, 404, "HTTP 404 Not Found")

    def _version(self, subject: str, version: str, q: dict[str, str]) -> SubjectVersion:
        return self.service.subject_version(
            subject, parse_version(version), deleted=_flag(q, "deleted")
        )

    def _text(self, content: SchemaContent, q: dict[str, str]) -> str:
        """The schema text, or with ``format=serialized`` a Protobuf schema's descriptor
        in base64 (what confluent-kafka's Protobuf deserializer asks for)."""
        if q.get("format") == "serialized" and content.schema_type == "PROTOBUF":
            serialized = getattr(self.service.parsed(content), "serialized", None)
            if isinstance(serialized, str):
                return serialized
        return content.schema

    def _describe(self, entry: SubjectVersion, q: dict[str, str]) -> dict[str, Any]:
        found: dict[str, Any] = {
            "subject": entry.subject,
            "version": entry.version,
            "id": entry.schema_id,
            "guid": entry.content.guid,
        }
        if entry.content.schema_type != "AVRO":
            found["schemaType"] = entry.content.schema_type
        if entry.content.reference_list:
            found["references"] = entry.content.reference_list
        _add_contract(found, entry.content)
        found["schema"] = self._text(entry.content, q)
        return found

    def _schema_by_id(self, text: str, tail: str | None, q: dict[str, str]) -> Any:
        try:
            schema_id = int(text)
        except ValueError:
            raise errors.schema_not_found() from None
        content = self.service.schema_by_id(schema_id)
        deleted = _flag(q, "deleted")
        if tail is None:
            found: dict[str, Any] = {"guid": content.guid}
            if content.schema_type != "AVRO":
                found["schemaType"] = content.schema_type
            if content.reference_list:
                found["references"] = content.reference_list
            _add_contract(found, content)
            found["schema"] = self._text(content, q)
            return found
        if tail == "schema":
            return Response(200, self._text(content, q).encode(), V1_JSON)
        usages = self.service.state.usages(schema_id, deleted=deleted)
        if "subject" in q:
            usages = [u for u in usages if u.subject == q["subject"]]
        if tail == "subjects":
            return _page(sorted({u.subject for u in usages}), q)
        if tail == "versions":
            return _page([{"subject": u.subject, "version": u.version} for u in usages], q)
        raise RegistryError(404, 404, "HTTP 404 Not Found")

    async def _compatibility(self, subject: str, version: str | None, request: Request) -> Any:
        check_subject(subject)
        body = await self._body(request)
        q = request.query
        _, parsed = await self.service.prepare(subject, body, normalize=_flag(q, "normalize"))
        if version is None:
            errs = await self.service.check_compatibility(subject, parsed, None, all_versions=True)
        else:
            number = parse_version(version)
            if not self.service.state.versions(subject):
                if number is None:
                    errs = []
                else:
                    raise errors.subject_not_found(subject)
            else:
                errs = await self.service.check_compatibility(
                    subject, parsed, number, all_versions=False
                )
        answer: dict[str, Any] = {"is_compatible": not errs}
        if _flag(q, "verbose"):
            answer["messages"] = errs
        return answer


def _add_contract(found: dict[str, Any], content: SchemaContent) -> None:
    if content.metadata:
        found["metadata"] = content.metadata_object
    if content.rule_set:
        found["ruleSet"] = content.rule_set_object


def _known_path(parts: list[str]) -> bool:
    head = parts[0]
    return (head in ("config", "mode") and len(parts) <= 2) or (
        head == "subjects" and 2 <= len(parts) <= 5
    )


__all__ = ["RegistryApi", "check_subject"]
