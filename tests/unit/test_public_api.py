"""The public surface: what ``samsa`` exports, and ``samsa --version``.

The README's examples are run by tests/integration/test_readme.py.
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import samsa
import samsa.storage


def test_top_level_exports_are_pinned() -> None:
    assert sorted(samsa.__all__) == [
        "Admin",
        "AsyncAdmin",
        "AsyncConsumer",
        "AsyncProducer",
        "Consumer",
        "KafkaError",
        "Producer",
        "SamsaError",
        "__version__",
    ]


def test_storage_exports_are_pinned() -> None:
    assert sorted(samsa.storage.__all__) == [
        "AppendInfo",
        "AppendOrigin",
        "FetchData",
        "FileRegion",
        "Log",
        "LogConfig",
        "LogManager",
        "LogOffsetMetadata",
        "LogSegment",
        "load_log",
    ]


def test_samsa_version_prints_the_installed_package_version() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "samsa", "--version"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == f"samsa {importlib.metadata.version('samsa')}\n"
