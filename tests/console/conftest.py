"""A module-scoped real broker for the console's tests (each module starts its own)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from samsa.client import Admin
from samsa.testing import BrokerProcess, start_broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(
        tmp_path_factory.mktemp("console") / "data",
        overrides=["group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000"],
    )
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[Admin]:
    """An admin client of the module's broker."""
    with Admin({"bootstrap.servers": broker.bootstrap}) as client:
        yield client
