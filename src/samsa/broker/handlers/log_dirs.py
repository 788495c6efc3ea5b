"""DescribeLogDirs (key 35), versions 0–4: each log dir, its partitions and their sizes.

Every data directory of ``log.dirs`` is described with the partitions it
holds (all, or those the request names): the bytes of each partition's log
and its offset lag — how far its log end is behind the high watermark, 0 for a
leader or a follower that has caught up. Version 4 adds the directory's total
and usable bytes (``statvfs``). A directory whose size cannot be read answers
KAFKA_STORAGE_ERROR. There are no "future" replicas: samsa does not move
partitions between log dirs of one broker. With the authorizer on, it needs
DESCRIBE on the cluster: otherwise no directory is described, and version 3+
answers CLUSTER_AUTHORIZATION_FAILED, as Kafka's.
"""

from __future__ import annotations

import os
from typing import Any

from samsa.acl import AclOperation
from samsa.broker.api import respond
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.security.authorizer import authorize_cluster
from samsa.errors import ErrorCode
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import RequestHeader
from samsa.storage import LogManager
from samsa.types import TopicPartition

CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def register(registry: ApiRegistry, *, log_manager: LogManager) -> None:
    async def handle(header: RequestHeader, body: Any) -> Any:
        if not authorize_cluster(AclOperation.DESCRIBE):
            return respond(header, {"throttle_time": 0, "results": [],
                                    "error_code": CLUSTER_DENIED})  # fmt: skip
        wanted: set[TopicPartition] | None = None
        if body.topics is not None:
            wanted = {TopicPartition(t.topic, p) for t in body.topics for p in t.partitions}
        results = []
        for directory, logs in log_manager.logs_by_dir().items():
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for tp, partition_log in sorted(logs.items()):
                if wanted is not None and tp not in wanted:
                    continue
                lag = max(partition_log.high_watermark - partition_log.log_end_offset, 0)
                by_topic.setdefault(tp.topic, []).append({
                    "partition_index": tp.partition, "partition_size": partition_log.size,
                    "offset_lag": lag, "is_future_key": False,
                })  # fmt: skip
            try:
                space = os.statvfs(directory)
                total, usable = space.f_blocks * space.f_frsize, space.f_bavail * space.f_frsize
                code = ErrorCode.NONE
            except OSError:
                total = usable = -1
                code = ErrorCode.KAFKA_STORAGE_ERROR
            results.append({
                "error_code": code, "log_dir": str(directory),
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
                "total_bytes": total, "usable_bytes": usable,
            })  # fmt: skip
        return respond(header, {"throttle_time": 0, "error_code": ErrorCode.NONE,
                                "results": results})  # fmt: skip

    registry.add(ApiKey.DESCRIBE_LOG_DIRS, 0, 4, handle)
