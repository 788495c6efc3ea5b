"""The schema registry in a real broker, through confluent-kafka's SchemaRegistryClient,
its Avro and JSON serializers producing and consuming through the broker, and raw HTTP
for what those clients never send.

One broker serving the registry for the module; each test uses subjects of its own.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import (
    Metadata,
    MetadataProperties,
    Schema,
    SchemaReference,
    SchemaRegistryClient,
    SchemaRegistryError,
)
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message_factory import GetMessageClass

from samsa.testing import BrokerProcess, start_broker

pytestmark = pytest.mark.timeout(120)

QUIET = {"log_level": 3}


def avro_record(name: str, *fields: dict[str, Any]) -> str:
    return json.dumps({"type": "record", "name": name, "fields": list(fields)})


USER_V1 = avro_record("User", {"name": "name", "type": "string"})
USER_V2 = avro_record(
    "User", {"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": 0}
)
USER_NO_DEFAULT = avro_record(
    "User", {"name": "name", "type": "string"}, {"name": "email", "type": "string"}
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path_factory.mktemp("registry") / "data", schema_registry=True)
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def client(broker: BrokerProcess) -> Iterator[SchemaRegistryClient]:
    sr = SchemaRegistryClient({"url": broker.schema_registry_url})
    yield sr


@pytest.fixture
def subject(request: pytest.FixtureRequest) -> str:
    return f"{request.node.name}-value"


def fresh(client: SchemaRegistryClient) -> SchemaRegistryClient:
    """A client with empty caches: every call below reaches the registry."""
    return SchemaRegistryClient({"url": client._rest_client.base_urls[0]})


def raw(
    broker: BrokerProcess,
    method: str,
    path: str,
    body: bytes | str | None = None,
    content_type: str = "application/vnd.schemaregistry.v1+json",
) -> tuple[int, str, Any]:
    url = urlsplit(broker.schema_registry_url)
    conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=30)
    headers = {"Content-Type": content_type} if body is not None else {}
    conn.request(method, path, body=body, headers=headers)
    response = conn.getresponse()
    text = response.read().decode()
    conn.close()
    try:
        decoded = json.loads(text)
    except ValueError:
        decoded = text
    return response.status, response.getheader("Content-Type") or "", decoded


def error_code(exc: pytest.ExceptionInfo[SchemaRegistryError]) -> tuple[int, int]:
    return exc.value.http_status_code, exc.value.error_code


# -- subjects, versions and ids ------------------------------------------------------------


def test_a_registered_schema_is_found_by_id_version_latest_and_lookup(
    client: SchemaRegistryClient, subject: str
) -> None:
    schema_id = client.register_schema(subject, Schema(USER_V1, "AVRO"))
    sr = fresh(client)
    assert json.loads(sr.get_schema(schema_id).schema_str) == json.loads(USER_V1)
    version = sr.get_version(subject, 1)
    assert (version.schema_id, version.version, version.subject) == (schema_id, 1, subject)
    assert sr.get_latest_version(subject).schema_id == schema_id
    assert sr.get_versions(subject) == [1]
    found = sr.lookup_schema(subject, Schema(USER_V1, "AVRO"))
    assert (found.schema_id, found.version) == (schema_id, 1)
    assert subject in sr.get_subjects()
    assert sr.get_subjects_by_schema_id(schema_id) == [subject]
    assert [(v.subject, v.version) for v in sr.get_schema_versions(schema_id)] == [(subject, 1)]


def test_registering_the_same_schema_again_returns_its_id_without_a_new_version(
    client: SchemaRegistryClient, subject: str
) -> None:
    first = fresh(client).register_schema(subject, Schema(USER_V1, "AVRO"))
    again = fresh(client).register_schema(subject, Schema(USER_V1, "AVRO"))
    assert again == first
    assert fresh(client).get_versions(subject) == [1]


def test_the_same_schema_under_two_subjects_has_one_id_and_another_schema_a_new_one(
    client: SchemaRegistryClient, subject: str
) -> None:
    record = avro_record("Shared", {"name": "x", "type": "long"})
    first = client.register_schema(subject, Schema(record, "AVRO"))
    second = client.register_schema(subject + "-other", Schema(record, "AVRO"))
    other = client.register_schema(
        subject + "-third", Schema(avro_record("Other", {"name": "y", "type": "long"}), "AVRO")
    )
    assert first == second
    assert other > first
    assert sorted(fresh(client).get_subjects_by_schema_id(first)) == [
        subject,
        subject + "-other",
    ]


def test_concurrent_registrations_get_distinct_ids_and_consecutive_versions(
    client: SchemaRegistryClient, subject: str
) -> None:
    client.set_compatibility(subject, "NONE")
    schemas = [avro_record(f"Concurrent{i}", {"name": "x", "type": "int"}) for i in range(16)]
    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(lambda s: fresh(client).register_schema(subject, Schema(s, "AVRO")),
                            schemas))  # fmt: skip
    assert len(set(ids)) == len(schemas)
    sr = fresh(client)
    assert sr.get_versions(subject) == list(range(1, len(schemas) + 1))
    by_version = {sr.get_version(subject, v).schema_id for v in range(1, len(schemas) + 1)}
    assert by_version == set(ids)


def test_register_full_response_carries_the_id_and_version(
    client: SchemaRegistryClient, subject: str
) -> None:
    registered = client.register_schema_full_response(subject, Schema(USER_V1, "AVRO"))
    assert registered.version == 1
    assert registered.schema_id == fresh(client).get_latest_version(subject).schema_id


def test_metadata_is_kept_and_the_latest_version_with_it_is_found(
    client: SchemaRegistryClient, subject: str
) -> None:
    tagged = Schema(
        USER_V1, "AVRO", metadata=Metadata(None, MetadataProperties({"owner": "ops"}), None)
    )
    newer = Schema(
        USER_V2, "AVRO", metadata=Metadata(None, MetadataProperties({"owner": "dev"}), None)
    )
    first = client.register_schema(subject, tagged)
    client.register_schema(subject, newer)
    sr = fresh(client)
    found = sr.get_latest_with_metadata(subject, {"owner": "ops"})
    assert (found.version, found.schema_id) == (1, first)
    assert found.schema.metadata.properties.properties == {"owner": "ops"}
    assert sr.get_latest_with_metadata(subject, {}).version == 2
    with pytest.raises(SchemaRegistryError) as none:
        sr.get_latest_with_metadata(subject, {"owner": "nobody"})
    assert error_code(none) == (404, 40403)


def test_a_schema_is_found_by_its_guid(client: SchemaRegistryClient, subject: str) -> None:
    registered = client.register_schema_full_response(subject, Schema(USER_V1, "AVRO"))
    sr = fresh(client)
    assert registered.guid is not None
    assert sr.get_version(subject, 1).guid == registered.guid
    assert json.loads(sr.get_schema_by_guid(registered.guid).schema_str) == json.loads(USER_V1)
    with pytest.raises(SchemaRegistryError) as unknown:
        sr.get_schema_by_guid("00000000-0000-0000-0000-000000000000")
    assert error_code(unknown) == (404, 40403)


def test_schema_types_are_avro_json_and_protobuf(client: SchemaRegistryClient) -> None:
    assert sorted(fresh(client).get_schema_types()) == ["AVRO", "JSON", "PROTOBUF"]


def test_the_only_context_is_the_default_one(client: SchemaRegistryClient) -> None:
    assert fresh(client).get_contexts() == ["."]


def test_normalize_registers_differently_written_equal_schemas_once(
    client: SchemaRegistryClient, subject: str
) -> None:
    spaced = (
        '{ "type" : "record", "name": "N", "fields": [{"name": "a", "type": {"type": "int"}}] }'
    )
    reordered = '{"fields":[{"type":"int","name":"a"}],"name":"N","type":"record"}'
    first = client.register_schema(subject, Schema(spaced, "AVRO"), normalize_schemas=True)
    again = fresh(client).register_schema(
        subject, Schema(reordered, "AVRO"), normalize_schemas=True
    )
    assert again == first
    assert fresh(client).get_versions(subject) == [1]
    found = fresh(client).lookup_schema(subject, Schema(reordered, "AVRO"), normalize_schemas=True)
    assert found.version == 1


def test_a_subject_with_a_slash_is_reached_percent_encoded(client: SchemaRegistryClient) -> None:
    subject = "team/orders-value"
    schema_id = client.register_schema(subject, Schema(USER_V1, "AVRO"))
    assert fresh(client).get_latest_version(subject).schema_id == schema_id
    assert subject in fresh(client).get_subjects()


def test_unknown_subject_version_and_id_get_40401_40402_40403(
    client: SchemaRegistryClient, subject: str
) -> None:
    sr = fresh(client)
    with pytest.raises(SchemaRegistryError) as missing_subject:
        sr.get_version("no-such-subject", 1)
    assert error_code(missing_subject) == (404, 40401)
    sr.register_schema(subject, Schema(USER_V1, "AVRO"))
    with pytest.raises(SchemaRegistryError) as missing_version:
        sr.get_version(subject, 7)
    assert error_code(missing_version) == (404, 40402)
    with pytest.raises(SchemaRegistryError) as missing_id:
        sr.get_schema(987654)
    assert error_code(missing_id) == (404, 40403)
    with pytest.raises(SchemaRegistryError) as not_registered:
        sr.lookup_schema(subject, Schema(USER_V2, "AVRO"))
    assert error_code(not_registered) == (404, 40403)


# -- compatibility -------------------------------------------------------------------------


def test_backward_refuses_a_field_without_default_and_accepts_one_with_a_default(
    client: SchemaRegistryClient, subject: str
) -> None:
    client.register_schema(subject, Schema(USER_V1, "AVRO"))
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(USER_NO_DEFAULT, "AVRO"))
    assert error_code(refused) == (409, 409)
    client.register_schema(subject, Schema(USER_V2, "AVRO"))
    assert fresh(client).get_versions(subject) == [1, 2]


def test_test_compatibility_answers_without_registering(
    client: SchemaRegistryClient, subject: str
) -> None:
    client.register_schema(subject, Schema(USER_V1, "AVRO"))
    sr = fresh(client)
    assert sr.test_compatibility(subject, Schema(USER_V2, "AVRO")) is True
    assert sr.test_compatibility(subject, Schema(USER_NO_DEFAULT, "AVRO")) is False
    assert sr.test_compatibility(subject, Schema(USER_V2, "AVRO"), version=1) is True
    assert sr.test_compatibility_all_versions(subject, Schema(USER_NO_DEFAULT, "AVRO")) is False
    assert sr.get_versions(subject) == [1]


def test_forward_refuses_removing_a_field_the_old_schema_needs(
    client: SchemaRegistryClient, subject: str
) -> None:
    client.set_compatibility(subject, "FORWARD")
    client.register_schema(subject, Schema(USER_NO_DEFAULT, "AVRO"))
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(USER_V1, "AVRO"))
    assert error_code(refused) == (409, 409)
    # Adding a field is forward compatible: the old schema skips it.
    widened = avro_record(
        "User",
        {"name": "name", "type": "string"},
        {"name": "email", "type": "string"},
        {"name": "extra", "type": "int"},
    )
    client.register_schema(subject, Schema(widened, "AVRO"))


def test_transitive_levels_check_every_version_and_plain_ones_the_latest(
    client: SchemaRegistryClient, subject: str
) -> None:
    v1 = avro_record("T", {"name": "a", "type": "int"})
    v2 = avro_record("T", {"name": "a", "type": "int", "default": 0})
    v3 = avro_record("T", {"name": "b", "type": "int", "default": 0})  # drops a
    client.set_compatibility(subject, "FORWARD")
    for schema in (v1, v2, v3):
        client.register_schema(subject, Schema(schema, "AVRO"))
    other = subject + "-transitive"
    client.set_compatibility(other, "FORWARD_TRANSITIVE")
    client.register_schema(other, Schema(v1, "AVRO"))
    client.register_schema(other, Schema(v2, "AVRO"))
    with pytest.raises(SchemaRegistryError) as refused:
        # v1 cannot read what v3 writes: a has no default in v1
        client.register_schema(other, Schema(v3, "AVRO"))
    assert error_code(refused) == (409, 409)


def test_none_accepts_anything_of_the_same_type(client: SchemaRegistryClient, subject: str) -> None:
    client.set_compatibility(subject, "NONE")
    client.register_schema(subject, Schema(USER_V1, "AVRO"))
    client.register_schema(
        subject, Schema(avro_record("X", {"name": "z", "type": "bytes"}), "AVRO")
    )
    assert fresh(client).get_versions(subject) == [1, 2]


def test_config_is_set_read_and_deleted_per_subject_and_globally(
    client: SchemaRegistryClient, subject: str
) -> None:
    sr = fresh(client)
    assert sr.get_compatibility() == "BACKWARD"
    assert sr.set_compatibility(subject, "full_transitive") == {"compatibility": "FULL_TRANSITIVE"}
    assert sr.get_compatibility(subject) == "FULL_TRANSITIVE"
    assert sr.get_config(subject).compatibility_level.value == "FULL_TRANSITIVE"
    sr.delete_config(subject)
    with pytest.raises(SchemaRegistryError) as unset:
        sr.get_compatibility(subject)
    assert error_code(unset) == (404, 40408)
    with pytest.raises(SchemaRegistryError) as invalid:
        sr.set_compatibility(subject, "SIDEWAYS")
    assert error_code(invalid) == (422, 42203)


# -- modes ---------------------------------------------------------------------------------


def test_a_readonly_subject_refuses_registration_with_42205(
    client: SchemaRegistryClient, subject: str
) -> None:
    sr = fresh(client)
    assert sr.get_global_mode() == "READWRITE"
    assert sr.update_mode(subject, "READONLY") == "READONLY"
    assert sr.get_mode(subject) == "READONLY"
    with pytest.raises(SchemaRegistryError) as refused:
        sr.register_schema(subject, Schema(USER_V1, "AVRO"))
    assert error_code(refused) == (422, 42205)
    assert sr.delete_mode(subject) == "READONLY"
    sr.register_schema(subject, Schema(USER_V1, "AVRO"))


def test_import_mode_registers_under_the_id_and_version_the_caller_gives(
    broker: BrokerProcess, client: SchemaRegistryClient, subject: str
) -> None:
    sr = fresh(client)
    assert sr.update_mode(subject, "IMPORT") == "IMPORT"
    body = json.dumps({"schema": USER_V1, "id": 5000, "version": 7})
    status, _, answer = raw(broker, "POST", f"/subjects/{subject}/versions", body)
    assert (status, answer["id"]) == (200, 5000)
    assert sr.get_version(subject, 7).schema_id == 5000
    clash = json.dumps({"schema": USER_V2, "id": 5000, "version": 8})
    status, _, answer = raw(broker, "POST", f"/subjects/{subject}/versions", clash)
    assert (status, answer["error_code"]) == (422, 42207)
    taken = json.dumps({"schema": USER_V2, "id": 5001, "version": 7})
    status, _, answer = raw(broker, "POST", f"/subjects/{subject}/versions", taken)
    assert (status, answer["error_code"]) == (422, 42205)
    sr.update_mode(subject, "READWRITE")
    status, _, answer = raw(broker, "POST", f"/subjects/{subject}/versions", body)
    assert (status, answer["error_code"]) == (422, 42205)
    # Ids given later never collide with imported ones.
    after = avro_record("AfterImport", {"name": "n", "type": "string"})
    assert sr.register_schema(subject + "-after", Schema(after, "AVRO")) > 5000


def test_the_global_mode_cannot_become_import_while_schemas_exist_unless_forced(
    client: SchemaRegistryClient, subject: str
) -> None:
    client.register_schema(subject, Schema(USER_V1, "AVRO"))
    sr = fresh(client)
    with pytest.raises(SchemaRegistryError) as refused:
        sr.update_global_mode("IMPORT")
    assert error_code(refused) == (422, 42205)
    with pytest.raises(SchemaRegistryError) as invalid:
        sr.update_mode(subject, "SOMETIMES")
    assert error_code(invalid) == (422, 42204)


# -- deletes -------------------------------------------------------------------------------


def test_a_soft_deleted_version_is_hidden_then_hard_deleted(
    client: SchemaRegistryClient, subject: str
) -> None:
    client.register_schema(subject, Schema(USER_V1, "AVRO"))
    client.register_schema(subject, Schema(USER_V2, "AVRO"))
    sr = fresh(client)
    with pytest.raises(SchemaRegistryError) as not_soft:
        sr.delete_version(subject, 1, permanent=True)
    assert error_code(not_soft) == (404, 40407)
    assert sr.delete_version(subject, 1) == 1
    assert sr.get_versions(subject) == [2]
    assert sr.get_versions(subject, deleted=True) == [1, 2]
    with pytest.raises(SchemaRegistryError) as again:
        sr.delete_version(subject, 1)
    assert error_code(again) == (404, 40406)
    assert sr.delete_version(subject, 1, permanent=True) == 1
    assert sr.get_versions(subject, deleted=True) == [2]


def test_a_deleted_subject_is_listed_only_with_deleted_and_gone_after_a_hard_delete(
    client: SchemaRegistryClient, subject: str
) -> None:
    schema_id = client.register_schema(subject, Schema(USER_V1, "AVRO"))
    sr = fresh(client)
    with pytest.raises(SchemaRegistryError) as not_soft:
        sr.delete_subject(subject, permanent=True)
    assert error_code(not_soft) == (404, 40405)
    assert sr.delete_subject(subject) == [1]
    assert subject not in sr.get_subjects()
    assert subject in sr.get_subjects(deleted=True)
    with pytest.raises(SchemaRegistryError) as again:
        sr.delete_subject(subject)
    assert error_code(again) == (404, 40404)
    # Still readable by id while only soft-deleted: records written with it stay readable.
    assert json.loads(sr.get_schema(schema_id).schema_str) == json.loads(USER_V1)
    assert sr.delete_subject(subject, permanent=True) == [1]
    assert subject not in sr.get_subjects(deleted=True)
    with pytest.raises(SchemaRegistryError) as gone:
        sr.get_versions(subject)
    assert error_code(gone) == (404, 40401)


def test_versions_continue_after_a_soft_deleted_subject_is_registered_again(
    client: SchemaRegistryClient, subject: str
) -> None:
    client.register_schema(subject, Schema(USER_V1, "AVRO"))
    client.delete_subject(subject)
    fresh(client).register_schema(subject, Schema(USER_V1, "AVRO"))
    assert fresh(client).get_versions(subject) == [2]


# -- references ----------------------------------------------------------------------------


def test_a_schema_referencing_another_subject_resolves_and_protects_it(
    client: SchemaRegistryClient, subject: str
) -> None:
    address_subject = subject + "-address"
    address = json.dumps(
        {
            "type": "record",
            "name": "Address",
            "namespace": "acme",
            "fields": [{"name": "street", "type": "string"}],
        }
    )
    address_id = client.register_schema(address_subject, Schema(address, "AVRO"))
    person = json.dumps(
        {
            "type": "record",
            "name": "Person",
            "namespace": "acme",
            "fields": [{"name": "home", "type": "acme.Address"}],
        }
    )
    reference = SchemaReference("acme.Address", address_subject, 1)
    person_id = client.register_schema(subject, Schema(person, "AVRO", [reference]))
    sr = fresh(client)
    assert sr.get_referenced_by(address_subject, 1) == [person_id]
    stored = sr.get_schema(person_id)
    assert [(r.name, r.subject, r.version) for r in stored.references] == [
        ("acme.Address", address_subject, 1)
    ]
    assert address_id != person_id
    with pytest.raises(SchemaRegistryError) as referenced:
        sr.delete_version(address_subject, 1)
    assert error_code(referenced) == (422, 42206)
    with pytest.raises(SchemaRegistryError) as whole_subject:
        sr.delete_subject(address_subject)
    assert error_code(whole_subject) == (422, 42206)


def test_an_unknown_reference_is_an_invalid_schema(
    client: SchemaRegistryClient, subject: str
) -> None:
    person = avro_record("P", {"name": "home", "type": "acme.Nowhere"})
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(
            subject, Schema(person, "AVRO", [SchemaReference("acme.Nowhere", "no-such", 1)])
        )
    assert error_code(refused) == (422, 42201)


# -- JSON Schema ---------------------------------------------------------------------------


ORDER_V1 = json.dumps(
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
        "required": ["id"],
        "additionalProperties": False,
    }
)


def test_json_schemas_register_and_evolve_under_backward(
    client: SchemaRegistryClient, subject: str
) -> None:
    client.register_schema(subject, Schema(ORDER_V1, "JSON"))
    v2 = json.loads(ORDER_V1)
    v2["properties"]["note"] = {"type": "string"}
    client.register_schema(subject, Schema(json.dumps(v2), "JSON"))
    v3 = json.loads(json.dumps(v2))
    v3["required"] = ["id", "note"]
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(json.dumps(v3), "JSON"))
    assert error_code(refused) == (409, 409)
    latest = fresh(client).get_latest_version(subject)
    assert latest.schema.schema_type == "JSON"
    assert latest.version == 2


def test_an_invalid_json_schema_is_refused_with_42201(
    client: SchemaRegistryClient, subject: str
) -> None:
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(json.dumps({"type": "nonsense"}), "JSON"))
    assert error_code(refused) == (422, 42201)


# -- serializers through the broker --------------------------------------------------------


def _consume(broker: BrokerProcess, topic: str, count: int | None = None) -> list[Any]:
    """``count`` records of partition 0 (None: up to its end now)."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "sr", **QUIET})
    if count is None:
        count = consumer.get_watermark_offsets(TopicPartition(topic, 0), 10)[1]
    consumer.assign([TopicPartition(topic, 0, 0)])
    found: list[Any] = []
    deadline = time.monotonic() + 30
    while len(found) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            found.append(message)
    consumer.close()
    return found


def test_avro_serializer_and_deserializer_round_trip_through_the_broker(
    broker: BrokerProcess, client: SchemaRegistryClient
) -> None:
    topic = "avro-users"
    serializer = AvroSerializer(client, USER_V2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    users = [{"name": f"user-{i}", "age": i} for i in range(5)]
    for user in users:
        value = serializer(user, SerializationContext(topic, MessageField.VALUE))
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(30) == 0
    messages = _consume(broker, topic, len(users))
    deserializer = AvroDeserializer(fresh(client))
    decoded = [
        deserializer(m.value(), SerializationContext(topic, MessageField.VALUE)) for m in messages
    ]
    assert decoded == users
    registered = fresh(client).get_latest_version(f"{topic}-value")
    assert messages[0].value()[1:5] == registered.schema_id.to_bytes(4, "big")


def test_avro_deserializer_reads_old_records_with_a_newer_reader_schema(
    broker: BrokerProcess, client: SchemaRegistryClient
) -> None:
    topic = "avro-evolving"
    producer = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    old = AvroSerializer(client, USER_V1)
    producer.produce(
        topic,
        value=old({"name": "ada"}, SerializationContext(topic, MessageField.VALUE)),
        partition=0,
    )
    assert producer.flush(30) == 0
    AvroSerializer(client, USER_V2)({"name": "x", "age": 1}, SerializationContext(
        topic, MessageField.VALUE))  # fmt: skip
    [message] = _consume(broker, topic, 1)
    reader = AvroDeserializer(fresh(client), USER_V2)
    decoded = reader(message.value(), SerializationContext(topic, MessageField.VALUE))
    assert decoded == {"name": "ada", "age": 0}


def test_json_serializer_and_deserializer_round_trip_through_the_broker(
    broker: BrokerProcess, client: SchemaRegistryClient
) -> None:
    topic = "json-orders"
    serializer = JSONSerializer(ORDER_V1, client)
    producer = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    orders = [{"id": i, "item": f"thing-{i}"} for i in range(3)]
    for order in orders:
        producer.produce(
            topic, value=serializer(order, SerializationContext(topic, MessageField.VALUE)),
            partition=0,
        )  # fmt: skip
    assert producer.flush(30) == 0
    messages = _consume(broker, topic, len(orders))
    deserializer = JSONDeserializer(None, schema_registry_client=fresh(client))
    decoded = [
        deserializer(m.value(), SerializationContext(topic, MessageField.VALUE)) for m in messages
    ]
    assert decoded == orders


# -- what the clients never send -----------------------------------------------------------


def test_invalid_avro_text_gets_42201_not_a_500(broker: BrokerProcess) -> None:
    for text in ('{"type": "record", "name": "A"', '{"type": "nope"}', "[]", "17"):
        body = json.dumps({"schema": text})
        status, content_type, answer = raw(broker, "POST", "/subjects/bad-avro/versions", body)
        assert (status, answer["error_code"]) == (422, 42201), text
        assert content_type == "application/vnd.schemaregistry.v1+json"


def test_a_body_that_is_not_json_gets_400_and_a_wrong_media_type_415(
    broker: BrokerProcess,
) -> None:
    status, _, answer = raw(broker, "POST", "/subjects/s/versions", "{not json")
    assert (status, answer["error_code"]) == (400, 400)
    status, _, answer = raw(broker, "POST", "/subjects/s/versions", "{}", "text/xml")
    assert (status, answer["error_code"]) == (415, 415)


def test_a_body_larger_than_the_cap_is_refused_with_413_before_it_is_read(
    broker: BrokerProcess,
) -> None:
    url = urlsplit(broker.schema_registry_url)
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(
            b"POST /subjects/huge/versions HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n"
        )
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        answer = received.decode()
    assert answer.startswith("HTTP/1.1 413 ")
    assert json.loads(answer.split("\r\n\r\n", 1)[1])["error_code"] == 413


def test_unknown_paths_get_404_and_wrong_methods_405_as_json(broker: BrokerProcess) -> None:
    status, _, answer = raw(broker, "GET", "/nowhere")
    assert (status, answer["error_code"]) == (404, 404)
    status, _, answer = raw(broker, "PATCH", "/config")
    assert (status, answer["error_code"]) == (405, 405)
    status, _, answer = raw(broker, "GET", "/subjects/s/versions/zero")
    assert (status, answer["error_code"]) == (422, 42202)


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /subjects HTTP/1.1\r\nno colon here\r\n\r\n", 400),
        (b"POST /subjects/s/versions HTTP/1.1\r\nContent-Length: -5\r\n\r\n", 400),
        (b"POST /subjects/s/versions HTTP/1.1\r\nContent-Length: ten\r\n\r\n", 400),
        (b"POST /subjects/s/versions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411),
        (b"GET /subjects HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n", 431),
        (b"GET /subjects SPDY/3\r\n\r\n", 400),
        (b"POST /subjects/s/versions HTTP/1.1\r\nContent-Length: 10\r\n\r\nshort", 400),
    ],
)
def test_malformed_requests_get_a_4xx_json_error_and_the_connection_closed(
    broker: BrokerProcess, request_bytes: bytes, status: int
) -> None:
    url = urlsplit(broker.schema_registry_url)
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(request_bytes)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status} ".encode()), head
    assert json.loads(body)["error_code"] == status


def test_bodies_of_the_wrong_shape_get_the_registrys_codes(broker: BrokerProcess) -> None:
    cases = [
        ("POST", "/subjects/shape/versions", {"schema": 5}, 42201),
        ("POST", "/subjects/shape/versions", {"schema": USER_V1, "schemaType": "XML"}, 42201),
        ("POST", "/subjects/shape/versions", {"schema": USER_V1, "references": "x"}, 42201),
        ("POST", "/subjects/shape/versions", {"schema": USER_V1, "references": [{"x": 1}]}, 42201),
        ("PUT", "/config/shape", {"compatibility": 5}, 42203),
        ("PUT", "/mode/shape", {"mode": ["READONLY"]}, 42204),
        ("POST", "/subjects/shape/versions", [1, 2], 422),
        ("POST", "/compatibility/subjects/shape/versions/latest", {"schema": "{"}, 42201),
    ]
    for method, path, body, code in cases:
        status, _, answer = raw(broker, method, path, json.dumps(body))
        assert answer["error_code"] == code, (path, body, answer)
        assert status in (400, 404, 409, 422), (path, body, status)


@pytest.mark.parametrize("depth", [50, 400, 3000])
def test_deeply_nested_schemas_get_an_answer_never_a_500(broker: BrokerProcess, depth: int) -> None:
    def nested(leaf: str) -> str:  # built as text: json.dumps itself stops at ~1000 levels
        opening = '{"type": "object", "properties": {"n": '
        return opening * depth + f'{{"type": "{leaf}"}}' + "}}" * depth

    subject = f"nested-{depth}"
    for leaf in ("string", "integer"):  # the second is checked against the first
        body = json.dumps({"schema": nested(leaf), "schemaType": "JSON"})
        status, _, answer = raw(broker, "POST", f"/subjects/{subject}/versions", body)
        assert status in (200, 409, 422), answer
        if status != 200:
            assert answer["error_code"] in (409, 42201), answer


def test_curl_is_told_to_continue_when_it_asks_before_sending_a_large_body(
    broker: BrokerProcess, subject: str
) -> None:
    fields = [{"name": f"field_{i}", "type": "string", "default": ""} for i in range(200)]
    schema = json.dumps({"type": "record", "name": "Wide", "fields": fields})
    command = [
        "curl", "-sv", "-o", "/dev/null", "-w", "%{http_code}",
        "-H", "Content-Type: application/vnd.schemaregistry.v1+json",
        "-H", "Expect: 100-continue",  # what curl sends on its own past a size it chooses
        "--data-binary", json.dumps({"schema": schema}),
        f"{broker.schema_registry_url}/subjects/{subject}/versions",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=30)
    assert done.stdout == "200"
    assert "HTTP/1.1 100 Continue" in done.stderr


def test_an_http_1_0_request_is_answered_and_the_connection_closed(broker: BrokerProcess) -> None:
    url = urlsplit(broker.schema_registry_url)
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(b"GET /schemas/types HTTP/1.0\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert json.loads(answer.partition(b"\r\n\r\n")[2]) == ["AVRO", "JSON", "PROTOBUF"]


def test_garbage_instead_of_http_gets_400_and_the_connection_closed(
    broker: BrokerProcess,
) -> None:
    url = urlsplit(broker.schema_registry_url)
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(b"\x00\x01\x02 hello\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 400 ")


def test_a_reference_cycle_written_to_the_topic_is_refused_not_followed_forever(
    broker: BrokerProcess, client: SchemaRegistryClient, subject: str
) -> None:
    # The API refuses references to versions that do not exist yet, so a cycle can only
    # come from the topic itself (written by hand or by another registry): a → b → a.
    a, b = subject + "-a", subject + "-b"
    producer = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    for name, other, schema_id in ((a, b, 9001), (b, a, 9002)):
        key = {"keytype": "SCHEMA", "subject": name, "version": 1, "magic": 1}
        value = {
            "subject": name, "version": 1, "id": schema_id, "deleted": False,
            "schema": avro_record(name.replace("-", "_"), {"name": "x", "type": "int"}),
            "references": [{"name": "Other", "subject": other, "version": 1}],
        }  # fmt: skip
        producer.produce("_schemas", key=json.dumps(key), value=json.dumps(value), partition=0)
    assert producer.flush(30) == 0
    deadline = time.monotonic() + 30
    while raw(broker, "GET", f"/subjects/{b}/versions")[0] != 200:
        assert time.monotonic() < deadline, "the registry did not read the records"
        time.sleep(0.05)
    body = json.dumps(
        {"schema": avro_record("C", {"name": "x", "type": "int"}),
         "references": [{"name": "A", "subject": a, "version": 1}]}
    )  # fmt: skip
    status, _, answer = raw(broker, "POST", f"/subjects/{subject}/versions", body)
    assert (status, answer["error_code"]) == (422, 42201)
    assert "cycle" in answer["message"]
    status, _, answer = raw(broker, "GET", "/schemas/ids/9001")
    assert status == 200


def test_the_schemas_topic_holds_confluent_format_keys_and_values(
    broker: BrokerProcess, client: SchemaRegistryClient, subject: str
) -> None:
    schema_id = client.register_schema(subject, Schema(USER_V1, "AVRO"))
    records = _consume(broker, "_schemas")
    found = [
        (json.loads(m.key()), json.loads(m.value()) if m.value() else None)
        for m in records
        if m.key() and json.loads(m.key()).get("subject") == subject
    ]
    key, value = found[0]
    assert list(key) == ["keytype", "subject", "version", "magic"]
    assert key == {"keytype": "SCHEMA", "subject": subject, "version": 1, "magic": 1}
    assert value == {
        "subject": subject,
        "version": 1,
        "id": schema_id,
        "schema": json.dumps(json.loads(USER_V1), separators=(",", ":")),
        "deleted": False,
    }


def test_the_pytest_fixture_serves_a_registry(samsa_schema_registry: BrokerProcess) -> None:
    registry = SchemaRegistryClient({"url": samsa_schema_registry.schema_registry_url})
    schema_id = registry.register_schema("fixture-value", Schema(USER_V1, "AVRO"))
    assert registry.get_schema(schema_id).schema_type == "AVRO"


# -- Protobuf ------------------------------------------------------------------------------


def _protobuf_order_class() -> Any:
    """shop.Order (shop/order.proto), which imports shop.Money from shop/money.proto: built
    at run time, as protoc's generated code would register them."""
    field = descriptor_pb2.FieldDescriptorProto
    money = descriptor_pb2.FileDescriptorProto(
        name="shop/money.proto", package="shop", syntax="proto3"
    )
    money_type = money.message_type.add(name="Money")
    money_type.field.add(name="currency", number=1, label=1, type=field.TYPE_STRING)
    money_type.field.add(name="cents", number=2, label=1, type=field.TYPE_INT64)
    order = descriptor_pb2.FileDescriptorProto(
        name="shop/order.proto", package="shop", syntax="proto3", dependency=["shop/money.proto"]
    )
    order_type = order.message_type.add(name="Order")
    order_type.field.add(name="id", number=1, label=1, type=field.TYPE_INT32)
    order_type.field.add(name="item", number=2, label=1, type=field.TYPE_STRING)
    order_type.field.add(
        name="price", number=3, label=1, type=field.TYPE_MESSAGE, type_name=".shop.Money"
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(money)
    pool.Add(order)
    return GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_protobuf_serializer_and_deserializer_round_trip_through_the_broker(
    broker: BrokerProcess, client: SchemaRegistryClient
) -> None:
    topic = "proto-orders"
    order_class = _protobuf_order_class()
    serializer = ProtobufSerializer(order_class, client)
    producer = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    orders = [order_class(id=i, item=f"thing-{i}") for i in range(3)]
    for order in orders:
        order.price.currency, order.price.cents = "EUR", 100 * order.id
        producer.produce(
            topic, value=serializer(order, SerializationContext(topic, MessageField.VALUE)),
            partition=0,
        )  # fmt: skip
    assert producer.flush(30) == 0
    messages = _consume(broker, topic, len(orders))
    # a fresh client: the writer schema and its reference are fetched format=serialized
    deserializer = ProtobufDeserializer(order_class, {}, fresh(client))
    decoded = [
        deserializer(m.value(), SerializationContext(topic, MessageField.VALUE)) for m in messages
    ]
    assert decoded == orders
    # the import was registered as a subject of its own and referenced
    latest = fresh(client).get_latest_version(f"{topic}-value")
    assert latest.schema.schema_type == "PROTOBUF"
    [reference] = latest.schema.references
    assert (reference.name, reference.subject, reference.version) == (
        "shop/money.proto", "shop/money.proto", 1,
    )  # fmt: skip
    assert 'import "shop/money.proto";' in latest.schema.schema_str
    assert ".shop.Money price = 3;" in latest.schema.schema_str


def test_protobuf_text_and_its_serialized_form_are_one_schema(
    broker: BrokerProcess, client: SchemaRegistryClient, subject: str
) -> None:
    text = 'syntax = "proto3";\npackage geo;\nmessage Point { int32 x = 1; int32 y = 2; }\n'
    registered = client.register_schema(subject, Schema(text, "PROTOBUF"))
    status, _, answer = raw(broker, "GET", f"/schemas/ids/{registered}?format=serialized")
    assert status == 200
    file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(answer["schema"]))
    assert [f.name for f in file.message_type[0].field] == ["x", "y"]
    # the serialized form looks up as the schema registered as text
    found = fresh(client).lookup_schema(subject, Schema(answer["schema"], "PROTOBUF"))
    assert (found.schema_id, found.version) == (registered, 1)
    status, _, plain = raw(broker, "GET", f"/subjects/{subject}/versions/1/schema")
    assert status == 200 and "message Point {" in plain


def test_protobuf_evolution_follows_backward_rules(
    client: SchemaRegistryClient, subject: str
) -> None:
    def point(fields: str) -> Schema:
        return Schema(f'syntax = "proto3";\npackage geo;\nmessage Point {{ {fields} }}', "PROTOBUF")

    client.register_schema(subject, point("int32 x = 1;"))
    assert client.register_schema(subject, point("int32 x = 1; string label = 2;"))
    assert not client.test_compatibility(subject, point("string x = 1; string label = 2;"))
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, point("string x = 1; string label = 2;"))
    assert error_code(refused) == (409, 409)
    assert client.register_schema(subject, point("int64 x = 1;"))  # int32 -> int64, label removed


def test_invalid_proto_text_gets_42201_not_a_500(broker: BrokerProcess) -> None:
    for text in (
        "message { bad",
        'syntax = "proto3"; message A { Missing m = 1; }',
        'syntax = "proto3"; import "nowhere.proto"; message A { int32 a = 1; }',
        "bm90IGEgZGVzY3JpcHRvcg==",
        'syntax = "proto3";' + "message A { " * 3000 + " }" * 3000,
    ):
        body = json.dumps({"schema": text, "schemaType": "PROTOBUF"})
        status, _, answer = raw(broker, "POST", "/subjects/bad-proto/versions", body)
        assert (status, answer["error_code"]) == (422, 42201), text
