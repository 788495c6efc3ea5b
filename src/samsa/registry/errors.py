"""The registry's errors: an HTTP status and Confluent Schema Registry's ``error_code``.

Clients read ``{"error_code": …, "message": …}`` from every error response
(confluent-kafka's ``SchemaRegistryError`` carries both); the codes are Confluent's.
"""

from __future__ import annotations

import json

from samsa.errors import SamsaError

SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403
SUBJECT_SOFT_DELETED = 40404
SUBJECT_NOT_SOFT_DELETED = 40405
VERSION_SOFT_DELETED = 40406
VERSION_NOT_SOFT_DELETED = 40407
SUBJECT_COMPATIBILITY_NOT_CONFIGURED = 40408
SUBJECT_MODE_NOT_CONFIGURED = 40409
INCOMPATIBLE_SCHEMA = 409
INVALID_SCHEMA = 42201
INVALID_VERSION = 42202
INVALID_COMPATIBILITY_LEVEL = 42203
INVALID_MODE = 42204
OPERATION_NOT_PERMITTED = 42205
REFERENCE_EXISTS = 42206
ID_DOES_NOT_MATCH = 42207
INVALID_SUBJECT = 42208
STORE_ERROR = 50001
STORE_TIMEOUT = 50002


class RegistryError(SamsaError):
    """An error answered to the client: ``status`` is HTTP's, ``error_code`` Confluent's
    (raised by the registry's operations; at start-up, one stops the broker's start)."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message

    def body(self) -> bytes:
        return error_body(self.error_code, self.message)


def error_body(error_code: int, message: str) -> bytes:
    return json.dumps({"error_code": error_code, "message": message}).encode()


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")


def version_not_found(subject: str, version: object) -> RegistryError:
    return RegistryError(
        404, VERSION_NOT_FOUND, f"Version {version} not found for subject '{subject}'."
    )


def schema_not_found(detail: str = "Schema not found") -> RegistryError:
    return RegistryError(404, SCHEMA_NOT_FOUND, detail)


def invalid_schema(detail: str) -> RegistryError:
    return RegistryError(422, INVALID_SCHEMA, f"Invalid schema: {detail}")


def invalid_version(version: object) -> RegistryError:
    return RegistryError(
        422,
        INVALID_VERSION,
        f"The specified version '{version}' is not a valid version id. Allowed values are "
        'between [1, 2^31-1] and the string "latest"',
    )


def operation_not_permitted(detail: str) -> RegistryError:
    return RegistryError(422, OPERATION_NOT_PERMITTED, detail)


def bad_request(detail: str) -> RegistryError:
    return RegistryError(400, 400, detail)
