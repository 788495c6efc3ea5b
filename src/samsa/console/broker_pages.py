"""The brokers pages: every broker with its address, rack, controller mark, the
partitions it leads (and how many of them are under-replicated) and its log dirs'
sizes; one broker with its configs (overrides apart from defaults) and each log dir."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from samsa.client.admin import ConfigResource, LogDirDescription, TopicDescription
from samsa.console.state import clients_of, render

__all__ = ["broker_page", "brokers_list"]


async def _all_topics(request: Request) -> dict[str, TopicDescription]:
    """Every topic, the internal ones (``__consumer_offsets``…) too: their partitions
    are led and stored like the others'."""
    admin = clients_of(request).admin
    return await admin.describe_topics(await admin.list_topics(include_internal=True))


def _partition_counts(topics: dict[str, TopicDescription], broker: int) -> dict[str, int]:
    """How many partitions ``broker`` holds a replica of, leads, and leads while one of
    their replicas is out of the ISR (Kafka's per-broker UnderReplicatedPartitions)."""
    partitions = [p for t in topics.values() for p in t.partitions]
    led = [p for p in partitions if p.leader == broker]
    return {
        "replicas": sum(1 for p in partitions if broker in p.replicas),
        "led": len(led),
        "under_replicated": sum(1 for p in led if len(p.isr) < len(p.replicas)),
    }


def _log_dir_rows(dirs: list[LogDirDescription]) -> list[dict[str, Any]]:
    return [
        {
            "path": d.path,
            "error": d.error.name if d.error is not None else "",
            "replicas": len(d.replicas),
            "size": sum(r.size for r in d.replicas.values()),
            "total": d.total_bytes,
            "usable": d.usable_bytes,
        }
        for d in dirs
    ]


async def brokers_list(request: Request) -> Response:
    admin = clients_of(request).admin
    cluster = await admin.describe_cluster()
    topics = await _all_topics(request)
    log_dirs = await admin.describe_log_dirs([n.node_id for n in cluster.nodes])
    rows = []
    for node in cluster.nodes:
        dirs = _log_dir_rows(log_dirs.get(node.node_id, []))
        rows.append(
            {
                "node": node,
                "controller": node.node_id == cluster.controller_id,
                **_partition_counts(topics, node.node_id),
                "log_dirs": len(dirs),
                "size": sum(d["size"] for d in dirs),
            }
        )
    return render(request, "brokers.html", cluster=cluster, rows=rows)


async def broker_page(request: Request) -> Response:
    admin = clients_of(request).admin
    text = request.path_params["broker"]
    cluster = await admin.describe_cluster()
    node = next((n for n in cluster.nodes if str(n.node_id) == text), None)
    if node is None:
        return render(request, "error.html", status_code=404, title="No such broker",
                      error=f"no live broker has the id {text!r}")  # fmt: skip
    resource = ConfigResource.broker(node.node_id)
    configs = (await admin.describe_configs([resource]))[resource].values()
    topics = await _all_topics(request)
    dirs = _log_dir_rows((await admin.describe_log_dirs([node.node_id])).get(node.node_id, []))
    return render(
        request,
        "broker.html",
        node=node,
        controller=node.node_id == cluster.controller_id,
        counts=_partition_counts(topics, node.node_id),
        log_dirs=dirs,
        overrides=sorted((c for c in configs if not c.is_default), key=lambda c: c.name),
        defaults=sorted((c for c in configs if c.is_default), key=lambda c: c.name),
    )
