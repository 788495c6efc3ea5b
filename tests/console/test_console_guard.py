"""What protects the console, over plain HTTP against a real broker: a change posted by
a page of another site (no Origin, ``Origin: null``, a foreign Origin, no or a wrong CSRF
token) is refused and the topic stays; a request naming a host that is not allowed is
refused (DNS rebinding); a console whose client properties use SASL asks for a login as
a user of the cluster and acts as that user (so the cluster's ACLs apply); a static
token works the same way; and every change is logged with who made it."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.console.console_process import ConsoleProcess, start_console

from samsa import Admin
from samsa.client.admin import ConfigResource, NewTopic, ScramUpsertion
from samsa.console.guard import parse_host
from samsa.testing import BrokerProcess, start_broker
from samsa.types import TopicPartition

pytestmark = pytest.mark.timeout(180)

USERS = {"admin": "admin-secret", "alice": "alice-secret"}
_ADDRESSES = re.compile(r"ready on (.+?) \(cluster")
WAIT_S = 30


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker with a PLAINTEXT listener (a super user's: the tests set up through it)
    and a SASL_PLAINTEXT one with SCRAM users, an authorizer, and no ACLs for alice."""
    process = start_broker(
        tmp_path_factory.mktemp("console-guard") / "data",
        overrides=[
            "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms=SCRAM-SHA-512",
            "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
            "super.users=User:ANONYMOUS;User:admin",
            "allow.everyone.if.no.acl.found=false",
        ],
    )
    try:
        with Admin({"bootstrap.servers": process.bootstrap}) as admin:
            admin.alter_user_scram_credentials(
                [ScramUpsertion(u, "SCRAM-SHA-512", p, iterations=4096) for u, p in USERS.items()]
            )
        yield process
    finally:
        process.stop()


def sasl_address(broker: BrokerProcess) -> str:
    """The SASL_PLAINTEXT listener's address (the second of the broker's ready line)."""
    match = _ADDRESSES.search(broker.log_path.read_text(errors="replace"))
    assert match, "no ready line"
    return "127.0.0.1:" + match.group(1).split(",")[1].strip().rpartition(":")[2]


@pytest.fixture(scope="module")
def console(
    broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConsoleProcess]:
    process = start_console(
        broker, tmp_path_factory, "--sample-interval", "60", "--allowed-host", "console.example"
    )
    try:
        yield process
    finally:
        process.stop()


def port_of(console: ConsoleProcess) -> int:
    return int(console.url.rpartition(":")[2])


def logged(console: ConsoleProcess, pattern: str) -> bool:
    """Whether the console's log has a line matching ``pattern`` (the log is written by
    another process: the line is waited for)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if re.search(pattern, console.log_path.read_text(errors="replace")):
            return True
        time.sleep(0.05)
    return False


REFUSED_POSTS = {
    "no Origin": ({}, {"origin": False}),
    "Origin null": ({"Origin": "null"}, {}),
    "a foreign Origin": ({"Origin": "http://elsewhere.example"}, {}),
    "the console's name on another port": ({"Origin": "http://127.0.0.1:1"}, {}),
    "no CSRF token": ({}, {"csrf": False}),
}


@pytest.mark.parametrize("case", REFUSED_POSTS, ids=list(REFUSED_POSTS))
def test_a_cross_site_delete_is_refused_and_the_topic_stays(
    console: ConsoleProcess, admin: Admin, case: str
) -> None:
    headers, options = REFUSED_POSTS[case]
    name = "kept-" + re.sub(r"\W", "-", case)
    admin.create_topics([NewTopic(name, 1)])
    status, body = console.post(f"/topics/{name}/delete", {"confirm": name}, headers, **options)
    assert status == 403, body
    assert name in admin.list_topics()
    assert logged(console, rf"refused POST /topics/{name}/delete by anonymous")


@pytest.mark.parametrize("case", ["a foreign Origin", "no CSRF token"])
def test_a_cross_site_config_quota_user_acl_or_group_change_is_refused(
    console: ConsoleProcess, admin: Admin, case: str
) -> None:
    headers, options = REFUSED_POSTS[case]
    name = "kept-configs-" + re.sub(r"\W", "-", case)
    admin.create_topics([NewTopic(name, 1)])
    admin.alter_group_offsets(name, {TopicPartition(name, 0): 0})
    posts = {
        f"/topics/{name}/configs": {"set": "retention.ms=1000"},
        "/group-offsets/delete": {"group": name, "topic": name},
        "/group-delete": {"group": name, "confirm": name},
        "/acls": {
            "resource_type": "TOPIC",
            "name": name,
            "pattern_type": "LITERAL",
            "principal": "User:x",
            "operation": "READ",
            "permission": "ALLOW",
        },
        "/users": {"user": name, "mechanism": "SCRAM-SHA-256", "password": "pw"},
        "/quotas": {
            "entity_type": "user",
            "name": name,
            "key": "producer_byte_rate",
            "value": "1024",
        },
    }
    for path, form in posts.items():
        assert console.post(path, form, headers, **options)[0] == 403, path
    resource = ConfigResource.topic(name)
    assert admin.describe_configs([resource])[resource]["retention.ms"].is_default
    assert TopicPartition(name, 0) in admin.list_group_offsets(name)
    assert (("user", name),) not in admin.describe_client_quotas()
    assert name not in admin.describe_user_scram_credentials()


def test_a_wrong_or_another_sessions_csrf_token_is_refused(
    console: ConsoleProcess, admin: Admin
) -> None:
    admin.create_topics([NewTopic("kept-token", 1)])
    other_session = console.csrf_token()
    console.cookie = ""  # a new session: the token of the old one is no good in it
    form = {"confirm": "kept-token"}
    assert console.post("/topics/kept-token/delete", {**form, "csrf_token": "0" * 64},
                        csrf=False)[0] == 403  # fmt: skip
    assert console.post("/topics/kept-token/delete", {**form, "csrf_token": other_session},
                        csrf=False)[0] == 403  # fmt: skip
    assert "kept-token" in admin.list_topics()


def test_a_delete_from_the_consoles_own_page_works_and_is_logged(
    console: ConsoleProcess, admin: Admin
) -> None:
    admin.create_topics([NewTopic("doomed", 1)])
    status, _ = console.post("/topics/doomed/delete", {"confirm": "doomed"})
    assert status == 303
    assert "doomed" not in admin.list_topics()
    assert logged(console, r"INFO samsa\.console: anonymous deleted topic 'doomed'")


def test_the_session_cookie_is_same_site_strict_and_http_only(console: ConsoleProcess) -> None:
    console.cookie = ""
    with urllib.request.urlopen(console.url + "/groups", timeout=60) as response:
        cookie = response.headers["set-cookie"]
    assert "samesite=strict" in cookie.lower() and "httponly" in cookie.lower()


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("evil.example:{port}", 400),  # a rebinding page names its own host
        ("evil.example", 400),
        ("127.0.0.2:{port}", 400),
        ("localhost:1", 400),  # a loopback name, but not this console's port
        ("localhost:{port}", 200),
        ("[::1]:{port}", 200),
        ("console.example", 200),  # --allowed-host without a port: any port
        ("console.example:8443", 200),
    ],
)
def test_only_allowed_host_names_are_answered(
    console: ConsoleProcess, host: str, status: int
) -> None:
    assert console.get("/groups", {"Host": host.format(port=port_of(console))})[0] == status


def test_a_change_naming_a_foreign_host_is_refused(console: ConsoleProcess, admin: Admin) -> None:
    admin.create_topics([NewTopic("kept-host", 1)])
    rebound = f"evil.example:{port_of(console)}"
    status, _ = console.post(
        "/topics/kept-host/delete",
        {"confirm": "kept-host"},
        {"Host": rebound, "Origin": f"http://{rebound}"},
    )
    assert status == 400
    assert "kept-host" in admin.list_topics()


@pytest.fixture(scope="module")
def sasl_console(
    broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConsoleProcess]:
    """A console whose own client properties log in to the cluster as admin (SCRAM)."""
    config = tmp_path_factory.mktemp("sasl-console") / "client.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.username=admin\nsasl.password=admin-secret\n"
    )
    process = start_console(
        broker, tmp_path_factory, "--sample-interval", "60", "--command-config", str(config),
        bootstrap=sasl_address(broker),
    )  # fmt: skip
    try:
        yield process
    finally:
        process.stop()


def test_a_sasl_console_asks_for_a_login_as_a_user_of_the_cluster(
    sasl_console: ConsoleProcess,
) -> None:
    status, body = sasl_console.get("/topics")
    assert status == 401 and "log in" in body
    assert sasl_console.get("/topics", auth=("alice", "wrong"))[0] == 401
    assert sasl_console.get("/topics", auth=("nobody", "alice-secret"))[0] == 401
    assert sasl_console.get("/topics", auth=("", ""))[0] == 401
    assert sasl_console.get("/topics", {"Authorization": "Basic !!"})[0] == 401
    assert sasl_console.get("/static/console.css")[0] == 401
    status, body = sasl_console.get("/topics", auth=("alice", "alice-secret"))
    assert status == 200 and "User:alice" in body


def test_a_change_without_the_login_is_refused(sasl_console: ConsoleProcess, admin: Admin) -> None:
    admin.create_topics([NewTopic("kept-login", 1)])
    sasl_console.auth = None
    status, _ = sasl_console.post("/topics/kept-login/delete", {"confirm": "kept-login"},
                                  csrf=False)  # fmt: skip
    assert status == 401
    assert "kept-login" in admin.list_topics()


def test_a_user_acts_with_their_own_rights_and_is_logged(
    sasl_console: ConsoleProcess, admin: Admin
) -> None:
    admin.create_topics([NewTopic("guarded", 1)])
    sasl_console.auth = ("alice", "alice-secret")
    _, location = sasl_console.post("/topics/guarded/delete", {"confirm": "guarded"})
    assert "TOPIC_AUTHORIZATION_FAILED" in location or "authoriz" in location.lower()
    assert "guarded" in admin.list_topics()  # alice has no ACL on it
    assert logged(sasl_console, r"User:alice failed to delete topic 'guarded'")
    sasl_console.auth = ("admin", "admin-secret")
    assert sasl_console.post("/topics/guarded/delete", {"confirm": "guarded"})[0] == 303
    assert "guarded" not in admin.list_topics()
    assert logged(sasl_console, r"INFO samsa\.console: User:admin deleted topic 'guarded'")


def test_a_token_console_asks_for_the_token(
    broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory, admin: Admin
) -> None:
    token_file: Path = tmp_path_factory.mktemp("token") / "token"
    token_file.write_text("s3cret-console-token\n")
    process = start_console(broker, tmp_path_factory, "--auth-token-file", str(token_file))
    try:
        assert process.get("/groups")[0] == 401
        assert process.get("/groups", auth=("ops", "not-the-token"))[0] == 401
        forged = ("ops\nINFO samsa.console: admin", "s3cret-console-token")
        assert process.get("/groups", auth=forged)[0] == 401  # no line of its own in the log
        process.auth = ("ops", "s3cret-console-token")
        assert process.get("/groups")[0] == 200
        status, _ = process.post("/topics", {"name": "by-token", "partitions": "1"})
        assert status == 303
        assert "by-token" in admin.list_topics()
        assert logged(process, r"INFO samsa\.console: ops \(token\) created topic 'by-token'")
    finally:
        process.stop()


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("LocalHost:8080", ("localhost", 8080)),
        ("console.example", ("console.example", None)),
        ("[::1]:8080", ("::1", 8080)),
        ("[::1]", ("::1", None)),
        ("::1", ("::1", None)),
    ],
)
def test_host_names_are_parsed_with_their_port(text: str, parsed: tuple[str, int | None]) -> None:
    assert parse_host(text) == parsed


@pytest.mark.parametrize("text", ["", ":80", "a:b", "a:0", "a:70000", "[::1", "[::1]x", "a/b"])
def test_a_host_that_is_not_one_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_host(text)


def test_a_bad_allowed_host_is_a_usage_error() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "samsa", "console", "--bootstrap-server", "127.0.0.1:1",
         "--allowed-host", "a/b"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert run.returncode == 2
    assert "--allowed-host" in run.stderr
