"""``python -m samsa serve`` as a user runs it: configuration errors, the ready line, signals."""

from __future__ import annotations

import re
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

READY = re.compile(r"ready on (\S+):(\d+)")
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
CONFIG_ERROR_EXIT_WITHIN_S = 10
READY_WITHIN_S = 20
STOP_WITHIN_S = 20


def _serve_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "samsa", "serve", *args]


def _run_to_exit(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a serve command expected to stop on its own; its output is stdout + stderr."""
    return subprocess.run(
        args,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=CONFIG_ERROR_EXIT_WITHIN_S,
        check=False,
    )


class ServeProcess:
    """A ``samsa serve`` process whose output goes to a file the test can read."""

    def __init__(self, args: list[str], cwd: Path) -> None:
        self.output_path = cwd / "serve.out"
        with open(self.output_path, "wb") as output:
            self.process = subprocess.Popen(args, cwd=cwd, stdout=output, stderr=subprocess.STDOUT)

    @property
    def output(self) -> str:
        return self.output_path.read_text(errors="replace")

    def wait_ready(self) -> tuple[str, int]:
        """Wait for the ready line; return the host and port it names."""
        deadline = time.monotonic() + READY_WITHIN_S
        while time.monotonic() < deadline:
            match = READY.search(self.output)
            if match:
                return match.group(1), int(match.group(2))
            if self.process.poll() is not None:
                raise AssertionError(f"exited with {self.process.returncode}:\n{self.output}")
            time.sleep(0.02)
        raise AssertionError(f"no ready line after {READY_WITHIN_S} s:\n{self.output}")

    def signal_and_wait(self, signum: int) -> int:
        self.process.send_signal(signum)
        return self.process.wait(STOP_WITHIN_S)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def serve_processes() -> Iterator[list[ServeProcess]]:
    """Serve processes a test starts; any still running at the end are killed."""
    started: list[ServeProcess] = []
    yield started
    for serve in started:
        serve.kill()


def _write_properties(path: Path, data_dir: Path, *extra: str) -> Path:
    lines = ["listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={data_dir}", *extra]
    path.write_text("# written by test_serve_cli\n" + "\n".join(lines) + "\n")
    return path


def _api_versions_v0_answers(host: str, port: int) -> bool:
    """Send ApiVersions v0 and check the answer echoes the correlation id with no error."""
    client_id = b"serve-cli-test"
    request = struct.pack(">hhih", 18, 0, 1234, len(client_id)) + client_id
    with socket.create_connection((host, port), timeout=5) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        data = b""
        while len(data) < 10:
            chunk = sock.recv(4096)
            if not chunk:
                return False
            data += chunk
    _, correlation_id, error_code = struct.unpack_from(">iih", data)
    return correlation_id == 1234 and error_code == 0


# -- configuration errors --------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_an_unknown_override_key_stops_start_up_naming_the_key(tmp_path: Path) -> None:
    result = _run_to_exit(
        _serve_command(
            "--override", f"log.dirs={tmp_path / 'data'}", "--override", "no.such.key=1"
        ),
        tmp_path,
    )
    assert result.returncode != 0
    assert "no.such.key" in result.stdout
    assert not READY.search(result.stdout)


@pytest.mark.timeout(30)
def test_an_invalid_override_value_stops_start_up_naming_the_key(tmp_path: Path) -> None:
    result = _run_to_exit(
        _serve_command(
            "--override", f"log.dirs={tmp_path / 'data'}", "--override", "num.partitions=abc"
        ),
        tmp_path,
    )
    assert result.returncode != 0
    assert "num.partitions" in result.stdout
    assert not READY.search(result.stdout)


@pytest.mark.timeout(30)
def test_an_unknown_key_in_the_config_file_stops_start_up_naming_the_key(tmp_path: Path) -> None:
    config = _write_properties(tmp_path / "server.properties", tmp_path / "data", "bogus.key=2")
    result = _run_to_exit(_serve_command("--config", str(config)), tmp_path)
    assert result.returncode != 0
    assert "bogus.key" in result.stdout


@pytest.mark.timeout(30)
def test_a_missing_config_file_stops_start_up_naming_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "absent.properties"
    result = _run_to_exit(_serve_command("--config", str(missing)), tmp_path)
    assert result.returncode != 0
    assert str(missing) in result.stdout


@pytest.mark.timeout(30)
def test_an_override_without_equals_stops_start_up_naming_it(tmp_path: Path) -> None:
    result = _run_to_exit(
        _serve_command("--override", f"log.dirs={tmp_path / 'data'}", "--override", "justakey"),
        tmp_path,
    )
    assert result.returncode != 0
    assert "justakey" in result.stdout


# -- a running broker ------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_config_file_starts_a_broker_that_sigterm_stops_cleanly(
    tmp_path: Path, serve_processes: list[ServeProcess]
) -> None:
    data_dir = tmp_path / "data"
    config = _write_properties(tmp_path / "server.properties", data_dir)
    serve = ServeProcess(_serve_command("--config", str(config)), tmp_path)
    serve_processes.append(serve)
    serve.wait_ready()
    assert serve.signal_and_wait(signal.SIGTERM) == 0, serve.output
    assert (data_dir / CLEAN_SHUTDOWN_MARKER).exists()


@pytest.mark.timeout(60)
def test_port_0_is_reported_as_the_real_port_in_the_ready_line(
    tmp_path: Path, serve_processes: list[ServeProcess]
) -> None:
    config = _write_properties(tmp_path / "server.properties", tmp_path / "data")
    serve = ServeProcess(_serve_command("--config", str(config)), tmp_path)
    serve_processes.append(serve)
    host, port = serve.wait_ready()
    assert host == "127.0.0.1"
    assert port != 0
    assert _api_versions_v0_answers(host, port)


@pytest.mark.timeout(60)
def test_sigint_stops_the_broker_cleanly(
    tmp_path: Path, serve_processes: list[ServeProcess]
) -> None:
    data_dir = tmp_path / "data"
    config = _write_properties(tmp_path / "server.properties", data_dir)
    serve = ServeProcess(_serve_command("--config", str(config)), tmp_path)
    serve_processes.append(serve)
    serve.wait_ready()
    assert serve.signal_and_wait(signal.SIGINT) == 0, serve.output
    assert (data_dir / CLEAN_SHUTDOWN_MARKER).exists()


@pytest.mark.timeout(60)
def test_an_override_wins_over_the_config_file(
    tmp_path: Path, serve_processes: list[ServeProcess]
) -> None:
    file_dir, override_dir = tmp_path / "from-file", tmp_path / "from-override"
    config = _write_properties(tmp_path / "server.properties", file_dir)
    serve = ServeProcess(
        _serve_command("--config", str(config), "--override", f"log.dirs={override_dir}"),
        tmp_path,
    )
    serve_processes.append(serve)
    serve.wait_ready()
    assert serve.signal_and_wait(signal.SIGTERM) == 0, serve.output
    assert (override_dir / CLEAN_SHUTDOWN_MARKER).exists()
    assert not (file_dir / CLEAN_SHUTDOWN_MARKER).exists()
