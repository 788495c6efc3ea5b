"""The physical limits of this machine that bound the broker's throughput.

Not a test. Three figures, each the best a broker could do on the path it takes,
with no Kafka in the way:

- **loopback copy**: one process sends 1 MiB buffers over a loopback TCP connection
  (``sendall``), another receives them into one reusable buffer (``recv_into``). A
  produced byte crosses loopback once on its way to the broker, as here.
- **sendfile**: a file that is in the page cache (written just before, as a broker's
  recent log is) sent with ``os.sendfile`` to a loopback TCP socket, the receiver as
  above. A fetched byte takes this path out of the broker.
- **raw write**: ``os.write`` of 1 MiB buffers to a new file on the data disk (the
  directory given by ``--dir``); the page-cache copy a produce append makes. The
  rate with an ``fsync`` at the end is printed too (the disk itself).

Each runs ``--repeat`` times; the median and the range are printed, with the CPU
seconds per GB (user + system, from ``resource.getrusage``) of both processes and of
the sending one alone (the broker's end: it receives a produce, it sends a fetch).
1 GB = 10^9 B. Keep the written volume under this VM's warm-memory limit (see
RESULTS.md, storage section): 256 MiB per file by default.

    .venv/bin/python bench/limits.py                 # ~20 s
    .venv/bin/python bench/limits.py --json out.json

Results: bench/RESULTS.md, section "Headline figures".
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from pathlib import Path

CHUNK = 1 << 20


@dataclass
class Sample:
    limit: str
    bytes: int
    seconds: float
    cpu_s: float  # both processes, user + system
    sender_cpu_s: float  # the writing or sending process alone

    @property
    def gb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e9

    @property
    def cpu_s_per_gb(self) -> float:
        return self.cpu_s / (self.bytes / 1e9)


def cpu_now() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def receive(port: int, total: int, out: Connection) -> None:
    """Connect, read ``total`` bytes into one buffer; report (bytes, seconds, CPU seconds)."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        buffer = bytearray(CHUNK)
        view = memoryview(buffer)
        got = first = sock.recv_into(view)  # the clock starts at the first byte
        cpu0, t0 = cpu_now(), time.perf_counter()
        while got < total:
            n = sock.recv_into(view)
            if n == 0:
                raise RuntimeError(f"sender closed after {got} of {total} bytes")
            got += n
        out.send((got - first, time.perf_counter() - t0, cpu_now() - cpu0))


def blast(total: int, send: Callable[[socket.socket], None], name: str) -> Sample:
    """Run ``send`` against a receiving child process; time both ends."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        ours, theirs = mp.Pipe()
        child = mp.get_context("fork").Process(target=receive, args=(port, total, theirs))
        child.start()
        sock, _ = server.accept()
        with sock:
            cpu0 = cpu_now()
            send(sock)
            sender_cpu = cpu_now() - cpu0
            timed, seconds, receiver_cpu = ours.recv()
        child.join()
    return Sample(name, timed, seconds, sender_cpu + receiver_cpu, sender_cpu)


def loopback(total: int) -> Sample:
    payload = os.urandom(CHUNK)

    def send(sock: socket.socket) -> None:
        sent = 0
        while sent < total:
            sock.sendall(payload)
            sent += CHUNK

    return blast(total, send, "loopback copy")


def sendfile(total: int, path: Path) -> Sample:
    size = path.stat().st_size

    def send(sock: socket.socket) -> None:
        with open(path, "rb") as file:
            fd = file.fileno()
            sent = 0
            while sent < total:
                count = min(size - sent % size, total - sent)
                sent += os.sendfile(sock.fileno(), fd, sent % size, count)

    return blast(total, send, "sendfile")


def write_file(path: Path, total: int) -> tuple[Sample, float]:
    """os.write ``total`` bytes to a new file: the write rate, and the rate with fsync."""
    payload = os.urandom(CHUNK)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        cpu0, t0 = cpu_now(), time.perf_counter()
        written = 0
        while written < total:
            written += os.write(fd, payload)
        seconds = time.perf_counter() - t0
        cpu = cpu_now() - cpu0
        os.fsync(fd)
        with_fsync = time.perf_counter() - t0
    finally:
        os.close(fd)
    return Sample("raw write", written, seconds, cpu, cpu), written / with_fsync / 1e9


def summary(samples: list[Sample]) -> dict[str, float]:
    rates = sorted(s.gb_per_s for s in samples)
    return {
        "gb_per_s": statistics.median(rates),
        "gb_per_s_min": rates[0],
        "gb_per_s_max": rates[-1],
        "cpu_s_per_gb": statistics.median(s.cpu_s_per_gb for s in samples),
        "sender_cpu_s_per_gb": statistics.median(s.sender_cpu_s / (s.bytes / 1e9) for s in samples),
    }


def commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=True, cwd=Path(__file__).parent,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()),
                        help="the data disk: where the written file goes")  # fmt: skip
    parser.add_argument("--socket-gib", type=float, default=2.0, help="per socket run")
    parser.add_argument("--file-mib", type=int, default=256, help="per write run")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    socket_bytes = int(args.socket_gib * (1 << 30)) // CHUNK * CHUNK
    file_bytes = args.file_mib * CHUNK
    work = Path(tempfile.mkdtemp(prefix="samsa-limits-", dir=args.dir))
    load = os.getloadavg()
    samples: dict[str, list[Sample]] = {"loopback copy": [], "sendfile": [], "raw write": []}
    fsync_rates: list[float] = []
    try:
        for _ in range(args.repeat):
            samples["loopback copy"].append(loopback(socket_bytes))
            path = work / "segment.log"
            written, with_fsync = write_file(path, file_bytes)
            samples["raw write"].append(written)
            fsync_rates.append(with_fsync)
            samples["sendfile"].append(sendfile(socket_bytes, path))
            path.unlink()
    finally:
        for leftover in work.iterdir():
            leftover.unlink()
        work.rmdir()
    figures = {name: summary(runs) for name, runs in samples.items()}
    figures["raw write"]["gb_per_s_with_fsync"] = statistics.median(fsync_rates)
    print(f"{'limit':<14} {'GB/s':>6}  {'range':<11}  {'CPU-s/GB':>8}  {'sender':>6}  note")
    notes = {
        "loopback copy": "1 MiB sendall -> recv_into, two processes, CPU of both",
        "sendfile": f"{file_bytes >> 20} MiB hot file -> loopback socket -> recv_into",
        "raw write": f"1 MiB os.write into the page cache, {args.dir}; "
        f"{figures['raw write']['gb_per_s_with_fsync']:.2f} GB/s with the fsync",
    }
    for name, fig in figures.items():
        span = f"{fig['gb_per_s_min']:.2f}-{fig['gb_per_s_max']:.2f}"
        print(
            f"{name:<14} {fig['gb_per_s']:>6.2f}  {span:<11}  "
            f"{fig['cpu_s_per_gb']:>8.3f}  {fig['sender_cpu_s_per_gb']:>6.3f}  {notes[name]}"
        )
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; commit {commit()}")
    if args.json:
        record = {
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "commit": commit(),
            "load_average": load,
            "figures": figures,
            "samples": {name: [asdict(s) for s in runs] for name, runs in samples.items()},
        }
        args.json.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
