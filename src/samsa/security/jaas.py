"""Kafka's ``sasl.jaas.config`` values: one JAAS login module entry.

The text is ``<LoginModuleClass> <flag> key="value" key2=value2 … ;`` — the
broker's PLAIN users as ``user_<name>="<password>"`` options of
``PlainLoginModule``, a client's identity as ``username`` and ``password``.
Values may be quoted (with ``\\"`` escapes) or bare words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["JaasConfig", "JaasError", "parse_jaas_config"]

_FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})
_TOKEN = re.compile(
    r'\s*(?:(?P<key>[A-Za-z0-9_.\-]+)\s*=\s*(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<bare>[^\s;"]+))|(?P<end>;))'
)


class JaasError(ValueError):
    """Raised when a ``sasl.jaas.config`` value cannot be parsed (its text is not repeated:
    it may hold passwords)."""


@dataclass(frozen=True, slots=True)
class JaasConfig:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def plain_users(self) -> dict[str, str]:
        """The ``user_<name>="<password>"`` options: PLAIN users a broker accepts."""
        return {k[5:]: v for k, v in self.options.items() if k.startswith("user_") and k[5:]}


def parse_jaas_config(text: str) -> JaasConfig:
    head = text.strip().split(None, 2)
    if len(head) < 2 or head[1].rstrip(";").lower() not in _FLAGS:
        raise JaasError("sasl.jaas.config must read '<LoginModule> required key=\"value\" …;'")
    module, flag = head[0], head[1].rstrip(";").lower()
    rest = head[2] if len(head) > 2 else ""
    if head[1].endswith(";"):
        rest = ";" + rest
    options: dict[str, str] = {}
    position = 0
    ended = False
    while position < len(rest):
        if not rest[position:].strip():
            break
        match = _TOKEN.match(rest, position)
        if match is None or ended:
            raise JaasError(f"sasl.jaas.config cannot be parsed at character {position}")
        if match.group("end"):
            ended = True
        else:
            quoted = match.group("quoted")
            value = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else match.group("bare")
            options[match.group("key")] = value
        position = match.end()
    if not ended:
        raise JaasError("sasl.jaas.config must end with ';'")
    return JaasConfig(module, flag, options)
