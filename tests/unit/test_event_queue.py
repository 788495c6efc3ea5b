"""The event queue's log of a failed handler: a handler cut off by the ZooKeeper session is
retried with a WARNING and no traceback; any other failure is an ERROR with its traceback.
Both are run again."""

from __future__ import annotations

import asyncio

import pytest

from samsa.cluster.events import EventQueue
from samsa.cluster.zk_client import ConnectionLoss, SessionExpiredError


@pytest.mark.parametrize(
    ("failure", "level", "traceback", "says"),
    [
        (SessionExpiredError(), "WARNING", False, "the ZooKeeper session expired"),
        (ConnectionLoss(), "WARNING", False, "the ZooKeeper session dropped"),
        (KeyError("broker"), "ERROR", True, "failed"),
    ],
    ids=["session-expired", "connection-lost", "a-fault"],
)
def test_a_failed_handler_is_retried_and_logged_by_what_failed(
    caplog: pytest.LogCaptureFixture,
    failure: Exception,
    level: str,
    traceback: bool,
    says: str,
) -> None:
    handled: list[str] = []

    async def handler(event: str) -> None:
        handled.append(event)
        if len(handled) == 1:
            raise failure

    async def main() -> None:
        queue: EventQueue[str] = EventQueue("zk-metadata", handler)
        queue.start()
        queue.put("brokers")
        while len(handled) < 2:
            await queue.wait_idle()
            await asyncio.sleep(0)
        await queue.stop()

    with caplog.at_level("WARNING", logger="samsa.cluster.events"):
        asyncio.run(main())
    assert handled == ["brokers", "brokers"]
    [record] = caplog.records
    assert (record.levelname, record.exc_info is not None) == (level, traceback)
    assert says in record.getMessage()
