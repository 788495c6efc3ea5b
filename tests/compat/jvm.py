"""Java command lines for the JVM compatibility tests.

``compat/jvm/pom.xml`` brings Kafka's Java clients, tools, Streams, Connect and broker at one
version, and compiles samsa's small Java test programs beside them. ``make jvm`` (a
prerequisite of ``make test``) resolves it into Maven's local cache and writes the classpath
to ``compat/jvm/target/classpath.txt``; :func:`java_command` builds on that file. When the
Java sources or the POM changed since, it runs Maven once (under a file lock: pytest-xdist's
workers share the build). Java or Maven missing fails the test with what to install: the
suite never skips for it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2] / "compat" / "jvm"
TARGET = PROJECT / "target"
CLASSES = TARGET / "classes"
CLASSPATH_FILE = TARGET / "classpath.txt"
# A JVM that starts fast: no C2 compiler, one GC thread (the programs run for seconds).
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto")
BUILD_TIMEOUT_S = 900  # a first resolution downloads Kafka's jars


def _tools() -> tuple[str, str]:
    java, mvn = shutil.which("java"), shutil.which("mvn")
    if not (java and mvn and shutil.which("javac")):
        pytest.fail(
            "the JVM compatibility tests need a JDK 17+ (java, javac) and Maven (mvn): "
            "`make test` installs Debian's openjdk-17-jdk-headless and maven when missing "
            "(`make jvm` alone resolves compat/jvm)",
            pytrace=False,
        )
    return java, mvn


def _sources() -> list[Path]:
    return [PROJECT / "pom.xml", *(p for p in (PROJECT / "src").rglob("*") if p.is_file())]


def _stale() -> bool:
    if not CLASSPATH_FILE.exists():
        return True
    built = CLASSPATH_FILE.stat().st_mtime
    return any(p.stat().st_mtime > built for p in _sources())


def build(mvn: str) -> None:
    """Compile the programs and write the classpath, unless both are newer than the sources."""
    if not _stale():
        return
    TARGET.mkdir(exist_ok=True)
    with open(TARGET / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _stale():  # another process built it while this one waited
            return
        done = subprocess.run(
            [mvn, "-q", "-B", "-f", str(PROJECT / "pom.xml"), "package",
             "dependency:build-classpath", f"-Dmdep.outputFile={CLASSPATH_FILE}"],
            capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            pytest.fail(f"Maven could not build compat/jvm:\n{done.stdout[-6000:]}", pytrace=False)
        # The plugin leaves an unchanged classpath file as it was: its time marks the build.
        os.utime(CLASSPATH_FILE)


def java_command(main_class: str, *args: str) -> list[str]:
    """The command line that runs ``main_class`` with Kafka's jars and the test programs."""
    java, mvn = _tools()
    build(mvn)
    classpath = f"{CLASSES}{os.pathsep}{CLASSPATH_FILE.read_text().strip()}"
    return [java, *JVM_OPTIONS, "-cp", classpath, main_class, *args]
