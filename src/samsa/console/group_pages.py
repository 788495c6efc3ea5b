"""The consumer group pages: the groups list (state, members, total lag; search, pages),
one group (members and their assignment, lag per partition with a total), resetting
its offsets — a form, a page showing the new offsets to confirm, then the commit — and
deleting a group (its name typed to confirm) or its committed offsets of a topic.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response

from samsa.client.admin import GroupDescription
from samsa.console.offsets import (
    INACTIVE_STATES,
    RESET_TARGETS,
    group_lag,
    plan_reset,
    total_lag,
)
from samsa.console.render import format_timestamp, paginate, parse_timestamp
from samsa.console.state import audit, clients_of, console_of, int_param, redirect, render
from samsa.errors import KafkaError
from samsa.types import TopicPartition

__all__ = ["delete_group", "delete_offsets", "group_page", "groups_list", "reset_offsets"]


async def groups_list(request: Request) -> Response:
    console = console_of(request)
    admin = clients_of(request).admin
    query = request.query_params.get("q", "").strip()
    listings = await admin.list_groups()
    matching = [g for g in listings if query.lower() in g.group_id.lower()]
    page = paginate(matching, int_param(request.query_params.get("page"), 1, 1, 1 << 30),
                    console.settings.page_size)  # fmt: skip
    rows: list[dict[str, Any]] = []
    if page.items:
        described = await admin.describe_groups([g.group_id for g in page.items])
        # The groups' offsets and log ends are asked for together (one connection each
        # to the coordinators and leaders, requests pipelined), not group after group.
        all_lags = await asyncio.gather(
            *(group_lag(admin, described[g.group_id]) for g in page.items)
        )
        for listing, lags in zip(page.items, all_lags, strict=True):
            description = described[listing.group_id]
            rows.append(
                {
                    "group": description,
                    "protocol_type": listing.protocol_type or "-",
                    "topics": sorted({row.partition.topic for row in lags}),
                    "partitions": len(lags),
                    "lag": total_lag(lags),
                }
            )
    return render(request, "groups.html", page=page, rows=rows, query=query,
                  all_count=len(listings))  # fmt: skip


def _url(group_id: str) -> str:
    return "/groups/" + quote(group_id, safe="")


async def group_page(request: Request) -> Response:
    admin = clients_of(request).admin
    group_id = request.path_params["group_id"]
    description = (await admin.describe_groups([group_id]))[group_id]
    lags = await group_lag(admin, description)
    exists = description.state != "Dead" or bool(lags)
    return render(
        request,
        "group.html",
        status_code=200 if exists else 404,
        group=description,
        lags=lags,
        total=total_lag(lags),
        topics=sorted({row.partition.topic for row in lags}),
        committed_topics=sorted({r.partition.topic for r in lags if r.committed is not None}),
        can_reset=description.state in INACTIVE_STATES,
        targets=RESET_TARGETS,
        exists=exists,
    )


def _partitions(
    description: GroupDescription, committed: list[TopicPartition], topic: str
) -> list[TopicPartition]:
    owned = {tp for m in description.members for tp in m.assignment}
    every = sorted(set(committed) | owned)
    return [tp for tp in every if not topic or tp.topic == topic]


async def reset_offsets(request: Request) -> Response:
    """POST without ``confirm``: show the offsets a reset would commit; with it: commit."""
    admin = clients_of(request).admin
    form = await request.form()
    group_id = str(form.get("group", ""))
    topic = str(form.get("topic", ""))
    target = str(form.get("target", ""))
    value = str(form.get("value", "")).strip()
    back = _url(group_id)
    if target not in RESET_TARGETS:
        return redirect(back, error=f"choose where to reset to: {', '.join(RESET_TARGETS)}")
    timestamp_ms, offset = 0, 0
    try:
        if target == "timestamp":
            timestamp_ms = parse_timestamp(value)
        elif target == "offset":
            offset = int(value)
    except ValueError:
        return redirect(
            back, error=f"{value!r} is not a {'time' if target == 'timestamp' else 'number'}"
        )
    description = (await admin.describe_groups([group_id]))[group_id]
    if description.state not in INACTIVE_STATES:
        return redirect(
            back,
            error=f"group {group_id!r} is {description.state} with {len(description.members)} "
            "active member(s): offsets can be reset only while no consumer is in the group; "
            "stop its consumers (or wait for their session to time out) and try again",
        )
    committed = await admin.list_group_offsets(group_id)
    partitions = _partitions(description, list(committed), topic)
    if not partitions:
        return redirect(back, error=f"group {group_id!r} has no committed offsets to reset")
    plan = await plan_reset(admin, partitions, target, timestamp_ms=timestamp_ms, offset=offset)
    if form.get("confirm") != "yes":
        rows = [(tp, committed[tp].offset if tp in committed else None, new)
                for tp, new in sorted(plan.items())]  # fmt: skip
        return render(
            request,
            "reset_confirm.html",
            group=description,
            rows=rows,
            topic=topic,
            target=target,
            value=value,
            when=format_timestamp(timestamp_ms) if target == "timestamp" else "",
        )
    try:
        await admin.alter_group_offsets(group_id, plan)
    except KafkaError as exc:
        audit(request, "failed to reset the offsets of group %r: %s", group_id, exc)
        return redirect(back, error=f"cannot commit the new offsets: {exc}")
    offsets = ", ".join(f"{tp.topic}-{tp.partition}={new}" for tp, new in sorted(plan.items()))
    audit(request, "reset the offsets of group %r to %s: %s", group_id, target, offsets)
    return redirect(back, notice=f"Reset {len(plan)} partition(s) of group {group_id} to {target}.")


async def delete_group(request: Request) -> Response:
    """Delete the group ``group`` when ``confirm`` repeats its name (the broker refuses
    while consumers are in it)."""
    form = await request.form()
    group_id = str(form.get("group", ""))
    back = _url(group_id)
    if not group_id or form.get("confirm") != group_id:
        return redirect(back, error="type the group's name to confirm its deletion")
    try:
        await clients_of(request).admin.delete_groups([group_id])
    except KafkaError as exc:
        audit(request, "failed to delete group %r: %s", group_id, exc)
        return redirect(back, error=f"cannot delete group {group_id!r}: {exc}")
    audit(request, "deleted group %r", group_id)
    return redirect("/groups", notice=f"Deleted group {group_id}.")


async def delete_offsets(request: Request) -> Response:
    """Delete the committed offsets of group ``group`` for topic ``topic`` (the broker
    refuses while the group consumes that topic)."""
    admin = clients_of(request).admin
    form = await request.form()
    group_id = str(form.get("group", ""))
    topic = str(form.get("topic", ""))
    back = _url(group_id)
    partitions = [tp for tp in await admin.list_group_offsets(group_id) if tp.topic == topic]
    if not partitions:
        return redirect(back, error=f"group {group_id!r} has no committed offsets of {topic!r}")
    try:
        await admin.delete_group_offsets(group_id, partitions)
    except KafkaError as exc:
        audit(request, "failed to delete the offsets of group %r for %r: %s", group_id, topic, exc)
        return redirect(back, error=f"cannot delete the offsets of {topic!r}: {exc}")
    audit(request, "deleted the offsets of group %r for topic %r (%d partitions)",
          group_id, topic, len(partitions))  # fmt: skip
    return redirect(back, notice=f"Deleted the committed offsets of {topic} "
                    f"({len(partitions)} partition(s)) from group {group_id}.")  # fmt: skip
