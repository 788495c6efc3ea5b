"""Resource limits on connections, as Kafka has them, against real broker processes.

``connections.max.idle.ms`` closes connections that send nothing (half-sent
frames included), ``queued.max.request.bytes`` caps the memory held by frames
being received, ``max.connections.per.ip`` closes connections over the limit
and ``max.connections`` makes new ones wait, the soft open-file limit is raised
to the hard one at start, and running out of descriptors is logged. Memory is
read from ``/proc/<pid>/status`` (VmRSS) and checked against generous bounds.
"""

from __future__ import annotations

import os
import resource
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.testing import BrokerProcess, start_broker
from samsa.testing.waiting import wait_until

API_VERSIONS = 18
MB = 1 << 20
WAIT_S = 20.0  # deadline for something that must happen; passing tests never wait it out


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[list[BrokerProcess]]:
    """Brokers a test starts (through :func:`_start`), killed at its end."""
    started: list[BrokerProcess] = []
    yield started
    for broker in started:
        broker.kill()


def _start(brokers: list[BrokerProcess], tmp_path: Path, *overrides: str) -> BrokerProcess:
    broker = start_broker(tmp_path / f"data{len(brokers)}", overrides=overrides)
    brokers.append(broker)
    return broker


def _connect(broker: BrokerProcess) -> socket.socket:
    return socket.create_connection((broker.host, broker.port), timeout=5)


def _api_versions_frame() -> bytes:
    payload = struct.pack(">hhih", API_VERSIONS, 0, 1, 4) + b"test"
    return struct.pack(">i", len(payload)) + payload


def _answers(sock: socket.socket, timeout: float = WAIT_S) -> bool:
    """Send ApiVersions on ``sock``; True if an answer arrives, False if the broker closes."""
    try:
        sock.sendall(_api_versions_frame())
        sock.settimeout(timeout)
        return len(sock.recv(4)) == 4
    except (ConnectionResetError, BrokenPipeError):
        return False


def _closed_by_broker_within(sock: socket.socket, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while (remaining := deadline - time.monotonic()) > 0:
        sock.settimeout(remaining)
        try:
            if sock.recv(65536) == b"":
                return True
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
    return False


def _rss_mb(broker: BrokerProcess) -> float:
    assert broker.process is not None
    for line in Path(f"/proc/{broker.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS line")


def _send_half_frames(
    broker: BrokerProcess, count: int, declared: int, sent: int
) -> list[socket.socket]:
    """Open ``count`` connections that each announce a ``declared``-byte frame and send up to
    ``sent`` bytes of it, interleaved; stops pushing once the broker reads no more of them."""
    socks = []
    for _ in range(count):
        sock = _connect(broker)
        sock.sendall(struct.pack(">i", declared))
        sock.setblocking(False)
        socks.append(sock)
    chunk = b"\x01" * (64 * 1024)
    pushed = [0] * count
    last_progress = time.monotonic()
    while time.monotonic() - last_progress < 2.0:
        progressed = False
        for i, sock in enumerate(socks):
            if pushed[i] >= sent:
                continue
            try:
                pushed[i] += sock.send(chunk[: sent - pushed[i]])
                progressed = True
            except BlockingIOError:
                pass
        if progressed:
            last_progress = time.monotonic()
        elif all(p >= sent for p in pushed):
            break
        else:
            time.sleep(0.01)
    return socks


# -- connections.max.idle.ms ---------------------------------------------------------------


@pytest.mark.timeout(60)
def test_a_half_sent_frame_is_closed_after_connections_max_idle_ms(
    brokers: list[BrokerProcess], tmp_path: Path
) -> None:
    broker = _start(brokers, tmp_path, "connections.max.idle.ms=300")
    with _connect(broker) as sock:
        sock.sendall(struct.pack(">i", 1000) + b"\0" * 400)
        assert _closed_by_broker_within(sock, WAIT_S)


@pytest.mark.timeout(60)
def test_a_connection_sending_requests_is_not_closed_as_idle(
    brokers: list[BrokerProcess], tmp_path: Path
) -> None:
    broker = _start(brokers, tmp_path, "connections.max.idle.ms=2000")
    with _connect(broker) as sock:
        for _ in range(30):  # 3 s of requests, 100 ms apart
            assert _answers(sock)
            sock.recv(65536)  # the rest of the answer (ApiVersions v0 is small)
            time.sleep(0.1)


# -- memory held by frames being received -----------------------------------------------------


@pytest.mark.timeout(120)
def test_queued_max_request_bytes_caps_the_memory_of_half_sent_frames(
    brokers: list[BrokerProcess], tmp_path: Path
) -> None:
    broker = _start(brokers, tmp_path, f"queued.max.request.bytes={64 * MB}")
    before = _rss_mb(broker)
    # Unbounded, ten connections would make the broker hold 300 MB.
    socks = _send_half_frames(broker, 10, declared=60 * MB, sent=30 * MB)
    try:
        grown = _rss_mb(broker) - before
        assert grown < 120, f"RSS grew by {grown:.0f} MB"
    finally:
        for sock in socks:
            sock.close()


@pytest.mark.timeout(120)
def test_a_connection_stopped_by_queued_max_request_bytes_is_served_once_memory_frees(
    brokers: list[BrokerProcess], tmp_path: Path
) -> None:
    broker = _start(brokers, tmp_path, f"queued.max.request.bytes={8 * MB}")
    (hog,) = _send_half_frames(broker, 1, declared=8 * MB, sent=1 * MB)
    with _connect(broker) as waiting:
        # Announces a frame that does not fit beside the hog's: reading from it stops.
        waiting.sendall(struct.pack(">i", 1 * MB))
        hog.close()
        # Memory freed: the rest of its frame is read, and a request after it answered.
        # API key -1 then zeros: no API has that key, so the frame closes the connection
        # (an all-zero frame is a valid Produce v0 with acks=0 and no topics).
        waiting.sendall(b"\xff\xff" + b"\0" * (MB - 2))
        assert _closed_by_broker_within(waiting, WAIT_S)
    with _connect(broker) as client:
        assert _answers(client)


@pytest.mark.timeout(120)
def test_memory_of_half_sent_frames_is_given_back_when_their_connections_close(
    brokers: list[BrokerProcess], tmp_path: Path
) -> None:
    broker = _start(brokers, tmp_path)
    before = _rss_mb(broker)
    # Many connections interleaved: their pieces alternate through the heap.
    socks = _send_half_frames(broker, 24, declared=30 * MB, sent=15 * MB)
    held = _rss_mb(broker) - before
    assert held > 250, f"the broker holds only {held:.0f} MB: the frames did not arrive"
    for sock in socks:
        sock.close()
    wait_until(
        lambda: _rss_mb(broker) < before + 12,
        lambda: f"the memory to be given back: {_rss_mb(broker) - before:.0f} MB still held",
        timeout=WAIT_S,
        interval=0.2,
    )


# -- max.connections and max.connections.per.ip -------------------------------------------------


@pytest.mark.timeout(60)
def test_a_connection_over_max_connections_per_ip_is_closed(
    brokers: list[BrokerProcess], tmp_path: Path
) -> None:
    broker = _start(brokers, tmp_path, "max.connections.per.ip=2")
    with _connect(broker) as first, _connect(broker) as second:
        assert _answers(first)
        assert _answers(second)
        with _connect(broker) as third:
            assert _closed_by_broker_within(third, WAIT_S)
    # Once the broker has seen the two close, there is room again.
    deadline = time.monotonic() + WAIT_S
    while True:
        with _connect(broker) as again:
            if _answers(again):
                break
        assert time.monotonic() < deadline, "still refused after both connections closed"
        time.sleep(0.05)


@pytest.mark.timeout(60)
def test_a_connection_over_max_connections_waits_until_one_closes(
    brokers: list[BrokerProcess], tmp_path: Path
) -> None:
    broker = _start(brokers, tmp_path, "max.connections=2")
    first, second = _connect(broker), _connect(broker)
    assert _answers(first)
    assert _answers(second)
    with _connect(broker) as third:  # the kernel completes the handshake; samsa waits
        third.sendall(_api_versions_frame())
        third.settimeout(0.5)
        with pytest.raises(TimeoutError):
            third.recv(4)
        first.close()
        third.settimeout(WAIT_S)
        assert len(third.recv(4)) == 4
    second.close()


# -- file descriptors ---------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_the_soft_open_file_limit_is_raised_to_the_hard_limit_at_start(
    brokers: list[BrokerProcess], tmp_path: Path
) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # Low, but above what this test process holds (earlier tests leave some open).
    low = max(256, len(os.listdir("/proc/self/fd")) + 64)
    if hard == resource.RLIM_INFINITY or hard <= low:
        pytest.skip(f"the hard open file limit ({hard}) leaves nothing to raise")
    resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))  # the broker inherits it
    try:
        broker = _start(brokers, tmp_path)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert broker.process is not None
    assert resource.prlimit(broker.process.pid, resource.RLIMIT_NOFILE) == (hard, hard)
    assert f"from {low} to {hard}" in broker.log_path.read_text()


def _log_has(broker: BrokerProcess, text: str) -> bool:
    return text in broker.log_path.read_text(errors="replace")


@pytest.mark.timeout(90)
def test_running_out_of_descriptors_logs_an_error_and_accepting_resumes_after(
    brokers: list[BrokerProcess], tmp_path: Path
) -> None:
    broker = _start(brokers, tmp_path)
    assert broker.process is not None
    pid = broker.process.pid
    open_fds = len(list(Path(f"/proc/{pid}/fd").iterdir()))
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (open_fds + 10, open_fds + 10))
    # Connect until one is not accepted: the kernel completes its handshake, and it waits
    # in the backlog while the broker has no descriptor to accept it with.
    held: list[socket.socket] = []
    deadline = time.monotonic() + WAIT_S
    while not _log_has(broker, "cannot accept connections"):
        assert len(held) < 40, "every connection was accepted"
        sock = _connect(broker)
        held.append(sock)
        sock.sendall(_api_versions_frame())
        sock.settimeout(0.2)
        while not _log_has(broker, "cannot accept connections"):
            assert time.monotonic() < deadline, "neither an answer nor an ERROR"
            try:
                if sock.recv(4):
                    break
            except TimeoutError:
                continue
    starved = held.pop()
    for sock in held:
        sock.close()
    starved.settimeout(WAIT_S)
    assert len(starved.recv(4)) == 4  # accepted once descriptors were freed
    starved.close()
    errors = [line for line in broker.log_path.read_text().splitlines() if "cannot accept" in line]
    assert "ERROR" in errors[0]
    assert len(errors) <= 10  # rate-limited, not one per retry
