"""Typed configuration definitions with Kafka's property names.

A :class:`ConfigDef` lists the keys a component accepts, each with a type, a
default, a validator and a line of documentation. Parsing a mapping of
properties returns typed values; an unknown key or an invalid value raises
:class:`~samsa.errors.ConfigError` naming the key, so mistakes surface at start.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from samsa.errors import ConfigError

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


class ConfigType(Enum):
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    STRING = "string"
    BOOLEAN = "boolean"
    LIST = "list"
    PASSWORD = "password"
    """A string never shown: DescribeConfigs answers it as sensitive, with no value."""


Validator = Callable[[Any], str | None]
"""Returns None when the value is acceptable, else what is wrong with it."""


def at_least(minimum: float) -> Validator:
    def check(value: Any) -> str | None:
        return None if value >= minimum else f"must be at least {minimum}"

    return check


def between(minimum: float, maximum: float) -> Validator:
    def check(value: Any) -> str | None:
        return None if minimum <= value <= maximum else f"must be in [{minimum}, {maximum}]"

    return check


def one_of(*choices: str) -> Validator:
    def check(value: Any) -> str | None:
        values = value if isinstance(value, list) else [value]
        bad = [v for v in values if v not in choices]
        return f"must be one of {', '.join(choices)}" if bad else None

    return check


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    type: ConfigType
    default: Any
    doc: str
    validator: Validator | None = None


def _parse(key: ConfigKey, raw: Any) -> Any:
    kind = key.type
    try:
        if kind in (ConfigType.INT, ConfigType.LONG):
            if isinstance(raw, bool):
                raise ValueError
            value: Any = int(str(raw).strip()) if not isinstance(raw, int) else raw
            limit = INT_MAX if kind is ConfigType.INT else LONG_MAX
            if not -limit - 1 <= value <= limit:
                raise ValueError
        elif kind is ConfigType.DOUBLE:
            value = float(raw)
        elif kind is ConfigType.BOOLEAN:
            if isinstance(raw, bool):
                value = raw
            elif str(raw).strip().lower() in ("true", "false"):
                value = str(raw).strip().lower() == "true"
            else:
                raise ValueError
        elif kind is ConfigType.LIST:
            if isinstance(raw, list | tuple):
                value = [str(v) for v in raw]
            else:
                value = [part.strip() for part in str(raw).split(",") if part.strip()]
        else:
            value = str(raw).strip()
    except (TypeError, ValueError):
        raise ConfigError(
            f"invalid value {raw!r} for {key.name}: expected a {kind.value}"
        ) from None
    if key.validator is not None:
        problem = key.validator(value)
        if problem:
            raise ConfigError(f"invalid value {raw!r} for {key.name}: {problem}")
    return value


class ConfigDef:
    """An ordered set of :class:`ConfigKey` definitions."""

    def __init__(self, keys: Iterable[ConfigKey]) -> None:
        self.keys: dict[str, ConfigKey] = {key.name: key for key in keys}

    def __contains__(self, name: object) -> bool:
        return name in self.keys

    def defaults(self) -> dict[str, Any]:
        return {name: key.default for name, key in self.keys.items()}

    def parse_value(self, name: str, raw: Any) -> Any:
        key = self.keys.get(name)
        if key is None:
            raise ConfigError(f"unknown configuration key {name!r}")
        return _parse(key, raw)

    def parse(self, props: Mapping[str, Any], *, ignore_unknown: bool = False) -> dict[str, Any]:
        """Typed values for ``props`` (defaults for the keys it does not name)."""
        values = self.defaults()
        unknown = sorted(name for name in props if name not in self.keys)
        if unknown and not ignore_unknown:
            raise ConfigError(f"unknown configuration key(s): {', '.join(unknown)}")
        for name, raw in props.items():
            if name in self.keys:
                values[name] = _parse(self.keys[name], raw)
        return values
