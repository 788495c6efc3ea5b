"""The README as a newcomer follows it: every example in the order written, against one
fresh broker started as ``make run`` starts it, each compared with the output shown under it.

How the README shows output, and so how it is read here:

- ``sh`` blocks: the ``#`` lines right under a command are all it prints — on stdout, or
  on stderr for a line ending in "(on stderr)"; a ``#`` line after a blank line describes
  the next command. ``make …`` and ``source .venv/bin/activate`` are the set-up this test
  environment has already done; every other command runs in bash with the virtualenv's
  ``bin`` on PATH, in a directory whose ``./data`` is the broker's, as after ``make run``.
- ``python`` blocks: the comment on a line that calls ``print`` is what that line prints,
  and so are the comment lines right under it and the comment lines ending the block;
  together they are everything the block prints.
- A block without a language in a walked section is the broker's log.
- What differs from run to run is matched by its shape: ``...`` or ``…`` any text (a
  line that is just ``...``: any number of other lines, such as a tool's progress reports),
  and 13-digit timestamps, Kafka tools' dates, topic ids, decimal figures, a crc and
  "N ms" whatever their value. Lines are compared as a multiset (a consumer reading several
  partitions may print them in either order), tabs and runs of spaces as one column break.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kio.schema.index import api_key_map

from samsa.broker.config import BrokerConfig
from samsa.broker.server import Broker
from samsa.testing import BrokerProcess, start_broker

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
README_BOOTSTRAP = "127.0.0.1:9092"
README_REGISTRY = "http://127.0.0.1:8081"
# A command of the README finishes in seconds; this only stops a hang.
COMMAND_TIMEOUT_S = 120
SET_UP = ("make ", "source .venv/bin/activate")

# Sections whose examples a newcomer runs, top to bottom, against the broker of `make run`.
WALKED = {
    "Set-up: two commands",
    "Using the broker",
    "Python clients",
    "Schema registry",
    "Command-line tools",
    "Using the storage library",
}
# Sections whose blocks are not run here, and why.
NOT_WALKED = {
    "Testing your own Kafka code": "a test function for the reader's own suite",
    "Spark: the `samsa` data source and the click-events pipeline":
        "needs a Spark session (tests/spark runs the source and the sink); the pipeline "
        "and its consumer run for minutes",
    "Layout": "file trees",
    "Securing samsa": "certificates, host names and passwords of the reader's own; "
        "tests/security runs these settings with certificates it makes",
    "Web console": "a server that runs until stopped; tests/console drives every page in "
        "headless Chromium",
    "ACLs": "needs a broker started with an authorizer; tests/integration/test_acls.py runs "
        "samsa acls and admin clients against one",
    "Metrics: Prometheus, Grafana and `samsa top`": "a second broker with metrics.listeners "
        "and a view of the groups the walked examples left; tests/integration/test_metrics.py "
        "scrapes a broker and runs samsa top --once after known traffic",
    "A replicated cluster": "ZooKeeper and three brokers on ports of their own; tests/cluster "
        "runs clusters, and samsa.testing.run_cluster is what make cluster starts",
}  # fmt: skip

_VARYING = re.compile(
    r"(?P<any>\.\.\.|…)"
    r"|(?P<date>\b\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}\b)"
    r"|(?P<uuid>\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b)"
    r"|(?P<timestamp>\b\d{13}\b)"
    r"|(?P<decimal>\b\d+\.\d+\b)"
    r"|(?<=crc: )(?P<crc>\d+)"
    r"|(?P<ms>\b\d+(?= ms\b))"
)
_SHAPES = {
    "any": ".*?",
    "date": r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}",
    "uuid": r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    "timestamp": r"\d{13}",
    "decimal": r"\d+\.\d+",
    "crc": r"\d+",
    "ms": r"\d+",
}
_ON_STDERR = re.compile(r"\s*\(on stderr\)$")


@dataclass
class Block:
    section: str
    language: str
    text: str
    line: int

    def where(self) -> str:
        return f"README.md:{self.line} ({self.section})"


@dataclass
class Command:
    text: str
    line: int
    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)


def readme_blocks() -> list[Block]:
    blocks: list[Block] = []
    section = ""
    lines = README.read_text().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(("## ", "### ")):
            section = line.split(" ", 1)[1]
        elif line.startswith("```"):
            start, body = i + 1, []
            i += 1
            while lines[i] != "```":
                body.append(lines[i])
                i += 1
            blocks.append(Block(section, line[3:].strip(), "\n".join(body), start))
        i += 1
    return blocks


def shell_commands(block: Block) -> list[Command]:
    commands: list[Command] = []
    current: Command | None = None
    lines = block.text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            current = None  # a comment after a blank line describes what follows
        elif line.startswith("#"):
            if current is not None:
                shown = line[2:] if line.startswith("# ") else line[1:]
                if _ON_STDERR.search(shown):
                    current.stderr.append(_ON_STDERR.sub("", shown))
                else:
                    current.stdout.append(shown)
        else:
            text, first = line, block.line + i
            while text.endswith("\\"):
                i += 1
                text += "\n" + lines[i]
            current = Command(text, first)
            commands.append(current)
        i += 1
    return commands


def python_output(code: str) -> list[str]:
    """What a python block says it prints (see the module docstring)."""
    shown: list[str] = []
    lines = code.splitlines()
    code_lines = [n for n, line in enumerate(lines) if line.strip() and not _is_comment(line)]
    last_code = code_lines[-1] if code_lines else -1
    after_print = False
    for n, line in enumerate(lines):
        if _is_comment(line):
            if after_print or n > last_code:
                shown.append(line.strip()[1:].strip())
            continue
        after_print = "print(" in line
        if after_print and "  # " in line:
            shown.append(line.split("  # ", 1)[1].strip())
    return shown


def _is_comment(line: str) -> bool:
    return line.strip().startswith("#")


def _columns(line: str) -> str:
    return re.sub(r"\t| {2,}", "\t", line.strip())


def shape(shown: str) -> re.Pattern[str]:
    """The pattern a printed line must match in full to be the README's ``shown`` line."""
    text = _columns(shown)
    parts, position = [], 0
    for match in _VARYING.finditer(text):
        parts += [re.escape(text[position : match.start()]), _SHAPES[str(match.lastgroup)]]
        position = match.end()
    parts.append(re.escape(text[position:]))
    return re.compile("".join(parts))


def mismatch(shown: list[str], printed: list[str]) -> str | None:
    """None when each shown line matches its own printed line and nothing else is printed
    (anything else may be, when a shown line is just ``...``)."""
    open_ended = "..." in shown
    shown = [line for line in shown if line != "..."]
    patterns = [shape(line) for line in shown]
    actual = [_columns(line) for line in printed]
    edges = [[j for j, a in enumerate(actual) if p.fullmatch(a)] for p in patterns]
    owner: dict[int, int] = {}

    def assign(i: int, seen: set[int]) -> bool:  # Kuhn's augmenting path
        for j in edges[i]:
            if j not in seen:
                seen.add(j)
                if j not in owner or assign(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    matched = sum(assign(i, set()) for i in range(len(patterns)))
    if matched == len(patterns) and (open_ended or matched == len(actual)):
        return None
    missing = [shown[i] for i in range(len(patterns)) if i not in owner.values()]
    extra = [printed[j] for j in range(len(actual)) if j not in owner]
    return (
        "\n  shown but not printed: " + repr(missing) + "\n  printed but not shown: " + repr(extra)
    )


@pytest.fixture
def newcomer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[BrokerProcess]:
    """A broker as `make run` starts it (data in ./data), on a free port, in ``tmp_path``."""
    monkeypatch.chdir(tmp_path)
    broker = start_broker(Path("data"), schema_registry=True)
    try:
        yield broker
    finally:
        broker.stop()


def addresses_of(broker: BrokerProcess, text: str) -> str:
    """The README's text with the addresses of ``make run`` replaced by ``broker``'s."""
    return text.replace(README_BOOTSTRAP, broker.bootstrap).replace(
        README_REGISTRY, broker.schema_registry_url
    )


def run_shell(block: Block, broker: BrokerProcess) -> None:
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "samsa").exists(), f"no samsa command next to {sys.executable}"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    for command in shell_commands(block):
        if command.text.startswith(SET_UP):
            assert block.section == "Set-up: two commands", f"README.md:{command.line}"
            continue
        if command.text.startswith("kcat"):
            assert shutil.which("kcat"), "kcat is not installed: `make test` installs it"
        result = subprocess.run(
            ["bash", "-o", "pipefail", "-c", addresses_of(broker, command.text)],
            capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False, env=env,
        )  # fmt: skip
        where = f"README.md:{command.line}: {command.text}"
        assert result.returncode == 0, f"{where}\nexit {result.returncode}\n{result.stderr}"
        for stream, shown, printed in (
            ("stdout", command.stdout, result.stdout),
            ("stderr", command.stderr, result.stderr),
        ):
            problem = mismatch(shown, printed.splitlines())
            assert problem is None, f"{where}\n{stream}:{problem}"


def run_python(block: Block, broker: BrokerProcess, capsys: pytest.CaptureFixture[str]) -> None:
    code = addresses_of(broker, block.text)
    before = sorted(os.listdir("."))
    namespace: dict[str, object] = {}
    exec(compile(code, str(README), "exec"), namespace)
    printed = capsys.readouterr().out.splitlines()
    problem = mismatch(python_output(block.text), printed)
    assert problem is None, f"{block.where()}{problem}"
    # No example leaves files where the newcomer runs it: ./data is the broker's.
    assert sorted(os.listdir(".")) == before, block.where()
    data_dir = namespace.get("data_dir")
    if isinstance(data_dir, Path):
        assert not data_dir.resolve().is_relative_to(Path.cwd().resolve()), block.where()
        assert (data_dir / "orders-0" / f"{0:020d}.log").stat().st_size > 0
        assert (data_dir / ".kafka_cleanshutdown").exists()
        shutil.rmtree(data_dir)


def check_broker_log(block: Block, broker: BrokerProcess) -> None:
    log = broker.log_path.read_text().splitlines()
    for shown in block.text.replace(README_BOOTSTRAP, broker.bootstrap).splitlines():
        pattern = shape(shown)
        assert any(pattern.fullmatch(_columns(line)) for line in log), (
            f"{block.where()}: no line of the broker's log is {shown!r}\n" + "\n".join(log)
        )


def test_the_readme_sections_are_all_walked_or_said_why_not() -> None:
    sections = {block.section for block in readme_blocks()}
    assert sections == WALKED | set(NOT_WALKED)


def test_every_file_the_readme_names_is_in_the_repository() -> None:
    text = README.read_text()
    named = set(re.findall(r"\]\(([^)#\s]+)\)", text))  # link targets
    named |= {
        path
        for path in re.findall(r"`([^`\s]+)`", text)
        if path.endswith((".md", ".py"))
        or path.split("/")[0] in {"src", "tests", "docs", "bench", "examples", ".ci"}
    }
    assert named, "no file names found: the pattern no longer fits the README"
    assert sorted(path for path in named if not (ROOT / path).exists()) == []


def test_the_readme_examples_run_in_order_and_print_what_the_readme_shows(
    newcomer: BrokerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    for block in readme_blocks():
        if block.section not in WALKED:
            continue
        if block.language == "sh":
            run_shell(block, newcomer)
        elif block.language == "python":
            run_python(block, newcomer, capsys)
        else:
            assert block.language == "", block.where()
            check_broker_log(block, newcomer)


def test_the_readme_names_every_served_api_with_the_versions_the_broker_serves(
    tmp_path: Path,
) -> None:
    names = {key: "".join(w.capitalize() for w in n.split("_")) for key, n in api_key_map.items()}
    registry = Broker(BrokerConfig.load(None, [f"log.dirs={tmp_path}"])).registry
    served = {}
    for api_key, advertised_low, high in registry.advertised():
        low = next(v for v in range(advertised_low, high + 1) if registry.supports(api_key, v))
        served[names[api_key]] = f"{low}–{high}" if low != high else f"{low}"
    text = README.read_text().split("**Served today:**", 1)[1].split("\n### ", 1)[0]
    listed = {
        name: versions
        for name, versions in re.findall(r"\b([A-Za-z]+) (\d+(?:–\d+)?)\b", " ".join(text.split()))
        if name in names.values()
    }
    assert listed == served
