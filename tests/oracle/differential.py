"""Differential conformance: the same requests, byte for byte, to Apache Kafka and to samsa,
and their answers compared after the fields that rightly differ are set aside.

A :class:`Scenario` is a list of steps played in order on one connection to each broker.
A step is an API key, a version and the request's fields (a function of the scenario's
:class:`Names`, so each scenario has topics and groups of its own, named alike on both
brokers, and of the answers before it, such as a producer id). Answers are turned into
plain values (:func:`plain`) and scrubbed (:func:`scrub`): what depends on the broker
rather than on the protocol — node ids, hosts and ports, cluster and topic ids, throttle
times, timestamps the broker picks, error messages (free text) — is replaced by a marker,
so what is compared is the protocol's content: error codes, offsets, counts, states and
every field's presence.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.rawclient import HANG_S, exchange, read_response, request_frame

CREATE_TOPICS, CREATE_PARTITIONS = 19, 37

BROKER_DEPENDENT = frozenset({
    "throttle_time", "node_id", "host", "port", "rack", "cluster_id", "controller_id",
    "leader_id", "error_message", "log_append_time", "log_append_time_ms", "member_id",
    "coordinator_key", "timestamp", "current_leader", "node_endpoints", "brokers",
    "generation_id", "leader", "protocol_name", "member_assignment", "preferred_read_replica",
    "replica_nodes", "isr_nodes", "leader_epoch", "offline_replicas", "eligible_leader_replicas",
    "last_known_elr", "partition_leader_epoch", "batch_index_error_message",
})  # fmt: skip
"""Fields whose values depend on which broker answers, not on what the protocol says."""


@dataclass(frozen=True)
class Names:
    """The resources of one scenario: the same names on both brokers."""

    topic: str
    group: str
    txn: str


Values = dict[str, Any] | Callable[[Names, list[Any]], dict[str, Any]]
"""A request's fields, or a function of the names and the answers to the steps before."""


@dataclass(frozen=True)
class Step:
    api_key: int
    version: int
    values: Values
    note: str = ""

    def request(self, names: Names, answers: list[Any]) -> dict[str, Any]:
        return self.values(names, answers) if callable(self.values) else self.values


@dataclass(frozen=True)
class Scenario:
    id: str
    steps: Sequence[Step]
    ignore: frozenset[str] = field(default=frozenset())
    """Fields set aside in this scenario besides :data:`BROKER_DEPENDENT`."""

    def names(self, prefix: str) -> Names:
        return Names(f"{prefix}-{self.id}", f"{prefix}-group-{self.id}", f"{prefix}-txn-{self.id}")


def play(bootstrap: str, scenario: Scenario, names: Names) -> list[Any]:
    """Each step's answer, decoded, from one connection (None once the broker closed it)."""
    host, port = bootstrap.split(",", maxsplit=1)[0].rsplit(":", 1)
    answers: list[Any] = []
    with socket.create_connection((host, int(port)), timeout=HANG_S) as sock:
        for number, step in enumerate(scenario.steps, start=1):
            sock.sendall(
                request_frame(
                    step.api_key, step.version, step.request(names, answers), correlation_id=number
                )
            )
            try:
                answers.append(read_response(sock, step.api_key, step.version))
            except ConnectionError:
                answers.extend([None] * (len(scenario.steps) - len(answers)))
                break
            _settle(bootstrap, step, step.request(names, answers[:-1]), answers[-1])
    return answers


def _settle(bootstrap: str, step: Step, request: dict[str, Any], answer: Any) -> None:
    """After a topic is created or grows, wait until the broker's metadata shows it with a
    leader for every partition: Kafka (KRaft) answers CreateTopics before its brokers have
    the topic, and the next step must not race that."""
    if step.api_key == CREATE_TOPICS and not request.get("validate_only"):
        wanted = {t.name: int(t.num_partitions) for t in answer.topics if t.error_code == 0}
    elif step.api_key == CREATE_PARTITIONS and not request.get("validate_only"):
        counts = {t["name"]: int(t["count"]) for t in request["topics"]}
        wanted = {r.name: counts[r.name] for r in answer.results if r.error_code == 0}
    else:
        return
    if not wanted:
        return
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        metadata = exchange(bootstrap.split(",", maxsplit=1)[0], 3, 12, {
            "topics": [{"name": name, "topic_id": None} for name in wanted],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False,
        })  # fmt: skip
        ready = {
            t.name for t in metadata.topics
            if t.error_code == 0 and len(t.partitions) >= wanted.get(t.name or "", 0)
            and all(p.leader_id >= 0 for p in t.partitions)
        }  # fmt: skip
        if ready >= wanted.keys() and _partitions_answer(bootstrap, wanted):
            return
        time.sleep(0.05)
    raise AssertionError(f"topics {sorted(wanted)} not served on {bootstrap} after 30 s")


def _first(bootstrap: str) -> str:
    return bootstrap.split(",", maxsplit=1)[0]


def _partitions_answer(bootstrap: str, wanted: dict[str, int]) -> bool:
    """Whether every partition answers ListOffsets (its leader has loaded it)."""
    answer = exchange(_first(bootstrap), 2, 7, {"replica_id": -1, "isolation_level": 0,
        "topics": [{"name": name, "partitions": [
            {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
            for p in range(count)]} for name, count in wanted.items()]})  # fmt: skip
    return all(p.error_code == 0 for t in answer.topics for p in t.partitions)


def warm_up(bootstrap: str, timeout: float = 60.0) -> None:
    """Wait until the broker's group and transaction coordinators answer (Kafka creates
    ``__consumer_offsets`` and ``__transaction_state`` on the first FindCoordinator, and
    answers COORDINATOR_NOT_AVAILABLE until they are loaded) and it hands out producer ids."""
    deadline = time.monotonic() + timeout
    while True:
        found = exchange(_first(bootstrap), 10, 4, {"key_type": 0,
                         "coordinator_keys": ["oracle-warm-up"]})  # fmt: skip
        txn = exchange(_first(bootstrap), 10, 4, {"key_type": 1,
                       "coordinator_keys": ["oracle-warm-up"]})  # fmt: skip
        pid = exchange(_first(bootstrap), 22, 5, {"transactional_id": None,
                       "transaction_timeout": 60_000, "producer_id": -1,
                       "producer_epoch": -1})  # fmt: skip
        described = exchange(_first(bootstrap), 15, 5, {"groups": ["oracle-warm-up"],
                             "include_authorized_operations": False})  # fmt: skip
        codes = [found.coordinators[0].error_code, txn.coordinators[0].error_code,
                 pid.error_code, described.groups[0].error_code]  # fmt: skip
        if all(code == 0 for code in codes):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{bootstrap} still answers {codes} after {timeout} s")
        time.sleep(0.2)


def plain(value: Any) -> Any:
    """A kio answer as dicts, lists, ints and strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.name if isinstance(value.value, int) and value.name else value.value
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, uuid.UUID):
        return "<zero uuid>" if value.int == 0 else "<uuid>"
    if isinstance(value, tuple | list):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def scrub(value: Any, ignore: Iterable[str] = ()) -> Any:
    """``value`` with broker-dependent fields replaced by ``"<…>"`` and lists of records put
    in a stable order (brokers may list topics or partitions in any order)."""
    ignored = BROKER_DEPENDENT | frozenset(ignore)
    if isinstance(value, dict):
        return {k: ("<…>" if k in ignored else scrub(v, ignored)) for k, v in value.items()}
    if isinstance(value, list):
        items = [scrub(item, ignored) for item in value]
        if items and all(isinstance(item, dict) for item in items):
            return sorted(items, key=repr)
        return items
    return value


def differences(kafka: Any, samsa: Any, path: str = "") -> list[str]:
    """Where two scrubbed answers differ, one line each (empty when they agree)."""
    if isinstance(kafka, dict) and isinstance(samsa, dict):
        found: list[str] = []
        for key in sorted(kafka.keys() | samsa.keys()):
            if key not in samsa or key not in kafka:
                found.append(f"{path}.{key}: only {'Kafka' if key in kafka else 'samsa'} has it")
            else:
                found += differences(kafka[key], samsa[key], f"{path}.{key}")
        return found
    if isinstance(kafka, list) and isinstance(samsa, list) and _named(kafka) and _named(samsa):
        by_name = ({item["name"]: item for item in kafka}, {item["name"]: item for item in samsa})
        found = []
        for name in sorted(by_name[0].keys() | by_name[1].keys(), key=str):
            if name not in by_name[1] or name not in by_name[0]:
                who = "Kafka" if name in by_name[0] else "samsa"
                found.append(f"{path}[{name}]: only {who} has it")
            else:
                found += differences(by_name[0][name], by_name[1][name], f"{path}[{name}]")
        return found
    if isinstance(kafka, list) and isinstance(samsa, list) and len(kafka) == len(samsa):
        found = []
        for index, (a, b) in enumerate(zip(kafka, samsa, strict=True)):
            found += differences(a, b, f"{path}[{index}]")
        return found
    return [] if kafka == samsa else [f"{path or '.'}: Kafka {kafka!r}, samsa {samsa!r}"]


def _named(items: list[Any]) -> bool:
    """Whether ``items`` are records with distinct names (compared name by name)."""
    names = [item.get("name") for item in items if isinstance(item, dict)]
    return len(names) == len(items) > 0 and None not in names and len(set(names)) == len(names)


def compare(
    kafka_bootstrap: str, samsa_bootstrap: str, scenario: Scenario, prefix: str
) -> list[str]:
    """Play ``scenario`` on both brokers; the differences of each step's answer."""
    names = scenario.names(prefix)
    kafka = play(kafka_bootstrap, scenario, names)
    samsa = play(samsa_bootstrap, scenario, names)
    found: list[str] = []
    for number, (step, a, b) in enumerate(zip(scenario.steps, kafka, samsa, strict=True), 1):
        note = f" {step.note}" if step.note else ""
        label = f"step {number} (api {step.api_key} v{step.version}{note})"
        if a is None or b is None:
            if (a is None) != (b is None):
                closed = "Kafka" if a is None else "samsa"
                found.append(f"{label}: only {closed} closed the connection")
            continue
        found += [
            f"{label}{line}"
            for line in differences(
                scrub(plain(a), scenario.ignore), scrub(plain(b), scenario.ignore)
            )
        ]
    return found
