"""The public surface: what ``samsa`` exports, and the README's example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import samsa
import samsa.storage
from samsa.testing import BrokerProcess

ROOT = Path(__file__).resolve().parents[2]


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


def test_readme_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "LogManager" in b]
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], "README.md", "exec"), {})
    assert (tmp_path / "data" / "orders-0" / f"{0:020d}.log").stat().st_size > 0
    assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()


def test_readme_client_examples_run_against_a_broker(
    samsa_broker: BrokerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Python clients", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 4
    printed = []
    for block in blocks:
        code = block.replace("127.0.0.1:9092", samsa_broker.bootstrap)
        exec(compile(code, "README.md", "exec"), {})
        printed.append(capsys.readouterr().out.splitlines())
    producer, async_producer, consumer, copier = printed
    assert producer[1].startswith("RecordMetadata(topic='payments'")
    assert producer[-1] == "2"  # two records across the three partitions
    assert len(async_producer) == 1  # partition and offset of the asyncio one
    assert consumer[0].startswith("now reading [TopicPartition(topic='payments'")
    records = consumer[1:]
    assert len(records) == 3  # the two above and the asyncio one
    assert any(line.endswith("b'customer-7' 42 EUR") for line in records)
    assert copier == ["copied 3"]
