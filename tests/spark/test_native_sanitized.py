"""The C helper under AddressSanitizer and UndefinedBehaviorSanitizer.

Built here with ``-fsanitize=address,undefined`` and fed random and mutated records,
random columns with bad positions and sizes, and buffers that are too small, in a
Python whose objects come from ``malloc`` (``PYTHONMALLOC=malloc``) so a read past any
buffer is caught. Any report fails the test (a slow test: a minute or two).
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

SOURCE = Path(__file__).resolve().parents[2] / "src" / "samsa" / "records" / "_native.c"

FUZZ = textwrap.dedent(
    """
    import importlib.util, random, sys
    import numpy as np

    spec = importlib.util.spec_from_file_location("samsa.records._native", sys.argv[1])
    native = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(native)
    rng = random.Random(int(sys.argv[2]))
    calls = 0
    for _ in range(40_000):
        n = rng.randrange(0, 80)
        if rng.random() < 0.5:
            records = bytes(rng.getrandbits(8) for _ in range(n))
        else:
            records = bytes(rng.choice([0, 1, 2, 6, 12, 14, 0x7F, 0x80, 0xFF]) for _ in range(n))
        count = rng.randrange(0, 8)
        for fields in (np.empty((9, count), np.int64), np.empty((9, max(count - 1, 0)), np.int64)):
            try:
                native.scan_records(records, count, fields)
            except ValueError:
                pass
            calls += 1
    for _ in range(20_000):
        rows = rng.randrange(0, 6)
        data = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 40)))
        def column(low, high):
            return np.array([rng.randrange(low, high) for _ in range(rows)], np.int64)
        key_sizes, key_starts = column(-3, 12), column(-2, 45)
        value_sizes, value_starts = column(-3, 12), column(-2, 45)
        n = rng.randrange(0, 6)
        order = np.array([rng.randrange(-1, rows + 1) for _ in range(n)], np.int64)
        deltas = np.array([rng.randrange(-5, 1 << 40) for _ in range(n)], np.int64)
        try:
            native.encode_records(order, deltas, key_starts, key_sizes, data, value_starts,
                                  value_sizes, data, np.empty(n + 1, np.int64))
        except ValueError:
            pass
        try:
            native.murmur2_partitions(key_starts, key_sizes, data, rng.randrange(-1, 5),
                                      np.empty(rows, np.int64))
        except ValueError:
            pass
        entries = rng.randrange(0, 6)
        def entry_column(low, high):
            return np.array([rng.randrange(low, high) for _ in range(entries)], np.int64)
        try:
            native.encode_records_with_headers(
                order, deltas, key_starts, key_sizes, data, value_starts, value_sizes, data,
                column(-1, 6), column(-1, 4), entry_column(-2, 45), entry_column(-2, 12), data,
                entry_column(-2, 45), entry_column(-3, 12), data, np.empty(n + 1, np.int64))
        except ValueError:
            pass
        calls += 3
    for _ in range(20_000):
        size = rng.randrange(60)
        records = bytes(rng.choice([0, 1, 2, 4, 6, 0x61, 0x7F, 0x80]) for _ in range(size))
        n = rng.randrange(0, 5)
        header_at = np.array([rng.randrange(-2, 62) for _ in range(n)], np.int64)
        record_end = np.array([rng.randrange(-2, 64) for _ in range(n)], np.int64)
        counts = np.empty(n, np.int64)
        for spans in (np.empty(0, np.int64), np.empty((4, rng.randrange(0, 6)), np.int64)):
            native.scan_headers(records, header_at, record_end, counts, spans)
            calls += 1
    print("calls", calls)
    """
)


def _runtime(name: str) -> str:
    found = subprocess.run(
        ["gcc", f"-print-file-name={name}"], capture_output=True, text=True, check=True
    ).stdout.strip()
    if not os.path.isabs(found):
        pytest.fail(f"gcc has no {name}: install gcc (its sanitizer runtimes come with it)")
    return found


def test_the_c_helper_reads_and_writes_only_its_buffers_on_any_input(tmp_path: Path) -> None:
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    built = tmp_path / f"_native{suffix}"
    subprocess.run(
        ["gcc", "-O1", "-g", "-fPIC", "-shared", "-fno-omit-frame-pointer",
         "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
         f"-I{sysconfig.get_paths()['include']}", str(SOURCE), "-o", str(built)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    env = {
        **os.environ,
        "LD_PRELOAD": f"{_runtime('libasan.so')} {_runtime('libubsan.so')}",
        "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:exitcode=66",
        "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
        "PYTHONMALLOC": "malloc",
    }
    fuzz = tmp_path / "fuzz.py"
    fuzz.write_text(FUZZ)
    ran = subprocess.run(
        [sys.executable, str(fuzz), str(built), "7"],
        env=env, capture_output=True, text=True, timeout=840, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-4000:]
    assert "Sanitizer" not in ran.stderr and "runtime error" not in ran.stderr, ran.stderr[-4000:]
    assert ran.stdout.strip() == "calls 180000"
