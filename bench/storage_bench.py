"""Storage hot paths: append throughput, sendfile reads, offset index lookups, recovery.

Run from the repository root::

    .venv/bin/python bench/storage_bench.py                  # ~1.4 GiB written, ~10 s
    .venv/bin/python bench/storage_bench.py --quick          # smaller run
    .venv/bin/python bench/storage_bench.py --volume-mib 768 # past the VM's warm memory

What is measured (one log per phase in a temporary directory, removed at the end):

- append: ``Log.append_as_leader`` (framing, CRC-32C, timestamp checks, offset
  assignment, index entries, one ``os.write``) of 16 KiB and 1 MiB batches, no
  fsync. Three runs are interleaved chunk by chunk so they meet the same
  page-cache conditions: a raw ``os.write`` of the same bytes to a scratch file
  (the ceiling), ``append_as_leader`` of fresh ``bytearray`` copies made outside
  the timed loop (it rewrites base offsets in place, so every append needs its
  own copy), and ``append_as_leader(bytearray(batch))`` with the copy timed.
- read: the log front to back in ``--fetch-bytes`` fetches, ``Log.read`` then
  ``os.sendfile`` into one end of a ``socket.socketpair()`` while a thread drains
  the other with ``recv_into`` into one preallocated buffer; hot page cache.
  Baseline: ``os.sendfile`` of the same segment files in the same chunk size,
  without ``Log.read``.
- index: random ``OffsetIndex.lookup`` calls on a segment with 100k+ entries
  (``index.interval.bytes=4096``, ~4 KiB batches, so every batch but the first
  is indexed), random ``Log.read`` translations (index lookup + header preads),
  and ``load_log`` of that log after a clean shutdown (index sanity check).
- recovery: ``load_log(..., clean_shutdown=False, recovery_point=0)`` over the
  closed log (hot page cache, so CPU-bound: CRC and per-batch Python).

Latencies are per call (``perf_counter_ns`` around each call, its own cost
included) and as a mean over a tight loop; throughputs are bytes moved over
wall time; reads and recovery report the median of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from samsa.records import build_batch
from samsa.storage.log import Log
from samsa.storage.log_config import LogConfig
from samsa.storage.log_loader import load_log

KIB = 1024
MIB = 1024 * KIB
RECORD_VALUE_BYTES = 1 * KIB
PREP_CHUNK_BYTES = 8 * MIB
"""Fresh bytearrays are prepared this many bytes at a time, outside the timed region."""


@dataclass(frozen=True)
class Sizes:
    append_volume: int
    """Bytes per append run; each batch size has three runs (raw, append, append with copy)."""
    segment_bytes: int
    index_batches: int
    lookups: int


# Each phase keeps about 3 x append_volume of fresh page cache alive. On the VM these
# figures were taken on, only ~0.7 GB of new page cache could be written at full speed
# (about 2.5 GB/s); past that every new page cost a host page fault (about 0.3 GB/s for
# raw os.write). The default stays under that; --volume-mib measures the slow regime.
FULL = Sizes(
    append_volume=160 * MIB, segment_bytes=64 * MIB, index_batches=110_000, lookups=200_000
)
QUICK = Sizes(append_volume=48 * MIB, segment_bytes=16 * MIB, index_batches=25_000, lookups=30_000)


@dataclass(frozen=True)
class Row:
    name: str
    value: float
    unit: str
    target: str = ""
    met: bool | None = None
    note: str = ""


class Results:
    def __init__(self) -> None:
        self.rows: list[Row] = []

    def add(self, row: Row) -> None:
        self.rows.append(row)
        print(f"  {row.name}: {_fmt(row.value)} {row.unit} {row.note}".rstrip(), flush=True)

    def table(self) -> str:
        header = ("metric", "value", "unit", "target", "met", "note")
        body = [
            (
                r.name,
                _fmt(r.value),
                r.unit,
                r.target,
                "" if r.met is None else ("yes" if r.met else "NO"),
                r.note,
            )
            for r in self.rows
        ]
        widths = [max(len(str(line[i])) for line in [header, *body]) for i in range(6)]
        lines = []
        for n, line in enumerate([header, *body]):
            cells = [
                str(c).rjust(w) if i == 1 else str(c).ljust(w)
                for i, (c, w) in enumerate(zip(line, widths, strict=True))
            ]
            lines.append("  ".join(cells).rstrip())
            if n == 0:
                lines.append("  ".join("-" * w for w in widths))
        return "\n".join(lines)


def _fmt(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def make_batch(records: int) -> bytes:
    rng = random.Random(records)
    values = [rng.randbytes(RECORD_VALUE_BYTES) for _ in range(records)]
    return build_batch(values)


def open_log(directory: Path, sizes: Sizes, **overrides: str) -> Log:
    props = {
        "segment.bytes": str(sizes.segment_bytes),
        "max.message.bytes": str(4 * MIB),
        "retention.ms": "-1",
        **overrides,
    }
    return load_log(directory, LogConfig.from_props(props))


def chunks_of(batch: bytes, count: int) -> list[int]:
    """How many fresh copies to prepare per chunk, so a chunk is ~PREP_CHUNK_BYTES."""
    per_chunk = max(1, PREP_CHUNK_BYTES // len(batch))
    sizes = [per_chunk] * (count // per_chunk)
    if count % per_chunk:
        sizes.append(count % per_chunk)
    return sizes


# -- append ------------------------------------------------------------------
def paired_appends(
    raw_path: Path, log: Log, copy_log: Log, batch: bytes, count: int
) -> dict[str, float]:
    """Seconds spent in raw os.write, append_as_leader, and append_as_leader(bytearray(b)).

    The three runs are interleaved a chunk (~8 MiB) at a time, in rotating order,
    so that they meet the same page-cache conditions (see the module docstring).
    The fresh copies for the first two are made untimed (``copying``); the third
    copies inline.
    """
    fd = os.open(raw_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
    write, append, append_copy = os.write, log.append_as_leader, copy_log.append_as_leader
    clock = time.perf_counter
    seconds = dict.fromkeys(("raw_write", "append", "append_with_copy", "copying"), 0.0)
    try:
        for chunk, n in enumerate(chunks_of(batch, count)):
            start = clock()
            copies = [bytearray(batch) for _ in range(n)]
            seconds["copying"] += clock() - start

            def raw_write(copies: list[bytearray] = copies) -> None:
                for data in copies:
                    write(fd, data)

            def log_append(copies: list[bytearray] = copies) -> None:
                for data in copies:
                    append(data)

            def log_append_with_copy(n: int = n) -> None:
                for _ in range(n):
                    append_copy(bytearray(batch))

            steps = [
                ("raw_write", raw_write),
                ("append", log_append),
                ("append_with_copy", log_append_with_copy),
            ]
            rotation = chunk % len(steps)
            for name, step in steps[rotation:] + steps[:rotation]:
                start = clock()
                step()
                seconds[name] += clock() - start
    finally:
        os.close(fd)
        raw_path.unlink()
    return seconds


# -- read ----------------------------------------------------------------------
class Drain:
    """A socket pair whose reading end a thread empties into one preallocated buffer."""

    def __init__(self, socket_buffer: int) -> None:
        self.sender, self.receiver = socket.socketpair()
        if socket_buffer:
            self.sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, socket_buffer)
            self.receiver.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, socket_buffer)
        self.received = 0
        self._thread = threading.Thread(target=self._run, name="drain", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        buffer = memoryview(bytearray(4 * MIB))
        recv_into = self.receiver.recv_into
        total = 0
        while True:
            n = recv_into(buffer)
            if not n:
                break
            total += n
        self.received = total

    def finish(self) -> int:
        """Close the sending side, wait for the reader to see EOF; return bytes it read."""
        self.sender.shutdown(socket.SHUT_WR)
        self._thread.join()
        self.sender.close()
        self.receiver.close()
        return self.received


def send_region(out_fd: int, in_fd: int, position: int, length: int) -> None:
    while length:
        sent = os.sendfile(out_fd, in_fd, position, length)
        if sent <= 0:
            raise OSError("sendfile sent nothing")
        position += sent
        length -= sent


def time_log_sendfile(
    log: Log, batch_size: int, records: int, fetch_bytes: int, socket_buffer: int
) -> tuple[float, int, int, float]:
    """Read the log front to back: (seconds, bytes received, fetches, seconds in Log.read).

    Batches are uniform, so the next fetch offset is the first batch not wholly in
    the region (as a consumer drops a partial trailing batch and asks again).
    """
    drain = Drain(socket_buffer)
    out_fd = drain.sender.fileno()
    offset, end = log.log_start_offset, log.log_end_offset
    fetches = sent = 0
    in_read = 0.0
    clock = time.perf_counter
    start = clock()
    while offset < end:
        before = clock()
        region = log.read(offset, fetch_bytes).region
        in_read += clock() - before
        send_region(out_fd, region.fd, region.position, region.length)
        sent += region.length
        offset += max(region.length // batch_size, 1) * records
        fetches += 1
    received = drain.finish()
    elapsed = clock() - start
    assert received == sent, f"the reader got {received} of {sent} bytes"
    return elapsed, received, fetches, in_read


def time_raw_sendfile(paths: list[Path], fetch_bytes: int, socket_buffer: int) -> tuple[float, int]:
    drain = Drain(socket_buffer)
    out_fd = drain.sender.fileno()
    fds = [os.open(p, os.O_RDONLY) for p in paths]
    try:
        start = time.perf_counter()
        for fd in fds:
            size = os.fstat(fd).st_size
            for position in range(0, size, fetch_bytes):
                send_region(out_fd, fd, position, min(fetch_bytes, size - position))
        received = drain.finish()
        return time.perf_counter() - start, received
    finally:
        for fd in fds:
            os.close(fd)


# -- latency -------------------------------------------------------------------
def per_call_ns(fn: Callable[[int], object], arguments: list[int]) -> list[int]:
    clock = time.perf_counter_ns
    out = []
    for argument in arguments:
        start = clock()
        fn(argument)
        out.append(clock() - start)
    return out


def mean_ns(fn: Callable[[int], object], arguments: list[int]) -> float:
    start = time.perf_counter_ns()
    for argument in arguments:
        fn(argument)
    return (time.perf_counter_ns() - start) / len(arguments)


def timer_overhead_ns(samples: int = 100_000) -> float:
    clock = time.perf_counter_ns
    deltas = []
    for _ in range(samples):
        start = clock()
        deltas.append(clock() - start)
    return statistics.median(deltas)


def percentile(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))])


# -- phases --------------------------------------------------------------------
def median_of(runs: int, measure: Callable[[], tuple[float, int]]) -> tuple[float, float, float]:
    """(median, min, max) of ``bytes / seconds`` over ``runs`` calls of ``measure``."""
    rates = []
    for _ in range(runs):
        seconds, moved = measure()
        rates.append(moved / seconds)
    return statistics.median(rates), min(rates), max(rates)


def append_and_read_phase(
    label: str,
    records: int,
    *,
    root: Path,
    sizes: Sizes,
    args: argparse.Namespace,
    results: Results,
) -> None:
    batch = make_batch(records)
    count = max(1, sizes.append_volume // len(batch))
    total = count * len(batch)
    print(
        f"[{label}] {count:,} batches of {len(batch):,} B ({records} records of 1 KiB), "
        f"{total / MIB:,.0f} MiB per run",
        flush=True,
    )

    directory = root / f"bench-{records}r-0"
    copy_directory = root / f"bench-{records}r-copy-0"
    log = open_log(directory, sizes)
    copy_log = open_log(copy_directory, sizes)
    seconds = paired_appends(root / "scratch.raw", log, copy_log, batch, count)
    assert log.log_end_offset == copy_log.log_end_offset == count * records, "offsets lost"
    segments = len(log.segments)
    copy_log.close()
    shutil.rmtree(copy_directory)

    raw = total / seconds["raw_write"] / 1e6
    results.add(
        Row(
            f"raw os.write, {label} batches",
            raw,
            "MB/s",
            note="ceiling: same bytes, same time, no log",
        )
    )
    rate = total / seconds["append"] / 1e6
    results.add(
        Row(
            f"append_as_leader, {label} batches",
            rate,
            "MB/s",
            ">= 500 MB/s",
            rate >= 500,
            f"{count / seconds['append']:,.0f} batches/s, "
            f"{rate / raw:.0%} of raw, {segments} segments",
        )
    )
    rate = total / seconds["append_with_copy"] / 1e6
    results.add(
        Row(
            f"append_as_leader(bytearray(b)), {label}",
            rate,
            "MB/s",
            ">= 500 MB/s",
            rate >= 500,
            f"{count / seconds['append_with_copy']:,.0f} batches/s, copy timed",
        )
    )
    overhead = (seconds["append"] - seconds["raw_write"]) / count * 1e6
    results.add(
        Row(
            f"  log cost over raw write, {label}",
            overhead,
            "µs/batch",
            note="validation, offsets, indexes, bookkeeping",
        )
    )
    results.add(
        Row(
            f"  bytearray(b) copy, {label}",
            seconds["copying"] / count * 1e6,
            "µs/batch",
            note="made outside the timed loops",
        )
    )

    fetch_stats: list[tuple[int, float]] = []

    def log_sendfile() -> tuple[float, int]:
        elapsed, received, fetches, in_read = time_log_sendfile(
            log, len(batch), records, args.fetch_bytes, args.socket_buffer
        )
        fetch_stats.append((fetches, in_read))
        return elapsed, received

    median, low, high = median_of(args.repeat, log_sendfile)
    fetches, in_read = fetch_stats[-1]
    results.add(
        Row(
            f"Log.read + os.sendfile, {label} log",
            median / 1e9,
            "GB/s",
            ">= 1 GB/s",
            median >= 1e9,
            f"{low / 1e9:.2f}-{high / 1e9:.2f} over {args.repeat} runs; "
            f"{fetches:,} fetches, Log.read {in_read / fetches * 1e6:.1f} µs each",
        )
    )
    paths = [s.log_path for s in log.segments]
    median, low, high = median_of(
        args.repeat, lambda: time_raw_sendfile(paths, args.fetch_bytes, args.socket_buffer)
    )
    results.add(
        Row(
            f"raw os.sendfile, {label} log",
            median / 1e9,
            "GB/s",
            note=f"{low / 1e9:.2f}-{high / 1e9:.2f}; same files and chunks, no Log.read",
        )
    )

    end, config = log.log_end_offset, log.config
    log.close()

    def recover() -> tuple[float, int]:
        start = time.perf_counter()
        recovered = load_log(directory, config, clean_shutdown=False, recovery_point=0)
        elapsed = time.perf_counter() - start
        assert recovered.log_end_offset == end, "recovery changed the log end offset"
        recovered.close()
        return elapsed, total

    median, low, high = median_of(args.repeat, recover)
    results.add(
        Row(
            f"recovery scan, {label} log",
            median / 1e6,
            "MB/s",
            note=f"{low / 1e6:,.0f}-{high / 1e6:,.0f}; load_log(clean_shutdown=False, "
            "recovery_point=0), hot cache",
        )
    )
    shutil.rmtree(directory)


def index_phase(root: Path, sizes: Sizes, results: Results) -> None:
    records = 4
    batch = make_batch(records)
    count = sizes.index_batches
    print(f"[index] {count:,} batches of {len(batch):,} B, index.interval.bytes=4096", flush=True)
    directory = root / "bench-index-0"
    log = open_log(
        directory, sizes, **{"segment.bytes": str(1024**3), "index.interval.bytes": "4096"}
    )
    append = log.append_as_leader
    appending = 0.0
    for n in chunks_of(batch, count):
        copies = [bytearray(batch) for _ in range(n)]
        start = time.perf_counter()
        for data in copies:
            append(data)
        appending += time.perf_counter() - start
    results.add(
        Row(
            f"append_as_leader, {len(batch) / KIB:.1f} KiB batches",
            count * len(batch) / appending / 1e6,
            "MB/s",
            note=f"{count / appending:,.0f} batches/s (filling the index)",
        )
    )

    segment = log.active_segment
    index = segment.offset_index
    entries = index.entries
    rng = random.Random(7)
    offsets = [rng.randrange(segment.base_offset, log.log_end_offset) for _ in range(sizes.lookups)]
    overhead = timer_overhead_ns()

    lookup = index.lookup
    mean_ns(lookup, offsets[:1000])  # warm up
    samples = per_call_ns(lookup, offsets)
    mean = mean_ns(lookup, offsets)
    p50, p99 = statistics.median(samples) / 1e3, percentile(samples, 0.99) / 1e3
    results.add(
        Row(
            "OffsetIndex.lookup p50",
            p50,
            "µs",
            "<= 20 µs",
            p50 <= 20,
            f"{entries:,} entries, {len(offsets):,} random lookups",
        )
    )
    results.add(
        Row(
            "OffsetIndex.lookup p99",
            p99,
            "µs",
            "<= 20 µs",
            p99 <= 20,
            f"per-call timer cost {overhead:.0f} ns included",
        )
    )
    results.add(
        Row(
            "OffsetIndex.lookup mean",
            mean / 1e3,
            "µs",
            "<= 20 µs",
            mean / 1e3 <= 20,
            "tight loop, no per-call timer",
        )
    )

    def read(offset: int) -> object:
        return log.read(offset, MIB)

    samples = per_call_ns(read, offsets)
    mean = mean_ns(read, offsets)
    p50, p99 = statistics.median(samples) / 1e3, percentile(samples, 0.99) / 1e3
    results.add(
        Row("Log.read translation p50", p50, "µs", note="index lookup + header preads, 1 MiB max")
    )
    results.add(Row("Log.read translation p99", p99, "µs"))
    results.add(Row("Log.read translation mean", mean / 1e3, "µs", note="tight loop"))

    config = log.config
    log.close()
    start = time.perf_counter()
    reopened = load_log(directory, config, clean_shutdown=True, recovery_point=log.log_end_offset)
    results.add(
        Row(
            "load_log after clean shutdown",
            (time.perf_counter() - start) * 1e3,
            "ms",
            note=f"active segment's index sanity check, {entries:,} entries",
        )
    )
    reopened.close()
    shutil.rmtree(directory)


def machine() -> str:
    model = "?"
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3
    return (
        f"{os.cpu_count()} CPUs, {model}, {memory:.1f} GiB RAM, "
        f"Python {platform.python_version()}, Linux {platform.release()}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="smaller volumes")
    parser.add_argument("--dir", default="/tmp", help="parent of the temporary log directory")
    parser.add_argument("--fetch-bytes", type=int, default=MIB, help="max bytes per Log.read")
    parser.add_argument(
        "--socket-buffer",
        type=int,
        default=0,
        help="SO_SNDBUF/SO_RCVBUF of the socket pair (0: kernel default)",
    )
    parser.add_argument(
        "--volume-mib", type=int, default=0, help="MiB per append run (default 160, quick 48)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of each read and recovery")
    parser.add_argument(
        "--only", choices=("small", "large", "index"), action="append", help="run only these"
    )
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    if args.volume_mib:
        sizes = replace(sizes, append_volume=args.volume_mib * MIB)
    phases = args.only or ["small", "large", "index"]

    print(machine())
    print(
        f"{'quick' if args.quick else 'full'} run: {sizes.append_volume // MIB} MiB per append "
        f"run, segment.bytes {sizes.segment_bytes // MIB} MiB, fetches of "
        f"{args.fetch_bytes:,} B, socket buffer {args.socket_buffer or 'default'}",
        flush=True,
    )
    results = Results()
    root = Path(tempfile.mkdtemp(prefix="samsa-storage-bench-", dir=args.dir))
    started = time.perf_counter()
    try:
        if "small" in phases:
            append_and_read_phase("16 KiB", 16, root=root, sizes=sizes, args=args, results=results)
        if "large" in phases:
            append_and_read_phase("1 MiB", 1024, root=root, sizes=sizes, args=args, results=results)
        if "index" in phases:
            index_phase(root, sizes, results)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print()
    print(results.table())
    print(f"\ntotal {time.perf_counter() - started:.1f} s")
    missed = [r.name for r in results.rows if r.met is False]
    if missed:
        print("targets missed: " + "; ".join(missed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
