"""The SASL side of one connection on a SASL_PLAINTEXT or SASL_SSL listener.

A connection starts unauthenticated: it is served ApiVersions, SaslHandshake
and SaslAuthenticate only, and its frames are capped at
``sasl.server.max.receive.size``. SaslHandshake picks a mechanism (PLAIN,
SCRAM-SHA-256, SCRAM-SHA-512, as ``sasl.enabled.mechanisms`` allows);
SaslAuthenticate carries the mechanism's messages (with SaslHandshake v0 they
come as bare frames instead, as Kafka 0.10 clients send them). Success makes
the principal ``User:<name>``; a failure is answered with
SASL_AUTHENTICATION_FAILED and the connection closed, as Kafka does.

Re-authentication (KIP-368): with ``connections.max.reauth.ms`` set, the
session lifetime is sent in SaslAuthenticate (v1+); a connection that sends
any other request after its session expired is closed. A client re-authenticates
with a new SaslHandshake/SaslAuthenticate on the same connection, as the same
principal.

Owned by its connection; not thread-safe.
"""

from __future__ import annotations

import hmac
import time
from contextvars import ContextVar

from samsa.broker.security.scram_credentials import ScramCredentials
from samsa.broker.security.security_config import ListenerSecurity
from samsa.protocol.api_keys import ApiKey
from samsa.security.scram import ScramError, ScramMechanism, ScramServer, parse_client_first

__all__ = ["SaslAuthenticator", "SaslFailure", "current_authenticator"]

PRE_AUTHENTICATION_APIS = frozenset(
    {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE}
)


class SaslFailure(Exception):
    """An exchange failed; the message is safe to send and log (no secrets)."""


class SaslAuthenticator:
    """Where one connection is in its SASL exchange, and who it authenticated as."""

    def __init__(self, security: ListenerSecurity, credentials: ScramCredentials) -> None:
        self.security = security
        self._credentials = credentials
        self.mechanism: str | None = None
        self.principal: str | None = None
        """``User:<name>`` once authenticated."""
        self.raw_tokens = False
        """SaslHandshake v0: the exchange's messages come as bare frames."""
        self.session_expires_at: float | None = None
        self._scram: ScramServer | None = None
        self._exchanging = False
        self.username: str | None = None
        """The name the client gave (for logs), known once it sent its first message."""
        self.failure: str | None = None
        """Why authentication failed: the connection is closed once its answer is sent."""

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    @property
    def expired(self) -> bool:
        return self.session_expires_at is not None and time.monotonic() >= self.session_expires_at

    def handshake(self, mechanism: str, version: int) -> None:
        """Start an exchange with ``mechanism``; SaslFailure if it is not enabled or an
        exchange is under way."""
        if self._exchanging:
            self.failure = "SaslHandshake during an exchange"
            raise SaslFailure(self.failure)
        if mechanism not in self.security.mechanisms:
            self.failure = f"Unsupported SASL mechanism {mechanism}"
            raise SaslFailure(self.failure)
        self.mechanism = mechanism
        self.raw_tokens = version == 0
        self._exchanging = True
        self._scram = None  # made at the first SCRAM message, with the user's credential

    @property
    def exchanging(self) -> bool:
        return self._exchanging

    async def authenticate(self, token: bytes) -> tuple[bytes, bool]:
        """The answer to one client message and whether the exchange is complete;
        SaslFailure (the exchange ends) when authentication fails."""
        if not self._exchanging or self.mechanism is None:
            self.failure = "SaslAuthenticate before SaslHandshake"
            raise SaslFailure(self.failure)
        try:
            if self.mechanism == "PLAIN":
                self._succeed(self._plain(token))
                return b"", True
            return await self._scram_step(ScramMechanism.named(self.mechanism), token)
        except SaslFailure as exc:
            self._exchanging = False
            self.failure = str(exc)
            raise

    def _plain(self, token: bytes) -> str:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslFailure("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, user, password = (part.decode() for part in parts)
        except UnicodeDecodeError:
            raise SaslFailure("Invalid SASL/PLAIN response: not UTF-8") from None
        self.username = user
        if not user or not password:
            raise SaslFailure("Authentication failed: username or password is empty")
        if authzid and authzid != user:
            raise SaslFailure("Authentication failed: Client requested an authorization id "
                              "that is different from username")  # fmt: skip
        expected = self.security.plain_users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslFailure("Authentication failed: Invalid username or password")
        return user

    async def _scram_step(self, mechanism: ScramMechanism, token: bytes) -> tuple[bytes, bool]:
        failed = (
            "Authentication failed during authentication due to invalid credentials with "
            f"SASL mechanism {self.mechanism}"
        )
        scram = self._scram
        if scram is None:  # the client-first message: look the user's credential up once
            try:
                first = parse_client_first(token.decode())
            except (ScramError, UnicodeDecodeError):
                raise SaslFailure(failed) from None
            checked = first.username
            self.username = checked
            credential = await self._credentials.lookup(mechanism, checked)
            salt_key = await self._credentials.unknown_user_salt_key()
            # The server parses the same message again; a name other than the one looked up
            # would find no credential, so only ``checked`` can ever be authenticated.
            scram = self._scram = ScramServer(
                mechanism, lambda name: credential if name == checked else None, salt_key
            )
        try:
            answer = scram.respond(token)
        except ScramError:
            raise SaslFailure(failed) from None
        if scram.complete:
            assert scram.username is not None and scram.username == self.username
            self._succeed(scram.username)
            return answer, True
        return answer, False

    def _succeed(self, name: str) -> None:
        principal = f"User:{name}"
        if self.principal is not None and principal != self.principal:
            raise SaslFailure(
                f"Cannot change principals during re-authentication from {self.principal}: "
                f"{principal}"
            )
        self.principal = principal
        self._exchanging = False
        self.raw_tokens = False
        reauth_ms = self.security.max_reauth_ms
        self.session_expires_at = time.monotonic() + reauth_ms / 1000 if reauth_ms > 0 else None


current_authenticator: ContextVar[SaslAuthenticator | None] = ContextVar(
    "current_authenticator", default=None
)
"""The SASL state of the connection whose request is being served (None off SASL listeners)."""
