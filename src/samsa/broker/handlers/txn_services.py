"""What the transaction APIs' typed handlers use of the broker (a test gives them its own)."""

from __future__ import annotations

from typing import Protocol

from samsa.broker.handlers.group_services import InternalTopics
from samsa.coordinator.transaction.coordinator import TransactionCoordinator


class TxnServices(Protocol):
    """The part of the broker the transaction APIs use."""

    @property
    def txn_coordinator(self) -> TransactionCoordinator: ...

    @property
    def topics(self) -> InternalTopics: ...
