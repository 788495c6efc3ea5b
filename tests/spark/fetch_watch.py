"""A loopback TCP proxy that tells a test when a consumer asks for an offset.

Put in front of a broker that advertises the proxy's address (``advertised.listeners``),
it carries every client's bytes unchanged and sets an event once a Fetch request asks
for the watched offset of a partition. samsa's consumer fetches a partition again
only once ``poll()`` has returned everything buffered for it (see
``samsa.client.consumer.fetcher``), so a Fetch at offset N means the consumer's user
has been given the records before N and is waiting for N.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from typing import Any

from samsa.protocol.codec import RequestDecodeError, decode_request

FETCH = 1


class FetchWatch:
    """The proxy: ``port`` to advertise, ``forward_to`` once the broker's port is known."""

    def __init__(self) -> None:
        self.watched: tuple[str, int, int] | None = None
        self.asked = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []

    def watch(self, topic: str, partition: int, offset: int) -> threading.Event:
        """The event set once a Fetch asks for ``offset`` of ``topic``'s ``partition``."""
        self.watched = (topic, partition, offset)
        return self.asked

    def forward_to(self, broker: str) -> None:
        host, port = broker.rsplit(":", 1)
        threading.Thread(target=self._accept, args=((host, int(port)),), daemon=True).start()

    def close(self) -> None:
        self._listener.close()
        for sock in list(self._sockets):
            with contextlib.suppress(OSError):  # already disconnected
                sock.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in recv()
            sock.close()

    def _accept(self, broker: tuple[str, int]) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection(broker)
            except OSError:
                client.close()  # as the broker would be seen from the client: gone
                continue
            self._sockets += [client, upstream]
            threading.Thread(target=self._responses, args=(upstream, client), daemon=True).start()
            threading.Thread(target=self._requests, args=(client, upstream), daemon=True).start()

    def _responses(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            sink.close()  # one side is gone: so is the other

    def _requests(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while (size := _read_exactly(source, 4)) is not None:
                frame = _read_exactly(source, struct.unpack(">i", size)[0])
                if frame is None:
                    break
                if struct.unpack_from(">h", frame)[0] == FETCH:
                    self._check(frame)
                sink.sendall(size + frame)
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            sink.close()

    def _check(self, frame: bytes) -> None:
        if self.watched is None:
            return
        try:
            fetch: Any = decode_request(frame)[1]
        except RequestDecodeError:
            return  # the broker answers it with an error; it asked for nothing we watch
        topic, partition, offset = self.watched
        for t in fetch.topics:
            if getattr(t, "topic", None) != topic:  # Fetch v13+ names topics by id
                continue
            if any(p.partition == partition and p.fetch_offset == offset for p in t.partitions):
                self.asked.set()


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    """``size`` bytes, or None at the end of the stream."""
    chunks, left = [], size
    while left:
        chunk = sock.recv(left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
