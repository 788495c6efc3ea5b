"""SCRAM users over raw requests to one chosen broker: set or delete a credential, and log
in, answering the error code the broker gave."""

from __future__ import annotations

import secrets
import socket
from typing import Any

from tests.rawclient import exchange, read_response, request_frame

from samsa.errors import ErrorCode
from samsa.security.scram import ScramClient, ScramMechanism

SASL_HANDSHAKE, SASL_AUTHENTICATE, ALTER_USER_SCRAM_CREDENTIALS = 17, 36, 51


def set_credential(
    address: str, user: str, mechanism: str, password: str, iterations: int = 4096
) -> None:
    """Upsert ``user``'s credential through the broker at ``address`` (and only it)."""
    scram = ScramMechanism.named(mechanism)
    salt = secrets.token_bytes(32)
    _alter(address, {"deletions": [], "upsertions": [{
        "name": user, "mechanism": scram.type_code, "iterations": iterations, "salt": salt,
        "salted_password": scram.salted_password(password, salt, iterations)}]})  # fmt: skip


def delete_credential(address: str, user: str, mechanism: str) -> None:
    code = ScramMechanism.named(mechanism).type_code
    _alter(address, {"deletions": [{"name": user, "mechanism": code}], "upsertions": []})


def _alter(address: str, body: dict[str, Any]) -> None:
    response = exchange(address, ALTER_USER_SCRAM_CREDENTIALS, 0, body)
    assert [int(r.error_code) for r in response.results] == [ErrorCode.NONE], response


def scram_login(address: str, mechanism: str, user: str, password: str) -> int:
    """A SCRAM exchange on a new connection to ``address`` (a SASL listener): the error
    code of its last step (0: logged in)."""
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=20) as sock:

        def call(api_key: int, version: int, values: dict[str, Any]) -> Any:
            sock.sendall(request_frame(api_key, version, values))
            return read_response(sock, api_key, version)

        handshake = call(SASL_HANDSHAKE, 1, {"mechanism": mechanism})
        assert handshake.error_code == ErrorCode.NONE, handshake
        client = ScramClient(ScramMechanism.named(mechanism), user, password)
        first = call(SASL_AUTHENTICATE, 2, {"auth_bytes": client.first()})
        if first.error_code != ErrorCode.NONE:
            return int(first.error_code)
        final = call(SASL_AUTHENTICATE, 2, {"auth_bytes": client.final(first.auth_bytes)})
        return int(final.error_code)
