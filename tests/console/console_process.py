"""A real ``samsa console`` process for tests, and where the browser tests find Debian's
chromium and chromium-driver and leave their screenshots."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import pytest

from samsa.testing import BrokerProcess

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "build" / "console-screenshots"
"""Where the browser tests leave a screenshot of every page (git ignores build/)."""
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
_READY = re.compile(r"ready on (http://\S+)")


class ConsoleProcess:
    """A running ``samsa console`` on a free port: its URL, log file and process."""

    def __init__(self, bootstrap: str, log_path: Path, args: Sequence[str] = ()) -> None:
        self.log_path = log_path
        command = [sys.executable, "-m", "samsa", "console", "--bootstrap-server", bootstrap,
                   "--port", "0", *args]  # fmt: skip
        with open(log_path, "wb") as log_file:
            self.process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT)
        self.url = self._wait_ready(30.0)

    def _wait_ready(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = _READY.search(self.log_path.read_text(errors="replace"))
            if match:
                return match.group(1)
            if self.process.poll() is not None:
                raise RuntimeError(f"console exited:\n{self.log_path.read_text()}")
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"console not ready after {timeout} s; see {self.log_path}")

    def get(self, path: str) -> tuple[int, str]:
        """GET ``path``: (status, body)."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=60) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def post(
        self, path: str, form: dict[str, str], headers: dict[str, str] | None = None
    ) -> tuple[int, str]:
        """POST ``form`` to ``path`` without following a redirect: (status, Location or
        body)."""

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args: object, **kwargs: object) -> None:
                return None

        request = urllib.request.Request(
            self.url + path,
            data=urllib.parse.urlencode(form).encode(),
            headers=headers or {},
            method="POST",
        )
        opener = urllib.request.build_opener(NoRedirect)
        try:
            with opener.open(request, timeout=60) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers.get("location") or exc.read().decode()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_console(
    broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory, *args: str
) -> ConsoleProcess:
    """``samsa console`` for ``broker`` with ``args``, once it serves."""
    return ConsoleProcess(broker.bootstrap, tmp_path_factory.mktemp("console-log") / "log", args)
