"""What an authenticated user without rights cannot do: log in as someone else, set
another user's password, or throttle other users — on a broker with the authorizer on,
``allow.everyone.if.no.acl.found=false`` and ``User:admin`` its super user."""

from __future__ import annotations

import base64
import hashlib
import secrets
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from tests.rawclient import read_response, request_frame
from tests.security.certs import Pki
from tests.security.conftest import SecureBroker, start_secure

from samsa.client import Admin
from samsa.client.admin import ScramUpsertion
from samsa.errors import ErrorCode
from samsa.security.scram import ScramClient, ScramMechanism

SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 17, 36, 3
CREATE_ACLS, DESCRIBE_SCRAM, ALTER_SCRAM = 30, 50, 51
DESCRIBE_QUOTAS, ALTER_QUOTAS = 48, 49
SHA512 = ScramMechanism.SCRAM_SHA_512
PASSWORDS = {"admin": "admin-scram-secret", "mallory": "mallory-secret"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[SecureBroker]:
    secure = start_secure(
        tmp_path_factory.mktemp("hostile") / "data",
        pki,
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found=false",
        "super.users=User:admin;User:ANONYMOUS",
    )
    with Admin({"bootstrap.servers": secure.address("PLAINTEXT")}) as admin:
        admin.alter_user_scram_credentials(
            [ScramUpsertion(user, "SCRAM-SHA-512", pw, 4096) for user, pw in PASSWORDS.items()]
        )
    try:
        yield secure
    finally:
        secure.process.stop()


def _connect(broker: SecureBroker) -> socket.socket:
    return socket.create_connection(("127.0.0.1", broker.ports["SASL_PLAINTEXT"]), timeout=10)


def _call(sock: socket.socket, api_key: int, version: int, values: dict[str, Any]) -> Any:
    sock.sendall(request_frame(api_key, version, values))
    return read_response(sock, api_key, version)


def _authenticate(sock: socket.socket, token: bytes) -> Any:
    return _call(sock, SASL_AUTHENTICATE, 2, {"auth_bytes": token})


def _scram_login(sock: socket.socket, user: str, password: str) -> int:
    """A SCRAM-SHA-512 exchange on ``sock``; the error code of its last step."""
    assert _call(sock, SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"}).error_code == 0
    client = ScramClient(SHA512, user, password)
    first = _authenticate(sock, client.first())
    if first.error_code != ErrorCode.NONE:
        return int(first.error_code)
    final = _authenticate(sock, client.final(first.auth_bytes))
    return int(final.error_code)


def _closed(sock: socket.socket) -> bool:
    sock.settimeout(10)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _proof_for(user: str, password: str, bare: str, server_first: bytes) -> bytes:
    """The client-final message proving ``password`` over ``bare`` (any client-first bare)."""
    fields = dict(item.split("=", 1) for item in server_first.decode().split(","))
    salted = SHA512.salted_password(password, base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = SHA512.hmac(salted, b"Client Key")
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{bare},{server_first.decode()},{without_proof}".encode()
    signature = SHA512.hmac(SHA512.hash(client_key), auth_message)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def test_a_client_first_naming_a_second_user_is_refused_and_closed(broker: SecureBroker) -> None:
    bare = f"n=mallory,r={secrets.token_urlsafe(18)},n=admin"
    with _connect(broker) as sock:
        assert _call(sock, SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"}).error_code == 0
        first = _authenticate(sock, f"n,,{bare}".encode())
        if first.error_code == ErrorCode.NONE:  # the hole: carry on and see who we are
            proof = _proof_for("mallory", PASSWORDS["mallory"], bare, first.auth_bytes)
            final = _authenticate(sock, proof)
            acl = _call(sock, CREATE_ACLS, 3, {"creations": [{
                "resource_type": 2, "resource_name": "secret", "resource_pattern_type": 3,
                "principal": "User:mallory", "host": "*", "operation": 3,
                "permission_type": 3}]})  # fmt: skip
            pytest.fail(
                f"logged in ({final.error_code}); CreateAcls as that session answered "
                f"{acl.results[0].error_code}"
            )
        assert first.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert _closed(sock)


def test_the_users_own_scram_login_still_works(broker: SecureBroker) -> None:
    with _connect(broker) as sock:
        assert _scram_login(sock, "mallory", PASSWORDS["mallory"]) == ErrorCode.NONE
        answer = _call(sock, DESCRIBE_SCRAM, 0, {"users": None})
        assert answer.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert list(answer.results) == []


def test_a_user_cannot_set_a_super_users_password(broker: SecureBroker) -> None:
    stolen = "chosen-by-mallory"
    salt = secrets.token_bytes(16)
    with _connect(broker) as sock:
        assert _scram_login(sock, "mallory", PASSWORDS["mallory"]) == ErrorCode.NONE
        answer = _call(sock, ALTER_SCRAM, 0, {"deletions": [], "upsertions": [{
            "name": "admin", "mechanism": SHA512.type_code, "iterations": 4096, "salt": salt,
            "salted_password": SHA512.salted_password(stolen, salt, 4096)}]})  # fmt: skip
        assert [r.error_code for r in answer.results] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
        deleted = _call(sock, ALTER_SCRAM, 0, {"upsertions": [], "deletions": [
            {"name": "admin", "mechanism": SHA512.type_code}]})  # fmt: skip
        assert [r.error_code for r in deleted.results] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    with _connect(broker) as sock:
        assert _scram_login(sock, "admin", stolen) == ErrorCode.SASL_AUTHENTICATION_FAILED
    with _connect(broker) as sock:
        assert _scram_login(sock, "admin", PASSWORDS["admin"]) == ErrorCode.NONE


def test_a_user_cannot_set_or_read_client_quotas(broker: SecureBroker) -> None:
    entity = [{"entity_type": "user", "entity_name": "victim"}]
    with _connect(broker) as sock:
        assert _scram_login(sock, "mallory", PASSWORDS["mallory"]) == ErrorCode.NONE
        ops = [{"key": "producer_byte_rate", "value": 1000.0, "remove": False}]
        altered = _call(sock, ALTER_QUOTAS, 1, {
            "validate_only": False, "entries": [{"entity": entity, "ops": ops}]})  # fmt: skip
        assert altered.entries[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        described = _call(sock, DESCRIBE_QUOTAS, 1, {"components": [], "strict": False})
        assert described.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    with Admin({"bootstrap.servers": broker.address("PLAINTEXT")}) as admin:
        assert admin.describe_client_quotas() == {}


def test_an_admin_may_still_set_credentials_over_sasl(broker: SecureBroker) -> None:
    salt = secrets.token_bytes(16)
    with _connect(broker) as sock:
        assert _scram_login(sock, "admin", PASSWORDS["admin"]) == ErrorCode.NONE
        answer = _call(sock, ALTER_SCRAM, 0, {"deletions": [], "upsertions": [{
            "name": "trent", "mechanism": SHA512.type_code, "iterations": 4096, "salt": salt,
            "salted_password": SHA512.salted_password("trent-secret", salt, 4096)}]})  # fmt: skip
        assert [r.error_code for r in answer.results] == [ErrorCode.NONE]
    with _connect(broker) as sock:
        assert _scram_login(sock, "trent", "trent-secret") == ErrorCode.NONE


def test_sasl_authenticate_without_a_handshake_is_answered_and_closed(
    broker: SecureBroker,
) -> None:
    with _connect(broker) as sock:
        answer = _authenticate(sock, b"n,,n=mallory,r=abc")
        assert answer.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert _closed(sock)


def test_a_failed_login_is_answered_only_after_the_failed_authentication_delay(
    broker: SecureBroker,
) -> None:
    # Each wrong guess costs the guesser connection.failed.authentication.delay.ms (100 ms
    # by default): five guesses in a row take at least half a second.
    started = time.monotonic()
    for _ in range(5):
        with _connect(broker) as sock:
            code = _scram_login(sock, "admin", "guess")
            assert code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert time.monotonic() - started >= 0.5


def test_an_unknown_users_salt_is_the_same_each_time_and_not_a_hash_of_the_name(
    broker: SecureBroker,
) -> None:
    salts = []
    for _ in range(2):
        with _connect(broker) as sock:
            assert _call(sock, SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"}).error_code == 0
            first = _authenticate(sock, b"n,,n=nobody,r=abcdef")
            fields = dict(item.split("=", 1) for item in first.auth_bytes.decode().split(","))
            salts.append(base64.b64decode(fields["s"]))
    assert salts[0] == salts[1]
    assert salts[0] != hashlib.sha256(b"nobody").digest()
