"""A long-running Java program the JVM compatibility tests drive: started, watched, killed.

:class:`JavaProcess` runs one of ``compat/jvm``'s programs (or one of Kafka's main classes)
with its standard output read line by line on a thread, its standard error in a file, and
its standard input kept open (the test programs run until it closes).
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from pathlib import Path

from tests.compat.jvm import java_command

from samsa.testing.waiting import wait_until


def log4j_settings(info: tuple[str, ...]) -> str:
    """Log4j 2 settings: warnings and errors on stderr, and INFO for the ``info`` loggers."""
    lines = [
        "appender.stderr.type = Console",
        "appender.stderr.name = STDERR",
        "appender.stderr.target = SYSTEM_ERR",
        "appender.stderr.layout.type = PatternLayout",
        "appender.stderr.layout.pattern = [%d{HH:mm:ss.SSS}] %-5p %c{1}: %m%n",
        "rootLogger.level = warn",
        "rootLogger.appenderRef.stderr.ref = STDERR",
    ]
    for n, name in enumerate(info):
        lines += [f"logger.l{n}.name = {name}", f"logger.l{n}.level = info"]
    return "".join(f"{line}\n" for line in lines)


class JavaProcess:
    """``main_class args…`` in its own JVM; see the module docstring."""

    def __init__(self, log: Path, main_class: str, *args: str, info: tuple[str, ...] = ()) -> None:
        """``info``: loggers (packages) to log at level INFO rather than WARN, in ``log``."""
        self.log = log
        self.command = java_command(main_class, *args)
        if info:
            settings = log.with_suffix(".log4j2.properties")
            settings.write_text(log4j_settings(info))
            self.command.insert(1, f"-Dlog4j2.configurationFile={settings}")
        self.lines: list[str] = []
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> JavaProcess:
        self.lines = []
        stderr = open(self.log, "a")  # noqa: SIM115 (the child holds it; closed below)
        try:
            self.process = subprocess.Popen(
                self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                text=True, start_new_session=True,
            )  # fmt: skip
        finally:
            stderr.close()
        threading.Thread(target=self._read, args=(self.process, self.lines), daemon=True).start()
        return self

    @staticmethod
    def _read(process: subprocess.Popen[str], lines: list[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line.rstrip("\n"))

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def printed(self, line: str) -> bool:
        return line in self.lines

    def wait_for(self, line: str, timeout: float) -> None:
        """Wait until the program printed ``line``; fail at once if it exits first."""

        def seen() -> bool:
            if line in self.lines:
                return True
            assert self.running, f"exited before printing {line!r}:\n{self.details()}"
            return False

        wait_until(seen, f"{line!r} printed", timeout=timeout)

    def details(self) -> str:
        """What it printed, and the end of its log, for a failure message."""
        log = self.log.read_text(errors="replace")[-6000:] if self.log.exists() else ""
        return "\n".join(self.lines[-50:]) + "\n--- log ---\n" + log

    def kill(self) -> None:
        """SIGKILL: no shutdown hook, no clean close."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def stop(self, timeout: float = 90) -> int:
        """Close its standard input (the programs' cue to close cleanly) and wait for it."""
        assert self.process is not None and self.process.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.process.stdin.close()
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def close(self) -> None:
        """Kill it if it still runs (a test's cleanup)."""
        if self.running:
            self.kill()
