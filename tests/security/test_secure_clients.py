"""Every client library produces and consumes over SSL, mutual TLS, SASL_SSL and
SASL_PLAINTEXT (PLAIN and SCRAM) against one broker serving all four protocols."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.helpers import create_ssl_context
from kafka import KafkaConsumer, KafkaProducer
from tests.security.conftest import PLAIN_USERS, SCRAM_USERS, SecureBroker

from samsa.client import Consumer, Producer

COUNT = 20

# (name, listener, client settings in librdkafka's / samsa's names)
SETTINGS: list[tuple[str, str, dict[str, str]]] = [
    ("ssl", "SSL", {"security.protocol": "SSL"}),
    ("mutual-tls", "SSL", {"security.protocol": "SSL", "client_certificate": "alice"}),
    ("sasl-ssl-scram-512", "SASL_SSL",
     {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "user": "bob"}),
    ("sasl-plaintext-plain", "SASL_PLAINTEXT",
     {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "user": "alice"}),
    ("sasl-plaintext-scram-256", "SASL_PLAINTEXT",
     {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256", "user": "carol"}),
]  # fmt: skip
IDS = [name for name, _, _ in SETTINGS]


def password(user: str) -> str:
    return {**PLAIN_USERS, **SCRAM_USERS}[user]


def rdkafka_config(broker: SecureBroker, listener: str, settings: dict[str, str]) -> dict[str, Any]:
    """Settings in librdkafka's names (samsa's clients take the same)."""
    config: dict[str, Any] = {
        "bootstrap.servers": broker.address(listener),
        "security.protocol": settings["security.protocol"],
    }
    if listener.endswith("SSL"):
        config["ssl.ca.location"] = str(broker.pki.ca)
    if "client_certificate" in settings:
        cert, key = broker.pki.client(settings["client_certificate"])
        config["ssl.certificate.location"], config["ssl.key.location"] = str(cert), str(key)
    if "user" in settings:
        config["sasl.mechanism"] = settings["sasl.mechanism"]
        config["sasl.username"] = settings["user"]
        config["sasl.password"] = password(settings["user"])
    return config


def python_client_config(
    broker: SecureBroker, listener: str, settings: dict[str, str]
) -> dict[str, Any]:
    """Settings in kafka-python's and aiokafka's names (without the TLS context)."""
    config: dict[str, Any] = {
        "bootstrap_servers": broker.address(listener),
        "security_protocol": settings["security.protocol"],
    }
    if "user" in settings:
        config["sasl_mechanism"] = settings["sasl.mechanism"]
        config["sasl_plain_username"] = settings["user"]
        config["sasl_plain_password"] = password(settings["user"])
    return config


def topic_for(client: str, name: str) -> str:
    return f"{client}-{name}-{uuid.uuid4().hex[:6]}"


def values() -> list[bytes]:
    return [f"record-{i}".encode() for i in range(COUNT)]


@pytest.mark.parametrize(("name", "listener", "settings"), SETTINGS, ids=IDS)
def test_confluent_kafka_produces_and_consumes(
    secure_broker: SecureBroker, name: str, listener: str, settings: dict[str, str]
) -> None:
    config = rdkafka_config(secure_broker, listener, settings)
    topic = topic_for("confluent", name)
    producer = confluent_kafka.Producer(config)
    for value in values():
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer(
        {**config, "group.id": topic, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    read: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(read) < COUNT and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            read.append(message.value())
    consumer.close()
    assert read == values()


@pytest.mark.parametrize(("name", "listener", "settings"), SETTINGS, ids=IDS)
def test_samsa_clients_produce_and_consume(
    secure_broker: SecureBroker, name: str, listener: str, settings: dict[str, str]
) -> None:
    config = rdkafka_config(secure_broker, listener, settings)
    topic = topic_for("samsa", name)
    with Producer(config) as producer:
        for value in values():
            producer.send(topic, value=value)
        producer.flush()
    with Consumer({**config, "group.id": topic, "auto.offset.reset": "earliest"}) as consumer:
        consumer.subscribe([topic])
        read: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(read) < COUNT and time.monotonic() < deadline:
            read += [record.value for record in consumer.poll(0.5)]
    assert read == values()


def test_samsa_clients_take_the_identity_from_a_jaas_config(secure_broker: SecureBroker) -> None:
    config = {
        "bootstrap.servers": secure_broker.address("SASL_SSL"),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(secure_broker.pki.ca),
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="bob" password="{SCRAM_USERS["bob"]}";',
    }
    topic = topic_for("samsa", "jaas")
    with Producer(config) as producer:
        metadata = producer.send(topic, value=b"v").result(30)
    assert metadata.offset == 0


@pytest.mark.parametrize(("name", "listener", "settings"), SETTINGS, ids=IDS)
def test_kafka_python_produces_and_consumes(
    secure_broker: SecureBroker, name: str, listener: str, settings: dict[str, str]
) -> None:
    config = python_client_config(secure_broker, listener, settings)
    if listener.endswith("SSL"):
        config["ssl_cafile"] = str(secure_broker.pki.ca)
    if "client_certificate" in settings:
        cert, key = secure_broker.pki.client(settings["client_certificate"])
        config["ssl_certfile"], config["ssl_keyfile"] = str(cert), str(key)
    topic = topic_for("kafka-python", name)
    producer = KafkaProducer(**config)
    for value in values():
        producer.send(topic, value)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(
        topic, group_id=topic, auto_offset_reset="earliest", consumer_timeout_ms=20_000, **config
    )
    read = []
    for message in consumer:
        read.append(message.value)
        if len(read) == COUNT:
            break
    consumer.close()
    assert read == values()


@pytest.mark.parametrize(("name", "listener", "settings"), SETTINGS, ids=IDS)
def test_aiokafka_produces_and_consumes(
    secure_broker: SecureBroker, name: str, listener: str, settings: dict[str, str]
) -> None:
    config = python_client_config(secure_broker, listener, settings)
    if listener.endswith("SSL"):
        cert = key = None
        if "client_certificate" in settings:
            cert, key = map(str, secure_broker.pki.client(settings["client_certificate"]))
        config["ssl_context"] = create_ssl_context(
            cafile=str(secure_broker.pki.ca), certfile=cert, keyfile=key
        )
    topic = topic_for("aiokafka", name)

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**config)
        await producer.start()
        try:
            for value in values():
                await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=topic, auto_offset_reset="earliest", **config)
        await consumer.start()
        read: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                async for message in consumer:
                    read.append(message.value)
                    if len(read) == COUNT:
                        break
        finally:
            await consumer.stop()
        return read

    assert asyncio.run(run()) == values()


@pytest.mark.parametrize(("name", "listener", "settings"), SETTINGS, ids=IDS)
def test_kcat_produces_and_consumes(
    secure_broker: SecureBroker, name: str, listener: str, settings: dict[str, str]
) -> None:
    # Debian's kcat links librdkafka 2.0: its SCRAM repeats the client nonce (fixed in
    # librdkafka 2.6.1), which samsa accepts as Kafka 3.9 did.
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    assert kcat, "kcat is not installed: `make test` installs it (Debian package kcat)"
    topic = topic_for("kcat", name)
    config = rdkafka_config(secure_broker, listener, settings)
    common = [kcat, "-b", config.pop("bootstrap.servers"), "-t", topic]
    config["sasl.mechanisms"] = config.pop("sasl.mechanism", "PLAIN")
    for key, value in config.items():
        common += ["-X", f"{key}={value}"]
    lines = "\n".join(v.decode() for v in values()) + "\n"
    subprocess.run([*common, "-P"], input=lines.encode(), check=True, timeout=60)
    out = subprocess.run(
        [*common, "-C", "-o", "beginning", "-c", str(COUNT), "-e"],
        capture_output=True, check=True, timeout=60,
    )  # fmt: skip
    assert out.stdout.decode().split() == [v.decode() for v in values()]


def test_the_tools_take_security_settings_from_a_command_config_file(
    secure_broker: SecureBroker, tmp_path: Path
) -> None:
    properties = tmp_path / "client.properties"

    def write(password: str) -> None:
        properties.write_text(
            "security.protocol=SASL_SSL\nssl.truststore.type=PEM\n"
            f"ssl.truststore.location={secure_broker.pki.ca}\nsasl.mechanism=SCRAM-SHA-256\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
            f'required username="bob" password="{password}";\n'
        )

    def topics(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "samsa", "topics", "--bootstrap-server",
             secure_broker.address("SASL_SSL"), "--command-config", str(properties), *args],
            check=False, capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    write(SCRAM_USERS["bob"])
    assert topics("--create", "--topic", "tools-secured").returncode == 0
    assert "tools-secured" in topics("--list").stdout.split()
    write("wrong")
    refused = topics("--list")
    assert refused.returncode == 1
    assert "SASL_AUTHENTICATION_FAILED" in refused.stderr


@pytest.mark.parametrize(("name", "listener", "settings"), SETTINGS[:3], ids=IDS[:3])
def test_produce_requests_larger_than_the_read_buffer_arrive_intact_over_tls(
    secure_broker: SecureBroker, name: str, listener: str, settings: dict[str, str]
) -> None:
    config = rdkafka_config(secure_broker, listener, settings)
    topic = topic_for("large-requests", name)
    sent = [bytes([i % 251]) * 1000 + i.to_bytes(4, "big") for i in range(3000)]
    # Requests of ~1 MB, each received into a buffer of its own through the TLS transport.
    producer = confluent_kafka.Producer({**config, "linger.ms": 200, "batch.size": 1_000_000})
    for value in sent:
        producer.produce(topic, value, partition=0)
    assert producer.flush(60) == 0
    consumer = confluent_kafka.Consumer(
        {**config, "group.id": topic, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    read: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(read) < len(sent) and time.monotonic() < deadline:
        for message in consumer.consume(1000, 0.5):
            if message.error() is None:
                read.append(message.value())
    consumer.close()
    assert read == sent
