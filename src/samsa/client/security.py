"""How samsa's clients secure their connections: TLS and SASL, with Kafka's client keys.

``security.protocol`` is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL. TLS takes
librdkafka's and Java's names alike (``ssl.ca.location`` or
``ssl.truststore.location``; ``ssl.certificate.location`` + ``ssl.key.location``
or a PEM ``ssl.keystore.location`` for mutual TLS). SASL takes
``sasl.mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and the identity as
``sasl.username`` / ``sasl.password`` or a ``sasl.jaas.config`` with
``username`` and ``password`` options. :func:`authenticate` runs the exchange on
a new connection, after ApiVersions, with SaslHandshake v1 and SaslAuthenticate.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from samsa.config import ConfigKey, ConfigType, one_of
from samsa.errors import ConfigError, ErrorCode
from samsa.protocol.api_keys import ApiKey
from samsa.security.jaas import JaasError, parse_jaas_config
from samsa.security.scram import ScramClient, ScramError, ScramMechanism
from samsa.security.tls import TlsConfigError, client_context

__all__ = ["SECURITY_KEYS", "ClientSecurity", "authenticate"]


_S, _P, _LIST = ConfigType.STRING, ConfigType.PASSWORD, ConfigType.LIST

SECURITY_KEYS = [
    ConfigKey("security.protocol", _S, "PLAINTEXT", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.",
              one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
    ConfigKey("ssl.ca.location", _S, None, "PEM file of the CAs to trust (default: the system's)."),
    ConfigKey("ssl.truststore.location", _S, None, "PEM file of the CAs to trust."),
    ConfigKey("ssl.truststore.type", _S, "PEM", "Truststore format (PEM only)."),
    ConfigKey("ssl.truststore.password", _P, None, "Accepted; PEM truststores have none."),
    ConfigKey("ssl.certificate.location", _S, None, "PEM client certificate (mutual TLS)."),
    ConfigKey("ssl.key.location", _S, None, "PEM private key of the client certificate."),
    ConfigKey("ssl.key.password", _P, None, "Password of an encrypted private key."),
    ConfigKey("ssl.keystore.location", _S, None, "PEM file: client key + certificate chain."),
    ConfigKey("ssl.keystore.type", _S, "PEM", "Keystore format (PEM only)."),
    ConfigKey("ssl.keystore.password", _P, None, "Accepted; PEM keys use ssl.key.password."),
    ConfigKey("ssl.endpoint.identification.algorithm", _S, "https",
              "https: check the broker's host name; none: do not."),
    ConfigKey("ssl.enabled.protocols", _LIST, ["TLSv1.2", "TLSv1.3"], "TLS versions."),
    ConfigKey("sasl.mechanism", _S, "GSSAPI", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512."),
    ConfigKey("sasl.username", _S, None, "SASL user name."),
    ConfigKey("sasl.password", _P, None, "SASL password."),
    ConfigKey("sasl.jaas.config", _P, None, "A JAAS entry with username and password options."),
]  # fmt: skip

_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class SaslAuthenticationError(Exception):
    """Raised by :func:`authenticate`; the caller turns it into a client error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class ClientSecurity:
    """A client's security settings, checked once: the TLS context to connect with and
    the SASL identity to authenticate as."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str = ""
    password: str = ""

    @property
    def sasl(self) -> bool:
        return self.mechanism is not None

    def __repr__(self) -> str:  # never the password
        return (
            f"ClientSecurity({self.protocol}, mechanism={self.mechanism}, user={self.username!r})"
        )

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ClientSecurity:
        protocol = config.get("security.protocol") or "PLAINTEXT"
        if protocol == "PLAINTEXT":
            return cls()
        context = None
        if protocol in ("SSL", "SASL_SSL"):
            try:
                context = client_context(config)
            except TlsConfigError as exc:
                raise ConfigError(str(exc)) from None
        if protocol == "SSL":
            return cls(protocol, context)
        mechanism = str(config.get("sasl.mechanism") or "GSSAPI").upper()
        if mechanism not in _MECHANISMS:
            raise ConfigError(
                f"sasl.mechanism {mechanism} is not supported: use {', '.join(_MECHANISMS)}"
            )
        username, password = config.get("sasl.username"), config.get("sasl.password")
        jaas = config.get("sasl.jaas.config")
        if jaas and not (username and password):
            try:
                options = parse_jaas_config(jaas).options
            except JaasError as exc:
                raise ConfigError(str(exc)) from None
            username, password = options.get("username"), options.get("password")
        if not username or not password:
            raise ConfigError(
                f"security.protocol={protocol} needs sasl.username and sasl.password (or a "
                "sasl.jaas.config with username and password)"
            )
        return cls(protocol, context, mechanism, str(username), str(password))


Request = Callable[[int, Mapping[str, Any], int], Awaitable[Any]]
"""Send one request (api key, body, version) on the connection and return its response."""


async def authenticate(security: ClientSecurity, request: Request) -> None:
    """Authenticate a new connection; :class:`SaslAuthenticationError` if the broker refuses."""
    assert security.mechanism is not None
    response = await request(ApiKey.SASL_HANDSHAKE, {"mechanism": security.mechanism}, 1)
    if response.error_code:
        raise SaslAuthenticationError(
            int(response.error_code),
            f"the broker does not serve SASL mechanism {security.mechanism} (it serves "
            f"{', '.join(response.mechanisms) or 'none'})",
        )

    async def step(token: bytes) -> bytes:
        answer = await request(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token}, 1)
        if answer.error_code:
            raise SaslAuthenticationError(
                int(answer.error_code), answer.error_message or "SASL authentication failed"
            )
        return bytes(answer.auth_bytes)

    if security.mechanism == "PLAIN":
        await step(f"\0{security.username}\0{security.password}".encode())
        return
    scram = ScramClient(
        ScramMechanism.named(security.mechanism), security.username, security.password
    )
    try:
        server_first = await step(scram.first())
        server_final = await step(scram.final(server_first))
        scram.verify(server_final)
    except ScramError as exc:
        raise SaslAuthenticationError(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc)) from None
