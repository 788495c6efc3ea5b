"""The client connection against a peer that answers with bytes it cannot use.

The peer is a real socket server on loopback that reads one request frame and
writes a chosen answer: a response that cannot be decoded, or one with another
request's correlation id, must fail the waiting request at once with
NETWORK_EXCEPTION (and close the connection) — not leave it waiting for
``request.timeout.ms``.
"""

from __future__ import annotations

import asyncio
import struct

import pytest

from samsa.client.connection import BrokerConnection
from samsa.errors import for_code

NetworkError = for_code(13)


async def _serve_once(answer: bytes) -> tuple[asyncio.Server, int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        request = await reader.readexactly(size)
        correlation_id = request[4:8]
        writer.write(answer.replace(b"CCCC", correlation_id))
        await writer.drain()
        await asyncio.sleep(5)
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(struct.pack(">i", 6) + b"CCCC\xff\xff", id="undecodable body"),
        pytest.param(struct.pack(">i", 6) + b"\x7f\x00\x00\x01\x00\x00", id="wrong correlation id"),
    ],
)
def test_a_bad_response_fails_its_request_at_once(answer: bytes) -> None:
    async def main() -> None:
        server, port = await _serve_once(answer)
        connection = BrokerConnection(
            "127.0.0.1", port, node_id=-1, client_id="t", request_timeout_ms=3_600_000
        )
        try:
            # A hang guard, not a measurement: waiting out the hour-long request
            # timeout is the bug; an answer comes as soon as the bytes are read.
            async with asyncio.timeout(60):
                with pytest.raises(NetworkError):
                    await connection.open()  # ApiVersions is the first request
        finally:
            server.close()
            await connection.close()

    asyncio.run(main())
