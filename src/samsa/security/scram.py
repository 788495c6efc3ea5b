"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka uses them (KIP-84).

A credential is what a server keeps instead of a password: a random salt, an
iteration count, ``StoredKey = H(HMAC(SaltedPassword, "Client Key"))`` and
``ServerKey = HMAC(SaltedPassword, "Server Key")``, where ``SaltedPassword`` is
PBKDF2 of the password. Kafka writes it as the text
``salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>``
(:meth:`ScramCredential.to_text`), in ZooKeeper under ``/config/users/<name>``.

One exchange is four messages::

    client-first   n,,n=<user>,r=<client nonce>
    server-first   r=<client nonce + server nonce>,s=<salt>,i=<iterations>
    client-final   c=biws,r=<nonce>,p=<ClientProof>
    server-final   v=<ServerSignature>   (or e=<error>)

:class:`ScramServer` and :class:`ScramClient` each hold one side of one exchange.
A failed exchange raises :class:`ScramError` whose message never contains a
password or proof. Kafka's token extension (``tokenauth=true``) is refused:
samsa has no delegation tokens.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

__all__ = [
    "ClientFirst",
    "ScramClient",
    "ScramCredential",
    "ScramError",
    "ScramMechanism",
    "ScramServer",
    "parse_client_first",
    "unknown_user_salt",
]

MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
_NONCE_BYTES = 24


class ScramError(Exception):
    """Raised when a SCRAM message is malformed or a proof or signature does not match."""


class ScramMechanism(Enum):
    """A SCRAM mechanism: its SASL name, hash and the type code of
    AlterUserScramCredentials (1 = SHA-256, 2 = SHA-512)."""

    SCRAM_SHA_256 = ("SCRAM-SHA-256", "sha256", 1)
    SCRAM_SHA_512 = ("SCRAM-SHA-512", "sha512", 2)

    def __init__(self, mechanism_name: str, hash_name: str, type_code: int) -> None:
        self.mechanism_name = mechanism_name
        self.hash_name = hash_name
        self.type_code = type_code

    @classmethod
    def named(cls, name: str) -> ScramMechanism:
        for mechanism in cls:
            if mechanism.mechanism_name == name.upper():
                return mechanism
        raise ValueError(f"unknown SCRAM mechanism {name!r}")

    @classmethod
    def for_type(cls, type_code: int) -> ScramMechanism:
        for mechanism in cls:
            if mechanism.type_code == type_code:
                return mechanism
        raise ValueError(f"unknown SCRAM mechanism type {type_code}")

    def hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self.hash_name).digest()

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode(), salt, iterations)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the server stores for one user and mechanism."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(
        cls, mechanism: ScramMechanism, salt: bytes, salted_password: bytes, iterations: int
    ) -> ScramCredential:
        client_key = mechanism.hmac(salted_password, b"Client Key")
        return cls(
            salt=salt,
            stored_key=mechanism.hash(client_key),
            server_key=mechanism.hmac(salted_password, b"Server Key"),
            iterations=iterations,
        )

    @classmethod
    def from_password(
        cls,
        mechanism: ScramMechanism,
        password: str,
        iterations: int = MIN_ITERATIONS,
        salt: bytes | None = None,
    ) -> ScramCredential:
        salt = secrets.token_bytes(32) if salt is None else salt
        salted = mechanism.salted_password(password, salt, iterations)
        return cls.from_salted_password(mechanism, salt, salted, iterations)

    def to_text(self) -> str:
        """Kafka's form: ``salt=…,stored_key=…,server_key=…,iterations=…``."""
        return (
            f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
            f"server_key={_b64(self.server_key)},iterations={self.iterations}"
        )

    @classmethod
    def from_text(cls, text: str) -> ScramCredential:
        fields = dict(item.partition("=")[::2] for item in text.split(","))
        try:
            return cls(
                salt=base64.b64decode(fields["salt"], validate=True),
                stored_key=base64.b64decode(fields["stored_key"], validate=True),
                server_key=base64.b64decode(fields["server_key"], validate=True),
                iterations=int(fields["iterations"]),
            )
        except (KeyError, ValueError) as exc:
            raise ScramError(f"not a SCRAM credential: {exc}") from None


def check_iterations(iterations: int) -> None:
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ScramError(f"iterations {iterations} is outside {MIN_ITERATIONS}..{MAX_ITERATIONS}")


class ScramServer:
    """The server's side of one exchange. ``lookup(user)`` returns the user's credential
    for this mechanism, or None for an unknown user (which fails the exchange exactly as
    a wrong password does, after the client's proof). ``unknown_salt_key`` keys the salt
    made up for an unknown user (:func:`unknown_user_salt`); a broker passes one it keeps,
    so the made-up salt stays the same across restarts as a real one does."""

    def __init__(
        self,
        mechanism: ScramMechanism,
        lookup: Callable[[str], ScramCredential | None],
        unknown_salt_key: bytes | None = None,
    ) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self._unknown_salt_key = _PROCESS_SALT_KEY if unknown_salt_key is None else unknown_salt_key
        self._state = "first"
        self.username: str | None = None
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._client_nonce = ""

    @property
    def complete(self) -> bool:
        return self._state == "done"

    def respond(self, message: bytes) -> bytes:
        """The answer to one client message; :class:`ScramError` when the exchange fails."""
        try:
            text = message.decode()
        except UnicodeDecodeError:
            raise ScramError("SCRAM message is not UTF-8") from None
        if self._state == "first":
            return self._client_first(text)
        if self._state == "final":
            return self._client_final(text)
        raise ScramError("unexpected SCRAM message after the exchange ended")

    def _client_first(self, text: str) -> bytes:
        first = parse_client_first(text)
        self.username = first.username
        credential = self._lookup(first.username)
        # An unknown user gets a made-up salt, so the answer does not tell that it is unknown:
        # keyed by a secret the client does not know, so it cannot be recomputed from the name.
        self._credential = credential
        if credential is not None:
            salt = credential.salt
        else:
            salt = unknown_user_salt(self._unknown_salt_key, first.username)
        iterations = credential.iterations if credential else MIN_ITERATIONS
        self._client_nonce = first.nonce
        self._nonce = first.nonce + secrets.token_urlsafe(_NONCE_BYTES)
        self._client_first_bare = first.bare
        self._server_first = f"r={self._nonce},s={_b64(salt)},i={iterations}"
        self._state = "final"
        return self._server_first.encode()

    def _echoes_nonce(self, nonce: str | None) -> bool:
        """RFC 5802 wants the combined nonce back. librdkafka before 2.6.1 sends the client
        nonce once more in front of it (confluentinc/librdkafka#4895); Kafka 3.8.1–3.9
        accepted that, Kafka 4 refuses it. samsa accepts it, as Kafka 3.9 did: the
        server's nonce is still echoed, so a replayed exchange still fails."""
        return nonce == self._nonce or nonce == self._client_nonce + self._nonce

    def _client_final(self, text: str) -> bytes:
        without_proof, _, proof_part = text.rpartition(",p=")
        items = without_proof.split(",")
        if (
            len(items) != 2
            or items[0] != "c=biws"
            or not items[1].startswith("r=")
            or not self._echoes_nonce(items[1][2:])
            or not proof_part
        ):
            self._state = "failed"
            raise ScramError("SCRAM client-final message does not match the exchange")
        credential = self._credential
        self._state = "failed"
        if credential is None:
            raise ScramError("invalid credentials")
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise ScramError("SCRAM proof is not base64") from None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = self.mechanism.hmac(credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramError("invalid credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(self.mechanism.hash(client_key), credential.stored_key):
            raise ScramError("invalid credentials")
        server_signature = self.mechanism.hmac(credential.server_key, auth_message)
        self._state = "done"
        return f"v={_b64(server_signature)}".encode()


class ScramClient:
    """The client's side of one exchange: :meth:`first`, then :meth:`final` with the server's
    first message, then :meth:`verify` with the server's last."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str) -> None:
        self.mechanism = mechanism
        self._username = username
        self._password = password
        self._nonce = secrets.token_urlsafe(_NONCE_BYTES)
        self._client_first_bare = f"n={_escape_username(username)},r={self._nonce}"
        self._expected_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        attributes = _attributes(text)
        if "e" in attributes:
            raise ScramError(f"server refused: {attributes['e']}")
        try:
            nonce, salt_text, iterations = attributes["r"], attributes["s"], int(attributes["i"])
        except (KeyError, ValueError):
            raise ScramError("malformed SCRAM server-first message") from None
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise ScramError("SCRAM server nonce does not extend the client's")
        check_iterations(iterations)
        salted = self.mechanism.salted_password(
            self._password, base64.b64decode(salt_text), iterations
        )
        client_key = self.mechanism.hmac(salted, b"Client Key")
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        signature = self.mechanism.hmac(self.mechanism.hash(client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = self.mechanism.hmac(salted, b"Server Key")
        self._expected_signature = self.mechanism.hmac(server_key, auth_message)
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        attributes = _attributes(server_final.decode())
        if "e" in attributes:
            raise ScramError(f"server refused: {attributes['e']}")
        signature = base64.b64decode(attributes.get("v", ""))
        if not hmac.compare_digest(signature, self._expected_signature):
            raise ScramError("the server's SCRAM signature does not match: not the real server")


@dataclass(frozen=True, slots=True)
class ClientFirst:
    """A client-first message, parsed: the one user it names, its nonce and its bare part
    (what the proof is computed over)."""

    username: str
    nonce: str
    bare: str
    extensions: tuple[tuple[str, str], ...]


def parse_client_first(text: str) -> ClientFirst:
    """Parse a client-first message strictly as RFC 5802 defines it (Kafka's form): the GS2
    header ``n,,`` (or ``n,a=<the same user>,``), then exactly ``n=<user>,r=<nonce>`` in that
    order, then extensions ``key=value`` with distinct alphabetic keys. The user name's
    ``=2C`` and ``=3D`` are its only escapes; any other ``=`` in it, an empty name or nonce, a
    second ``n=`` or ``r=``, a mandatory extension (``m=``) or delegation-token login
    (``tokenauth=true``) raises :class:`ScramError`."""
    flag, comma, rest = text.partition(",")
    authzid, comma2, bare = rest.partition(",")
    if not comma or not comma2:
        raise ScramError("malformed SCRAM client-first message")
    if flag != "n":
        raise ScramError("SCRAM channel binding is not supported")
    items = bare.split(",")
    if items[0].startswith("m="):
        raise ScramError("SCRAM mandatory extensions are not supported")
    if len(items) < 2 or not items[0].startswith("n=") or not items[1].startswith("r="):
        raise ScramError("SCRAM client-first message must start with n= and r=")
    username = _unescape_username(items[0][2:])
    nonce = items[1][2:]
    if not nonce or not all(0x21 <= ord(c) <= 0x7E for c in nonce):
        raise ScramError("SCRAM client nonce is empty or not printable")
    if authzid and (not authzid.startswith("a=") or _unescape_username(authzid[2:]) != username):
        raise ScramError("SCRAM authorization id differs from the user name")
    extensions: list[tuple[str, str]] = []
    for item in items[2:]:
        key, eq, value = item.partition("=")
        if not eq or not key.isascii() or not key.isalpha():
            raise ScramError("malformed SCRAM extension")
        if key in ("n", "r", "m") or any(key == seen for seen, _ in extensions):
            raise ScramError(f"SCRAM attribute {key}= given twice or out of place")
        extensions.append((key, value))
    if any(k == "tokenauth" and v.lower() == "true" for k, v in extensions):
        raise ScramError("delegation tokens are not supported")
    return ClientFirst(username, nonce, bare, tuple(extensions))


def unknown_user_salt(key: bytes, username: str) -> bytes:
    """The salt answered for a user without a credential: HMAC-SHA-256 of the name under
    ``key``, the same for every exchange with that key, unpredictable without it."""
    return hmac.new(key, username.encode(), "sha256").digest()


_PROCESS_SALT_KEY = secrets.token_bytes(32)
"""Keys made-up salts when the server is given no key of its own."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _attributes(text: str) -> dict[str, str]:
    attributes: dict[str, str] = {}
    for item in text.split(","):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ScramError("malformed SCRAM message")
        attributes[key] = value
    return attributes


def _escape_username(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _unescape_username(name: str) -> str:
    """A saslname unescaped: ``=2C`` is a comma and ``=3D`` an equals sign, and any other
    ``=`` makes the name invalid (RFC 5802), as does an empty name."""
    parts = name.split("=")
    out = [parts[0]]
    for part in parts[1:]:
        if part.startswith("2C"):
            out.append("," + part[2:])
        elif part.startswith("3D"):
            out.append("=" + part[2:])
        else:
            raise ScramError("SCRAM user name has an = that is not =2C or =3D")
    username = "".join(out)
    if not username:
        raise ScramError("SCRAM user name is empty")
    return username
