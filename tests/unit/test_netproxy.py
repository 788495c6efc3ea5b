"""The link proxies of fault-injection runs: who connects, carried bytes, cuts and heals."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from samsa.testing.netproxy import ALL, LinkProxy, kafka_client_id, kafka_source


def _request(client_id: str | None, body: bytes = b"") -> bytes:
    encoded = b"" if client_id is None else client_id.encode()
    header = struct.pack(">hhih", 1, 12, 7, -1 if client_id is None else len(encoded))
    payload = header + encoded + body
    return struct.pack(">i", len(payload)) + payload


def test_the_client_id_of_a_request_header() -> None:
    frame = _request("samsa-replica-fetcher-3", b"rest")
    assert kafka_client_id(frame) == "samsa-replica-fetcher-3"
    assert kafka_source(frame) == "3"
    assert kafka_client_id(frame[:12]) is None  # more bytes needed
    assert kafka_client_id(_request(None)) == ""
    assert kafka_source(_request("rdkafka")) == "rdkafka"


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    """A server echoing whatever each connection sends."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[:2]
    server.close()


def _connect(proxy: LinkProxy, client_id: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
    sock.sendall(_request(client_id))
    return sock


def _echoed(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _is_refused(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_a_cut_closes_and_refuses_only_that_source(echo: tuple[str, int]) -> None:
    proxy = LinkProxy(echo, kafka_source)
    try:
        first, second = _connect(proxy, "fetcher-1"), _connect(proxy, "fetcher-2")
        assert _echoed(first, len(_request("fetcher-1"))) == _request("fetcher-1")
        assert _echoed(second, len(_request("fetcher-2"))) == _request("fetcher-2")

        proxy.cut("1")
        assert _is_refused(first)  # the open connection reset
        assert _is_refused(_connect(proxy, "fetcher-1"))  # and new ones refused
        second.sendall(b"still")
        assert _echoed(second, 5) == b"still"  # the other source's link carries on
        assert proxy.refused == 1

        proxy.heal("1")
        again = _connect(proxy, "fetcher-1")
        assert _echoed(again, len(_request("fetcher-1"))) == _request("fetcher-1")

        proxy.cut(ALL)
        assert _is_refused(second) and _is_refused(again)
        proxy.heal()
        assert _echoed(_connect(proxy, "x-2"), len(_request("x-2"))) == _request("x-2")
    finally:
        proxy.close()


def test_a_proxy_without_identifier_carries_any_bytes(echo: tuple[str, int]) -> None:
    proxy = LinkProxy(echo)
    try:
        sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        sock.sendall(b"\x00hello")
        assert _echoed(sock, 6) == b"\x00hello"
        proxy.cut()
        assert _is_refused(sock)
    finally:
        proxy.close()
