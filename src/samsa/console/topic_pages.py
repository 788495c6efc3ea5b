"""The cluster overview and the topic pages: the topics list (search, pages), one topic
(partitions with offsets, leaders and ISR; configs set on it apart from defaults), and
creating, deleting, adding partitions to and changing the configs of topics.

A list page asks the cluster for the names of all topics (one Metadata request) but
describes, sizes and counts only the topics of the page shown, so a cluster of thousands
of topics costs a page what fifty topics cost.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, NamedTuple

from starlette.requests import Request
from starlette.responses import Response

from samsa.client.admin import (
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    PartitionDescription,
    TopicDescription,
)
from samsa.console.render import key_value_lines, paginate
from samsa.console.state import audit, clients_of, console_of, int_param, redirect, render
from samsa.errors import KafkaError
from samsa.types import TopicPartition

__all__ = [
    "add_partitions",
    "alter_topic_configs",
    "create_topic",
    "delete_topic",
    "overview",
    "topic_page",
    "topics_list",
]

# Well-known API keys whose highest version says which Kafka release a broker matches.
SHOWN_APIS = {0: "Produce", 1: "Fetch", 3: "Metadata"}
LISTED_CONFIGS = ("retention.ms", "retention.bytes", "cleanup.policy")
_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


class PartitionRow(NamedTuple):
    """A row of a topic's partitions table."""

    description: PartitionDescription
    low: int
    high: int
    size: int


async def overview(request: Request) -> Response:
    console = console_of(request)
    admin = clients_of(request).admin
    cluster = await admin.describe_cluster()
    versions = await admin.describe_api_versions()
    topics = await admin.describe_topics()
    user_topics = [t for t in topics.values() if not t.is_internal]
    groups = await admin.list_groups()
    return render(
        request,
        "overview.html",
        cluster=cluster,
        apis=[(name, versions[key]) for key, name in SHOWN_APIS.items() if key in versions],
        api_count=len(versions),
        topic_count=len(user_topics),
        partition_count=sum(len(t.partitions) for t in user_topics),
        under_replicated=sum(
            1 for t in user_topics for p in t.partitions if len(p.isr) < len(p.replicas)
        ),
        offline=sum(1 for t in user_topics for p in t.partitions if p.leader < 0),
        group_count=len(groups),
        chart=console.sampler.chart(),
        sample_interval_s=console.sampler.interval_s,
    )


async def _sizes(request: Request, names: Iterable[str]) -> dict[TopicPartition, int]:
    """Each partition's size on disk: the largest of its replicas (the leader's, or a
    follower's that has not caught up with a deletion yet)."""
    sizes: dict[TopicPartition, int] = {}
    described = await clients_of(request).admin.describe_log_dirs(topics=list(names))
    for dirs in described.values():
        for log_dir in dirs:
            for tp, replica in log_dir.replicas.items():
                if not replica.is_future:
                    sizes[tp] = max(sizes.get(tp, 0), replica.size)
    return sizes


async def _watermarks(
    request: Request, topics: Iterable[TopicDescription]
) -> dict[TopicPartition, tuple[int, int]]:
    """(log start, log end) of every partition of ``topics``."""
    admin = clients_of(request).admin
    partitions = [TopicPartition(t.name, p.partition) for t in topics for p in t.partitions]
    if not partitions:
        return {}
    low = await admin.list_offsets(dict.fromkeys(partitions, int(OffsetSpec.EARLIEST)))
    high = await admin.list_offsets(dict.fromkeys(partitions, int(OffsetSpec.LATEST)))
    return {tp: (low[tp].offset, high[tp].offset) for tp in partitions}


async def topics_list(request: Request) -> Response:
    console = console_of(request)
    admin = clients_of(request).admin
    query = request.query_params.get("q", "").strip()
    internal = request.query_params.get("internal") == "1"
    names = await admin.list_topics(include_internal=internal)
    matching = [n for n in names if query.lower() in n.lower()]
    page = paginate(matching, int_param(request.query_params.get("page"), 1, 1, 1 << 30),
                    console.settings.page_size)  # fmt: skip
    rows: list[dict[str, Any]] = []
    if page.items:
        described = await admin.describe_topics(page.items)
        configs = await admin.describe_configs([ConfigResource.topic(n) for n in page.items])
        sizes = await _sizes(request, page.items)
        marks = await _watermarks(request, described.values())
        for name in page.items:
            topic = described[name]
            tps = [TopicPartition(name, p.partition) for p in topic.partitions]
            config = configs.get(ConfigResource.topic(name), {})
            rows.append(
                {
                    "name": name,
                    "internal": topic.is_internal,
                    "partitions": len(topic.partitions),
                    "replication": len(topic.partitions[0].replicas) if topic.partitions else 0,
                    "messages": sum(marks[tp][1] - marks[tp][0] for tp in tps),
                    "size": sum(sizes.get(tp, 0) for tp in tps),
                    "under_replicated": sum(
                        1 for p in topic.partitions if len(p.isr) < len(p.replicas)
                    ),
                    "configs": {
                        key: entry.value for key in LISTED_CONFIGS if (entry := config.get(key))
                    },
                }
            )
    return render(
        request,
        "topics.html",
        page=page,
        rows=rows,
        query=query,
        internal=internal,
        all_count=len(names),
    )


async def topic_page(request: Request) -> Response:
    admin = clients_of(request).admin
    name = request.path_params["topic"]
    topic = (await admin.describe_topics([name]))[name]
    marks = await _watermarks(request, [topic])
    sizes = await _sizes(request, [name])
    configs = (await admin.describe_configs([ConfigResource.topic(name)]))[
        ConfigResource.topic(name)
    ]
    partitions = [
        PartitionRow(p, *marks[TopicPartition(name, p.partition)],
                     sizes.get(TopicPartition(name, p.partition), -1))
        for p in topic.partitions
    ]  # fmt: skip
    return render(
        request,
        "topic.html",
        topic=topic,
        partitions=partitions,
        messages=sum(p.high - p.low for p in partitions),
        size=sum(max(0, p.size) for p in partitions),
        overrides=sorted((c for c in configs.values() if not c.is_default), key=lambda c: c.name),
        defaults=sorted((c for c in configs.values() if c.is_default), key=lambda c: c.name),
    )


async def create_topic(request: Request) -> Response:
    form = await request.form()
    name = str(form.get("name", "")).strip()
    if not _TOPIC_NAME.match(name):
        return redirect("/topics", error=f"{name!r} is not a topic name: use letters, digits, "
                        "'.', '_' and '-' (at most 249)")  # fmt: skip
    try:
        configs = dict(key_value_lines(str(form.get("configs", "")), "config"))
    except ValueError as exc:
        return redirect("/topics", error=str(exc))
    topic = NewTopic(
        name,
        int_param(str(form.get("partitions", "")), -1, -1, 100_000),
        int_param(str(form.get("replication_factor", "")), -1, -1, 1000),
        configs,
    )
    try:
        await clients_of(request).admin.create_topics([topic])
    except KafkaError as exc:
        audit(request, "failed to create topic %r: %s", name, exc)
        return redirect("/topics", error=f"cannot create topic {name!r}: {exc}")
    audit(request, "created topic %r (%d partitions, replication factor %d, configs %s)",
          name, topic.num_partitions, topic.replication_factor, configs)  # fmt: skip
    return redirect(f"/topics/{name}", notice=f"Created topic {name}.")


async def add_partitions(request: Request) -> Response:
    name = request.path_params["topic"]
    form = await request.form()
    count = int_param(str(form.get("count", "")), 0, 0, 100_000)
    try:
        await clients_of(request).admin.create_partitions({name: count})
    except KafkaError as exc:
        audit(request, "failed to raise topic %r to %d partitions: %s", name, count, exc)
        return redirect(f"/topics/{name}", error=f"cannot raise the partition count: {exc}")
    audit(request, "raised topic %r to %d partitions", name, count)
    return redirect(f"/topics/{name}", notice=f"Topic {name} now has {count} partitions.")


async def alter_topic_configs(request: Request) -> Response:
    """Set the ``set`` lines (NAME=VALUE) and take each ``delete`` name back to its
    default, once the broker has validated the whole change (validate_only)."""
    name = request.path_params["topic"]
    back = f"/topics/{name}"
    form = await request.form()
    try:
        pairs = key_value_lines(str(form.get("set", "")), "config")
    except ValueError as exc:
        return redirect(back, error=str(exc))
    ops = [AlterConfigOp(key, value) for key, value in pairs]
    ops += [AlterConfigOp(str(key), None, AlterConfigOpType.DELETE)
            for key in form.getlist("delete") if str(key).strip()]  # fmt: skip
    if not ops:
        return redirect(back, error="name a config to set (NAME=VALUE) or to reset")
    change = ", ".join(
        f"{op.name}={op.value}" if op.op is AlterConfigOpType.SET else f"{op.name} to its default"
        for op in ops
    )
    resource = ConfigResource.topic(name)
    admin = clients_of(request).admin
    for validate_only in (True, False):
        try:
            error = (await admin.alter_configs({resource: ops}, validate_only=validate_only,
                                               raise_on_error=False))[resource]  # fmt: skip
        except KafkaError as exc:
            error = exc
        if error is not None:
            audit(request, "failed to change the configs of topic %r (%s): %s", name, change, error)
            return redirect(back, error=f"cannot change the configs of {name}: {error}")
    audit(request, "changed the configs of topic %r: %s", name, change)
    return redirect(back, notice=f"Changed the configs of {name}: {change}.")


async def delete_topic(request: Request) -> Response:
    """GET: ask for confirmation; POST with ``confirm``: delete."""
    name = request.path_params["topic"]
    if request.method == "GET":
        topic = (await clients_of(request).admin.describe_topics([name]))[name]
        return render(request, "delete_topic.html", topic=topic)
    form = await request.form()
    if form.get("confirm") != name:
        return redirect(f"/topics/{name}/delete",
                        error="type the topic's name to confirm its deletion")  # fmt: skip
    try:
        await clients_of(request).admin.delete_topics([name])
    except KafkaError as exc:
        audit(request, "failed to delete topic %r: %s", name, exc)
        return redirect(f"/topics/{name}", error=f"cannot delete topic {name!r}: {exc}")
    audit(request, "deleted topic %r", name)
    return redirect("/topics", notice=f"Deleted topic {name}.")
