"""How ``samsa console-consumer`` prints a record: Kafka's message formatters and
deserializers, chosen by their Java class names.

``--formatter`` takes:

- Kafka's ``DefaultMessageFormatter`` (the default; ``kafka.tools.DefaultMessageFormatter``,
  ``org.apache.kafka.tools.consumer.DefaultMessageFormatter`` or just the class name),
  byte for byte as Kafka prints: the columns asked for with ``print.timestamp``
  (``CreateTime:1700000000000``), ``print.partition`` (``Partition:0``),
  ``print.offset`` (``Offset:5``), ``print.headers`` (``k:v,k2:v2`` or ``NO_HEADERS``),
  ``print.key`` and ``print.value`` (on by default), separated by ``key.separator``
  (a tab) and ended by ``line.separator`` (a line break); a null key, value or
  header value prints as ``null.literal`` (``null``). Separators are taken
  literally, as Kafka does (``key.separator=\\t`` is a backslash and a t).
- Kafka's ``NoOpMessageFormatter``: prints nothing (the tool still counts records).
- ``json`` (samsa's own): one JSON object a line with every field —
  ``{"topic":…,"partition":…,"offset":…,"timestamp":…,"timestampType":"CreateTime",
  "headers":[{"key":…,"value":…}],"key":…,"value":…}``. Bytes must be UTF-8 (a
  record that is not fails, see ``--skip-message-on-error``), unless a deserializer
  says otherwise: ``ByteArrayDeserializer`` gives base64 text, number deserializers
  give JSON numbers.

``key.deserializer``, ``value.deserializer`` and ``headers.deserializer`` take the
class names of Kafka's own deserializers (``org.apache.kafka.common.serialization.``
``LongDeserializer`` or ``LongDeserializer``): String, ByteArray, Bytes, ByteBuffer,
Short, Integer, Long, Float, Double, Boolean, UUID and Void. Data a deserializer
cannot read (a 3-byte Long) raises :class:`FormatError`. Deliberate differences from
Kafka: an unknown property or class name is refused instead of ignored, and a null
is printed as ``null.literal`` without being passed to the deserializer.
"""

from __future__ import annotations

import base64
import json
import struct
import uuid
from collections.abc import Callable, Mapping
from typing import Protocol

from samsa.cli.session import UsageError
from samsa.client.consumer.types import LOG_APPEND_TIME, ConsumerRecord
from samsa.errors import SamsaError

__all__ = [
    "DEFAULT_FORMATTER",
    "FORMATTERS",
    "FormatError",
    "Formatter",
    "build_formatter",
    "deserializer_for",
]

SERIALIZATION_PACKAGE = "org.apache.kafka.common.serialization."


class FormatError(SamsaError):
    """Raised when a record cannot be printed (a deserializer cannot read its bytes,
    or the json formatter meets bytes that are not UTF-8)."""


class Formatter(Protocol):
    def format(self, record: ConsumerRecord) -> bytes:
        """The bytes printed for ``record`` (its line separator included)."""
        ...


Deserializer = Callable[[bytes], object]


def _fixed(name: str, layout: str) -> Deserializer:
    codec = struct.Struct(layout)

    def read(data: bytes) -> object:
        if len(data) != codec.size:
            raise FormatError(f"size of data received by {name} is not {codec.size}")
        return codec.unpack(data)[0]

    return read


def _boolean(data: bytes) -> object:
    if len(data) != 1:
        raise FormatError("size of data received by BooleanDeserializer is not 1")
    if data not in (b"\x00", b"\x01"):
        raise FormatError("unexpected byte received by BooleanDeserializer: not 0 or 1")
    return data == b"\x01"


def _uuid(data: bytes) -> object:
    try:
        return str(uuid.UUID(data.decode()))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"UUIDDeserializer: not a UUID string: {data[:40]!r}") from exc


def _void(data: bytes) -> object:
    raise FormatError("data should be null for a VoidDeserializer")


# Java's String(bytes, UTF_8) replaces malformed input, and so does StringDeserializer.
DESERIALIZERS: dict[str, Deserializer] = {
    "StringDeserializer": lambda data: data.decode("utf-8", errors="replace"),
    "ByteArrayDeserializer": bytes,
    "BytesDeserializer": bytes,
    "ByteBufferDeserializer": bytes,
    "ShortDeserializer": _fixed("ShortDeserializer", ">h"),
    "IntegerDeserializer": _fixed("IntegerDeserializer", ">i"),
    "LongDeserializer": _fixed("LongDeserializer", ">q"),
    "FloatDeserializer": _fixed("FloatDeserializer", ">f"),
    "DoubleDeserializer": _fixed("DoubleDeserializer", ">d"),
    "BooleanDeserializer": _boolean,
    "UUIDDeserializer": _uuid,
    "VoidDeserializer": _void,
}


def deserializer_for(class_name: str, what: str) -> Deserializer:
    """Kafka's deserializer ``class_name`` (full or short); ``what`` names the flag."""
    short = class_name.strip().removeprefix(SERIALIZATION_PACKAGE)
    found = DESERIALIZERS.get(short)
    if found is None:
        raise UsageError(
            f"unknown {what} {class_name!r}: use one of Kafka's deserializers "
            f"({', '.join(sorted(DESERIALIZERS))}, optionally prefixed {SERIALIZATION_PACKAGE})"
        )
    return found


def _as_text(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, bool):  # Java's Boolean.toString
        return b"true" if value else b"false"
    return str(value).encode()


class DefaultMessageFormatter:
    """Kafka's DefaultMessageFormatter."""

    KEYS = frozenset(
        {
            "print.timestamp", "print.key", "print.offset", "print.partition", "print.headers",
            "print.value", "key.separator", "line.separator", "headers.separator",
            "null.literal", "key.deserializer", "value.deserializer", "headers.deserializer",
        }
    )  # fmt: skip

    def __init__(self, properties: Mapping[str, str]) -> None:
        def flag(name: str, default: bool) -> bool:
            if name not in properties:
                return default
            return properties[name].strip().lower() == "true"

        self.print_timestamp = flag("print.timestamp", False)
        self.print_key = flag("print.key", False)
        self.print_offset = flag("print.offset", False)
        self.print_partition = flag("print.partition", False)
        self.print_headers = flag("print.headers", False)
        self.print_value = flag("print.value", True)
        self.key_separator = properties.get("key.separator", "\t").encode()
        self.line_separator = properties.get("line.separator", "\n").encode()
        self.headers_separator = properties.get("headers.separator", ",").encode()
        self.null_literal = properties.get("null.literal", "null").encode()
        self.key_deserializer = _optional_deserializer(properties, "key.deserializer")
        self.value_deserializer = _optional_deserializer(properties, "value.deserializer")
        self.headers_deserializer = _optional_deserializer(properties, "headers.deserializer")

    def _bytes(self, data: bytes | None, deserializer: Deserializer | None) -> bytes:
        if data is None:
            return self.null_literal
        return data if deserializer is None else _as_text(deserializer(data))

    def format(self, record: ConsumerRecord) -> bytes:
        columns: list[bytes] = []
        if self.print_timestamp:
            kind = "LogAppendTime" if record.timestamp_type == LOG_APPEND_TIME else "CreateTime"
            columns.append(f"{kind}:{record.timestamp}".encode())
        if self.print_partition:
            columns.append(b"Partition:%d" % record.partition)
        if self.print_offset:
            columns.append(b"Offset:%d" % record.offset)
        if self.print_headers:
            if record.headers:
                columns.append(
                    self.headers_separator.join(
                        name.encode() + b":" + self._bytes(value, self.headers_deserializer)
                        for name, value in record.headers
                    )
                )
            else:
                columns.append(b"NO_HEADERS")
        if self.print_key:
            columns.append(self._bytes(record.key, self.key_deserializer))
        if self.print_value:
            columns.append(self._bytes(record.value, self.value_deserializer))
        if not columns:
            return b""
        return self.key_separator.join(columns) + self.line_separator


class NoOpMessageFormatter:
    """Kafka's NoOpMessageFormatter: prints nothing."""

    KEYS: frozenset[str] = frozenset()

    def __init__(self, properties: Mapping[str, str]) -> None:
        del properties

    def format(self, record: ConsumerRecord) -> bytes:
        return b""


class JsonFormatter:
    """One JSON object a line, every field of the record."""

    KEYS = frozenset({"key.deserializer", "value.deserializer", "headers.deserializer"})

    def __init__(self, properties: Mapping[str, str]) -> None:
        self.key_deserializer = _optional_deserializer(properties, "key.deserializer")
        self.value_deserializer = _optional_deserializer(properties, "value.deserializer")
        self.headers_deserializer = _optional_deserializer(properties, "headers.deserializer")

    @staticmethod
    def _json(data: bytes | None, deserializer: Deserializer | None, what: str) -> object:
        if data is None:
            return None
        if deserializer is None:
            try:
                return data.decode()
            except UnicodeDecodeError as exc:
                raise FormatError(
                    f"its {what} is not UTF-8; print it as base64 with --property "
                    f"{what}.deserializer=ByteArrayDeserializer"
                ) from exc
        value = deserializer(data)
        if isinstance(value, bytes):
            return base64.b64encode(value).decode()
        return value

    def format(self, record: ConsumerRecord) -> bytes:
        kind = "LogAppendTime" if record.timestamp_type == LOG_APPEND_TIME else "CreateTime"
        document = {
            "topic": record.topic,
            "partition": record.partition,
            "offset": record.offset,
            "timestamp": record.timestamp,
            "timestampType": kind,
            "headers": [
                {"key": name, "value": self._json(value, self.headers_deserializer, "headers")}
                for name, value in record.headers
            ],
            "key": self._json(record.key, self.key_deserializer, "key"),
            "value": self._json(record.value, self.value_deserializer, "value"),
        }
        try:
            text = json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except ValueError as exc:  # a NaN or infinite Float/Double
            raise FormatError(f"not representable in JSON: {exc}") from exc
        return text.encode() + b"\n"


def _optional_deserializer(properties: Mapping[str, str], name: str) -> Deserializer | None:
    class_name = properties.get(name)
    return None if class_name is None else deserializer_for(class_name, f"--property {name}")


DEFAULT_FORMATTER = "org.apache.kafka.tools.consumer.DefaultMessageFormatter"

_FORMATTER_CLASSES: dict[str, type[DefaultMessageFormatter | NoOpMessageFormatter]] = {
    "DefaultMessageFormatter": DefaultMessageFormatter,
    "NoOpMessageFormatter": NoOpMessageFormatter,
}
# --formatter values accepted: Kafka's class names (pre-3.8 and current packages, or the
# bare class name) and samsa's json.
FORMATTERS: dict[str, type[DefaultMessageFormatter | NoOpMessageFormatter | JsonFormatter]] = {
    "json": JsonFormatter,
    **{
        f"{package}{name}": cls
        for name, cls in _FORMATTER_CLASSES.items()
        for package in ("", "kafka.tools.", "org.apache.kafka.tools.consumer.")
    },
}


def build_formatter(name: str, properties: Mapping[str, str]) -> Formatter:
    """The formatter ``--formatter name`` configured with ``properties``; a UsageError for
    an unknown name or a property it does not take."""
    cls = FORMATTERS.get(name.strip())
    if cls is None:
        raise UsageError(
            f"unknown --formatter {name!r}: use DefaultMessageFormatter (Kafka's, the "
            "default), NoOpMessageFormatter or json"
        )
    unknown = sorted(set(properties) - cls.KEYS)
    if unknown:
        known = ", ".join(sorted(cls.KEYS)) or "none"
        raise UsageError(
            f"--formatter {name} does not take --property {unknown[0]!r} (it takes: {known})"
        )
    return cls(properties)
