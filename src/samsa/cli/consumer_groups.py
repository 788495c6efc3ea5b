"""``samsa consumer-groups``: list, describe, reset and delete consumer groups, as
kafka-consumer-groups.sh does.

The flags and columns are Kafka's. Deliberate differences: ``--describe`` of several
groups prints one table (its GROUP column tells them apart), and remarks such as
"group 'g' has no active members" go to stderr, so stdout is only the table.

``--reset-offsets --export`` prints the plan as Kafka's CSV instead of the table:
``topic,partition,offset`` lines for one group, ``group,topic,partition,offset`` for
several (then an empty line, as Kafka's tool prints it). ``--from-file`` reads that
CSV back (either form; blank lines are skipped). Offsets outside a partition's log,
whichever option asked for them, become the nearest end of the log, as in Kafka.
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from samsa.cli.output import note, print_table
from samsa.cli.session import (
    ToolError,
    UsageError,
    add_connection_arguments,
    only_with,
    open_admin,
    reason,
    run_tool,
)
from samsa.errors import KafkaError
from samsa.types import TopicPartition

if TYPE_CHECKING:
    from samsa.client.admin import Admin, GroupDescription, GroupListing, MemberDescription

__all__ = ["build_parser", "run"]

PROG = "samsa consumer-groups"
# Kafka's classic group states, by the lower-case name --state accepts.
GROUP_STATES = {
    s.lower(): s
    for s in ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Unknown")
}
# A group may have its offsets changed only when no consumer holds it (Kafka's rule too).
INACTIVE_STATES = ("Empty", "Dead")
OFFSETS_HEADERS = [
    "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
    "CONSUMER-ID", "HOST", "CLIENT-ID",
]  # fmt: skip
RESET_OPTIONS = (
    "to_earliest", "to_latest", "to_current", "to_offset", "to_datetime", "by_duration",
    "shift_by", "from_file",
)  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="List, describe, reset and delete consumer groups "
        "(kafka-consumer-groups.sh's flags).",
    )
    add_connection_arguments(parser, "--command-config")
    parser.add_argument(
        "--timeout",
        type=int,
        metavar="MS",
        help="give up on a call after this long (default.api.timeout.ms; default 60000)",
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list the consumer groups")
    action.add_argument("--describe", action="store_true", help="describe groups")
    action.add_argument(
        "--reset-offsets", action="store_true", help="change the committed offsets of a group"
    )
    action.add_argument("--delete", action="store_true", help="delete groups and their offsets")
    action.add_argument(
        "--delete-offsets",
        action="store_true",
        help="delete a group's committed offsets of --topic",
    )
    parser.add_argument("--group", action="append", metavar="GROUP", help="a group (repeatable)")
    parser.add_argument("--all-groups", action="store_true", help="every consumer group")
    parser.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC[:P,P]",
        help="with --reset-offsets or --delete-offsets: a topic, or some of its partitions "
        "(repeatable)",
    )
    parser.add_argument(
        "--all-topics",
        action="store_true",
        help="with --reset-offsets: every partition the group has committed offsets for",
    )
    view = parser.add_mutually_exclusive_group()
    view.add_argument(
        "--offsets", action="store_true", help="with --describe: offsets and lag (the default)"
    )
    view.add_argument("--members", action="store_true", help="with --describe: the members")
    view.add_argument(
        "--state",
        nargs="?",
        const="",
        metavar="STATES",
        help="with --describe: the group's state; with --list: show states, and only "
        "these (comma-separated) when given",
    )
    parser.add_argument(
        "--verbose", action="store_true", help="with --members: each member's partitions"
    )
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--to-earliest", action="store_true", help="reset to the log start")
    target.add_argument("--to-latest", action="store_true", help="reset to the log end")
    target.add_argument(
        "--to-current", action="store_true", help="reset to the committed offset (log end if none)"
    )
    target.add_argument("--to-offset", type=int, metavar="N", help="reset to offset N")
    target.add_argument(
        "--to-datetime",
        metavar="ISO-8601",
        help="reset to the first record at or after this time, e.g. 2026-01-31T12:00:00.000 "
        "(local time unless it names a zone)",
    )
    target.add_argument(
        "--by-duration",
        metavar="DURATION",
        help="reset to the first record at or after this long ago, an ISO-8601 duration "
        "such as PT1H or P1DT12H",
    )
    target.add_argument(
        "--shift-by", type=int, metavar="N", help="move the committed offset by N (may be < 0)"
    )
    target.add_argument(
        "--from-file",
        type=Path,
        metavar="CSV",
        help="reset to the offsets of a CSV file (topic,partition,offset or "
        "group,topic,partition,offset per line, as --export writes it)",
    )
    parser.add_argument(
        "--export", action="store_true", help="with --reset-offsets: print the plan as CSV"
    )
    run_mode = parser.add_mutually_exclusive_group()
    run_mode.add_argument(
        "--dry-run", action="store_true", help="show the new offsets only (the default)"
    )
    run_mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    return parser


def run(args: argparse.Namespace) -> int:
    """``samsa consumer-groups`` with the arguments after the subcommand in ``args.argv``."""
    return run_tool(build_parser(), args.argv, _execute)


def _check_usage(options: argparse.Namespace) -> None:
    reset_given = [o for o in RESET_OPTIONS if getattr(options, o) not in (None, False)]
    only_with(options, "--members", "describe", options.members)
    only_with(options, "--offsets", "describe", options.offsets)
    only_with(options, "--verbose", "describe", options.verbose)
    only_with(options, "--state", "describe list", options.state is not None)
    only_with(options, "--topic", "reset_offsets delete_offsets", options.topic)
    only_with(options, "--all-topics", "reset_offsets", options.all_topics)
    only_with(options, "--dry-run", "reset_offsets", options.dry_run)
    only_with(options, "--execute", "reset_offsets", options.execute)
    only_with(options, "--export", "reset_offsets", options.export)
    for option in reset_given:
        only_with(options, f"--{option.replace('_', '-')}", "reset_offsets", True)
    if options.verbose and not options.members:
        raise UsageError("--verbose works only with --members")
    if options.list and (options.group or options.all_groups):
        raise UsageError("--list lists every group; --group and --all-groups do not apply")
    if options.describe and options.state:
        raise UsageError("with --describe, --state takes no value")
    if (options.describe or options.reset_offsets or options.delete) and not (
        options.group or options.all_groups
    ):
        raise UsageError("name the group(s) with --group GROUP, or use --all-groups")
    if options.group and options.all_groups:
        raise UsageError("give --group or --all-groups, not both")
    if options.delete_offsets:
        if not options.group or len(options.group) != 1 or options.all_groups:
            raise UsageError("--delete-offsets needs exactly one --group")
        if not options.topic:
            raise UsageError("--delete-offsets needs --topic TOPIC[:P,P]")
    if options.reset_offsets:
        if not reset_given:
            raise UsageError(
                "say where to reset to: --to-earliest, --to-latest, --to-current, "
                "--to-offset N, --to-datetime ISO-8601, --by-duration PT1H, --shift-by N "
                "or --from-file CSV"
            )
        if options.from_file is not None:
            if options.topic or options.all_topics:
                raise UsageError("--from-file names its partitions; drop --topic/--all-topics")
        elif bool(options.topic) == bool(options.all_topics):
            raise UsageError("--reset-offsets needs --topic TOPIC[:P,P] or --all-topics")
    if options.to_datetime is not None:
        _timestamp_ms(options.to_datetime)
    if options.by_duration is not None:
        _duration(options.by_duration)
    if options.timeout is not None and options.timeout < 0:
        raise UsageError("--timeout must be at least 0")


def _execute(options: argparse.Namespace) -> int:
    _check_usage(options)
    overrides = {} if options.timeout is None else {"default.api.timeout.ms": str(options.timeout)}
    with open_admin(options, overrides) as admin:
        if options.list:
            return _list(admin, options.state)
        groups = options.group or [g.group_id for g in _consumer_groups(admin)]
        if options.describe:
            return _describe(admin, groups, options)
        if options.reset_offsets:
            return _reset(admin, groups, options)
        if options.delete:
            return _delete(admin, groups)
        return _delete_offsets(admin, groups[0], options.topic)


def _consumer_groups(admin: Admin, states: Sequence[str] = ()) -> list[GroupListing]:
    listings = admin.list_groups(states=states)
    # As Kafka's tool: groups of the consumer protocol, and groups with none (offsets only).
    return [g for g in listings if g.protocol_type in ("consumer", "")]


# -- --list ------------------------------------------------------------------------------


def _list(admin: Admin, state: str | None) -> int:
    wanted: list[str] = []
    for name in (state or "").split(","):
        if not name.strip():
            continue
        canonical = GROUP_STATES.get(name.strip().lower())
        if canonical is None:
            raise UsageError(
                f"unknown group state {name.strip()!r}: use {', '.join(GROUP_STATES.values())}"
            )
        wanted.append(canonical)
    listings = _consumer_groups(admin, wanted)
    if state is None:
        for listing in listings:
            print(listing.group_id)
        return 0
    rows = [[g.group_id, g.state or "Unknown"] for g in listings if not wanted or g.state in wanted]
    print_table(["GROUP", "STATE"], rows)
    return 0


# -- --describe --------------------------------------------------------------------------


def _describe(admin: Admin, groups: list[str], options: argparse.Namespace) -> int:
    descriptions = admin.describe_groups(groups)
    missing = [g for g in groups if descriptions[g].state == "Dead"]
    for group in missing:
        note(PROG, f"consumer group {group!r} does not exist; `{PROG} --list` shows the groups")
    found = [descriptions[g] for g in groups if g not in missing]
    if not groups:
        note(PROG, "there are no consumer groups")
    if not found:
        return 1 if missing else 0
    if options.state is not None:
        print_table(
            ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
            ([d.group_id, _coordinator(d), d.protocol, d.state, len(d.members)] for d in found),
        )
    elif options.members:
        _print_members(found, options.verbose)
    else:
        rows: list[list[object]] = []
        for description in found:
            rows.extend(_offset_rows(admin, description))
        print_table(OFFSETS_HEADERS, rows)
    return 1 if missing else 0


def _coordinator(description: GroupDescription) -> str:
    node = description.coordinator
    return "-" if node is None else f"{node.host}:{node.port} ({node.node_id})"


def _assignment(member: MemberDescription) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in member.assignment:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ",".join(
        f"{topic}({','.join(map(str, sorted(ps)))})" for topic, ps in sorted(by_topic.items())
    )


def _print_members(descriptions: list[GroupDescription], verbose: bool) -> None:
    headers = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    if verbose:
        headers[2:2] = ["GROUP-INSTANCE-ID"]
        headers.append("ASSIGNMENT")
    rows = []
    for description in descriptions:
        if not description.members:
            note(PROG, f"consumer group {description.group_id!r} has no active members")
        for m in sorted(description.members, key=lambda m: m.member_id):
            row: list[object] = [
                description.group_id, m.member_id, m.client_host, m.client_id, len(m.assignment)
            ]  # fmt: skip
            if verbose:
                row[2:2] = [m.group_instance_id]
                row.append(_assignment(m))
            rows.append(row)
    print_table(headers, rows)


def _log_end_offsets(
    admin: Admin, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, int]:
    """Log end offsets; partitions of topics that no longer exist are left out."""
    from samsa.client.admin import OffsetSpec

    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp)
    specs = {tp: int(OffsetSpec.LATEST) for tps in by_topic.values() for tp in tps}
    try:
        return {tp: r.offset for tp, r in admin.list_offsets(specs).items()}
    except KafkaError:
        # One failed partition fails the whole call: ask topic by topic, keep what answers.
        found: dict[TopicPartition, int] = {}
        for tps in by_topic.values():
            try:
                answers = admin.list_offsets(dict.fromkeys(tps, int(OffsetSpec.LATEST)))
            except KafkaError as exc:
                note(PROG, f"no log end offset for {tps[0].topic}: {reason(exc)}")
                continue
            found.update((tp, r.offset) for tp, r in answers.items())
        return found


def _offset_rows(admin: Admin, description: GroupDescription) -> list[list[object]]:
    group = description.group_id
    if description.state in ("PreparingRebalance", "CompletingRebalance"):
        note(PROG, f"consumer group {group!r} is rebalancing")
    if not description.members:
        note(PROG, f"consumer group {group!r} has no active members")
    committed = {tp: om.offset for tp, om in admin.list_group_offsets(group).items()}
    owner = {tp: m for m in description.members for tp in m.assignment}
    partitions = sorted(set(committed) | set(owner))
    log_end = _log_end_offsets(admin, partitions) if partitions else {}
    rows: list[list[object]] = []
    for tp in partitions:
        current, end, member = committed.get(tp), log_end.get(tp), owner.get(tp)
        lag = end - current if current is not None and end is not None else None
        rows.append(
            [group, tp.topic, tp.partition, current, end, lag]
            + ([member.member_id, member.client_host, member.client_id] if member else [None] * 3)
        )
    for m in sorted(description.members, key=lambda m: m.member_id):
        if not m.assignment:  # a member with nothing to read still shows up, as in Kafka
            rows.append([group, None, None, None, None, None, m.member_id, m.client_host,
                         m.client_id])  # fmt: skip
    return rows


# -- --reset-offsets ---------------------------------------------------------------------


def _parse_topics(specs: Sequence[str]) -> list[tuple[str, list[int] | None]]:
    """``TOPIC`` or ``TOPIC:0,1,2`` → (topic, partitions or None for all)."""
    parsed: list[tuple[str, list[int] | None]] = []
    for spec in specs:
        topic, colon, partitions = spec.partition(":")
        if not topic:
            raise UsageError(f"--topic {spec!r} names no topic")
        if not colon:
            parsed.append((topic, None))
            continue
        try:
            numbers = sorted({int(p) for p in partitions.split(",") if p.strip()})
        except ValueError:
            raise UsageError(
                f"--topic {spec!r}: partitions are numbers, e.g. {topic}:0,1"
            ) from None
        if not numbers or numbers[0] < 0:
            raise UsageError(f"--topic {spec!r}: name partitions as {topic}:0,1,2")
        parsed.append((topic, numbers))
    return parsed


def _topic_partitions(
    admin: Admin, specs: Sequence[tuple[str, list[int] | None]]
) -> list[TopicPartition]:
    wanted = sorted({topic for topic, _ in specs})
    try:
        described = admin.describe_topics(wanted)
    except KafkaError as exc:
        raise ToolError(f"{reason(exc)}; `samsa topics --list` shows the topics") from exc
    partitions: set[TopicPartition] = set()
    for topic, numbers in specs:
        count = len(described[topic].partitions)
        for number in range(count) if numbers is None else numbers:
            if number >= count:
                raise ToolError(f"topic {topic!r} has {count} partitions; there is no {number}")
            partitions.add(TopicPartition(topic, number))
    return sorted(partitions)


def _timestamp_ms(text: str) -> int:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"--to-datetime {text!r} is not ISO-8601, e.g. 2026-01-31T12:00:00.000 or "
            "2026-01-31T12:00:00+01:00"
        ) from None
    return int(moment.timestamp() * 1000)  # a naive time is local, as in Kafka


# Java's Duration.parse: [-]P[nD][T[nH][nM][n[.n]S]], each number may carry a sign.
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?\d+)D)?"
    r"(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?",
    re.IGNORECASE,
)


def _duration(text: str) -> int:
    """An ISO-8601 duration (as Java's ``Duration.parse`` reads it) in milliseconds."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or text.strip().upper().endswith("T") or not any(match.groups()[1:5]):
        raise UsageError(
            f"--by-duration {text!r} is not an ISO-8601 duration, e.g. PT1H, PT30M, P1DT12H"
        )
    sign, days, hours, minutes, seconds, fraction = match.groups()
    span = timedelta(
        days=int(days or 0),
        hours=int(hours or 0),
        minutes=int(minutes or 0),
        seconds=float(f"{seconds or 0}.{fraction or 0}"),  # the fraction takes the sign
    )
    ms = round(span.total_seconds() * 1000)
    return -ms if sign == "-" else ms


def _read_plan(path: Path, groups: Sequence[str]) -> dict[str, dict[TopicPartition, int]]:
    """A CSV reset plan by group: ``topic,partition,offset`` lines apply to every group named,
    ``group,topic,partition,offset`` lines to their own group."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror or exc}; check the path") from exc
    plans: dict[str, dict[TopicPartition, int]] = {}
    for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        cells = [c.strip() for c in row]
        if not any(cells):
            continue
        try:
            if len(cells) == 3:
                targets, (topic, partition, offset) = list(groups), cells
            elif len(cells) == 4:
                group, topic, partition, offset = cells
                targets = [group]
            else:
                raise ValueError
            tp = TopicPartition(topic, int(partition))
            for group in targets:
                plans.setdefault(group, {})[tp] = int(offset)
        except ValueError:
            raise ToolError(
                f"{path}, line {number}: expected topic,partition,offset or "
                f"group,topic,partition,offset, got {','.join(row)!r}"
            ) from None
    return plans


def _export(plans: Mapping[str, Mapping[TopicPartition, int]]) -> str:
    """The plan as Kafka's tool exports it (a group column only when there are several)."""
    lines = []
    for group, plan in sorted(plans.items()):
        for tp, offset in sorted(plan.items()):
            fields = [tp.topic, str(tp.partition), str(offset)]
            lines.append(",".join([group, *fields] if len(plans) > 1 else fields))
    return "".join(f"{line}\n" for line in lines) + "\n"


def _clamped(admin: Admin, wanted: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """``wanted`` offsets, each moved into its partition's log (the nearest end), as Kafka."""
    from samsa.client.admin import OffsetSpec

    partitions = list(wanted)
    earliest = admin.list_offsets(dict.fromkeys(partitions, int(OffsetSpec.EARLIEST)))
    latest = admin.list_offsets(dict.fromkeys(partitions, int(OffsetSpec.LATEST)))
    return {tp: min(max(wanted[tp], earliest[tp].offset), latest[tp].offset) for tp in partitions}


def _new_offsets(
    admin: Admin,
    options: argparse.Namespace,
    partitions: list[TopicPartition],
    committed: Mapping[TopicPartition, int],
) -> dict[TopicPartition, int]:
    from samsa.client.admin import OffsetSpec

    def offsets(spec: int) -> dict[TopicPartition, int]:
        return {
            tp: r.offset for tp, r in admin.list_offsets(dict.fromkeys(partitions, spec)).items()
        }

    if options.to_earliest:
        return offsets(OffsetSpec.EARLIEST)
    latest = offsets(OffsetSpec.LATEST)
    if options.to_latest:
        return latest
    if options.to_current:
        return {tp: committed.get(tp, latest[tp]) for tp in partitions}
    if options.to_datetime is not None or options.by_duration is not None:
        if options.to_datetime is not None:
            timestamp = _timestamp_ms(options.to_datetime)
        else:
            timestamp = int(time.time() * 1000) - _duration(options.by_duration)
        by_time = offsets(timestamp)
        # No record at or after the time: the log end, as Kafka does.
        return {tp: by_time[tp] if by_time[tp] >= 0 else latest[tp] for tp in partitions}
    earliest = offsets(OffsetSpec.EARLIEST)
    if options.to_offset is not None:
        wanted = dict.fromkeys(partitions, options.to_offset)
    else:
        lacking = [tp for tp in partitions if tp not in committed]
        if lacking:
            raise ToolError(
                f"cannot shift the offset of {lacking[0].topic}:{lacking[0].partition}: the group "
                "has no committed offset there; reset it with --to-earliest/--to-latest/"
                "--to-offset first"
            )
        wanted = {tp: committed[tp] + options.shift_by for tp in partitions}
    # Out of range: the nearest end of the log, as Kafka does.
    return {tp: min(max(wanted[tp], earliest[tp]), latest[tp]) for tp in partitions}


def _reset(admin: Admin, groups: list[str], options: argparse.Namespace) -> int:
    descriptions = admin.describe_groups(groups)
    for group in groups:
        state = descriptions[group].state
        if state not in INACTIVE_STATES:
            members = len(descriptions[group].members)
            raise ToolError(
                f"cannot reset the offsets of group {group!r}: it is {state} with {members} "
                "active member(s); offsets can be reset only while no consumer is in the group, "
                "so stop its consumers (or wait for their session to time out) and try again"
            )
    specs = _parse_topics(options.topic) if options.topic else []
    named = _topic_partitions(admin, specs) if specs else []
    from_file = _read_plan(options.from_file, groups) if options.from_file is not None else None
    rows: list[list[object]] = []
    plans: dict[str, dict[TopicPartition, int]] = {}
    for group in groups:
        committed = {tp: om.offset for tp, om in admin.list_group_offsets(group).items()}
        if from_file is not None:
            requested = from_file.get(group, {})
            if not requested:
                note(PROG, f"{options.from_file} has no offsets for group {group!r}")
                continue
            _topic_partitions(admin, [(tp.topic, [tp.partition]) for tp in requested])
            plans[group] = _clamped(admin, requested)
            rows.extend(
                [group, tp.topic, tp.partition, o] for tp, o in sorted(plans[group].items())
            )
            continue
        partitions = named if specs else sorted(committed)
        if not partitions:
            note(PROG, f"group {group!r} has no committed offsets; name topics with --topic")
            continue
        plans[group] = _new_offsets(admin, options, partitions, committed)
        rows.extend([group, tp.topic, tp.partition, o] for tp, o in sorted(plans[group].items()))
    if options.execute:
        for group, plan in plans.items():
            try:
                admin.alter_group_offsets(group, plan)
            except KafkaError as exc:
                raise ToolError(f"cannot commit the new offsets of group {group!r}: "
                                f"{reason(exc)}") from exc  # fmt: skip
    if options.export:
        print(_export(plans), end="")
    else:
        print_table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows)
    if not options.execute and not options.dry_run:
        note(PROG, "dry run: nothing was changed; add --execute to commit these offsets "
                   "(or --dry-run to say this is what you meant)")  # fmt: skip
    return 0


# -- --delete and --delete-offsets -------------------------------------------------------


def _delete(admin: Admin, groups: list[str]) -> int:
    results = admin.delete_groups(groups, raise_on_error=False)
    deleted = [g for g in groups if results.get(g) is None]
    if deleted:
        print(f"Deleted consumer group(s): {', '.join(repr(g) for g in deleted)}.")
    for group in groups:
        error = results.get(group)
        if error is None:
            continue
        if error.name == "NON_EMPTY_GROUP":
            why = "it has active members; stop its consumers first"
        elif error.name == "GROUP_ID_NOT_FOUND":
            why = f"it does not exist; `{PROG} --list` shows the groups"
        else:
            why = reason(error)
        note(PROG, f"cannot delete group {group!r}: {why}")
    return 0 if len(deleted) == len(groups) else 1


def _delete_offsets(admin: Admin, group: str, topics: Sequence[str]) -> int:
    specs = _parse_topics(topics)
    committed = admin.list_group_offsets(group)
    partitions: set[TopicPartition] = set()
    for topic, numbers in specs:
        if numbers is None:  # every partition the group committed, even of a deleted topic
            partitions.update(tp for tp in committed if tp.topic == topic)
        else:
            partitions.update(TopicPartition(topic, n) for n in numbers)
    if not partitions:
        raise ToolError(
            f"group {group!r} has no committed offsets for {', '.join(t for t, _ in specs)}; "
            f"`{PROG} --describe --group {group}` shows what it has"
        )
    try:
        results = admin.delete_group_offsets(group, partitions, raise_on_error=False)
    except KafkaError as exc:
        if exc.name == "GROUP_ID_NOT_FOUND":
            raise ToolError(f"group {group!r} does not exist") from exc
        raise ToolError(f"cannot delete offsets of group {group!r}: {reason(exc)}") from exc
    rows = []
    for tp in sorted(partitions):
        error = results.get(tp)
        if error is None:
            status = "Successful"
        elif error.name == "GROUP_SUBSCRIBED_TO_TOPIC":
            status = "Error: the group's members read this topic; stop them first"
        else:
            status = f"Error: {reason(error)}"
        rows.append([tp.topic, tp.partition, status])
    print_table(["TOPIC", "PARTITION", "STATUS"], rows)
    return 0 if all(results.get(tp) is None for tp in partitions) else 1
