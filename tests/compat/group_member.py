"""A confluent-kafka group member in a process of its own, for tests that SIGKILL it.

Usage: ``python group_member.py BOOTSTRAP GROUP TOPIC SESSION_TIMEOUT_MS HEARTBEAT_INTERVAL_MS``

Prints one JSON line per event and polls until it is killed:
``{"event": "assign" | "revoke", "partitions": [...], "member_id": "..."}``.
"""

from __future__ import annotations

import json
import sys

from confluent_kafka import Consumer, TopicPartition


def main(bootstrap: str, group: str, topic: str, session_ms: str, heartbeat_ms: str) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "session.timeout.ms": int(session_ms),
            "heartbeat.interval.ms": int(heartbeat_ms),
            "log_level": 3,
        }
    )

    def report(event: str, partitions: list[TopicPartition]) -> None:
        line = {
            "event": event,
            "partitions": sorted(tp.partition for tp in partitions),
            "member_id": consumer.memberid(),
        }
        print(json.dumps(line), flush=True)

    consumer.subscribe(
        [topic],
        on_assign=lambda _, partitions: report("assign", partitions),
        on_revoke=lambda _, partitions: report("revoke", partitions),
    )
    while True:
        consumer.poll(0.1)


if __name__ == "__main__":
    main(*sys.argv[1:6])
