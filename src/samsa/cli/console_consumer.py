"""``samsa console-consumer``: print the records of topics on stdout, as
kafka-console-consumer.sh does.

The flags are Kafka's; how a record is printed (``--formatter``, ``--property``) is
in :mod:`samsa.cli.message_format`. On exit, "Processed a total of N messages" goes to
stderr. Ctrl-C (or SIGTERM) stops after the records already fetched are printed,
closes the consumer (committing a group's offsets when ``enable.auto.commit`` is on,
the default) and exits 130 (143). A closed stdout (``| head``) stops the tool too.

Without ``--group`` (or ``group.id`` in the consumer properties) no group is used:
the tool assigns itself every partition of ``--topic`` (or of each topic matching
``--include``) and checks every few seconds for new partitions and topics, whose
records it reads from their beginning. Kafka instead joins a generated group
``console-consumer-NNNNN`` that never commits; assigning leaves nothing behind in
the cluster and starts at once, without waiting for a group to form.

Deliberate differences from Kafka: an unknown ``--property`` or ``--formatter`` is
refused; ``--whitelist`` is accepted for ``--include``; the deprecation notices of
Kafka 4 for ``--property``, ``--consumer-property`` and ``--consumer.config`` are not
printed (``--formatter-property``, ``--command-property`` and ``--command-config``
are accepted too); the record a formatter cannot print is left uncommitted.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING, Any

from samsa.cli.message_format import (
    DEFAULT_FORMATTER,
    FormatError,
    Formatter,
    build_formatter,
)
from samsa.cli.output import note
from samsa.cli.session import (
    ToolError,
    UsageError,
    check_reachable,
    client_properties,
    parse_key_values,
    run_tool,
)
from samsa.errors import SamsaError
from samsa.types import TopicPartition

if TYPE_CHECKING:
    from samsa.client.consumer import Consumer
    from samsa.client.consumer.types import ConsumerRecord

__all__ = [
    "add_topic_arguments",
    "build_parser",
    "consumer_properties",
    "open_consumer",
    "run",
    "topic_pattern",
]

PROG = "samsa console-consumer"
# How long one poll() waits, at most: how soon Ctrl-C and --timeout-ms are noticed.
POLL_S = 0.5
# Without a group: how often the tool looks for new partitions and matching topics.
ASSIGNMENT_REFRESH_S = 5.0
# After a failure, close() gets this long to commit and leave the group.
CLOSE_AFTER_FAILURE_S = 5.0
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Print the records of topics on stdout (kafka-console-consumer.sh's flags).",
    )
    parser.add_argument(
        "--bootstrap-server",
        required=True,
        metavar="HOST:PORT",
        help="the broker(s) to connect to, comma-separated (required)",
    )
    add_topic_arguments(parser)
    parser.add_argument(
        "--partition",
        type=int,
        metavar="P",
        help="read only this partition of --topic (from its end unless --offset or "
        "--from-beginning)",
    )
    parser.add_argument(
        "--offset",
        metavar="earliest|latest|N",
        help="with --partition: where to start (default latest)",
    )
    parser.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the earliest record when there is no committed offset",
    )
    parser.add_argument("--group", help="consume as a member of this consumer group")
    parser.add_argument(
        "--max-messages", type=int, metavar="N", help="exit after N records (default: never)"
    )
    parser.add_argument(
        "--timeout-ms",
        type=int,
        metavar="MS",
        help="exit when no record arrives for this long (default: never)",
    )
    parser.add_argument(
        "--formatter",
        default=DEFAULT_FORMATTER,
        metavar="CLASS",
        help="DefaultMessageFormatter (Kafka's, the default), NoOpMessageFormatter, or json "
        "(one JSON object a line)",
    )
    parser.add_argument(
        "--property",
        "--formatter-property",
        dest="property",
        action="append",
        metavar="KEY=VALUE",
        help="how records are printed (repeatable): print.timestamp=true, print.key=true, "
        "print.partition=true, print.offset=true, print.headers=true, print.value=false, "
        "key.separator, line.separator, headers.separator, null.literal, "
        "key.deserializer, value.deserializer, headers.deserializer",
    )
    parser.add_argument(
        "--formatter-config",
        type=Path,
        metavar="FILE",
        help="a properties file of --property settings (--property wins)",
    )
    parser.add_argument(
        "--key-deserializer", metavar="CLASS", help="Kafka's deserializer of keys, e.g. "
        "org.apache.kafka.common.serialization.LongDeserializer",
    )  # fmt: skip
    parser.add_argument(
        "--value-deserializer", metavar="CLASS", help="Kafka's deserializer of values"
    )
    parser.add_argument(
        "--isolation-level",
        choices=ISOLATION_LEVELS,
        help="read_committed: leave out records of aborted and open transactions "
        "(default read_uncommitted)",
    )
    parser.add_argument(
        "--consumer-property",
        "--command-property",
        dest="consumer_property",
        action="append",
        metavar="KEY=VALUE",
        help="a consumer config (repeatable), e.g. --consumer-property fetch.max.wait.ms=100",
    )
    parser.add_argument(
        "--consumer.config",
        "--command-config",
        dest="client_config",
        type=Path,
        metavar="FILE",
        help="a properties file of consumer configs (--consumer-property wins)",
    )
    parser.add_argument(
        "--skip-message-on-error",
        action="store_true",
        help="when a record cannot be printed, say so on stderr and go on",
    )
    return parser


def add_topic_arguments(parser: argparse.ArgumentParser) -> None:
    """``--topic`` and ``--include`` (alias ``--whitelist``): what to read."""
    parser.add_argument("--topic", help="the topic to read")
    parser.add_argument(
        "--include",
        "--whitelist",
        dest="include",
        metavar="REGEX",
        help="read every topic whose whole name matches this regular expression",
    )


def topic_pattern(options: argparse.Namespace) -> re.Pattern[str] | None:
    """The compiled ``--include``, or None for ``--topic``; a usage error unless exactly
    one of them is given."""
    if (options.topic is None) == (options.include is None):
        raise UsageError("name what to read with exactly one of --topic TOPIC or --include REGEX")
    if options.include is None:
        return None
    try:
        return re.compile(options.include)
    except re.error as exc:
        raise UsageError(
            f"--include {options.include!r} is not a regular expression: {exc}"
        ) from exc


def run(args: argparse.Namespace) -> int:
    """``samsa console-consumer`` with the arguments after the subcommand in ``args.argv``."""
    return run_tool(build_parser(), args.argv, _execute)


def consumer_properties(
    bootstrap_server: str | None, config_file: Path | None, overrides: dict[str, str]
) -> dict[str, Any]:
    """Consumer properties from a file, then ``overrides``, then the bootstrap servers."""
    props = client_properties(bootstrap_server, config_file, overrides)
    # Java config files name deserializer classes; the tools read bytes (Kafka's tools
    # also replace them with ByteArrayDeserializer).
    for name in ("key.deserializer", "value.deserializer"):
        props.pop(name, None)
    return props


def open_consumer(props: dict[str, Any]) -> Consumer:
    """A consumer, once a bootstrap server accepts connections."""
    from samsa.client.config import consumer_config
    from samsa.client.consumer import Consumer

    check_reachable(consumer_config(props))
    return Consumer(props)


def _key_values(items: Iterable[str], flag: str) -> dict[str, str]:
    """``k=v`` pairs whose values are kept as typed (a separator may be a space)."""
    values: dict[str, str] = {}
    for item in items:
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise UsageError(f"{flag} {item!r} is not KEY=VALUE")
        values[key.strip()] = value
    return values


@dataclass(frozen=True, slots=True)
class Start:
    """Where a --partition read starts: "earliest", "latest" or an offset."""

    position: str | int


def _start(options: argparse.Namespace) -> Start | None:
    if options.partition is None:
        if options.offset is not None:
            raise UsageError(
                "--offset works only with --partition P; without it, reading starts at the "
                "group's committed offsets or, with --from-beginning, at the earliest record"
            )
        return None
    if options.topic is None:
        raise UsageError("--partition needs --topic (a partition of which topic?)")
    if options.partition < 0:
        raise UsageError("--partition must be at least 0")
    if options.offset is None:
        return Start("earliest" if options.from_beginning else "latest")
    if options.from_beginning:
        raise UsageError("--from-beginning and --offset cannot be used together")
    text = options.offset.strip().lower()
    if text in ("earliest", "latest"):
        return Start(text)
    if text.isdigit():
        return Start(int(text))
    raise UsageError(
        f"--offset {options.offset!r} is not earliest, latest or a non-negative number"
    )


def _formatter(options: argparse.Namespace) -> Formatter:
    from samsa.broker.config import parse_properties

    properties: dict[str, str] = {}
    if options.formatter_config is not None:
        try:
            properties.update(parse_properties(options.formatter_config.read_text()))
        except OSError as exc:
            raise ToolError(
                f"cannot read {options.formatter_config}: {exc.strerror or exc}; check the path"
            ) from exc
    if options.key_deserializer:
        properties["key.deserializer"] = options.key_deserializer
    if options.value_deserializer:
        properties["value.deserializer"] = options.value_deserializer
    properties.update(_key_values(options.property or [], "--property"))
    return build_formatter(options.formatter, properties)


def _properties(options: argparse.Namespace) -> dict[str, Any]:
    """The consumer's properties, with Kafka's rules for the group and the start."""
    overrides = parse_key_values(options.consumer_property, "--consumer-property")
    props = consumer_properties(options.bootstrap_server, options.client_config, overrides)
    groups = {g for g in (options.group, props.get("group.id")) if g}
    if len(groups) > 1:
        named = ", ".join(f"'{g}'" for g in sorted(groups))
        raise UsageError(
            f"--group and group.id in the consumer properties disagree ({named}); give one"
        )
    if groups and options.partition is not None:
        raise UsageError(
            "--partition cannot be used with a group (the group assigns partitions); "
            "drop --group, or --partition"
        )
    reset = props.get("auto.offset.reset")
    if reset is not None and options.from_beginning and str(reset).strip() != "earliest":
        raise UsageError(
            f"--from-beginning contradicts auto.offset.reset={reset}; remove one of them"
        )
    if reset is None:
        props["auto.offset.reset"] = "earliest" if options.from_beginning else "latest"
    if options.isolation_level is not None:
        props["isolation.level"] = options.isolation_level
    props.setdefault("client.id", "console-consumer")
    if groups:
        props["group.id"] = groups.pop()
    else:
        props.pop("group.id", None)
        props.setdefault("enable.auto.commit", "false")  # no group: nothing to commit to
    return props


class Assigner:
    """Keeps a consumer without a group assigned to every partition of ``topic`` or of
    the topics matching ``pattern``; partitions that appear later are read from their
    beginning, since all their records came after the tool started."""

    def __init__(
        self,
        consumer: Consumer,
        topic: str | None,
        pattern: re.Pattern[str] | None,
        internal: bool,
    ) -> None:
        self.consumer = consumer
        self.topic = topic
        self.pattern = pattern
        self.internal = internal
        self.assigned: set[TopicPartition] = set()
        self.started = False
        self.checked_at = 0.0
        self.waiting_noted = False

    def _wanted(self) -> set[TopicPartition]:
        if self.topic is not None:
            partitions = self.consumer.partitions_for(self.topic) or []
            return {TopicPartition(self.topic, p) for p in partitions}
        assert self.pattern is not None
        return {
            TopicPartition(name, p)
            for name, partitions in self.consumer.list_topics().items()
            if self.pattern.fullmatch(name) and (self.internal or name not in INTERNAL_TOPICS)
            for p in partitions
        }

    def refresh(self) -> None:
        """Look for new partitions (at most every ASSIGNMENT_REFRESH_S)."""
        now = time.monotonic()
        if self.started and now - self.checked_at < ASSIGNMENT_REFRESH_S:
            return
        self.checked_at = now
        wanted = self._wanted()
        if not wanted and not self.waiting_noted:
            what = f"topic '{self.topic}'" if self.topic else "a topic matching --include"
            note(PROG, f"waiting for {what} to exist (Ctrl-C to stop)")
            self.waiting_noted = True
        if wanted == self.assigned:
            self.started = True
            return
        added = wanted - self.assigned
        self.consumer.assign(wanted)
        if self.started and added:
            self.consumer.seek_to_beginning(added)
        self.assigned = wanted
        self.started = True


def _assign_partition(consumer: Consumer, topic: str, partition: int, start: Start) -> None:
    partitions = consumer.partitions_for(topic)
    if not partitions:
        raise ToolError(f"topic '{topic}' does not exist; list topics with `samsa topics --list`")
    if partition not in partitions:
        raise ToolError(
            f"topic '{topic}' has no partition {partition} (it has 0 to {max(partitions)})"
        )
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    if start.position == "earliest":
        consumer.seek_to_beginning([tp])
    elif start.position == "latest":
        consumer.seek_to_end([tp])
    else:
        assert isinstance(start.position, int)
        consumer.seek(tp, start.position)


class Stopper:
    """Turns the first SIGINT/SIGTERM into a request to stop; a second one interrupts."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.signal is not None:
            raise KeyboardInterrupt
        self.signal = signum

    def __enter__(self) -> Stopper:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *_exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def _rewind(consumer: Consumer, records: Sequence[ConsumerRecord]) -> None:
    """Seek back to the first of ``records`` in each partition, so they are not committed."""
    first: dict[TopicPartition, int] = {}
    for record in records:
        first.setdefault(record.topic_partition, record.offset)
    for tp, offset in first.items():
        consumer.seek(tp, offset)


class StdoutClosed(Exception):
    """Raised when nobody reads stdout any more."""


def _write(out: IO[bytes], chunks: list[bytes]) -> None:
    try:
        out.write(b"".join(chunks))
        out.flush()
    except BrokenPipeError:
        # Python would fail again flushing stdout at exit: point it at /dev/null.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
        os.close(devnull)
        raise StdoutClosed from None


class Printer:
    """Polls, prints and counts records until a limit, a timeout or a signal."""

    def __init__(self, consumer: Consumer, formatter: Formatter, skip_on_error: bool) -> None:
        self.consumer = consumer
        self.formatter = formatter
        self.skip_on_error = skip_on_error
        self.batch = int(consumer.config["max.poll.records"])
        self.count = 0

    def _print(self, records: list[ConsumerRecord], out: IO[bytes]) -> None:
        chunks: list[bytes] = []
        for i, record in enumerate(records):
            try:
                chunks.append(self.formatter.format(record))
            except FormatError as exc:
                where = f"{record.topic}-{record.partition} offset {record.offset}"
                if self.skip_on_error:
                    self.count += 1
                    note(PROG, f"skipped the record at {where}: {exc}")
                    continue
                try:
                    _write(out, chunks)
                finally:
                    _rewind(self.consumer, records[i:])
                raise ToolError(
                    f"cannot print the record at {where}: {exc}; "
                    "add --skip-message-on-error to skip such records"
                ) from exc
            self.count += 1
        try:
            _write(out, chunks)
        except StdoutClosed:
            _rewind(self.consumer, records)
            self.count -= len(records)
            raise

    def run(
        self,
        max_messages: int | None,
        timeout_ms: int | None,
        stopper: Stopper,
        assigner: Assigner | None,
    ) -> None:
        out = sys.stdout.buffer
        last_record_at = time.monotonic()
        while stopper.signal is None and (max_messages is None or self.count < max_messages):
            if assigner is not None:
                assigner.refresh()
            wait = POLL_S
            if timeout_ms is not None:
                left = last_record_at + timeout_ms / 1000 - time.monotonic()
                wait = max(0.0, min(wait, left))
            if assigner is not None and not assigner.assigned:
                time.sleep(wait)  # nothing to read yet (poll() needs partitions)
                records = []
            else:
                limit = self.batch
                if max_messages is not None:
                    limit = min(limit, max_messages - self.count)
                records = self.consumer.poll(wait, max_records=limit)
            if not records:
                # As Kafka's tool: the timeout is checked after a poll that found nothing.
                idle_s = time.monotonic() - last_record_at
                if timeout_ms is not None and idle_s * 1000 >= timeout_ms:
                    return
                continue
            last_record_at = time.monotonic()
            try:
                self._print(records, out)
            except StdoutClosed:
                note(PROG, "stdout is closed; closing the consumer")
                return


def _execute(options: argparse.Namespace) -> int:
    pattern = topic_pattern(options)
    start = _start(options)
    formatter = _formatter(options)
    props = _properties(options)
    max_messages = options.max_messages
    if max_messages is not None and max_messages < -1:
        raise UsageError("--max-messages must be at least 0 (or -1: no limit)")
    if max_messages == -1:
        max_messages = None
    timeout_ms = options.timeout_ms
    if timeout_ms is not None and timeout_ms < 0:
        timeout_ms = None  # Kafka's tool: a negative timeout is no timeout
    consumer = open_consumer(props)
    printer = Printer(consumer, formatter, options.skip_message_on_error)
    stopper = Stopper()
    closed = reading = False
    try:
        with stopper:
            assigner = None
            if "group.id" in props:
                if pattern is not None:
                    consumer.subscribe(pattern=pattern)
                else:
                    consumer.subscribe([options.topic])
            elif start is not None:
                _assign_partition(consumer, options.topic, options.partition, start)
            else:
                internal = str(props.get("exclude.internal.topics", "true")).lower() == "false"
                assigner = Assigner(consumer, options.topic, pattern, internal)
            reading = True
            printer.run(max_messages, timeout_ms, stopper, assigner)
            # A group's offsets are committed here (enable.auto.commit, on by default).
            consumer.close()
            closed = True
    finally:
        if not closed:
            _close_after_failure(consumer)
        if reading:
            print(f"Processed a total of {printer.count} messages", file=sys.stderr, flush=True)
    return 0 if stopper.signal is None else 128 + stopper.signal


def _close_after_failure(consumer: Consumer) -> None:
    try:
        consumer.close(CLOSE_AFTER_FAILURE_S)
    except (SamsaError, OSError) as exc:
        # The failure that brought us here is what the user is told about; a second
        # one while leaving the group or committing adds nothing they can act on.
        logging.getLogger(__name__).debug("closing the consumer failed too: %s", exc)
