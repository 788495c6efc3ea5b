"""A connection dropped without close() — a peer connection given up at shutdown or after a
failure — does not leave its read task to the garbage collector, which would log an ERROR
("Task was destroyed but it is pending!") for a condition that harms nothing."""

from __future__ import annotations

import asyncio
import gc

import pytest

from samsa.client.connection import BrokerConnection
from samsa.testing import BrokerProcess


def test_a_connection_dropped_without_close_logs_no_destroyed_task(
    samsa_broker: BrokerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    host, port = samsa_broker.bootstrap.rsplit(":", 1)

    async def main() -> None:
        connection = BrokerConnection(host, int(port), node_id=0, client_id="dropped")
        await connection.open()
        del connection
        gc.collect()
        for _ in range(10):
            await asyncio.sleep(0)

    with caplog.at_level("ERROR", logger="asyncio"):
        asyncio.run(main())
        gc.collect()
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []
