"""pytest plugin: the ``samsa_broker`` session fixture (a real broker process)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from samsa.testing.broker import BrokerProcess, start_broker


@pytest.fixture(scope="session")
def samsa_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker for the whole test session; ``samsa_broker.bootstrap`` is its address."""
    broker = start_broker(tmp_path_factory.mktemp("samsa") / "data")
    try:
        yield broker
    finally:
        broker.stop()
