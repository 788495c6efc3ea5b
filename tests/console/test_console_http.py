"""The web console's forms and pages over plain HTTP (no browser) against a real broker:
creating, growing and deleting topics, browsing from an offset or a time, resetting a
group to an offset or a time, the brokers pages, changing a topic's configs, deleting a
group or its offsets, and the refusals (a reset or deletion while consumers are in the
group, a bad topic name or config, a deletion not confirmed, an unknown group or broker,
a broker that refuses connections)."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
from tests.acls import AUTHORIZER
from tests.console.console_process import ConsoleProcess, start_console

from samsa import Admin, Consumer, Producer
from samsa.client.admin import ConfigResource, NewTopic
from samsa.testing import BrokerProcess, start_broker
from samsa.types import TopicPartition

pytestmark = pytest.mark.timeout(120)

LOG = "events"  # 5 records in partition 0, one a minute from T0
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
WAIT_S = 30


@pytest.fixture(scope="module")
def events(broker: BrokerProcess) -> BrokerProcess:
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(LOG, 1)])
    with Producer({"bootstrap.servers": broker.bootstrap}) as producer:
        for i in range(5):
            producer.send(LOG, b"event %d" % i, partition=0, timestamp=T0 + i * 60_000)
    return broker


@pytest.fixture(scope="module")
def console(
    events: BrokerProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConsoleProcess]:
    process = start_console(events, tmp_path_factory, "--sample-interval", "60")
    try:
        yield process
    finally:
        process.stop()


def notice(location: str, kind: str = "notice") -> str:
    """The notice (or error) a redirect carries to the next page."""
    return parse_qs(urlsplit(location).query)[kind][0]


def test_a_topic_created_from_the_form_has_its_partitions_and_configs(
    console: ConsoleProcess, admin: Admin
) -> None:
    status, location = console.post(
        "/topics", {"name": "created", "partitions": "4", "configs": "retention.ms=3600000\n"}
    )
    assert (status, notice(location)) == (303, "Created topic created.")
    assert len(admin.describe_topics(["created"])["created"].partitions) == 4
    configs = admin.describe_configs([ConfigResource.topic("created")])
    assert configs[ConfigResource.topic("created")]["retention.ms"].value == "3600000"
    page = console.get("/topics/created")[1]
    assert "retention.ms" in page and "3600000" in page


def test_a_topic_name_kafka_refuses_is_refused_with_a_message(console: ConsoleProcess) -> None:
    status, location = console.post("/topics", {"name": "no spaces/allowed"})
    assert status == 303
    assert "is not a topic name" in notice(location, "error")


def test_adding_partitions_from_the_form_raises_the_count(
    console: ConsoleProcess, admin: Admin
) -> None:
    admin.create_topics([NewTopic("growing", 1)])
    status, _ = console.post("/topics/growing/partitions", {"count": "3"})
    assert status == 303
    assert len(admin.describe_topics(["growing"])["growing"].partitions) == 3


def test_a_topic_is_deleted_only_when_its_name_is_typed(
    console: ConsoleProcess, admin: Admin
) -> None:
    admin.create_topics([NewTopic("doomed", 1)])
    status, location = console.post("/topics/doomed/delete", {"confirm": "yes"})
    assert "type the topic's name" in notice(location, "error")
    assert "doomed" in admin.list_topics()
    status, location = console.post("/topics/doomed/delete", {"confirm": "doomed"})
    assert (status, notice(location)) == (303, "Deleted topic doomed.")
    assert "doomed" not in admin.list_topics()


def test_the_browser_reads_from_an_offset_in_offset_order(console: ConsoleProcess) -> None:
    status, page = console.get(f"/topics/{LOG}/messages?partition=0&mode=offset&offset=3")
    assert status == 200
    assert "event 3" in page and "event 4" in page
    assert "event 2" not in page
    assert page.index("event 3") < page.index("event 4")


def test_the_browser_reads_from_a_time_given_in_utc(console: ConsoleProcess) -> None:
    query = "mode=timestamp&timestamp=2026-01-01T00:02:30&limit=10"
    page = console.get(f"/topics/{LOG}/messages?{query}")[1]
    assert [f"event {i}" in page for i in range(5)] == [False, False, False, True, True]


def test_the_newest_n_records_are_the_last_n_of_the_log(console: ConsoleProcess) -> None:
    page = console.get(f"/topics/{LOG}/messages?limit=2")[1]
    assert [f"event {i}" in page for i in range(5)] == [False, False, False, True, True]


def test_a_reset_to_an_offset_past_the_log_end_commits_the_log_end(
    console: ConsoleProcess, admin: Admin
) -> None:
    admin.alter_group_offsets("by-offset", {TopicPartition(LOG, 0): 1})
    form = {"group": "by-offset", "topic": LOG, "target": "offset", "value": "100"}
    status, preview = console.post("/group-offsets/reset", form)
    assert status == 200 and "Commit these offsets" in preview
    assert admin.list_group_offsets("by-offset")[TopicPartition(LOG, 0)].offset == 1
    assert console.post("/group-offsets/reset", {**form, "confirm": "yes"})[0] == 303
    assert admin.list_group_offsets("by-offset")[TopicPartition(LOG, 0)].offset == 5


def test_a_reset_to_a_time_commits_the_first_offset_at_or_after_it(
    console: ConsoleProcess, admin: Admin
) -> None:
    admin.alter_group_offsets("by-time", {TopicPartition(LOG, 0): 0})
    form = {"group": "by-time", "topic": "", "target": "timestamp",
            "value": "2026-01-01T00:01:00", "confirm": "yes"}  # fmt: skip
    assert console.post("/group-offsets/reset", form)[0] == 303
    assert admin.list_group_offsets("by-time")[TopicPartition(LOG, 0)].offset == 1


def test_a_reset_is_refused_while_the_group_has_active_members(
    console: ConsoleProcess, admin: Admin, broker: BrokerProcess
) -> None:
    config = {"bootstrap.servers": broker.bootstrap, "group.id": "busy",
              "auto.offset.reset": "earliest", "session.timeout.ms": 6000}  # fmt: skip
    with Consumer(config) as consumer:
        consumer.subscribe([LOG])
        deadline = time.monotonic() + WAIT_S
        while not consumer.assignment():
            assert time.monotonic() < deadline, "the consumer never joined"
            consumer.poll(0.2)
        consumer.commit()
        before = admin.list_group_offsets("busy")
        form = {"group": "busy", "topic": "", "target": "earliest", "value": "", "confirm": "yes"}
        _, location = console.post("/group-offsets/reset", form)
        assert "active member(s)" in notice(location, "error")
        assert admin.list_group_offsets("busy") == before
        assert "Stable" in console.get("/groups/busy")[1]


def test_an_unknown_group_is_not_found(console: ConsoleProcess) -> None:
    status, page = console.get("/groups/nobody-reads-here")
    assert status == 404
    assert "No such group" in page


def test_the_console_fails_fast_when_no_broker_answers() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "samsa", "console", "--bootstrap-server", "127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 1
    assert "cannot reach 127.0.0.1:1" in run.stderr


def _cells(page: str, table_id: str) -> list[list[str]]:
    """The text of each cell of each body row of table ``table_id``."""
    table = page.split(f'id="{table_id}"', 1)[1].split("</table>", 1)[0]
    body = table.split("<tbody>", 1)[1]
    return [
        [
            re.sub(r"<[^>]+>", "", cell).strip()
            for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        ]
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)
    ]


def test_the_brokers_page_shows_each_broker_its_leaders_and_log_dirs(
    console: ConsoleProcess, admin: Admin, broker: BrokerProcess
) -> None:
    admin.create_topics([NewTopic("led", 2)])
    # A committed offset: __consumer_offsets' partitions are led by the broker too.
    admin.alter_group_offsets("brokers-page", {TopicPartition("led", 0): 0})
    cluster = admin.describe_cluster()
    partitions = [
        p
        for t in admin.describe_topics(admin.list_topics(include_internal=True)).values()
        for p in t.partitions
    ]
    status, page = console.get("/brokers")
    assert status == 200
    (row,) = _cells(page, "broker-table")
    node = cluster.nodes[0]
    led = sum(1 for p in partitions if p.leader == node.node_id)
    assert row[:7] == [str(node.node_id), broker.bootstrap, "-", "controller",
                       str(len(partitions)), str(led), "0"]  # fmt: skip
    assert row[7] == "1"


def test_a_brokers_page_shows_its_configs_overrides_apart_and_its_log_dir(
    console: ConsoleProcess, admin: Admin, broker: BrokerProcess
) -> None:
    node_id = admin.describe_cluster().nodes[0].node_id
    status, page = console.get(f"/brokers/{node_id}")
    assert status == 200
    assert 'id="controller-mark"' in page
    overrides = {row[0]: row[1:] for row in _cells(page, "config-overrides")}
    assert overrides["group.initial.rebalance.delay.ms"] == ["0", "static broker config"]
    defaults = {row[0]: row[1] for row in _cells(page, "config-defaults")}
    assert "group.initial.rebalance.delay.ms" not in defaults
    assert defaults["num.partitions"] == "1"
    (log_dir,) = _cells(page, "log-dirs")
    assert log_dir[0] == str(broker.data_dir)
    assert int(log_dir[1]) >= 1 and log_dir[5] == "-"


def test_an_unknown_broker_is_not_found(console: ConsoleProcess) -> None:
    status, page = console.get("/brokers/4242")
    assert status == 404
    assert "no live broker has the id" in page


def test_the_overview_labels_the_controller_as_a_broker_id_and_links_the_brokers(
    console: ConsoleProcess, admin: Admin
) -> None:
    controller = admin.describe_cluster().controller_id
    page = console.get("/")[1]
    card = page.split('id="controller"', 1)[1].split("</div></div>", 1)[0]
    assert f'href="/brokers/{controller}">#{controller}</a>' in card
    assert "controller (broker id)" in page
    assert 'href="/brokers"' in page


def test_a_broker_that_refuses_connections_is_named_at_once(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # The console's own broker: stopped while the console runs, so its port refuses.
    lone = start_broker(tmp_path_factory.mktemp("refusing") / "data")
    try:
        process = start_console(lone, tmp_path_factory, "--sample-interval", "60")
    finally:
        lone.stop()
    try:
        status, page = process.get("/topics")
        assert status == 503
        assert f"The broker at {lone.bootstrap} refused the connection" in page
        assert process.get("/static/console.css")[0] == 200
    finally:
        process.stop()


def test_a_topics_configs_are_changed_from_the_form_and_reset_to_their_default(
    console: ConsoleProcess, admin: Admin
) -> None:
    admin.create_topics([NewTopic("tuned", 1)])
    resource = ConfigResource.topic("tuned")
    form = {"set": "retention.ms=86400000\ncleanup.policy=compact\n"}
    status, location = console.post("/topics/tuned/configs", form)
    assert status == 303
    assert "retention.ms=86400000" in notice(location)
    configs = admin.describe_configs([resource])[resource]
    assert (configs["retention.ms"].value, configs["cleanup.policy"].value) == (
        "86400000",
        "compact",
    )
    page = console.get("/topics/tuned")[1]
    overrides = {row[0]: row[1] for row in _cells(page, "config-overrides")}
    assert overrides == {"retention.ms": "86400000", "cleanup.policy": "compact"}
    defaults = {row[0]: row[1] for row in _cells(page, "config-defaults")}
    assert "retention.ms" not in defaults and defaults["segment.bytes"]
    status, location = console.post("/topics/tuned/configs", {"delete": "retention.ms"})
    assert "retention.ms to its default" in notice(location)
    configs = admin.describe_configs([resource])[resource]
    assert configs["retention.ms"].is_default and configs["cleanup.policy"].value == "compact"


def test_a_config_change_the_broker_refuses_changes_nothing(
    console: ConsoleProcess, admin: Admin
) -> None:
    admin.create_topics([NewTopic("strict", 1)])
    resource = ConfigResource.topic("strict")
    form = {"set": "cleanup.policy=compact\nretention.ms=soon"}
    status, location = console.post("/topics/strict/configs", form)
    assert status == 303
    assert "cannot change the configs of strict" in notice(location, "error")
    configs = admin.describe_configs([resource])[resource]
    assert configs["cleanup.policy"].is_default and configs["retention.ms"].is_default
    _, location = console.post("/topics/strict/configs", {"set": "no equals sign"})
    assert "is not NAME=VALUE" in notice(location, "error")


def test_a_groups_offsets_of_one_topic_are_deleted_from_its_page(
    console: ConsoleProcess, admin: Admin
) -> None:
    admin.create_topics([NewTopic("forgotten", 2)])
    committed = {TopicPartition("forgotten", 0): 1, TopicPartition("forgotten", 1): 0,
                 TopicPartition(LOG, 0): 3}  # fmt: skip
    admin.alter_group_offsets("pruned", committed)
    page = console.get("/groups/pruned")[1]
    assert 'id="delete-offsets"' in page and '<option value="forgotten">' in page
    form = {"group": "pruned", "topic": "forgotten"}
    status, location = console.post("/group-offsets/delete", form)
    assert status == 303
    assert "(2 partition(s))" in notice(location)
    assert set(admin.list_group_offsets("pruned")) == {TopicPartition(LOG, 0)}
    _, location = console.post("/group-offsets/delete", form)
    assert "has no committed offsets of 'forgotten'" in notice(location, "error")


def test_a_group_is_deleted_only_when_its_name_is_typed_and_no_consumer_is_in_it(
    console: ConsoleProcess, admin: Admin, broker: BrokerProcess
) -> None:
    admin.alter_group_offsets("retired", {TopicPartition(LOG, 0): 2})
    _, location = console.post("/group-delete", {"group": "retired", "confirm": "yes"})
    assert "type the group's name" in notice(location, "error")
    assert "retired" in {g.group_id for g in admin.list_groups()}
    status, location = console.post("/group-delete", {"group": "retired", "confirm": "retired"})
    assert (status, notice(location)) == (303, "Deleted group retired.")
    assert "retired" not in {g.group_id for g in admin.list_groups()}
    assert admin.list_group_offsets("retired") == {}
    config = {"bootstrap.servers": broker.bootstrap, "group.id": "in-use",
              "auto.offset.reset": "earliest", "session.timeout.ms": 6000}  # fmt: skip
    with Consumer(config) as consumer:
        consumer.subscribe([LOG])
        deadline = time.monotonic() + WAIT_S
        while not consumer.assignment():
            assert time.monotonic() < deadline, "the consumer never joined"
            consumer.poll(0.2)
        _, location = console.post("/group-delete", {"group": "in-use", "confirm": "in-use"})
        assert "cannot delete group 'in-use'" in notice(location, "error")
        form = {"group": "in-use", "topic": LOG}
        consumer.commit()
        _, location = console.post("/group-offsets/delete", form)
        assert "cannot delete the offsets of" in notice(location, "error")
        assert TopicPartition(LOG, 0) in admin.list_group_offsets("in-use")


def test_client_quotas_are_set_shown_and_removed_from_the_quotas_page(
    console: ConsoleProcess, admin: Admin
) -> None:
    form = {"entity_type": "user", "name": "alice", "key": "producer_byte_rate",
            "value": "1048576"}  # fmt: skip
    status, location = console.post("/quotas", form)
    assert (status, notice(location)) == (
        303,
        "Quota producer_byte_rate of user alice set to 1048576.",
    )
    form = {"entity_type": "client-id", "name": "", "key": "consumer_byte_rate", "value": "2048"}
    assert console.post("/quotas", form)[0] == 303
    quotas = admin.describe_client_quotas()
    assert quotas[(("user", "alice"),)] == {"producer_byte_rate": 1048576.0}
    assert quotas[(("client-id", None),)] == {"consumer_byte_rate": 2048.0}
    rows = _cells(console.get("/quotas")[1], "quotas")
    assert ["user alice", "producer_byte_rate", "1048576", "Remove"] in rows
    assert ["client-id (default)", "consumer_byte_rate", "2048", "Remove"] in rows
    remove = {"entity_type": "user", "name": "alice", "key": "producer_byte_rate", "remove": "yes"}
    _, location = console.post("/quotas", remove)
    assert notice(location) == "Quota producer_byte_rate of user alice removed."
    assert (("user", "alice"),) not in admin.describe_client_quotas()
    _, location = console.post("/quotas", {**form, "value": "fast"})
    assert "'fast' is not a number" in notice(location, "error")
    _, location = console.post("/quotas", {**form, "key": "bytes_per_fortnight"})
    assert "choose an entity type" in notice(location, "error")


def test_a_search_is_exported_as_json_lines_and_csv(
    console: ConsoleProcess, admin: Admin, broker: BrokerProcess
) -> None:
    query = f"/topics/{LOG}/messages?partition=0&mode=offset&offset=3"
    assert 'id="export-jsonl"' in console.get(query)[1]
    status, body = console.get(query + "&export=jsonl")
    assert status == 200
    lines = [json.loads(line) for line in body.splitlines()]
    assert [(r["offset"], r["value"], r["value_encoding"]) for r in lines] == [
        (3, "event 3", "utf-8"),
        (4, "event 4", "utf-8"),
    ]
    assert lines[0]["timestamp"] == T0 + 3 * 60_000 and lines[0]["key"] is None
    status, body = console.get(query + "&export=csv")
    rows = list(csv.DictReader(body.splitlines()))
    assert [(r["offset"], r["value"]) for r in rows] == [("3", "event 3"), ("4", "event 4")]
    admin.create_topics([NewTopic("binary", 1)])
    with Producer({"bootstrap.servers": broker.bootstrap}) as producer:
        producer.send("binary", b"\xff\x00", key=b"k", headers=[("h", b"\xfe")])
        producer.flush()
    (record,) = [json.loads(line) for line in
                 console.get("/topics/binary/messages?export=jsonl")[1].splitlines()]  # fmt: skip
    assert (record["value"], record["value_encoding"]) == ("/wA=", "base64")
    assert (record["key"], record["key_encoding"]) == ("k", "utf-8")
    assert record["headers"] == [{"key": "h", "value": "/g==", "encoding": "base64"}]


def test_scram_users_are_set_listed_and_deleted_from_the_users_page(
    console: ConsoleProcess, admin: Admin
) -> None:
    form = {"user": "carol", "mechanism": "SCRAM-SHA-512", "password": "s3cret-pw",
            "iterations": "8192"}  # fmt: skip
    status, location = console.post("/users", form)
    assert (status, notice(location)) == (
        303,
        "Set the SCRAM-SHA-512 credential of user 'carol'.",
    )
    assert admin.describe_user_scram_credentials(["carol"]) == {"carol": {"SCRAM-SHA-512": 8192}}
    assert ["carol", "SCRAM-SHA-512", "8192", "Delete"] in _cells(console.get("/users")[1], "users")
    assert "s3cret-pw" not in console.log_path.read_text()
    _, location = console.post("/users", {**form, "password": ""})
    assert "type the user's password" in notice(location, "error")
    delete = {"user": "carol", "mechanism": "SCRAM-SHA-512", "delete": "yes"}
    _, location = console.post("/users", delete)
    assert notice(location) == "Deleted the SCRAM-SHA-512 credential of user 'carol'."
    assert "carol" not in admin.describe_user_scram_credentials()
    _, location = console.post("/users", delete)
    assert "cannot delete the SCRAM-SHA-512 credential of user 'carol'" in notice(location, "error")


def test_the_acls_page_says_when_the_cluster_has_no_authorizer(console: ConsoleProcess) -> None:
    status, page = console.get("/acls")
    assert status == 200
    assert 'id="acls-disabled"' in page and 'id="create-acl"' not in page


def test_acls_are_created_listed_and_deleted_from_the_acls_page(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    secured = start_broker(tmp_path_factory.mktemp("acls") / "data",
                           overrides=[AUTHORIZER, "super.users=User:ANONYMOUS"])  # fmt: skip
    try:
        process = start_console(secured, tmp_path_factory, "--sample-interval", "60")
        try:
            acl = {"resource_type": "TOPIC", "name": "orders", "pattern_type": "PREFIXED",
                   "principal": "User:alice", "host": "*", "operation": "READ",
                   "permission": "ALLOW"}  # fmt: skip
            status, location = process.post("/acls", acl)
            assert (status, notice(location)) == (
                303,
                "Created ACL: ALLOW User:alice from * READ on TOPIC prefixed 'orders'.",
            )
            with Admin({"bootstrap.servers": secured.bootstrap}) as admin:
                (binding,) = admin.describe_acls()
            assert (binding.pattern.name, binding.entry.principal) == ("orders", "User:alice")
            rows = _cells(process.get("/acls")[1], "acls")
            assert rows == [["TOPIC", "orders", "PREFIXED", "User:alice", "*", "READ", "ALLOW",
                             "Delete"]]  # fmt: skip
            _, location = process.post("/acls", {**acl, "operation": "FLY"})
            assert "'FLY' is not one of" in notice(location, "error")
            _, location = process.post("/acls", {**acl, "delete": "yes"})
            assert notice(location).startswith("Deleted ACL: ALLOW User:alice")
            with Admin({"bootstrap.servers": secured.bootstrap}) as admin:
                assert admin.describe_acls() == []
            _, location = process.post("/acls", {**acl, "delete": "yes"})
            assert "no ACL ALLOW User:alice" in notice(location, "error")
        finally:
            process.stop()
    finally:
        secured.stop()
