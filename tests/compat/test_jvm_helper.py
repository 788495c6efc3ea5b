"""The JVM suites' command lines: a missing JDK or Maven fails the test, never skips it."""

from __future__ import annotations

import pytest
from tests.compat import jvm


@pytest.mark.parametrize("missing", ["java", "javac", "mvn"])
def test_java_command_fails_saying_what_to_install_when_a_tool_is_missing(
    monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    monkeypatch.setattr(jvm.shutil, "which", lambda name: None if name == missing else name)
    with pytest.raises(pytest.fail.Exception, match=r"JDK 17\+ .* and Maven"):
        jvm.java_command("org.apache.kafka.tools.TopicCommand")


def test_java_command_puts_the_test_programs_before_kafkas_jars() -> None:
    command = jvm.java_command("io.samsa.compat.ClientsCheck", "a", "b")
    classpath = command[command.index("-cp") + 1].split(":")
    assert classpath[0] == str(jvm.CLASSES)
    assert any("/kafka-clients-" in entry for entry in classpath[1:])
    assert command[-3:] == ["io.samsa.compat.ClientsCheck", "a", "b"]
