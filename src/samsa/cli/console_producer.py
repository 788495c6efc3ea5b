"""``samsa console-producer``: each line of stdin becomes a record, as
kafka-console-producer.sh does.

Lines are bytes (no decoding); the line break ("\\n" or "\\r\\n") is not part of the
record. ``--property`` takes the line reader's keys: ``parse.key``, ``key.separator``
(default a tab), ``parse.headers``, ``headers.delimiter`` (tab), ``headers.separator``
(","), ``headers.key.separator`` (":"), ``null.marker`` and ``ignore.error``.
Deliberate differences from Kafka: an unknown ``--property`` is refused instead of
ignored, and the ">" prompt appears (on stderr) only when stdin is a terminal.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

from samsa.cli.session import (
    DeliveryFailures,
    ToolError,
    UsageError,
    add_connection_arguments,
    check_reachable,
    client_properties,
    parse_key_values,
    reason,
    run_tool,
)
from samsa.errors import KafkaError

__all__ = ["LineReader", "build_parser", "run"]

PROG = "samsa console-producer"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Send each line of stdin to a topic as a record "
        "(kafka-console-producer.sh's flags).",
    )
    add_connection_arguments(parser, "--producer.config", broker_list=True)
    parser.add_argument("--topic", required=True, help="the topic to write to (required)")
    parser.add_argument(
        "--property",
        action="append",
        metavar="KEY=VALUE",
        help="how lines are read (repeatable): parse.key=true, key.separator=:, "
        "parse.headers=true, headers.delimiter, headers.separator, headers.key.separator, "
        "null.marker, ignore.error=true",
    )
    parser.add_argument(
        "--producer-property",
        action="append",
        metavar="KEY=VALUE",
        help="a producer config (repeatable), e.g. --producer-property linger.ms=0",
    )
    parser.add_argument(
        "--compression-codec",
        nargs="?",
        const="gzip",
        choices=CODECS,
        help="compress batches (gzip when given without a codec)",
    )
    parser.add_argument(
        "--request-required-acks",
        choices=("all", "-1", "0", "1"),
        help="acks of each produce request (default all)",
    )
    parser.add_argument(
        "--timeout",
        type=int,
        metavar="MS",
        help="linger.ms: how long a batch waits for more lines (default 1000)",
    )
    parser.add_argument(
        "--sync", action="store_true", help="wait for each record's delivery before the next line"
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """``samsa console-producer`` with the arguments after the subcommand in ``args.argv``."""
    return run_tool(build_parser(), args.argv, _execute)


@dataclass(frozen=True, slots=True)
class ParsedLine:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class LineReader:
    """Splits a line into headers, key and value as Kafka's LineMessageReader does."""

    KEYS = frozenset(
        {
            "parse.key", "key.separator", "parse.headers", "headers.delimiter",
            "headers.separator", "headers.key.separator", "null.marker", "ignore.error",
        }
    )  # fmt: skip

    def __init__(self, properties: dict[str, str]) -> None:
        unknown = sorted(set(properties) - self.KEYS)
        if unknown:
            raise UsageError(
                f"unknown --property {unknown[0]!r}: use {', '.join(sorted(self.KEYS))}"
            )

        def flag(name: str) -> bool:
            return properties.get(name, "false").strip().lower() == "true"

        def text(name: str, default: str) -> bytes:
            value = properties.get(name, default).encode()
            if not value:
                raise UsageError(f"--property {name} must not be empty")
            return value

        self.parse_key = flag("parse.key")
        self.parse_headers = flag("parse.headers")
        self.ignore_error = flag("ignore.error")
        self.key_separator = text("key.separator", "\t")
        self.headers_delimiter = text("headers.delimiter", "\t")
        self.headers_separator = text("headers.separator", ",")
        self.headers_key_separator = text("headers.key.separator", ":")
        marker = properties.get("null.marker")
        self.null_marker = marker.encode() if marker else None

    def _null(self, data: bytes) -> bytes | None:
        return None if data == self.null_marker else data

    def parse(self, line: bytes, number: int) -> ParsedLine:
        """The record of ``line`` (line ``number``, counted from 1, for error messages)."""
        rest = line
        headers: list[tuple[str, bytes | None]] = []
        if self.parse_headers:
            part, found, after = rest.partition(self.headers_delimiter)
            if not found:
                if not self.ignore_error:
                    raise ToolError(f"no headers delimiter found on line number {number}: "
                                    f"{line.decode(errors='replace')!r}")  # fmt: skip
                return ParsedLine(None, line, [])
            rest = after
            for pair in part.split(self.headers_separator) if part else []:
                name, found, value = pair.partition(self.headers_key_separator)
                if not found:
                    raise ToolError(
                        f"no header key separator found in pair "
                        f"{pair.decode(errors='replace')!r} on line number {number}"
                    )
                headers.append((name.decode(errors="replace"), self._null(value)))
        key: bytes | None = None
        if self.parse_key:
            key_part, found, value_part = rest.partition(self.key_separator)
            if not found:
                if not self.ignore_error:
                    raise ToolError(
                        f"no key separator found on line number {number}: "
                        f"{line.decode(errors='replace')!r}; add the separator "
                        f"({self.key_separator.decode()!r}) or --property ignore.error=true"
                    )
                return ParsedLine(None, line, headers)
            key, rest = self._null(key_part), value_part
        return ParsedLine(key, self._null(rest), headers)


def _lines(stream: IO[bytes], prompt: bool) -> Iterator[bytes]:
    while True:
        if prompt:
            print(">", end="", file=sys.stderr, flush=True)
        line = stream.readline()
        if not line:
            return
        yield line.rstrip(b"\n").removesuffix(b"\r")


def _producer_properties(options: argparse.Namespace) -> dict[str, object]:
    overrides = parse_key_values(options.producer_property, "--producer-property")
    if options.compression_codec is not None:
        overrides["compression.type"] = options.compression_codec
    if options.request_required_acks is not None:
        overrides["acks"] = options.request_required_acks
    if options.timeout is not None:
        overrides["linger.ms"] = str(options.timeout)
    # kafka-console-producer's own default: wait up to a second to fill a batch.
    overrides.setdefault("linger.ms", "1000")
    return client_properties(options.bootstrap_server, options.client_config, overrides)


def _execute(options: argparse.Namespace) -> int:
    from samsa.client.config import producer_config
    from samsa.client.producer import Producer

    reader = LineReader(parse_key_values(options.property, "--property"))
    props = _producer_properties(options)
    check_reachable(producer_config(props))
    failures = DeliveryFailures(PROG)
    stdin = sys.stdin.buffer
    producer = Producer(props)
    try:
        for number, line in enumerate(_lines(stdin, stdin.isatty()), start=1):
            record = reader.parse(line, number)
            future = producer.send(
                options.topic,
                record.value,
                key=record.key,
                headers=record.headers or None,
                on_delivery=None if options.sync else failures.on_delivery,
            )
            if options.sync:
                try:
                    future.result()
                except KafkaError as exc:
                    raise ToolError(f"line {number} was not delivered: {reason(exc)}") from exc
    finally:
        producer.close()
    return failures.exit_code()
