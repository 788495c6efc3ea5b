"""What a broker does with clients that fail to authenticate, or try to skip it: Kafka's
error codes, a closed connection, nothing allocated from an unauthenticated length, and
every other client served on."""

from __future__ import annotations

import socket
import ssl
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from tests.rawclient import read_response, request_frame
from tests.security.certs import Pki
from tests.security.conftest import SCRAM_USERS, SecureBroker, add_scram_users, start_secure

from samsa.cli.main import main
from samsa.client import Admin, Producer
from samsa.client.admin import ConfigResource, ResourceType, ScramUpsertion
from samsa.errors import ErrorCode, ResourceNotFoundError, UnacceptableCredentialError

SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 17, 36, 3


def connect(broker: SecureBroker, listener: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", broker.ports[listener]), timeout=10)
    if listener.endswith("SSL"):
        context = ssl.create_default_context(cafile=str(broker.pki.ca))
        return context.wrap_socket(sock, server_hostname="127.0.0.1")
    return sock


def closed_by_broker(sock: socket.socket) -> bool:
    """True when the broker closed the connection (EOF or reset) within 10 s."""
    sock.settimeout(10)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, ssl.SSLError):
        return True


def handshake(sock: socket.socket, mechanism: str, version: int = 1) -> object:
    sock.sendall(request_frame(SASL_HANDSHAKE, version, {"mechanism": mechanism}))
    return read_response(sock, SASL_HANDSHAKE, version)


def authenticate(sock: socket.socket, token: bytes) -> object:
    sock.sendall(request_frame(SASL_AUTHENTICATE, 2, {"auth_bytes": token}))
    return read_response(sock, SASL_AUTHENTICATE, 2)


def plain_token(user: str, password: str) -> bytes:
    return f"\0{user}\0{password}".encode()


def metadata_works(broker: SecureBroker, listener: str = "SASL_PLAINTEXT") -> bool:
    config = {
        "bootstrap.servers": broker.address(listener),
        "security.protocol": listener,
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }
    if listener.endswith("SSL"):
        config["ssl.ca.location"] = str(broker.pki.ca)
    return confluent_kafka.Producer(config).list_topics(timeout=20).brokers != {}


def test_a_wrong_password_gets_sasl_authentication_failed_and_the_connection_closes(
    secure_broker: SecureBroker,
) -> None:
    with connect(secure_broker, "SASL_PLAINTEXT") as sock:
        assert handshake(sock, "PLAIN").error_code == ErrorCode.NONE
        answer = authenticate(sock, plain_token("alice", "wrong"))
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "wrong" not in (answer.error_message or "")
        assert closed_by_broker(sock)
    assert metadata_works(secure_broker)
    log = secure_broker.process.log_path.read_text()
    assert "failed authentication" in log and "alice" in log and "wrong" not in log


def test_an_unknown_scram_user_fails_as_a_wrong_password_does(secure_broker: SecureBroker) -> None:
    failures = []
    for user in ("bob", "nobody"):
        errors: list[str] = []

        def record(error: confluent_kafka.KafkaError, errors: list[str] = errors) -> None:
            errors.append(error.str())

        producer = confluent_kafka.Producer(
            {"bootstrap.servers": secure_broker.address("SASL_SSL"),
             "security.protocol": "SASL_SSL", "ssl.ca.location": str(secure_broker.pki.ca),
             "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user,
             "sasl.password": "not-the-password", "error_cb": record}
        )  # fmt: skip
        deadline = time.monotonic() + 20
        while not errors and time.monotonic() < deadline:
            producer.poll(0.2)
        failures.append(errors[0].split(": ", 2)[-1].split(" (after")[0])
    assert failures[0] == failures[1]
    assert "invalid credentials" in failures[0]
    assert metadata_works(secure_broker, "SASL_SSL")


def test_a_request_before_authentication_closes_the_connection(
    secure_broker: SecureBroker,
) -> None:
    with connect(secure_broker, "SASL_SSL") as sock:
        sock.sendall(request_frame(METADATA, 12, {"topics": None}))
        assert closed_by_broker(sock)


def test_an_oversized_frame_before_authentication_closes_at_its_size_prefix(
    secure_broker: SecureBroker,
) -> None:
    # 600 KiB is over sasl.server.max.receive.size (512 KiB) though far under
    # socket.request.max.bytes: only the 4-byte prefix is sent, and the connection closes.
    with connect(secure_broker, "SASL_PLAINTEXT") as sock:
        sock.sendall(struct.pack(">i", 600 * 1024))
        assert closed_by_broker(sock)
    assert metadata_works(secure_broker)


def test_garbage_before_authentication_closes_the_connection(secure_broker: SecureBroker) -> None:
    with connect(secure_broker, "SASL_PLAINTEXT") as sock:
        sock.sendall(struct.pack(">i", 12) + b"\xff" * 12)
        assert closed_by_broker(sock)


def test_an_unsupported_mechanism_is_answered_with_the_enabled_ones(
    secure_broker: SecureBroker,
) -> None:
    with connect(secure_broker, "SASL_PLAINTEXT") as sock:
        answer = handshake(sock, "GSSAPI")
        assert answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert set(answer.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
        assert closed_by_broker(sock)


def test_sasl_handshake_on_a_plaintext_listener_is_an_illegal_state(
    secure_broker: SecureBroker,
) -> None:
    with connect(secure_broker, "PLAINTEXT") as sock:
        assert handshake(sock, "PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE


def test_handshake_v0_exchanges_bare_tokens(secure_broker: SecureBroker) -> None:
    with connect(secure_broker, "SASL_PLAINTEXT") as sock:
        assert handshake(sock, "PLAIN", version=0).error_code == ErrorCode.NONE
        token = plain_token("alice", "alice-secret")
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert sock.recv(4) == struct.pack(">i", 0)  # an empty answer: authenticated
        sock.sendall(request_frame(METADATA, 12, {"topics": None}))
        assert read_response(sock, METADATA, 12).brokers


def test_a_plaintext_client_on_a_tls_port_is_closed_and_tls_clients_go_on(
    secure_broker: SecureBroker,
) -> None:
    with socket.create_connection(("127.0.0.1", secure_broker.ports["SSL"]), timeout=10) as sock:
        sock.sendall(request_frame(METADATA, 12, {"topics": None}))
        assert closed_by_broker(sock)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": secure_broker.address("SSL"), "security.protocol": "SSL",
         "ssl.ca.location": str(secure_broker.pki.ca)}
    )  # fmt: skip
    assert producer.list_topics(timeout=20).brokers


def test_scram_credentials_are_described_by_mechanism_and_iterations(
    secure_broker: SecureBroker,
) -> None:
    with Admin({"bootstrap.servers": secure_broker.address("PLAINTEXT")}) as admin:
        described = admin.describe_user_scram_credentials(["bob"])
        assert described == {"bob": {"SCRAM-SHA-256": 8192, "SCRAM-SHA-512": 8192}}
        with pytest.raises(ResourceNotFoundError):
            admin.describe_user_scram_credentials(["nobody"])
        with pytest.raises(UnacceptableCredentialError, match="Too few iterations"):
            admin.alter_user_scram_credentials(
                [ScramUpsertion("dave", "SCRAM-SHA-256", "pw", iterations=1000)]
            )


@pytest.fixture
def restartable(tmp_path: Path, pki: Pki) -> Iterator[tuple[Path, Pki]]:
    yield tmp_path / "data", pki


def test_credentials_survive_a_restart_and_deleted_ones_stop_working(
    restartable: tuple[Path, Pki],
) -> None:
    data, pki = restartable
    extra = ("ssl.truststore.password=hunter2",)
    broker = start_secure(data, pki, *extra)
    try:
        add_scram_users(broker.address("PLAINTEXT"), {"erin": "erin-secret"})
        with Admin({"bootstrap.servers": broker.address("PLAINTEXT")}) as admin:
            admin.alter_user_scram_credentials(deletions=[("erin", "SCRAM-SHA-256")])
            config = admin.describe_configs([ConfigResource(ResourceType.BROKER, "0")])
        entry = config[ConfigResource(ResourceType.BROKER, "0")]["ssl.truststore.password"]
        assert entry.sensitive and entry.value is None
    finally:
        broker.process.stop()
    broker = start_secure(data, pki, *extra)
    try:
        scram = {
            "bootstrap.servers": broker.address("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.username": "erin", "sasl.password": "erin-secret",
        }  # fmt: skip
        with Producer({**scram, "sasl.mechanism": "SCRAM-SHA-512"}) as producer:
            assert producer.send("after-restart", value=b"v").result(30).offset == 0
        with (
            Producer({**scram, "sasl.mechanism": "SCRAM-SHA-256"}) as producer,
            pytest.raises(Exception, match="SASL_AUTHENTICATION_FAILED"),
        ):
            producer.send("after-restart", value=b"v").result(30)
    finally:
        broker.process.stop()


def test_mutual_tls_required_refuses_a_client_without_a_certificate(
    restartable: tuple[Path, Pki],
) -> None:
    data, pki = restartable
    broker = start_secure(data, pki, "listener.name.ssl.ssl.client.auth=required")
    try:
        base = {"bootstrap.servers": broker.address("SSL"), "security.protocol": "SSL",
                "ssl.ca.location": str(pki.ca)}  # fmt: skip
        errors: list[str] = []
        anonymous = confluent_kafka.Producer({**base, "error_cb": lambda e: errors.append(e.str())})
        deadline = time.monotonic() + 20
        while not errors and time.monotonic() < deadline:
            anonymous.poll(0.2)
        assert errors, "a client without a certificate was let in"
        cert, key = pki.client("frank")
        with_cert = confluent_kafka.Producer(
            {**base, "ssl.certificate.location": str(cert), "ssl.key.location": str(key)}
        )
        assert with_cert.list_topics(timeout=20).brokers
    finally:
        broker.process.stop()


def test_a_session_past_connections_max_reauth_ms_is_closed_unless_it_reauthenticates(
    restartable: tuple[Path, Pki],
) -> None:
    data, pki = restartable
    broker = start_secure(data, pki, "connections.max.reauth.ms=1500")
    try:
        with connect(broker, "SASL_PLAINTEXT") as sock:
            assert handshake(sock, "PLAIN").error_code == ErrorCode.NONE
            answer = authenticate(sock, plain_token("alice", "alice-secret"))
            assert answer.error_code == ErrorCode.NONE
            assert answer.session_lifetime.total_seconds() == 1.5
            time.sleep(2)
            sock.sendall(request_frame(METADATA, 12, {"topics": None}))
            assert closed_by_broker(sock)
        # librdkafka re-authenticates (KIP-368): its producer carries on past the lifetime.
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": broker.address("SASL_PLAINTEXT"),
             "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
             "sasl.username": "alice", "sasl.password": "alice-secret"}
        )  # fmt: skip
        failed: list[object] = []
        for i in range(8):
            producer.produce("reauth", f"{i}".encode(), on_delivery=lambda e, _m: failed.append(e)
                             if e is not None else None)  # fmt: skip
            assert producer.flush(20) == 0
            time.sleep(0.5)
        assert failed == []
        assert SCRAM_USERS  # the module's users are not needed here
    finally:
        broker.process.stop()


def test_samsa_configs_sets_describes_and_deletes_a_scram_credential(
    secure_broker: SecureBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap = secure_broker.address("PLAINTEXT")

    def configs(*args: str) -> tuple[int, str]:
        capsys.readouterr()
        code = main(["configs", "--bootstrap-server", bootstrap, *args])
        return code, capsys.readouterr().out

    user = ["--entity-type", "users", "--entity-name", "gina"]
    code, out = configs("--alter", *user, "--add-config",
                        "SCRAM-SHA-256=[iterations=8192,password=gina-pw],"
                        "SCRAM-SHA-512=[password=gina-pw]")  # fmt: skip
    assert (code, out) == (0, "Completed updating config for user-principal 'gina'.\n")
    assert configs("--describe", *user) == (
        0,
        "SCRAM credential configs for user-principal 'gina' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n",
    )
    scram = {
        "bootstrap.servers": secure_broker.address("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "gina", "sasl.password": "gina-pw",
    }  # fmt: skip
    with Producer(scram) as producer:
        assert producer.send("gina-topic", value=b"v").result(30).offset == 0
    assert configs("--alter", *user, "--delete-config", "SCRAM-SHA-256")[0] == 0
    with Producer(scram) as producer, pytest.raises(Exception, match="SASL_AUTHENTICATION"):
        producer.send("gina-topic", value=b"v").result(30)
