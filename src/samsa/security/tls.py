"""TLS contexts from Kafka's ``ssl.*`` settings, and the principal of a client certificate.

Stores are PEM files (Kafka's ``ssl.keystore.type=PEM``): the keystore holds the
private key and the certificate chain (in one file, or as
``ssl.keystore.key`` / ``ssl.keystore.certificate.chain`` texts), the truststore
the CA certificates. JKS and PKCS12 stores are refused with a message saying
to convert them (``openssl pkcs12 -in store.p12 -nodes``).

A client certificate's subject becomes the principal ``User:<DN>``, the DN
written as RFC 2253 does (most specific first: ``CN=alice,OU=eng,O=acme``),
then rewritten by ``ssl.principal.mapping.rules`` (Kafka's
``RULE:<regex>/<replacement>/[LU]`` list, first match wins; ``DEFAULT`` keeps
the DN).
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "PrincipalMapper",
    "TlsConfigError",
    "client_context",
    "distinguished_name",
    "server_context",
]

_PROTOCOLS = {
    "TLSV1.2": ssl.TLSVersion.TLSv1_2,
    "TLSV1.3": ssl.TLSVersion.TLSv1_3,
    "TLSV1.1": ssl.TLSVersion.TLSv1_1,
    "TLSV1": ssl.TLSVersion.TLSv1,
}
_CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


class TlsConfigError(ValueError):
    """Raised when ``ssl.*`` settings name a missing or unreadable store or a bad value."""


def server_context(settings: Mapping[str, Any]) -> ssl.SSLContext:
    """A server context from a listener's ``ssl.*`` settings (keystore required)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _protocols(context, settings)
    _load_keystore(context, settings, required=True)
    client_auth = str(settings.get("ssl.client.auth") or "none").lower()
    if client_auth not in _CLIENT_AUTH:
        raise TlsConfigError(
            f"ssl.client.auth must be none, requested or required, not {client_auth!r}"
        )
    context.verify_mode = _CLIENT_AUTH[client_auth]
    if context.verify_mode != ssl.CERT_NONE and not _load_truststore(context, settings):
        raise TlsConfigError(
            f"ssl.client.auth={client_auth} needs ssl.truststore.location (the CAs that "
            "sign client certificates)"
        )
    return context


def client_context(settings: Mapping[str, Any]) -> ssl.SSLContext:
    """A client context from Kafka client settings: ``ssl.ca.location`` or
    ``ssl.truststore.location`` (else the system CAs), ``ssl.certificate.location`` +
    ``ssl.key.location`` or a PEM keystore for mutual TLS,
    ``ssl.endpoint.identification.algorithm`` (``https``, the default, checks the
    broker's host name; empty or ``none`` does not)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _protocols(context, settings)
    identification = str(settings.get("ssl.endpoint.identification.algorithm", "https") or "")
    context.check_hostname = identification.lower() == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    if not _load_truststore(context, settings):
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    certificate = settings.get("ssl.certificate.location")
    if certificate:
        key = settings.get("ssl.key.location") or certificate
        password = settings.get("ssl.key.password")
        try:
            context.load_cert_chain(str(certificate), str(key), password=password)
        except (OSError, ssl.SSLError) as exc:
            raise TlsConfigError(
                f"cannot load the client certificate {certificate}: {exc}"
            ) from exc
    else:
        _load_keystore(context, settings, required=False)
    return context


def _protocols(context: ssl.SSLContext, settings: Mapping[str, Any]) -> None:
    enabled = settings.get("ssl.enabled.protocols") or ["TLSv1.2", "TLSv1.3"]
    if isinstance(enabled, str):
        enabled = [p.strip() for p in enabled.split(",") if p.strip()]
    versions = []
    for name in enabled:
        version = _PROTOCOLS.get(str(name).upper())
        if version is None:
            raise TlsConfigError(f"ssl.enabled.protocols: unknown protocol {name!r}")
        versions.append(version)
    context.minimum_version = min(versions)
    context.maximum_version = max(versions)
    ciphers = settings.get("ssl.cipher.suites")
    if isinstance(ciphers, str):
        ciphers = [c.strip() for c in ciphers.split(",") if c.strip()]
    if ciphers:
        try:
            context.set_ciphers(":".join(ciphers))
        except ssl.SSLError as exc:
            raise TlsConfigError(f"ssl.cipher.suites: no usable cipher in {ciphers}") from exc


def _load_truststore(context: ssl.SSLContext, settings: Mapping[str, Any]) -> bool:
    _check_type(settings, "ssl.truststore.type")
    location = settings.get("ssl.truststore.location") or settings.get("ssl.ca.location")
    certificates = settings.get("ssl.truststore.certificates")
    if certificates:
        context.load_verify_locations(cadata=str(certificates))
        return True
    if not location:
        return False
    try:
        context.load_verify_locations(cafile=str(location))
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"cannot load the truststore {location}: {exc}") from exc
    return True


def _load_keystore(context: ssl.SSLContext, settings: Mapping[str, Any], *, required: bool) -> None:
    _check_type(settings, "ssl.keystore.type")
    location = settings.get("ssl.keystore.location")
    password = settings.get("ssl.key.password") or settings.get("ssl.keystore.password")
    chain, key = settings.get("ssl.keystore.certificate.chain"), settings.get("ssl.keystore.key")
    try:
        if location:
            context.load_cert_chain(str(location), password=password)
        elif chain and key:
            with _pem_file(f"{key}\n{chain}\n") as path:
                context.load_cert_chain(path, password=password)
        elif required:
            raise TlsConfigError(
                "a TLS listener needs ssl.keystore.location (a PEM file with the key and the "
                "certificate chain)"
            )
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(
            f"cannot load the keystore {location or '(inline PEM)'}: {exc}"
        ) from exc


def _check_type(settings: Mapping[str, Any], key: str) -> None:
    kind = str(settings.get(key) or "PEM").upper()
    if kind != "PEM":
        raise TlsConfigError(
            f"{key}={kind} is not supported: samsa reads PEM stores (convert with "
            "'openssl pkcs12 -in store.p12 -nodes' or keytool -importkeystore to PKCS12 first)"
        )


@contextlib.contextmanager
def _pem_file(text: str) -> Iterator[str]:
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        yield path
    finally:
        os.unlink(path)


_SHORT_NAMES = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
    "emailAddress": "EMAILADDRESS",
}


def distinguished_name(certificate: Mapping[str, Any]) -> str:
    """The subject of a certificate (as ``SSLSocket.getpeercert()`` returns it) in RFC 2253
    form: relative names in reverse order, ``+`` between the parts of a multi-valued one."""
    rdns = []
    for rdn in reversed(certificate.get("subject", ())):
        parts = [f"{_SHORT_NAMES.get(name, name)}={_escape(value)}" for name, value in rdn]
        rdns.append("+".join(parts))
    return ",".join(rdns)


def _escape(value: str) -> str:
    escaped = re.sub(r'([,+"\\<>;])', r"\\\1", value)
    if escaped.startswith((" ", "#")):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and not escaped.endswith("\\ "):
        escaped = escaped[:-1] + "\\ "
    return escaped


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str
    case: str

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        match = self.pattern.fullmatch(name)
        if match is None:
            return None
        result = match.expand(re.sub(r"\$(\d)", r"\\\1", self.replacement))
        return (
            result.lower() if self.case == "L" else result.upper() if self.case == "U" else result
        )


_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?))\s*(?:,|$)")


class PrincipalMapper:
    """``ssl.principal.mapping.rules``: a DN → the principal's name."""

    def __init__(self, rules: str | list[str] | None) -> None:
        text = ",".join(rules) if isinstance(rules, list) else (rules or "DEFAULT")
        self._rules: list[_Rule] = []
        position = 0
        while position < len(text):
            match = _RULE.match(text, position)
            if match is None or match.end() == position:
                raise TlsConfigError(
                    f"ssl.principal.mapping.rules: cannot parse {text[position:]!r}"
                )
            if match.group(1):
                self._rules.append(_Rule(None, "", ""))
            else:
                try:
                    pattern = re.compile(match.group(2).replace("\\/", "/"))
                except re.error as exc:
                    raise TlsConfigError(
                        f"ssl.principal.mapping.rules: bad pattern: {exc}"
                    ) from exc
                self._rules.append(
                    _Rule(pattern, match.group(3).replace("\\/", "/"), match.group(4))
                )
            position = match.end()

    def name(self, dn: str) -> str:
        for rule in self._rules:
            mapped = rule.apply(dn)
            if mapped is not None:
                return mapped
        raise TlsConfigError(f"no ssl.principal.mapping.rules rule matches {dn!r}")
