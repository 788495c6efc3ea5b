"""The registry rebuilds its state from ``_schemas`` after a clean restart and after kill -9:
every acknowledged registration, config, mode and delete is there, and ids given
afterwards are new ones, also above ids whose schemas were hard-deleted."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from samsa.testing import BrokerProcess, start_broker

pytestmark = pytest.mark.timeout(180)


def avro_record(name: str, field: str) -> Schema:
    return Schema(
        json.dumps({"type": "record", "name": name, "fields": [{"name": field, "type": "int"}]}),
        "AVRO",
    )


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(
        tmp_path_factory.mktemp("registry-restart") / "data", schema_registry=True
    )
    try:
        yield process
    finally:
        process.stop()


def client(broker: BrokerProcess) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": broker.schema_registry_url})


def snapshot(sr: SchemaRegistryClient) -> dict[str, Any]:
    """Everything a client can see of the registry's state."""
    subjects = sr.get_subjects(deleted=True)
    found: dict[str, Any] = {"global": sr.get_compatibility(), "mode": sr.get_global_mode()}
    for subject in subjects:
        versions = sr.get_versions(subject, deleted=True)
        found[subject] = {
            "live": sr.get_versions(subject) if subject in sr.get_subjects() else [],
            "versions": [(v, sr.get_version(subject, v, deleted=True).schema_id) for v in versions],
        }
    return found


def test_a_clean_restart_keeps_schemas_configs_modes_and_deletes(broker: BrokerProcess) -> None:
    sr = client(broker)
    ids = [sr.register_schema(f"clean-{i}", avro_record(f"R{i}", "a")) for i in range(5)]
    widened = {"type": "record", "name": "R0", "fields": [
        {"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 1}]}  # fmt: skip
    sr.register_schema("clean-0", Schema(json.dumps(widened), "AVRO"))
    sr.set_compatibility("clean-1", "NONE")
    sr.set_compatibility(level="FULL")
    sr.update_mode("clean-2", "READONLY")
    sr.delete_subject("clean-3")
    sr.delete_subject("clean-4")
    sr.delete_subject("clean-4", permanent=True)  # the highest id: gone, never given again
    before = snapshot(sr)
    broker.restart()
    after = snapshot(client(broker))
    assert after == before
    assert client(broker).get_compatibility("clean-1") == "NONE"
    assert client(broker).get_mode("clean-2") == "READONLY"
    new_id = client(broker).register_schema("clean-new", avro_record("Fresh", "z"))
    assert new_id > max(ids)
    client(broker).set_compatibility(level="BACKWARD")


def test_kill_9_loses_no_acknowledged_registration(broker: BrokerProcess) -> None:
    sr = client(broker)
    acknowledged = {
        f"crash-{i}": sr.register_schema(f"crash-{i}", avro_record(f"C{i}", "a")) for i in range(20)
    }
    broker.kill()
    broker.start()
    after = client(broker)
    for subject, schema_id in acknowledged.items():
        assert after.get_latest_version(subject).schema_id == schema_id
    assert after.register_schema("crash-after", avro_record("After", "q")) > max(
        acknowledged.values()
    )
