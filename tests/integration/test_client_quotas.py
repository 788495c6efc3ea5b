"""Client quotas against a real broker process.

AlterClientQuotas and DescribeClientQuotas through samsa's Admin (neither
confluent-kafka nor kafka-python binds them), Kafka's precedence between
user, client-id and default entities, ``throttle_time_ms`` in raw Produce and
Metadata responses and the muted connection after it, a confluent-kafka
producer and consumer held to their byte rates, quotas kept across a restart,
and ``samsa configs``.

The rate tests run a broker with ``quota.window.num=2``. Kafka's rate over
sampled windows lets a client at full speed through in bursts: when the oldest
sample expires, what it held may be sent again at once, and the client is then
throttled until the window has moved on — a cycle of ``quota.window.num``
windows (eleven seconds with Kafka's defaults, two here; docs/quotas.md). The
rate is measured over whole cycles: from the long throttle that ends one burst
to the first such throttle at least six seconds later. A slow test measures
it with Kafka's default windows, over two eleven-second cycles.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from tests.conftest import make_batch
from tests.rawclient import exchange, read_response, request_frame

from samsa import Admin
from samsa.cli.main import main
from samsa.client.admin import ClientQuotaAlteration, ClientQuotaFilterComponent, NewTopic
from samsa.errors import InvalidRequestError
from samsa.testing import BrokerProcess, start_broker

PRODUCE = 0
FETCH = 1
METADATA = 3
INVALID_REQUEST = 42
QUIET = {"log_level": 3}
TIMEOUT_S = 20
RATE = 200_000
"""The byte rate the producer and consumer are held to (bytes per second)."""
MEASURED_S = 6.0
CYCLE_END_S = 0.25
"""A throttle this long ends a burst (one request's own is 16 kB / 200 kB/s = 0.08 s)."""
RATE_BROKER = ["quota.window.num=2", "quota.window.size.seconds=1"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """Shared by the tests that name their own users and client ids (no defaults)."""
    process = start_broker(tmp_path_factory.mktemp("quotas") / "data", RATE_BROKER)
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """For the tests that set default entities, which apply to every client."""
    process = start_broker(tmp_path / "data", RATE_BROKER)
    try:
        yield process
    finally:
        process.stop()


def _admin(broker: BrokerProcess) -> Admin:
    return Admin({"bootstrap.servers": broker.bootstrap, "default.api.timeout.ms": 15_000})


def _alter(broker: BrokerProcess, entity: dict[str, str | None], **ops: float | None) -> None:
    with _admin(broker) as admin:
        admin.alter_client_quotas([ClientQuotaAlteration(entity, ops)])


def _describe(
    broker: BrokerProcess, *components: ClientQuotaFilterComponent, strict: bool = False
) -> dict[Any, dict[str, float]]:
    with _admin(broker) as admin:
        return admin.describe_client_quotas(components, strict=strict)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _topic(broker: BrokerProcess) -> str:
    name = _name("quota")
    with _admin(broker) as admin:
        admin.create_topics([NewTopic(name, 1, 1)])
    return name


def _produce_frame(
    topic: str, client_id: str, size: int, correlation_id: int = 1, version: int = 9
) -> bytes:
    batch = make_batch([b"v" * size], timestamp=int(time.time() * 1000))
    values = {
        "transactional_id": None, "acks": 1, "timeout": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": bytes(batch)}]}],
    }  # fmt: skip
    return request_frame(PRODUCE, version, values, correlation_id, client_id)


def produce_throttle_ms(address: str, topic: str, client_id: str, size: int) -> int:
    """The throttle time of one Produce request of ``size`` bytes from ``client_id``, sent
    to the broker at ``address`` on a connection of its own."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as sock:
        sock.sendall(_produce_frame(topic, client_id, size))
        response = read_response(sock, PRODUCE, 9)
    assert response.responses[0].partition_responses[0].error_code.value == 0
    return int(response.throttle_time.total_seconds() * 1000)


# -- AlterClientQuotas / DescribeClientQuotas -------------------------------------------


def test_quotas_set_for_users_clients_and_defaults_are_described_back(
    own_broker: BrokerProcess,
) -> None:
    _alter(own_broker, {"user": "alice"}, producer_byte_rate=1024)
    _alter(own_broker, {"user": "alice", "client-id": "app"}, consumer_byte_rate=2048)
    _alter(own_broker, {"user": None, "client-id": None}, request_percentage=12.5)
    _alter(own_broker, {"client-id": None}, producer_byte_rate=4096)

    assert _describe(own_broker) == {
        (("user", "alice"),): {"producer_byte_rate": 1024.0},
        (("client-id", "app"), ("user", "alice")): {"consumer_byte_rate": 2048.0},
        (("client-id", None), ("user", None)): {"request_percentage": 12.5},
        (("client-id", None),): {"producer_byte_rate": 4096.0},
    }


def test_a_strict_filter_leaves_out_entities_with_parts_it_does_not_name(
    broker: BrokerProcess,
) -> None:
    user = _name("user")
    _alter(broker, {"user": user}, producer_byte_rate=1000)
    _alter(broker, {"user": user, "client-id": "app"}, producer_byte_rate=2000)
    only_user = ClientQuotaFilterComponent.of_entity("user", user)

    assert _describe(broker, only_user, strict=True) == {
        (("user", user),): {"producer_byte_rate": 1000.0}
    }
    assert set(_describe(broker, only_user)) == {
        (("user", user),),
        (("client-id", "app"), ("user", user)),
    }


def test_a_default_filter_matches_only_the_default_entity(own_broker: BrokerProcess) -> None:
    _alter(own_broker, {"client-id": None}, consumer_byte_rate=5000)
    _alter(own_broker, {"client-id": "app"}, consumer_byte_rate=6000)

    found = _describe(own_broker, ClientQuotaFilterComponent.of_default_entity("client-id"))

    assert found == {(("client-id", None),): {"consumer_byte_rate": 5000.0}}


def test_an_unknown_quota_key_is_invalid_request_and_the_other_entries_still_apply(
    broker: BrokerProcess,
) -> None:
    good, bad = _name("good"), _name("bad")
    with _admin(broker) as admin:
        results = admin.alter_client_quotas(
            [
                ClientQuotaAlteration({"client-id": bad}, {"log.retention.ms": 1.0}),
                ClientQuotaAlteration({"client-id": good}, {"producer_byte_rate": 3000}),
            ],
            raise_on_error=False,
        )
    assert isinstance(results[(("client-id", bad),)], InvalidRequestError)
    assert results[(("client-id", good),)] is None
    described = _describe(broker, ClientQuotaFilterComponent.of_entity_type("client-id"))
    assert described[(("client-id", good),)] == {"producer_byte_rate": 3000.0}
    assert (("client-id", bad),) not in described


def test_a_byte_rate_that_is_not_a_whole_number_is_invalid_request(broker: BrokerProcess) -> None:
    with pytest.raises(InvalidRequestError):
        _alter(broker, {"client-id": _name("c")}, producer_byte_rate=10.5)


def test_removing_an_entitys_last_quota_removes_the_entity(broker: BrokerProcess) -> None:
    client = _name("client")
    _alter(broker, {"client-id": client}, producer_byte_rate=1000, consumer_byte_rate=2000)
    _alter(broker, {"client-id": client}, producer_byte_rate=None)
    exact = ClientQuotaFilterComponent.of_entity("client-id", client)
    assert _describe(broker, exact) == {(("client-id", client),): {"consumer_byte_rate": 2000.0}}

    _alter(broker, {"client-id": client}, consumer_byte_rate=None)

    assert _describe(broker, exact) == {}


def test_a_validate_only_alteration_changes_nothing(broker: BrokerProcess) -> None:
    client = _name("client")
    with _admin(broker) as admin:
        admin.alter_client_quotas(
            [ClientQuotaAlteration({"client-id": client}, {"producer_byte_rate": 1000})],
            validate_only=True,
        )
    assert _describe(broker, ClientQuotaFilterComponent.of_entity("client-id", client)) == {}


def test_an_ip_entity_is_invalid_request(broker: BrokerProcess) -> None:
    response = exchange(broker.bootstrap, 49, 1, {
        "entries": [{"entity": [{"entity_type": "ip", "entity_name": "127.0.0.1"}],
                     "ops": [{"key": "connection_creation_rate", "value": 5.0, "remove": False}]}],
        "validate_only": False,
    })  # fmt: skip
    assert response.entries[0].error_code.value == INVALID_REQUEST


# -- enforcement ------------------------------------------------------------------------


def test_a_produce_over_the_quota_gets_throttle_time_ms_and_its_connection_waits_that_long(
    broker: BrokerProcess,
) -> None:
    topic, client = _topic(broker), _name("client")
    _alter(broker, {"client-id": client}, producer_byte_rate=50_000)
    host, port = broker.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as sock:
        sent = time.monotonic()
        sock.sendall(_produce_frame(topic, client, 100_000, correlation_id=1))
        first = read_response(sock, PRODUCE, 9)
        sock.sendall(_produce_frame(topic, client, 10, correlation_id=2))
        second = read_response(sock, PRODUCE, 9)
        answered = time.monotonic()

    throttle_s = first.throttle_time.total_seconds()
    assert first.responses[0].partition_responses[0].error_code.value == 0
    assert throttle_s > 0.5  # twice the quota over the (at least one second) window
    # The broker handled the second request only once the first's throttle was over.
    assert answered - sent >= throttle_s
    assert second.responses[0].partition_responses[0].error_code.value == 0


def test_a_client_within_its_quota_is_not_throttled(broker: BrokerProcess) -> None:
    topic, client = _topic(broker), _name("client")
    _alter(broker, {"client-id": client}, producer_byte_rate=10_000_000)

    assert produce_throttle_ms(broker.bootstrap, topic, client, 100_000) == 0


def test_the_most_specific_entity_sets_a_clients_quota(own_broker: BrokerProcess) -> None:
    topic, client = _topic(own_broker), _name("client")
    _alter(own_broker, {"client-id": client}, producer_byte_rate=1000)
    assert produce_throttle_ms(own_broker.bootstrap, topic, client, 20_000) > 0

    # users/<default> comes before clients/<client-id>: a generous default user quota wins.
    _alter(own_broker, {"user": None}, producer_byte_rate=100_000_000)
    assert produce_throttle_ms(own_broker.bootstrap, topic, client, 20_000) == 0

    # users/<user>/clients/<client-id> comes before everything.
    _alter(own_broker, {"user": "ANONYMOUS", "client-id": client}, producer_byte_rate=1000)
    assert produce_throttle_ms(own_broker.bootstrap, topic, client, 20_000) > 0


def test_request_percentage_throttles_a_client_that_keeps_the_broker_busy(
    broker: BrokerProcess,
) -> None:
    client = _name("client")
    _alter(broker, {"client-id": client}, request_percentage=0.00001)
    host, port = broker.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as sock:
        sock.sendall(request_frame(METADATA, 12, {
            "topics": None, "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        }, 1, client))  # fmt: skip
        throttle_s = read_response(sock, METADATA, 12).throttle_time.total_seconds()

    # 0.00001 % of a thread is 0.1 µs of loop time per second: any request exceeds it, and
    # the throttle is at most one window (quota.window.size.seconds), as Kafka bounds it.
    assert 0 < throttle_s <= 1.0


def _ends_a_burst(throttle_s: float) -> bool:
    return throttle_s >= CYCLE_END_S


def _ends_a_throttled_phase(throttle_s: float) -> bool:
    """librdkafka reports a throttle of 0 when a throttled phase is over."""
    return throttle_s == 0


@pytest.mark.parametrize("version", [8, 9])  # the response turned flexible at 9
def test_a_produce_over_request_percentage_carries_the_throttle_time(
    broker: BrokerProcess, version: int
) -> None:
    topic, client = _topic(broker), _name("client")
    _alter(broker, {"client-id": client}, request_percentage=0.00001)
    host, port = broker.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as sock:
        sock.sendall(_produce_frame(topic, client, 100, correlation_id=3, version=version))
        response = read_response(sock, PRODUCE, version)

    assert 0 < response.throttle_time.total_seconds() <= 1.0
    assert response.responses[0].partition_responses[0].error_code.value == 0


@pytest.mark.parametrize("version", [11, 12])  # the response header grew a byte at 12
def test_a_fetch_over_request_percentage_carries_the_throttle_time(
    broker: BrokerProcess, version: int
) -> None:
    topic, client = _topic(broker), _name("client")
    _alter(broker, {"client-id": client}, request_percentage=0.00001)
    fetch = {
        "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
            "log_start_offset": -1, "partition_max_bytes": 1 << 20,
        }]}],
        "forgotten_topics_data": [], "rack_id": "",
    }  # fmt: skip
    host, port = broker.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as sock:
        sock.sendall(request_frame(FETCH, version, fetch, 1, client))
        response = read_response(sock, FETCH, version)

    assert 0 < response.throttle_time.total_seconds() <= 1.0
    assert response.responses[0].partitions[0].error_code.value == 0


def _cycles(
    throttles: list[tuple[float, float]],
    marks: Callable[[float], bool] = _ends_a_burst,
    measured_s: float = MEASURED_S,
) -> tuple[float, float] | None:
    """Where to measure: from the first throttle that ``marks`` a cycle to the first one
    at least ``measured_s`` after it; or, for a client held steadily — no mark over
    ``measured_s`` — from the first throttle after the last mark to the one at least
    ``measured_s`` after it.

    A client at full speed is held either way, depending on where the samples roll over
    between its requests: in bursts that each end in a long throttle (a whole cycle
    averages to the quota), or by a throttle after nearly every request and no burst at
    all (any stretch is at the quota). A client that stalls for a moment can go from one
    to the other."""
    ends = [at for at, throttle_s in throttles if marks(throttle_s)]
    later = [at for at in ends[1:] if at >= ends[0] + measured_s]
    if later:
        return ends[0], later[0]
    held = [at for at, throttle_s in throttles if throttle_s > 0 and not marks(throttle_s)]
    steady = [at for at in held if not ends or at > ends[-1]]
    if steady and steady[-1] >= steady[0] + measured_s:
        return steady[0], next(at for at in steady if at >= steady[0] + measured_s)
    return None


def _measuring(
    started: float, throttles: list[tuple[float, float]], measured_s: float = MEASURED_S
) -> bool:
    """Whether to go on: until the client has been throttled for three measured spans,
    however long a loaded machine took to get it going (up to ``TIMEOUT_S``)."""
    now = time.monotonic()
    if not throttles:
        return now < started + TIMEOUT_S
    return now < max(started + TIMEOUT_S, throttles[0][0] + 3 * measured_s)


def _rate(
    events: list[tuple[float, int]],
    throttles: list[tuple[float, float]],
    marks: Callable[[float], bool] = _ends_a_burst,
    measured_s: float = MEASURED_S,
) -> float:
    """Bytes per second over whole cycles, or over a stretch held steadily."""
    measured = _cycles(throttles, marks, measured_s)
    assert measured is not None, (
        f"no {measured_s} s of throttled cycles nor of steady throttles: {throttles}"
    )
    start, end = measured
    total = sum(size for at, size in events if start < at <= end)
    return total / (end - start)


def _producer_rate(
    broker: BrokerProcess, marks: Callable[[float], bool], measured_s: float
) -> float:
    """The rate a confluent-kafka producer at full speed gets, over whole cycles."""
    topic, client = _topic(broker), _name("producer")
    _alter(broker, {"client-id": client}, producer_byte_rate=RATE)
    delivered: list[tuple[float, int]] = []
    throttled: list[tuple[float, float]] = []

    def on_delivery(error: Any, message: Any) -> None:
        if error is None:
            delivered.append((time.monotonic(), len(message.value())))

    producer = Producer({
        "bootstrap.servers": broker.bootstrap, "client.id": client, "linger.ms": 5,
        "batch.size": 16_384, "queue.buffering.max.kbytes": 256, "acks": 1,
        "throttle_cb": lambda event: throttled.append((time.monotonic(), event.throttle_time)),
        **QUIET,
    })  # fmt: skip
    value = b"x" * 1000
    started = time.monotonic()
    while (
        _measuring(started, throttled, measured_s) and _cycles(throttled, marks, measured_s) is None
    ):
        try:
            producer.produce(topic, value, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.01)
    producer.flush(TIMEOUT_S)
    return _rate(delivered, throttled, marks, measured_s)


def test_a_producer_is_held_to_its_producer_byte_rate(broker: BrokerProcess) -> None:
    rate = _producer_rate(broker, _ends_a_burst, MEASURED_S)

    assert 0.8 * RATE <= rate <= 1.2 * RATE, f"{rate:.0f} B/s for a quota of {RATE} B/s"


@pytest.mark.slow
def test_a_producer_is_held_to_its_producer_byte_rate_with_kafkas_default_windows(
    tmp_path: Path,
) -> None:
    """Eleven one-second samples: cycles of about eleven seconds, measured over two."""
    with start_broker(tmp_path / "data") as broker:
        rate = _producer_rate(broker, _ends_a_throttled_phase, measured_s=20.0)

    assert 0.8 * RATE <= rate <= 1.2 * RATE, f"{rate:.0f} B/s for a quota of {RATE} B/s"


def test_a_consumer_is_held_to_its_consumer_byte_rate(broker: BrokerProcess) -> None:
    topic, client = _topic(broker), _name("consumer")
    _alter(broker, {"client-id": client}, consumer_byte_rate=RATE)
    value = b"y" * 1000
    # Batches well within what the quota lets through per window: a fetch returns at
    # least one whole batch, and one larger than that would never be sent.
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.size": 16_384, **QUIET}
    )
    for _ in range(int(RATE * (MEASURED_S + 8) / len(value))):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(TIMEOUT_S) == 0

    throttled: list[tuple[float, float]] = []
    consumed: list[tuple[float, int]] = []
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap, "client.id": client, "group.id": client,
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "fetch.max.bytes": 16_384, "max.partition.fetch.bytes": 16_384,
        "message.max.bytes": 16_384,
        "throttle_cb": lambda event: throttled.append((time.monotonic(), event.throttle_time)),
        **QUIET,
    })  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    try:
        started = time.monotonic()
        while _measuring(started, throttled) and _cycles(throttled) is None:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                consumed.append((time.monotonic(), len(message.value())))
    finally:
        consumer.close()

    rate = _rate(consumed, throttled)
    assert 0.8 * RATE <= rate <= 1.2 * RATE, f"{rate:.0f} B/s for a quota of {RATE} B/s"


# -- persistence and the command line ---------------------------------------------------


def test_client_quotas_survive_a_broker_restart(own_broker: BrokerProcess) -> None:
    topic, client = _topic(own_broker), _name("client")
    _alter(own_broker, {"user": None, "client-id": client}, producer_byte_rate=1000)

    own_broker.restart()

    assert _describe(own_broker) == {
        (("client-id", client), ("user", None)): {"producer_byte_rate": 1000.0}
    }
    assert produce_throttle_ms(own_broker.bootstrap, topic, client, 20_000) > 0


@dataclass
class _Run:
    returncode: int
    stdout: str
    stderr: str


def _samsa(capsys: pytest.CaptureFixture[str], *args: str) -> _Run:
    """``samsa ARGS`` run in this process (the tool is the same code as the command)."""
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return _Run(code, out, err)


def test_samsa_configs_alters_and_describes_a_users_quotas(
    broker: BrokerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    user = _name("user")
    altered = _samsa(capsys, "configs", "--bootstrap-server", broker.bootstrap, "--alter",
                     "--entity-type", "users", "--entity-name", user,
                     "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048")  # fmt: skip
    assert altered.returncode == 0, altered.stderr
    assert altered.stdout == f"Completed updating config for user-principal '{user}'.\n"

    _samsa(capsys, "configs", "--bootstrap-server", broker.bootstrap, "--alter",
           "--entity-type", "users", "--entity-name", user,
           "--delete-config", "consumer_byte_rate")  # fmt: skip
    described = _samsa(capsys, "configs", "--bootstrap-server", broker.bootstrap, "--describe",
                       "--entity-type", "users", "--entity-name", user)  # fmt: skip

    assert described.returncode == 0, described.stderr
    assert described.stdout == (
        f"Quota configs for user-principal '{user}' are producer_byte_rate=1024.0\n"
    )


def test_samsa_configs_refuses_an_unknown_quota_key(
    broker: BrokerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    result = _samsa(capsys, "configs", "--bootstrap-server", broker.bootstrap, "--alter",
                    "--entity-type", "clients", "--entity-default",
                    "--add-config", "bogus_rate=5")  # fmt: skip

    assert result.returncode == 1
    assert "Invalid configuration key bogus_rate" in result.stderr
