"""SaslHandshake (key 17, v0–1) and SaslAuthenticate (key 36, v0–2).

Served on SASL listeners before and after authentication (a second exchange
re-authenticates, KIP-368); the exchange itself is the connection's
:class:`~samsa.broker.security.sasl_authenticator.SaslAuthenticator`. On a listener
without SASL, or for SaslAuthenticate after a completed exchange, both answer
ILLEGAL_SASL_STATE, as Kafka does; on a SASL listener the connection is then
closed. A failed exchange is answered (UNSUPPORTED_SASL_MECHANISM or
SASL_AUTHENTICATION_FAILED) after ``connection.failed.authentication.delay.ms``
and the connection is then closed. After SaslHandshake v0 the exchange continues in bare frames,
which the connection hands to :func:`raw_token`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from samsa.broker.api import respond
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.security.sasl_authenticator import (
    SaslAuthenticator,
    SaslFailure,
    current_authenticator,
)
from samsa.errors import ErrorCode
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import RequestHeader


def register(registry: ApiRegistry) -> None:
    async def handshake(header: RequestHeader, body: Any) -> Any:
        authenticator = current_authenticator.get()
        if authenticator is None:
            return respond(header, {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": ()})
        mechanisms = authenticator.security.mechanisms
        try:
            authenticator.handshake(body.mechanism, header.api_version)
        except SaslFailure:
            code = (
                ErrorCode.ILLEGAL_SASL_STATE
                if authenticator.exchanging
                else ErrorCode.UNSUPPORTED_SASL_MECHANISM
            )
            return respond(header, {"error_code": code, "mechanisms": mechanisms})
        return respond(header, {"error_code": ErrorCode.NONE, "mechanisms": mechanisms})

    async def authenticate(header: RequestHeader, body: Any) -> Any:
        authenticator = current_authenticator.get()
        if authenticator is not None and not authenticator.exchanging:
            # On a SASL listener this breaks the exchange: answered, then closed (Kafka's).
            authenticator.failure = "SaslAuthenticate without a SaslHandshake before it"
        if authenticator is None or not authenticator.exchanging:
            return _answer(
                header, ErrorCode.ILLEGAL_SASL_STATE,
                "SaslAuthenticate without a SaslHandshake before it", b"", None,
            )  # fmt: skip
        try:
            token, complete = await authenticator.authenticate(body.auth_bytes)
        except SaslFailure as exc:
            return _answer(header, ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc), b"", None)
        lifetime = _session_lifetime_ms(authenticator) if complete else 0
        return _answer(header, ErrorCode.NONE, None, token, lifetime)

    registry.add(ApiKey.SASL_HANDSHAKE, 0, 1, handshake)
    registry.add(ApiKey.SASL_AUTHENTICATE, 0, 2, authenticate)


def _session_lifetime_ms(authenticator: SaslAuthenticator) -> int:
    return authenticator.security.max_reauth_ms


def _answer(
    header: RequestHeader, code: ErrorCode, message: str | None, token: bytes, lifetime: int | None
) -> Any:
    values: dict[str, Any] = {"error_code": code, "error_message": message, "auth_bytes": token}
    if header.api_version >= 1:
        values["session_lifetime"] = timedelta(milliseconds=lifetime or 0)
    return respond(header, values)


async def raw_token(authenticator: SaslAuthenticator, token: bytes) -> bytes | None:
    """The bare answer to a bare token (after SaslHandshake v0), or None when the exchange
    failed: Kafka closes such a connection without an answer."""
    try:
        answer, _complete = await authenticator.authenticate(token)
    except SaslFailure:
        return None
    return answer
