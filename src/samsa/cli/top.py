"""``samsa top``: a live view of throughput per topic and lag per consumer group.

Every ``--interval`` seconds it asks the cluster, through the admin client, for
each topic's partitions and log end offsets (ListOffsets latest: the high
watermark) and each group's committed offsets, and shows two tables:

- per topic: partitions, the sum of their log end offsets, and messages in per
  second (how far those offsets moved since the last refresh);
- per group and topic: committed and log end offsets summed over the partitions
  the group commits, the lag (log end minus committed, never below 0, per
  partition), and messages consumed per second (how far its commits moved).

Rates need two samples: the first refresh shows "-". On a terminal the view
refreshes in place (rich ``Live``) until Ctrl-C; elsewhere each refresh is
printed as plain tables. ``--once`` takes two samples ``--interval`` apart,
prints the tables once and exits.

Nothing here reads the broker's ``/metrics``: any Kafka-compatible cluster works.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from samsa.cli.output import EMPTY, print_table
from samsa.cli.session import (
    UsageError,
    add_connection_arguments,
    check_reachable,
    client_properties,
    run_tool,
)
from samsa.types import TopicPartition

if TYPE_CHECKING:
    from rich.console import RenderableType

    from samsa.client.admin import AsyncAdmin

__all__ = ["build_parser", "run"]

PROG = "samsa top"
TOPIC_HEADERS = ["TOPIC", "PARTITIONS", "LOG-END-OFFSET", "MSG/S-IN"]
GROUP_HEADERS = ["GROUP", "TOPIC", "PARTITIONS", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                 "MSG/S-CONSUMED"]  # fmt: skip


@dataclass
class Sample:
    """What one refresh saw."""

    at: float
    """``time.monotonic()`` when the offsets were read."""
    end_offsets: dict[TopicPartition, int] = field(default_factory=dict)
    committed: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    """Committed offsets by group."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="A live view of messages in per topic and lag per consumer group.",
    )
    add_connection_arguments(parser, "--command-config")
    parser.add_argument(
        "--interval",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="seconds between refreshes (default 2)",
    )
    parser.add_argument(
        "--once",
        action="store_true",
        help="take two samples --interval apart, print the tables once and exit",
    )
    parser.add_argument("--topic", action="append", metavar="TOPIC", help="only these topics")
    parser.add_argument("--group", action="append", metavar="GROUP", help="only these groups")
    parser.add_argument(
        "--include-internal",
        action="store_true",
        help="show internal topics (__consumer_offsets, __transaction_state) too",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """``samsa top`` with the arguments after the subcommand in ``args.argv``."""
    return run_tool(build_parser(), args.argv, _execute)


def _execute(options: argparse.Namespace) -> int:
    if options.interval < 0 or (options.interval == 0 and not options.once):
        raise UsageError("--interval must be more than 0 (0 only with --once)")
    from samsa.client.config import admin_config

    props = client_properties(options.bootstrap_server, options.client_config)
    check_reachable(admin_config(props))
    try:
        return asyncio.run(_watch(options, props))
    except KeyboardInterrupt:
        return 0


async def _watch(options: argparse.Namespace, props: dict[str, object]) -> int:
    from samsa.client.admin import AsyncAdmin

    async with AsyncAdmin(props) as admin:
        previous = await sample(admin, options)
        if options.once:
            current, earlier = previous, None
            if options.interval:
                await asyncio.sleep(options.interval)
                current, earlier = await sample(admin, options), previous
            topics, groups = tables(current, earlier)
            print_table(TOPIC_HEADERS, topics)
            print()
            print_table(GROUP_HEADERS, groups)
            return 0
        if not sys.stdout.isatty():
            return await _print_every_interval(admin, options, previous)
        return await _live(admin, options, previous)


async def _print_every_interval(
    admin: AsyncAdmin, options: argparse.Namespace, previous: Sample
) -> int:
    while True:
        await asyncio.sleep(options.interval)
        current = await sample(admin, options)
        topics, groups = tables(current, previous)
        print(time.strftime("%Y-%m-%d %H:%M:%S"))
        print_table(TOPIC_HEADERS, topics)
        print()
        print_table(GROUP_HEADERS, groups)
        print(flush=True)
        previous = current


async def _live(admin: AsyncAdmin, options: argparse.Namespace, previous: Sample) -> int:
    from rich.console import Console
    from rich.live import Live

    console = Console()
    with Live(_view(previous, None, options), console=console, auto_refresh=False) as live:
        while True:
            await asyncio.sleep(options.interval)
            current = await sample(admin, options)
            live.update(_view(current, previous, options), refresh=True)
            previous = current


def _view(current: Sample, previous: Sample | None, options: argparse.Namespace) -> RenderableType:
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    topics, groups = tables(current, previous)
    rendered = []
    for title, headers, rows in (
        ("Topics", TOPIC_HEADERS, topics),
        ("Consumer groups", GROUP_HEADERS, groups),
    ):
        table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
        for i, header in enumerate(headers):
            table.add_column(header, justify="left" if i < 2 else "right", no_wrap=True)
        for row in rows:
            table.add_row(*(Text(str(cell)) for cell in row))
        rendered.append(table)
    footer = Text(
        f"{time.strftime('%H:%M:%S')}  every {options.interval:g} s  (Ctrl-C to quit)",
        style="dim",
    )
    return Group(*rendered, footer)


async def sample(admin: AsyncAdmin, options: argparse.Namespace) -> Sample:
    """Every wanted topic's log end offsets and every wanted group's committed offsets."""
    from samsa.client.admin import OffsetSpec

    names = options.topic or None
    described = await admin.describe_topics(names)
    partitions = [
        TopicPartition(name, p.partition)
        for name, topic in described.items()
        if options.include_internal or not topic.is_internal
        for p in topic.partitions
    ]
    at = time.monotonic()
    ends = await admin.list_offsets(dict.fromkeys(partitions, OffsetSpec.LATEST))
    result = Sample(at, {tp: found.offset for tp, found in ends.items()})
    if options.group:
        group_ids: Sequence[str] = options.group
    else:
        group_ids = [g.group_id for g in await admin.list_groups()]
    for group_id in group_ids:
        offsets = await admin.list_group_offsets(group_id)
        result.committed[group_id] = {
            tp: meta.offset for tp, meta in offsets.items() if tp in result.end_offsets
        }
    return result


def _rate(now: int, before: int | None, seconds: float) -> str:
    if before is None or seconds <= 0:
        return EMPTY
    return f"{max(now - before, 0) / seconds:.1f}"


def tables(
    current: Sample, previous: Sample | None
) -> tuple[list[list[object]], list[list[object]]]:
    """The rows of the topic table and of the group table (rates against ``previous``)."""
    seconds = current.at - previous.at if previous is not None else 0.0
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in sorted(current.end_offsets):
        by_topic.setdefault(tp.topic, []).append(tp)
    topics: list[list[object]] = []
    for name, tps in by_topic.items():
        end = sum(current.end_offsets[tp] for tp in tps)
        before = None
        if previous is not None and all(tp in previous.end_offsets for tp in tps):
            before = sum(previous.end_offsets[tp] for tp in tps)
        topics.append([name, len(tps), end, _rate(end, before, seconds)])
    groups: list[list[object]] = []
    for group_id in sorted(current.committed):
        committed = current.committed[group_id]
        earlier = previous.committed.get(group_id) if previous is not None else None
        for name in sorted({tp.topic for tp in committed}):
            tps = [tp for tp in committed if tp.topic == name]
            position = sum(committed[tp] for tp in tps)
            end = sum(current.end_offsets[tp] for tp in tps)
            lag = sum(max(current.end_offsets[tp] - committed[tp], 0) for tp in tps)
            before = None
            if earlier is not None and all(tp in earlier for tp in tps):
                before = sum(earlier[tp] for tp in tps)
            groups.append(
                [group_id, name, len(tps), position, end, lag, _rate(position, before, seconds)]
            )
    return topics, groups
