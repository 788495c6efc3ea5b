"""The data source passes kafka.security.protocol, kafka.ssl.* and kafka.sasl.* to the
clients of the driver and the executors: a batch written and read over SASL_SSL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from tests.security.certs import make_pki
from tests.security.conftest import SCRAM_USERS, SecureBroker, add_scram_users, start_secure


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    root: Path = tmp_path_factory.mktemp("spark-secure")
    broker = start_secure(root / "data", make_pki(root / "pki"))
    add_scram_users(broker.address("PLAINTEXT"), SCRAM_USERS)
    try:
        yield broker
    finally:
        broker.process.stop()


def options(broker: SecureBroker, password: str) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": broker.address("SASL_SSL"),
        "kafka.security.protocol": "SASL_SSL",
        "kafka.ssl.ca.location": str(broker.pki.ca),
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
        f'required username="bob" password="{password}";',
    }


def test_a_batch_is_written_and_read_back_over_sasl_ssl(
    spark: SparkSession, secure: SecureBroker
) -> None:
    settings = options(secure, SCRAM_USERS["bob"])
    df = spark.range(30).selectExpr("cast(id as string) as key", "concat('v', id) as value")
    df.write.mode("append").format("samsa").options(**settings).option(
        "topic", "spark-secured"
    ).save()
    back = (
        spark.read.format("samsa")
        .options(**settings)
        .option("subscribe", "spark-secured")
        .load()
        .collect()
    )
    assert sorted((int(r.key), bytes(r.value)) for r in back) == [
        (i, b"v%d" % i) for i in range(30)
    ]


def test_a_wrong_password_fails_the_read_naming_the_authentication(
    spark: SparkSession, secure: SecureBroker
) -> None:
    with pytest.raises(PySparkException, match="SASL_AUTHENTICATION_FAILED"):
        spark.read.format("samsa").options(**options(secure, "wrong")).option(
            "subscribe", "spark-secured"
        ).load().collect()
