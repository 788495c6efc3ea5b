"""Which exceptions a log line may give without a traceback: the expected ones."""

from __future__ import annotations

import pytest
from kazoo.exceptions import BadVersionError, ConnectionLoss, SessionExpiredError

from samsa.cluster.zk_client import is_expected_zk_error
from samsa.errors import (
    ConfigError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    is_expected_error,
)


@pytest.mark.parametrize(
    "exc",
    [
        NotLeaderOrFollowerError("moved"),
        KafkaStorageError("disk"),
        ConfigError("bad"),
        OSError(28, "No space left on device"),
        TimeoutError(),
    ],
    ids=repr,
)
def test_samsa_and_operating_system_errors_are_expected(exc: Exception) -> None:
    assert is_expected_error(exc)
    assert is_expected_zk_error(exc)


@pytest.mark.parametrize(
    "exc", [TypeError("x"), KeyError("k"), AttributeError("a"), AssertionError()], ids=repr
)
def test_a_programming_error_is_not_expected(exc: Exception) -> None:
    assert not is_expected_error(exc)
    assert not is_expected_zk_error(exc)


@pytest.mark.parametrize(
    "exc", [ConnectionLoss(), SessionExpiredError(), BadVersionError()], ids=repr
)
def test_zookeeper_errors_are_expected_only_where_zookeeper_is_talked_to(exc: Exception) -> None:
    assert is_expected_zk_error(exc)
    assert not is_expected_error(exc)
