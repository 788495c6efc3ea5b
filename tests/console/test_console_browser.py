"""The web console in a real headless browser (Debian's chromium through chromium-driver)
against a real broker with real topics, records and a consumer group.

One broker, one console process and one browser serve the whole module; the tests run
in file order and build on each other the way an operator's visit would (a record
produced from the page is there when the group is reset). Every page visited leaves a
screenshot in build/console-screenshots/, and the time the 1,000-topic list took to
render is written there too, as a figure, not an assertion. With SAMSA_DOCS_SCREENSHOTS=1
the overview and the group page are also copied to docs/images/ for the README.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import Select, WebDriverWait
from tests.console.console_process import (
    CHROMEDRIVER,
    CHROMIUM,
    REPO,
    SCREENSHOTS,
    ConsoleProcess,
    start_console,
)

from samsa import Admin, Consumer, Producer
from samsa.client.admin import NewTopic, OffsetSpec
from samsa.testing import BrokerProcess
from samsa.types import TopicPartition

pytestmark = [pytest.mark.timeout(300), pytest.mark.browser]

TOPIC, GROUP, PARTITIONS = "orders", "shipping", 3
CLICKS = "clicks"  # traffic for the throughput chart
BULK_TOPICS = 1000
TOPICS = BULK_TOPICS + 2
WAIT_S = 30  # a deadline that only detects a hang
ORDERS = [
    (f"customer-{i}".encode(), json.dumps({"order": i, "item": item}).encode())
    for i, item in enumerate(["lamp", "desk", "chair", "shelf", "rug", "clock"])
]
BINARY_VALUE = bytes([0, 159, 146, 150, 255])
DOCS_IMAGES = REPO / "docs" / "images"
"""Where SAMSA_DOCS_SCREENSHOTS=1 copies the README's screenshots (overview, group)."""


@pytest.fixture(scope="module")
def cluster(broker: BrokerProcess) -> BrokerProcess:
    """``orders`` with six JSON orders and a binary record, group ``shipping`` that has
    read and committed them all, ``clicks`` and 1,000 more topics."""
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS), NewTopic(CLICKS, 1)])
    # The broker takes seconds to create 1,000 topics: meanwhile, the records and the group.
    bulk = ThreadPoolExecutor(1).submit(_create_bulk_topics, broker)
    with Producer({"bootstrap.servers": broker.bootstrap}) as producer:
        for key, value in ORDERS:
            producer.send(TOPIC, value, key=key, headers=[("source", b"shop")])
        producer.send(TOPIC, BINARY_VALUE, key=b"binary", partition=0)
        producer.flush()
    config = {"bootstrap.servers": broker.bootstrap, "group.id": GROUP,
              "auto.offset.reset": "earliest", "enable.auto.commit": False}  # fmt: skip
    with Consumer(config) as consumer:
        consumer.subscribe([TOPIC])
        read, deadline = 0, time.monotonic() + WAIT_S
        while read < len(ORDERS) + 1 and time.monotonic() < deadline:
            read += len(consumer.poll(0.5))
        consumer.commit()
    assert read == len(ORDERS) + 1
    bulk.result(timeout=240)
    return broker


def _create_bulk_topics(broker: BrokerProcess) -> None:
    # One request, answered when all are created: on a loaded machine, after a while (a
    # request timing out would be sent again and find the topics already there).
    config = {"bootstrap.servers": broker.bootstrap, "default.api.timeout.ms": 240_000,
              "request.timeout.ms": 240_000}  # fmt: skip
    with Admin(config) as admin:
        topics = [NewTopic(f"bulk-{i:04d}", 1) for i in range(BULK_TOPICS)]
        admin.create_topics(topics, timeout_ms=240_000)


@pytest.fixture(scope="module")
def console(
    cluster: BrokerProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConsoleProcess]:
    process = start_console(cluster, tmp_path_factory, "--sample-interval", "0.5")
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.fail("chromium and chromium-driver are missing: `make test` installs them")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--window-size=1280,1000", "--hide-scrollbars"):  # fmt: skip
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(WAIT_S * 2)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()


def visit(browser: WebDriver, console: ConsoleProcess, path: str) -> None:
    browser.get(console.url + path)
    WebDriverWait(browser, WAIT_S).until(ec.presence_of_element_located((By.TAG_NAME, "main")))


def screenshot(browser: WebDriver, name: str) -> None:
    """The whole page as build/console-screenshots/NAME.png."""
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1280, min(max(int(height) + 40, 600), 3000))
    browser.save_screenshot(str(SCREENSHOTS / f"{name}.png"))
    browser.set_window_size(1280, 1000)


def text_of(browser: WebDriver, element_id: str) -> str:
    return str(browser.find_element(By.ID, element_id).text)


def column(browser: WebDriver, table_id: str, index: int) -> list[str]:
    rows = browser.find_elements(By.CSS_SELECTOR, f"#{table_id} tbody tr")
    return [row.find_elements(By.TAG_NAME, "td")[index].text for row in rows]


def submit(browser: WebDriver, form_id: str) -> None:
    browser.find_element(By.CSS_SELECTOR, f"#{form_id} button[type=submit]").click()


def wait_for(browser: WebDriver, element_id: str) -> str:
    WebDriverWait(browser, WAIT_S).until(ec.presence_of_element_located((By.ID, element_id)))
    return text_of(browser, element_id)


def log_end_offsets(broker: BrokerProcess) -> dict[TopicPartition, int]:
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        specs = {TopicPartition(TOPIC, p): int(OffsetSpec.LATEST) for p in range(PARTITIONS)}
        return {tp: r.offset for tp, r in admin.list_offsets(specs).items()}


def test_overview_shows_the_broker_the_topic_counts_and_the_produced_throughput(
    browser: WebDriver, console: ConsoleProcess, cluster: BrokerProcess
) -> None:
    # Each sample lists the offsets of 1,004 partitions: on a busy machine, slowly.
    deadline = time.monotonic() + 2 * WAIT_S
    with Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0}) as producer:
        visit(browser, console, "/")
        # Clicks arrive while the page is reloaded, until the chart has a few samples
        # and the last of them saw clicks.
        while not browser.find_elements(By.ID, "rate-now") or not (
            float(text_of(browser, "rate-now")) > 0
            and int(browser.find_element(By.ID, "throughput").get_attribute("data-samples")) >= 6
        ):
            assert time.monotonic() < deadline, "the chart never showed the clicks produced"
            for i in range(20):
                producer.send(CLICKS, b"click %d" % i)
            producer.flush()
            time.sleep(0.2)
            visit(browser, console, "/")
    assert browser.find_elements(By.CSS_SELECTOR, "#throughput polyline")
    assert text_of(browser, "broker-count") == "1"
    assert text_of(browser, "topic-count") == str(TOPICS)
    assert text_of(browser, "partition-count") == str(BULK_TOPICS + PARTITIONS + 1)
    assert column(browser, "brokers", 2) == [str(cluster.port)]
    assert "Produce v" in text_of(browser, "version")
    screenshot(browser, "overview")


def test_the_brokers_page_shows_the_broker_its_leaders_and_its_configs(
    browser: WebDriver, console: ConsoleProcess, cluster: BrokerProcess
) -> None:
    visit(browser, console, "/")
    assert text_of(browser, "controller").startswith("#")
    browser.find_element(By.LINK_TEXT, "Brokers").click()
    WebDriverWait(browser, WAIT_S).until(ec.presence_of_element_located((By.ID, "broker-table")))
    assert column(browser, "broker-table", 1) == [cluster.bootstrap]
    assert column(browser, "broker-table", 3) == ["controller"]
    with Admin({"bootstrap.servers": cluster.bootstrap}) as admin:
        led = sum(
            len(t.partitions)
            for t in admin.describe_topics(admin.list_topics(include_internal=True)).values()
        )
    assert column(browser, "broker-table", 5) == [str(led)]
    screenshot(browser, "brokers")
    browser.find_element(By.CSS_SELECTOR, "#broker-table tbody a").click()
    WebDriverWait(browser, WAIT_S).until(ec.presence_of_element_located((By.ID, "log-dirs")))
    assert text_of(browser, "controller-mark") == "controller"
    assert column(browser, "log-dirs", 0) == [str(cluster.data_dir)]
    assert "group.initial.rebalance.delay.ms" in column(browser, "config-overrides", 0)
    assert "num.partitions" in column(browser, "config-defaults", 0)
    screenshot(browser, "broker")


def test_the_topics_list_pages_and_searches_a_thousand_topics(
    browser: WebDriver, console: ConsoleProcess
) -> None:
    started = time.monotonic()
    visit(browser, console, "/topics")
    render_s = time.monotonic() - started
    (SCREENSHOTS / "timings.txt").write_text(
        f"/topics with {TOPICS} topics rendered in {render_s:.2f} s\n"
    )
    print(f"\n/topics with {TOPICS} topics rendered in {render_s:.2f} s")
    assert text_of(browser, "topic-total") == str(TOPICS)
    assert browser.find_element(By.ID, "showing").text == f"1–50 of {TOPICS}"
    assert column(browser, "topics", 0)[:2] == ["bulk-0000", "bulk-0001"]
    screenshot(browser, "topics")
    browser.find_element(By.ID, "next-page").click()
    assert wait_for(browser, "showing") == f"51–100 of {TOPICS}"
    assert column(browser, "topics", 0)[0] == "bulk-0050"
    search = browser.find_element(By.CSS_SELECTOR, "#search input[name=q]")
    search.clear()
    search.send_keys("ord")
    submit(browser, "search")
    WebDriverWait(browser, WAIT_S).until(ec.url_contains("q=ord"))
    assert column(browser, "topics", 0) == [TOPIC]
    assert column(browser, "topics", 3) == [str(len(ORDERS) + 1)]  # messages


def test_the_topic_page_shows_offsets_leaders_and_isr_per_partition(
    browser: WebDriver, console: ConsoleProcess, cluster: BrokerProcess
) -> None:
    visit(browser, console, f"/topics/{TOPIC}")
    ends = log_end_offsets(cluster)
    assert column(browser, "partitions", 0) == [str(p) for p in range(PARTITIONS)]
    assert column(browser, "partitions", 2) == [
        str(ends[TopicPartition(TOPIC, p)]) for p in range(PARTITIONS)
    ]
    node = column(browser, "partitions", 5)[0]
    assert column(browser, "partitions", 5) == [node] * PARTITIONS  # the only broker leads
    assert column(browser, "partitions", 8) == [node] * PARTITIONS  # and is the ISR
    screenshot(browser, "topic")


def test_a_topics_config_is_changed_and_reset_from_its_page(
    browser: WebDriver, console: ConsoleProcess
) -> None:
    visit(browser, console, f"/topics/{CLICKS}")
    assert "retention.ms" in column(browser, "config-defaults", 0)
    browser.find_element(By.CSS_SELECTOR, "#alter-configs textarea").send_keys(
        "retention.ms=7200000"
    )
    submit(browser, "alter-configs")
    assert "retention.ms=7200000" in wait_for(browser, "notice")
    assert column(browser, "config-overrides", 0) == ["retention.ms"]
    assert column(browser, "config-overrides", 1) == ["7200000"]
    assert "retention.ms" not in column(browser, "config-defaults", 0)
    screenshot(browser, "topic-configs")
    browser.find_element(By.CSS_SELECTOR, "#config-overrides button[type=submit]").click()
    # The page before has a notice too: wait for the new one.
    WebDriverWait(browser, WAIT_S).until(
        ec.text_to_be_present_in_element((By.ID, "notice"), "retention.ms to its default")
    )
    assert "retention.ms" in column(browser, "config-defaults", 0)


def test_the_message_browser_shows_the_produced_values(
    browser: WebDriver, console: ConsoleProcess
) -> None:
    visit(browser, console, f"/topics/{TOPIC}/messages")
    values = column(browser, "messages", 4)
    for i, (_key, _value) in enumerate(ORDERS):
        assert any(f'"order": {i},' in v for v in values)  # JSON, pretty-printed
    assert sorted(column(browser, "messages", 3)) == sorted(
        [k.decode() for k, _ in ORDERS] + ["binary"]
    )
    assert "00 9f 92 96 ff" in " ".join(values)  # bytes that are not text, as hex
    assert "source: shop" in " ".join(column(browser, "messages", 5))
    screenshot(browser, "messages")


def test_the_message_browser_filters_by_text_and_partition(
    browser: WebDriver, console: ConsoleProcess
) -> None:
    visit(browser, console, f"/topics/{TOPIC}/messages")
    Select(browser.find_element(By.NAME, "partition")).select_by_value("0")
    browser.find_element(By.NAME, "filter").send_keys("binary")
    submit(browser, "browse-form")
    WebDriverWait(browser, WAIT_S).until(ec.url_contains("filter=binary"))
    assert column(browser, "messages", 3) == ["binary"]
    assert column(browser, "messages", 0) == ["0"]


def test_a_message_produced_from_the_page_is_written_and_shown(
    browser: WebDriver, console: ConsoleProcess, cluster: BrokerProcess
) -> None:
    before = sum(log_end_offsets(cluster).values())
    visit(browser, console, f"/topics/{TOPIC}/messages")
    form = browser.find_element(By.ID, "produce")
    form.find_element(By.NAME, "key").send_keys("from-the-page")
    form.find_element(By.NAME, "value").send_keys('{"order": 99, "item": "kettle"}')
    form.find_element(By.NAME, "headers").send_keys("source=console")
    submit(browser, "produce")
    assert wait_for(browser, "notice").startswith("Produced a record to partition")
    assert sum(log_end_offsets(cluster).values()) == before + 1
    assert "from-the-page" in column(browser, "messages", 3)
    assert any('"item": "kettle"' in v for v in column(browser, "messages", 4))
    screenshot(browser, "produced")


def test_the_groups_page_lists_the_group_with_its_state_and_lag(
    browser: WebDriver, console: ConsoleProcess
) -> None:
    visit(browser, console, "/groups")
    assert column(browser, "groups", 0) == [GROUP]
    assert column(browser, "groups", 1) == ["Empty"]
    assert column(browser, "groups", 4) == [TOPIC]
    assert column(browser, "groups", 6) == ["1"]  # the record produced from the page
    screenshot(browser, "groups")


def test_resetting_a_group_to_earliest_from_the_page_raises_its_lag(
    browser: WebDriver, console: ConsoleProcess, cluster: BrokerProcess
) -> None:
    visit(browser, console, f"/groups/{GROUP}")
    assert text_of(browser, "lag-total") == "1"
    Select(browser.find_element(By.NAME, "target")).select_by_value("earliest")
    submit(browser, "reset")
    wait_for(browser, "plan")
    assert column(browser, "plan", 3) == ["0"] * PARTITIONS  # the new offsets, to confirm
    screenshot(browser, "reset-confirm")
    submit(browser, "confirm-reset")
    assert wait_for(browser, "notice").startswith("Reset 3 partition(s)")
    everything = sum(log_end_offsets(cluster).values())
    assert text_of(browser, "lag-total") == str(everything)
    assert column(browser, "lag", 2) == ["0"] * PARTITIONS
    with Admin({"bootstrap.servers": cluster.bootstrap}) as admin:
        committed = admin.list_group_offsets(GROUP)
    assert {om.offset for om in committed.values()} == {0}
    screenshot(browser, "group")
    if os.environ.get("SAMSA_DOCS_SCREENSHOTS") == "1":  # the README's two, when asked
        for name in ("overview", "group"):
            shutil.copyfile(SCREENSHOTS / f"{name}.png", DOCS_IMAGES / f"console-{name}.png")


def test_a_client_quota_set_from_the_quotas_page_is_listed(
    browser: WebDriver, console: ConsoleProcess
) -> None:
    visit(browser, console, "/")
    browser.find_element(By.LINK_TEXT, "Quotas").click()
    WebDriverWait(browser, WAIT_S).until(ec.presence_of_element_located((By.ID, "set-quota")))
    Select(browser.find_element(By.NAME, "entity_type")).select_by_value("client-id")
    browser.find_element(By.NAME, "name").send_keys("shop-frontend")
    Select(browser.find_element(By.NAME, "key")).select_by_value("producer_byte_rate")
    browser.find_element(By.NAME, "value").send_keys("65536")
    submit(browser, "set-quota")
    assert "client-id shop-frontend set to 65536" in wait_for(browser, "notice")
    assert column(browser, "quotas", 0) == ["client-id shop-frontend"]
    assert column(browser, "quotas", 2) == ["65536"]
    screenshot(browser, "quotas")


def test_a_scram_user_set_from_the_users_page_is_listed(
    browser: WebDriver, console: ConsoleProcess
) -> None:
    visit(browser, console, "/")
    browser.find_element(By.LINK_TEXT, "Users").click()
    WebDriverWait(browser, WAIT_S).until(ec.presence_of_element_located((By.ID, "set-user")))
    browser.find_element(By.NAME, "user").send_keys("dave")
    Select(browser.find_element(By.NAME, "mechanism")).select_by_value("SCRAM-SHA-256")
    browser.find_element(By.NAME, "password").send_keys("dave-secret")
    submit(browser, "set-user")
    assert wait_for(browser, "notice") == "Set the SCRAM-SHA-256 credential of user 'dave'."
    assert column(browser, "users", 0) == ["dave"]
    assert column(browser, "users", 2) == ["4096"]
    screenshot(browser, "users")


def test_the_acls_page_says_the_cluster_has_no_authorizer(
    browser: WebDriver, console: ConsoleProcess
) -> None:
    visit(browser, console, "/acls")
    assert "no authorizer" in text_of(browser, "acls-disabled")


def test_a_search_links_its_exports_and_a_group_is_deleted_from_its_page(
    browser: WebDriver, console: ConsoleProcess, cluster: BrokerProcess
) -> None:
    visit(browser, console, f"/topics/{TOPIC}/messages?partition=0&mode=offset&offset=0")
    link = browser.find_element(By.ID, "export-csv").get_attribute("href")
    assert link.endswith("partition=0&mode=offset&offset=0&export=csv")
    visit(browser, console, f"/groups/{GROUP}")
    browser.find_element(By.CSS_SELECTOR, "#delete-group input[name=confirm]").send_keys(GROUP)
    submit(browser, "delete-group")
    assert wait_for(browser, "notice") == f"Deleted group {GROUP}."
    with Admin({"bootstrap.servers": cluster.bootstrap}) as admin:
        assert GROUP not in {g.group_id for g in admin.list_groups()}


def test_an_unknown_topic_shows_a_not_found_page(
    browser: WebDriver, console: ConsoleProcess
) -> None:
    visit(browser, console, "/topics/no-such-topic")
    assert "UNKNOWN_TOPIC_OR_PARTITION" in wait_for(browser, "error")


def test_a_read_only_console_shows_no_forms_and_refuses_changes(
    browser: WebDriver, cluster: BrokerProcess, tmp_path_factory: pytest.TempPathFactory
) -> None:
    read_only = start_console(cluster, tmp_path_factory, "--read-only")
    try:
        visit(browser, read_only, f"/topics/{TOPIC}/messages")
        assert wait_for(browser, "read-only") == "read-only"
        assert not browser.find_elements(By.ID, "produce")
        status, _ = read_only.post(f"/topics/{TOPIC}/messages", {"value": "no"})
    finally:
        read_only.stop()
    assert status == 403


def test_a_change_posted_from_another_site_is_refused(console: ConsoleProcess) -> None:
    status, _ = console.post(
        f"/topics/{TOPIC}/delete", {"confirm": TOPIC}, {"Origin": "http://elsewhere.example"}
    )
    assert status == 403
    assert console.get(f"/topics/{TOPIC}")[0] == 200


def test_a_form_of_another_site_cannot_delete_a_topic(
    browser: WebDriver, console: ConsoleProcess, cluster: BrokerProcess
) -> None:
    """The attack itself: a page of no origin (a data: URL, as a sandboxed iframe is)
    posts the delete form to the console through the operator's browser."""
    page = (
        f'<form id="f" method="post" action="{console.url}/topics/{TOPIC}/delete">'
        f'<input name="confirm" value="{TOPIC}"><input name="csrf_token" value="guess">'
        "</form><script>document.getElementById('f').submit()</script>"
    )
    browser.get("data:text/html," + quote(page))
    WebDriverWait(browser, WAIT_S).until(
        lambda driver: "own pages" in driver.find_element(By.TAG_NAME, "body").text
    )
    with Admin({"bootstrap.servers": cluster.bootstrap}) as admin:
        assert TOPIC in admin.list_topics()
