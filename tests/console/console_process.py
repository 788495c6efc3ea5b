"""A real ``samsa console`` process for tests, and where the browser tests find Debian's
chromium and chromium-driver and leave their screenshots."""

from __future__ import annotations

import base64
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
_CSRF = re.compile(r'<meta name="csrf-token" content="([0-9a-f]+)">')


class ConsoleProcess:
    """A running ``samsa console`` on a free port: its URL, log file and process, and a
    browser-like session with it (the session cookie, the basic login if ``auth``)."""

    def __init__(
        self,
        bootstrap: str,
        log_path: Path,
        args: Sequence[str] = (),
        auth: tuple[str, str] | None = None,
    ) -> None:
        self.log_path = log_path
        self.auth = auth
        self.cookie = ""
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

    def _send(
        self,
        path: str,
        headers: dict[str, str],
        data: bytes | None = None,
        auth: tuple[str, str] | None = None,
    ) -> tuple[int, str, str]:
        """One request, redirects not followed: (status, Location, body); keeps the
        session cookie the console sets."""

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args: object, **kwargs: object) -> None:
                return None

        sent = dict(headers)
        if self.cookie:
            sent.setdefault("Cookie", self.cookie)
        login = auth or self.auth
        if login is not None:
            user, password = login
            encoded = base64.b64encode(f"{user}:{password}".encode()).decode()
            sent.setdefault("Authorization", f"Basic {encoded}")
        request = urllib.request.Request(
            self.url + path, data=data, headers=sent, method="POST" if data is not None else "GET"
        )
        opener = urllib.request.build_opener(NoRedirect)
        try:
            with opener.open(request, timeout=60) as response:
                status, location, body = response.status, "", response.read().decode()
                cookie = response.headers.get("set-cookie")
        except urllib.error.HTTPError as exc:
            status, location = exc.code, exc.headers.get("location") or ""
            body, cookie = exc.read().decode(), exc.headers.get("set-cookie")
        if cookie:
            self.cookie = cookie.split(";", 1)[0]
        return status, location, body

    def get(
        self,
        path: str,
        headers: dict[str, str] | None = None,
        auth: tuple[str, str] | None = None,
    ) -> tuple[int, str]:
        """GET ``path``: (status, body)."""
        status, _, body = self._send(path, headers or {}, auth=auth)
        return status, body

    def csrf_token(self) -> str:
        """The session's CSRF token, from a page (which starts a session if needed); ""
        when the page has none."""
        _, body = self.get("/groups?q=%20none%20")
        match = _CSRF.search(body)
        return match.group(1) if match else ""

    def post(
        self,
        path: str,
        form: dict[str, str],
        headers: dict[str, str] | None = None,
        *,
        origin: bool = True,
        csrf: bool = True,
    ) -> tuple[int, str]:
        """POST ``form`` to ``path`` as the console's own form would (its Origin and the
        session's CSRF token, unless ``origin`` or ``csrf`` is False; ``headers`` replace
        them), without following a redirect: (status, Location or body)."""
        sent = {"Origin": self.url} if origin else {}
        sent.update(headers or {})
        fields = {"csrf_token": self.csrf_token(), **form} if csrf else form
        status, location, body = self._send(path, sent, urllib.parse.urlencode(fields).encode())
        return status, location or body

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_console(
    broker: BrokerProcess,
    tmp_path_factory: pytest.TempPathFactory,
    *args: str,
    bootstrap: str | None = None,
    auth: tuple[str, str] | None = None,
) -> ConsoleProcess:
    """``samsa console`` for ``broker`` (at ``bootstrap`` if given) with ``args``, once
    it serves; its requests log in with ``auth``."""
    return ConsoleProcess(
        bootstrap or broker.bootstrap,
        tmp_path_factory.mktemp("console-log") / "log",
        args,
        auth,
    )
