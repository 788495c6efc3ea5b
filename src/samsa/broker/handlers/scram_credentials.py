"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51), v0.

Alter takes the client's salt and salted password (never the password) and keeps
the derived credential. Each user's result is checked as Kafka checks it: an
empty name or an unknown mechanism, iterations outside 4096..16384
(UNACCEPTABLE_CREDENTIAL), a user named twice for one mechanism
(DUPLICATE_RESOURCE), deleting a credential that does not exist
(RESOURCE_NOT_FOUND). A user with any error has none of its changes applied.
Describe answers mechanism and iterations only; a user named twice is
DUPLICATE_RESOURCE, one without credentials RESOURCE_NOT_FOUND.

With the authorizer on, Describe needs DESCRIBE on the cluster (the whole request is
CLUSTER_AUTHORIZATION_FAILED otherwise) and Alter needs ALTER on the cluster (every
user's result is CLUSTER_AUTHORIZATION_FAILED and nothing changes), as Kafka's: whoever
may set a credential may log in as its user, super users included.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from samsa.acl import AclOperation
from samsa.broker.api import broker_message, client_message, respond
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.security.authorizer import authorize_cluster
from samsa.broker.security.scram_credentials import CredentialChange, ScramCredentials
from samsa.errors import ErrorCode
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import RequestHeader
from samsa.security.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    ScramMechanism,
)

log = logging.getLogger(__name__)


def register(registry: ApiRegistry, *, credentials: ScramCredentials) -> None:
    async def describe(header: RequestHeader, body: Any) -> Any:
        if not authorize_cluster(AclOperation.DESCRIBE):
            return respond(header, {
                "throttle_time": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": None, "results": [],
            })  # fmt: skip
        names = None if body.users is None else [u.name for u in body.users]
        counts = Counter(names or ())
        found = await credentials.describe(None if names is None else list(counts))
        results = []
        for name in sorted(found) if names is None else list(dict.fromkeys(names)):
            if counts[name] > 1:
                results.append(_result(name, ErrorCode.DUPLICATE_RESOURCE,
                                       "Cannot describe SCRAM credentials for the same user "
                                       "twice in a single request"))  # fmt: skip
            elif name not in found:
                results.append(_result(name, ErrorCode.RESOURCE_NOT_FOUND,
                                       "Attempt to describe a user credential that does not "
                                       "exist"))  # fmt: skip
            else:
                infos = [
                    {"mechanism": m.type_code, "iterations": i}
                    for m, i in sorted(found[name].items(), key=lambda item: item[0].type_code)
                ]
                results.append({**_result(name, ErrorCode.NONE, None), "credential_infos": infos})
        return respond(
            header,
            {"throttle_time": 0, "error_code": ErrorCode.NONE, "error_message": None,
             "results": results},
        )  # fmt: skip

    async def alter(header: RequestHeader, body: Any) -> Any:
        if not authorize_cluster(AclOperation.ALTER):
            refused = dict.fromkeys(d.name for d in (*body.deletions, *body.upsertions))
            return respond(header, {"throttle_time": 0, "results": [
                {"user": name, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                 "error_message": None} for name in refused
            ]})  # fmt: skip
        errors: dict[str, tuple[ErrorCode, str]] = {}
        changes: list[CredentialChange] = []
        seen = Counter((d.name, d.mechanism) for d in (*body.deletions, *body.upsertions))
        existing = await credentials.describe(
            list({d.name for d in (*body.deletions, *body.upsertions)})
        )
        order = list(dict.fromkeys(d.name for d in (*body.deletions, *body.upsertions)))

        def fail(name: str, code: ErrorCode, message: str) -> None:
            errors.setdefault(name, (code, message))

        for deletion in body.deletions:
            mechanism = _mechanism(deletion.mechanism)
            if not deletion.name:
                fail(deletion.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
            elif mechanism is None:
                fail(deletion.name, ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                     "Unknown SCRAM mechanism")  # fmt: skip
            elif seen[(deletion.name, deletion.mechanism)] > 1:
                fail(deletion.name, ErrorCode.DUPLICATE_RESOURCE,
                     "A user credential cannot be altered twice in the same request")  # fmt: skip
            elif mechanism not in existing.get(deletion.name, {}):
                fail(deletion.name, ErrorCode.RESOURCE_NOT_FOUND,
                     "Attempt to delete a user credential that does not exist")  # fmt: skip
            else:
                changes.append(CredentialChange(deletion.name, mechanism, None))
        for upsertion in body.upsertions:
            mechanism = _mechanism(upsertion.mechanism)
            if not upsertion.name:
                fail(upsertion.name, ErrorCode.UNACCEPTABLE_CREDENTIAL,
                     "Username must not be empty")  # fmt: skip
            elif mechanism is None:
                fail(upsertion.name, ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                     "Unknown SCRAM mechanism")  # fmt: skip
            elif seen[(upsertion.name, upsertion.mechanism)] > 1:
                fail(upsertion.name, ErrorCode.DUPLICATE_RESOURCE,
                     "A user credential cannot be altered twice in the same request")  # fmt: skip
            elif upsertion.iterations < MIN_ITERATIONS:
                fail(upsertion.name, ErrorCode.UNACCEPTABLE_CREDENTIAL,
                     f"Too few iterations (minimum {MIN_ITERATIONS})")  # fmt: skip
            elif upsertion.iterations > MAX_ITERATIONS:
                fail(upsertion.name, ErrorCode.UNACCEPTABLE_CREDENTIAL,
                     f"Too many iterations (maximum {MAX_ITERATIONS})")  # fmt: skip
            elif not upsertion.salt or not upsertion.salted_password:
                fail(upsertion.name, ErrorCode.UNACCEPTABLE_CREDENTIAL,
                     "Salt and salted password must not be empty")  # fmt: skip
            else:
                credential = ScramCredential.from_salted_password(
                    mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations
                )
                changes.append(CredentialChange(upsertion.name, mechanism, credential))
        applied = [c for c in changes if c.user not in errors]
        storage_error = None
        if applied:
            try:
                await credentials.alter(applied)
            except Exception as exc:  # answered per user: the request is otherwise well formed
                log.warning("storing SCRAM credentials failed: %s", broker_message(exc))
                storage_error = (ErrorCode.KAFKA_STORAGE_ERROR, client_message(exc))
        results = []
        for name in order:
            code, message = errors.get(name) or storage_error or (ErrorCode.NONE, None)
            results.append({"user": name, "error_code": code, "error_message": message})
        return respond(header, {"throttle_time": 0, "results": results})

    registry.add(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0, describe)
    registry.add(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0, alter)


def _result(name: str, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"user": name, "error_code": code, "error_message": message, "credential_infos": []}


def _mechanism(type_code: int) -> ScramMechanism | None:
    try:
        return ScramMechanism.for_type(type_code)
    except ValueError:
        return None
