"""samsa installs and reads record batches without a C compiler.

setup.py builds the optional C helper (``samsa.records._native``) where it can; here
pip builds a wheel with a compiler that always fails, and the wheel — without the
helper — decodes batches into Arrow with its numpy path in a fresh process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]

CHECK = textwrap.dedent(
    """
    import samsa
    from samsa.records import RecordBatchBuilder, read_batch
    from samsa.records.reader import record_tuples
    from samsa.spark import columns

    assert samsa.__file__.startswith(%r), samsa.__file__
    assert columns._native is None and columns._scan is columns._scan_numpy
    builder = RecordBatchBuilder(base_offset=10)
    for i in range(50):
        builder.append(b"v%%d" %% i, key=None if i %% 3 else b"k%%d" %% i, timestamp=1_000 + i)
    batch = read_batch(builder.build())
    offsets, timestamps, _, keys, values, _ = columns.record_columns([batch])
    got = list(zip(offsets.tolist(), timestamps.tolist(), keys.to_pylist(),
                   values.to_pylist(), [()] * len(offsets)))
    assert got == list(record_tuples(batch)), got
    print("decoded", len(got))
    """
)


def test_a_wheel_built_without_a_compiler_decodes_batches_with_numpy(tmp_path: Path) -> None:
    env = {**os.environ, "CC": "/bin/false", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
        env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("samsa-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert "samsa/spark/columns.py" in names
        assert not [n for n in names if n.endswith(".so")], names
        archive.extractall(tmp_path / "installed")

    installed = str(tmp_path / "installed")
    checked = subprocess.run(
        [sys.executable, "-c", CHECK % installed],
        env={**os.environ, "PYTHONPATH": installed}, capture_output=True, text=True,
        cwd=tmp_path, timeout=60, check=False,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.strip() == "decoded 50"
