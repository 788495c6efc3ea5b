"""What every schema format gives the registry: a parsed schema's stored and normalized
forms, its compatibility check, and the errors of parsing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class SchemaParseError(ValueError):
    """The schema text is not a valid schema of its format."""


@dataclass(frozen=True, slots=True)
class Dependency:
    """A schema a reference brings in: the name the referring schema uses, and its text."""

    name: str
    schema_type: str
    text: str


class ParsedSchema(Protocol):
    schema_type: str

    @property
    def canonical(self) -> str:
        """The form the registry stores and compares."""

    @property
    def normalized(self) -> str:
        """The form ``normalize=true`` stores and compares."""

    def read_errors(self, writer: ParsedSchema) -> list[str]:
        """Why this schema, reading, cannot read what ``writer`` wrote (empty: it can)."""
