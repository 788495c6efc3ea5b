"""The broker's security settings: Kafka's ``ssl.*`` and ``sasl.*`` keys, per listener.

Each listener has a security protocol (``listener.security.protocol.map``):
PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL. Its settings are the broker-wide
keys overridden by ``listener.name.<listener>.<key>`` ones, as in Kafka — for
example ``listener.name.sasl_ssl.ssl.keystore.location`` or
``listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config``. The PLAIN users of a
listener are the ``user_<name>="<password>"`` options of its PLAIN JAAS config
(``listener.name.<l>.plain.sasl.jaas.config``, else ``sasl.jaas.config``); SCRAM
users are the credentials stored through AlterUserScramCredentials.

:func:`listener_security` checks everything a listener needs at start-up —
stores readable, mechanisms known — so a misconfigured listener stops the broker
with a message naming the key rather than failing its first client.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from samsa.client.security import ClientSecurity
from samsa.config import ConfigKey, ConfigType, at_least
from samsa.errors import ConfigError
from samsa.security.jaas import JaasError, parse_jaas_config
from samsa.security.tls import PrincipalMapper, TlsConfigError, server_context

__all__ = [
    "SASL_MECHANISMS",
    "SECURITY_CONFIG_KEYS",
    "SECURITY_PROTOCOLS",
    "ListenerSecurity",
    "inter_broker_security",
    "listener_security",
    "split_listener_overrides",
]

SECURITY_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_UNSUPPORTED_MECHANISMS = frozenset({"GSSAPI", "OAUTHBEARER"})

_S, _P, _LIST, _I, _L = (
    ConfigType.STRING,
    ConfigType.PASSWORD,
    ConfigType.LIST,
    ConfigType.INT,
    ConfigType.LONG,
)

SECURITY_CONFIG_KEYS = [
    ConfigKey("ssl.keystore.type", _S, "PEM", "Keystore format (PEM only)."),
    ConfigKey("ssl.keystore.location", _S, None, "PEM file: private key + certificate chain."),
    ConfigKey("ssl.keystore.password", _P, None, "Accepted; PEM keys use ssl.key.password."),
    ConfigKey("ssl.keystore.key", _P, None, "The private key as PEM text."),
    ConfigKey("ssl.keystore.certificate.chain", _S, None, "The certificate chain as PEM text."),
    ConfigKey("ssl.key.password", _P, None, "Password of an encrypted private key."),
    ConfigKey("ssl.truststore.type", _S, "PEM", "Truststore format (PEM only)."),
    ConfigKey("ssl.truststore.location", _S, None, "PEM file of trusted CA certificates."),
    ConfigKey("ssl.truststore.password", _P, None, "Accepted; PEM truststores have none."),
    ConfigKey("ssl.truststore.certificates", _S, None, "Trusted CAs as PEM text."),
    ConfigKey("ssl.client.auth", _S, "none", "none, requested or required (mutual TLS)."),
    ConfigKey("ssl.enabled.protocols", _LIST, ["TLSv1.2", "TLSv1.3"], "TLS versions."),
    ConfigKey("ssl.cipher.suites", _LIST, [], "Cipher suites (OpenSSL names; empty: defaults)."),
    ConfigKey("ssl.principal.mapping.rules", _S, "DEFAULT",
              "RULE:<regex>/<replacement>/[LU],…: a client certificate's DN → principal name."),
    ConfigKey("ssl.endpoint.identification.algorithm", _S, "https",
              "https: a broker checks the host name of the brokers it connects to."),
    ConfigKey("ssl.protocol", _S, "TLSv1.3", "Accepted for compatibility."),
    ConfigKey("sasl.enabled.mechanisms", _LIST, ["GSSAPI"],
              "SASL mechanisms served: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512."),
    ConfigKey("sasl.jaas.config", _P, None, "A JAAS entry (PLAIN users as user_<name>=…)."),
    ConfigKey("sasl.mechanism.inter.broker.protocol", _S, "GSSAPI",
              "The mechanism brokers authenticate to each other with on a SASL listener."),
    ConfigKey("sasl.server.max.receive.size", _I, 524_288,
              "Largest frame before a connection has authenticated.", at_least(1)),
    ConfigKey("connections.max.reauth.ms", _L, 0,
              "A SASL session's lifetime; the client must re-authenticate (0: no limit).",
              at_least(0)),
    ConfigKey("connection.failed.authentication.delay.ms", _I, 100,
              "How long the answer to a failed authentication waits before the connection "
              "closes (a brake on password guessing).", at_least(0)),
    ConfigKey("security.inter.broker.protocol", _S, "PLAINTEXT",
              "Accepted; the inter-broker listener's protocol comes from its name."),
]  # fmt: skip

_OVERRIDABLE = frozenset(
    key.name
    for key in SECURITY_CONFIG_KEYS
    if key.name.startswith(("ssl.", "sasl.", "connections."))
)


def split_listener_overrides(
    props: Mapping[str, Any],
) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
    """``props`` without the ``listener.name.<l>.<key>`` keys, and those keys by listener
    (upper-cased name): each an ``ssl.*``/``sasl.*`` key or ``<mechanism>.sasl.jaas.config``."""
    rest: dict[str, Any] = {}
    overrides: dict[str, dict[str, str]] = {}
    for name, value in props.items():
        if not name.startswith("listener.name."):
            rest[name] = value
            continue
        listener, dot, key = name.removeprefix("listener.name.").partition(".")
        mechanism, _, jaas = key.partition(".")
        if not dot or not (
            key in _OVERRIDABLE
            or (jaas == "sasl.jaas.config" and mechanism.upper() in SASL_MECHANISMS)
        ):
            raise ConfigError(f"unknown configuration key {name!r}")
        overrides.setdefault(listener.upper(), {})[key.lower() if jaas else key] = str(value)
    return rest, overrides


@dataclass(frozen=True)
class ListenerSecurity:
    """What a connection on one listener needs: its TLS context (SSL, SASL_SSL), its SASL
    mechanisms and PLAIN users (SASL_*), its principal mapping and pre-auth frame cap."""

    protocol: str
    ssl_context: ssl.SSLContext | None = None
    mechanisms: tuple[str, ...] = ()
    plain_users: Mapping[str, str] = field(default_factory=dict)
    principal_mapper: PrincipalMapper | None = None
    max_receive_size: int = 524_288
    max_reauth_ms: int = 0

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")


def listener_security(
    name: str, protocol: str, values: Mapping[str, Any], overrides: Mapping[str, str]
) -> ListenerSecurity:
    """The security of listener ``name`` (``protocol``) from the broker's ``values`` and its
    ``listener.name.<name>.*`` overrides; :class:`ConfigError` naming what is wrong."""
    if protocol == "PLAINTEXT":
        return ListenerSecurity(protocol)

    def setting(key: str) -> Any:
        return overrides[key] if key in overrides else values.get(key)

    settings = {key: setting(key) for key in _OVERRIDABLE}
    context = None
    mapper = None
    try:
        if protocol in ("SSL", "SASL_SSL"):
            context = server_context(settings)
            mapper = PrincipalMapper(settings["ssl.principal.mapping.rules"])
    except TlsConfigError as exc:
        raise ConfigError(f"listener {name}: {exc}") from None
    if not protocol.startswith("SASL_"):
        return ListenerSecurity(protocol, context, principal_mapper=mapper)
    enabled = settings["sasl.enabled.mechanisms"]
    if isinstance(enabled, str):
        enabled = [m.strip() for m in enabled.split(",") if m.strip()]
    mechanisms = tuple(m.upper() for m in enabled)
    for mechanism in mechanisms:
        if mechanism in _UNSUPPORTED_MECHANISMS:
            raise ConfigError(
                f"listener {name}: sasl.enabled.mechanisms names {mechanism}, which samsa does "
                f"not serve; use {', '.join(SASL_MECHANISMS)}"
            )
        if mechanism not in SASL_MECHANISMS:
            raise ConfigError(f"listener {name}: unknown SASL mechanism {mechanism!r}")
    if not mechanisms:
        raise ConfigError(f"listener {name}: sasl.enabled.mechanisms is empty")
    users: dict[str, str] = {}
    if "PLAIN" in mechanisms:
        jaas = overrides.get("plain.sasl.jaas.config") or values.get("sasl.jaas.config")
        if not jaas:
            raise ConfigError(
                f"listener {name}: PLAIN needs its users in "
                f"listener.name.{name.lower()}.plain.sasl.jaas.config "
                '(PlainLoginModule required user_<name>="<password>" …;)'
            )
        try:
            users = parse_jaas_config(jaas).plain_users
        except JaasError as exc:
            raise ConfigError(f"listener {name}: {exc}") from None
    return ListenerSecurity(
        protocol,
        context,
        mechanisms,
        users,
        mapper,
        int(setting("sasl.server.max.receive.size")),
        int(setting("connections.max.reauth.ms")),
    )


def inter_broker_security(
    name: str, protocol: str, values: Mapping[str, Any], overrides: Mapping[str, str]
) -> ClientSecurity:
    """How this broker connects to the others' listener ``name`` (``inter.broker.listener.name``):
    TLS with the listener's own truststore (and keystore, for mutual TLS), SASL with
    ``sasl.mechanism.inter.broker.protocol`` as the ``username``/``password`` of the
    listener's JAAS config for that mechanism, as Kafka's brokers do."""
    if protocol == "PLAINTEXT":
        return ClientSecurity()

    def setting(key: str) -> Any:
        return overrides[key] if key in overrides else values.get(key)

    client: dict[str, Any] = {"security.protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        for key in ("ssl.truststore.location", "ssl.truststore.type", "ssl.keystore.location",
                    "ssl.keystore.type", "ssl.key.password", "ssl.enabled.protocols",
                    "ssl.endpoint.identification.algorithm"):  # fmt: skip
            client[key] = setting(key)
    if protocol.startswith("SASL_"):
        mechanism = str(values.get("sasl.mechanism.inter.broker.protocol") or "").upper()
        jaas = overrides.get(f"{mechanism.lower()}.sasl.jaas.config") or values.get(
            "sasl.jaas.config"
        )
        client["sasl.mechanism"] = mechanism
        client["sasl.jaas.config"] = jaas
    try:
        return ClientSecurity.from_config(client)
    except ConfigError as exc:
        raise ConfigError(f"inter-broker listener {name}: {exc}") from None
