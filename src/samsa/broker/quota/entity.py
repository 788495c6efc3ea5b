"""Quota entities, their keys, and which entity's quota applies to a request (KIP-55).

An entity is a user, a client id, or a user with a client id; either part may
be the *default* (``<default>``), which applies to every user (client id)
without a quota of its own. Entities are written as Kafka writes them under
``/config`` in ZooKeeper: ``users/<user>``, ``clients/<client-id>``,
``users/<user>/clients/<client-id>``, names URL-encoded (Kafka's ``Sanitizer``)
so that ``<default>`` cannot be a name.

Precedence, most specific first, for a request of user U and client id C,
looked up per quota key (a user's ``producer_byte_rate`` may come from one
entity and its ``consumer_byte_rate`` from another)::

    users/U/clients/C  users/U/clients/<default>  users/U
    users/<default>/clients/C  users/<default>/clients/<default>  users/<default>
    clients/C  clients/<default>

The entity that applies also says who shares the rate: ``users/U`` is one
rate for all of U's clients, ``users/U/clients/C`` one for that pair,
``clients/<default>`` one per client id.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import quote, unquote

from samsa.errors import InvalidRequestError

DEFAULT = "<default>"
"""The name of a default entity, as stored (a sanitized name never has ``<``)."""

USER = "user"
CLIENT_ID = "client-id"
ENTITY_TYPES = (USER, CLIENT_ID)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)
_WHOLE_NUMBER_KEYS = frozenset({PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE})


@functools.lru_cache(maxsize=4096)
def sanitize(name: str) -> str:
    """A name as it appears in an entity path: percent-encoded but for ``[A-Za-z0-9._~-]``."""
    return quote(name, safe="")


def desanitize(name: str) -> str:
    return unquote(name)


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """A user and/or client id: each a sanitized name, :data:`DEFAULT`, or None (not part
    of the entity)."""

    user: str | None = None
    client_id: str | None = None

    @property
    def path(self) -> str:
        """``users/<u>``, ``clients/<c>`` or ``users/<u>/clients/<c>``."""
        parts = []
        if self.user is not None:
            parts.append(f"users/{self.user}")
        if self.client_id is not None:
            parts.append(f"clients/{self.client_id}")
        return "/".join(parts)

    @classmethod
    def from_path(cls, path: str) -> QuotaEntity:
        """The entity of ``users/<u>[/clients/<c>]`` or ``clients/<c>`` (ValueError otherwise)."""
        parts = path.strip("/").split("/")
        if len(parts) == 2 and parts[0] == "users" and parts[1]:
            return cls(user=parts[1])
        if len(parts) == 2 and parts[0] == "clients" and parts[1]:
            return cls(client_id=parts[1])
        user_client = len(parts) == 4 and parts[0] == "users" and parts[2] == "clients"
        if user_client and parts[1] and parts[3]:
            return cls(user=parts[1], client_id=parts[3])
        raise ValueError(f"{path!r} is not a quota entity path")

    def components(self) -> list[tuple[str, str | None]]:
        """``(entity type, name or None for the default)`` as the protocol writes them."""
        found: list[tuple[str, str | None]] = []
        if self.user is not None:
            found.append((USER, None if self.user == DEFAULT else desanitize(self.user)))
        if self.client_id is not None:
            name = self.client_id
            found.append((CLIENT_ID, None if name == DEFAULT else desanitize(name)))
        return found

    @classmethod
    def from_components(cls, components: Iterable[tuple[str, str | None]]) -> QuotaEntity:
        """The entity of protocol components (INVALID_REQUEST for an unknown or repeated
        type, or none at all)."""
        user: str | None = None
        client_id: str | None = None
        seen: set[str] = set()
        for kind, name in components:
            if kind not in ENTITY_TYPES:
                raise InvalidRequestError(f"Unsupported quota entity type: {kind}")
            if kind in seen:
                raise InvalidRequestError(f"Duplicate {kind} component in the quota entity")
            seen.add(kind)
            stored = DEFAULT if name is None else sanitize(name)
            if kind == USER:
                user = stored
            else:
                client_id = stored
        if not seen:
            raise InvalidRequestError("A quota entity needs a user or a client-id")
        return cls(user, client_id)


def precedence(user: str, client_id: str) -> tuple[QuotaEntity, ...]:
    """The entities that may set the quotas of sanitized ``user`` and ``client_id``, most
    specific first."""
    return (
        QuotaEntity(user, client_id),
        QuotaEntity(user, DEFAULT),
        QuotaEntity(user, None),
        QuotaEntity(DEFAULT, client_id),
        QuotaEntity(DEFAULT, DEFAULT),
        QuotaEntity(DEFAULT, None),
        QuotaEntity(None, client_id),
        QuotaEntity(None, DEFAULT),
    )


def parse_quota_value(key: str, value: float) -> float:
    """A quota value checked for its key (INVALID_REQUEST otherwise)."""
    if key not in QUOTA_KEYS:
        raise InvalidRequestError(f"Invalid configuration key {key}")
    if not math.isfinite(value) or value <= 0:
        raise InvalidRequestError(f"Invalid value {value} for {key}: it must be positive")
    if key in _WHOLE_NUMBER_KEYS and value != int(value):
        raise InvalidRequestError(f"Illegal value {value} for {key}: it must be a whole number")
    return value


def stored_value(key: str, value: float) -> str:
    """A quota value as Kafka writes it in a config (``"1024"``, ``"12.5"``)."""
    return str(int(value)) if key in _WHOLE_NUMBER_KEYS else repr(float(value))


def parse_stored(values: Mapping[str, str]) -> dict[str, float]:
    """The quotas of a stored config; keys that are not quotas and bad values are dropped."""
    found: dict[str, float] = {}
    for key, text in values.items():
        try:
            found[key] = parse_quota_value(key, float(text))
        except (ValueError, InvalidRequestError):
            continue
    return found


# -- DescribeClientQuotas filters --------------------------------------------------------

MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_ANY = 2


@dataclass(frozen=True, slots=True)
class FilterComponent:
    entity_type: str
    match_type: int
    match: str | None


def check_filter(components: Iterable[FilterComponent]) -> None:
    """INVALID_REQUEST for a filter Kafka refuses: unknown types or match types, a type
    named twice, an exact match without a name."""
    seen: set[str] = set()
    for c in components:
        if c.entity_type not in ENTITY_TYPES:
            raise InvalidRequestError(f"Custom entity type '{c.entity_type}' not supported")
        if c.entity_type in seen:
            raise InvalidRequestError(f"Duplicate {c.entity_type} filter component entity type")
        seen.add(c.entity_type)
        if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            raise InvalidRequestError(f"Unknown match type {c.match_type}")
        if c.match_type == MATCH_EXACT and c.match is None:
            raise InvalidRequestError("An exact match needs a name")


def matches(entity: QuotaEntity, components: Iterable[FilterComponent], strict: bool) -> bool:
    """Whether ``entity`` passes the filter: every component matches its part, and with
    ``strict`` the entity has no part the filter does not name."""
    parts = {USER: entity.user, CLIENT_ID: entity.client_id}
    named: set[str] = set()
    for c in components:
        named.add(c.entity_type)
        part = parts[c.entity_type]
        if part is None:
            return False
        if c.match_type == MATCH_EXACT and (part == DEFAULT or desanitize(part) != c.match):
            return False
        if c.match_type == MATCH_DEFAULT and part != DEFAULT:
            return False
    if strict:
        return all(kind in named for kind, part in parts.items() if part is not None)
    return True
