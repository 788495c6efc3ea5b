"""What the group APIs' typed handlers use of the broker (a test gives them its own)."""

from __future__ import annotations

from typing import Protocol

from samsa.coordinator.group.coordinator import GroupCoordinator


class InternalTopics(Protocol):
    """Creates the internal topics on first use, as Kafka does."""

    async def ensure_offsets_topic(self) -> None: ...


class GroupServices(Protocol):
    """The part of the broker the group APIs use."""

    @property
    def group_coordinator(self) -> GroupCoordinator: ...

    @property
    def topics(self) -> InternalTopics: ...
