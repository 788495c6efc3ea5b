"""Client quotas in force: the configured entities, each client's measured rates, and
the throttle time a request earns (Kafka's ``ClientQuotaManager`` and
``ClientRequestQuotaManager``).

Three quotas, each measured on its own (:mod:`samsa.broker.quota.rate`):

- ``producer_byte_rate``: bytes of Produce requests (the whole request, as Kafka
  counts ``request.sizeInBytes``);
- ``consumer_byte_rate``: bytes of Fetch responses to consumers (followers are
  not throttled). A Fetch that would go over is answered empty, its bytes not
  counted, as Kafka does; a Fetch never asks more than the quota allows over
  the window (``quota × (quota.window.num - 1) × quota.window.size.seconds``);
- ``request_percentage``: time the broker's loop spends on a client's requests,
  in percent of one thread (100 = a whole thread), on every API but ApiVersions
  and the requests brokers send each other.
  Its throttle is at most one window, as Kafka bounds it.

A request over a quota is answered at once with ``throttle_time_ms``, and its
connection handles nothing more for that long (KIP-219): see
:class:`RequestThrottle`. A client without a quota is not measured.

One owner, the broker's loop; the configured entities are replaced whole by
the store that keeps them (local or ZooKeeper) through :meth:`ClientQuotas.update`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass

from samsa.broker.api import request_principal
from samsa.broker.quota.entity import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaEntity,
    precedence,
    sanitize,
)
from samsa.broker.quota.rate import SampledRate

log = logging.getLogger(__name__)

INACTIVE_SENSOR_S = 3600.0
"""A client's rate is forgotten after an hour without requests (Kafka's sensor expiry)."""


@dataclass(slots=True)
class RequestThrottle:
    """The throttle one request earned, read by its connection after the handler: the
    connection then handles nothing more from that client for ``ms``."""

    size: int = 0
    """Bytes of the request frame (what ``producer_byte_rate`` counts)."""
    ms: int = 0
    exempt: bool = False
    """A request between brokers (a follower's Fetch, WriteTxnMarkers): not counted
    against ``request_percentage``, as Kafka exempts cluster actions."""

    def add(self, ms: int) -> None:
        self.ms = max(self.ms, ms)


current_throttle: ContextVar[RequestThrottle] = ContextVar("current_throttle")
"""The :class:`RequestThrottle` of the request being served (set by its connection)."""


def request_throttle() -> RequestThrottle:
    """The request's throttle holder (a detached one outside a connection)."""
    try:
        return current_throttle.get()
    except LookupError:
        return RequestThrottle()


def principal_name(principal: str) -> str:
    """The user a quota names: the principal's name without its ``User:`` type."""
    return principal.partition(":")[2] if ":" in principal else principal


@dataclass(slots=True)
class _Sensor:
    rate: SampledRate
    last_used_ms: float


class ClientQuotaManager:
    """One quota key's limits and the rates measured against it."""

    def __init__(
        self,
        key: str,
        samples: int,
        window_ms: float,
        *,
        clock_ms: Callable[[], float],
        max_throttle_ms: float | None = None,
    ) -> None:
        self.key = key
        self.samples = samples
        self.window_ms = window_ms
        self._clock_ms = clock_ms
        self._max_throttle_ms = max_throttle_ms
        self._quotas: dict[QuotaEntity, float] = {}
        self._resolved: dict[tuple[str, str], tuple[float, tuple[str, str]] | None] = {}
        self._sensors: dict[tuple[str, str], _Sensor] = {}
        self._next_expiry_ms = 0.0

    @property
    def enabled(self) -> bool:
        return bool(self._quotas)

    def set_quotas(self, quotas: Mapping[QuotaEntity, float]) -> None:
        self._quotas = dict(quotas)
        self._resolved.clear()

    def quota(self, user: str, client_id: str) -> tuple[float, tuple[str, str]] | None:
        """The bound for a request of (sanitized) ``user`` and ``client_id`` and whose rate
        it counts against, or None when no entity sets this key."""
        pair = (user, client_id)
        try:
            return self._resolved[pair]
        except KeyError:
            pass
        found: tuple[float, tuple[str, str]] | None = None
        for entity in precedence(user, client_id):
            bound = self._quotas.get(entity)
            if bound is not None:
                shared = (
                    user if entity.user is not None else "",
                    client_id if entity.client_id is not None else "",
                )
                found = (bound, shared)
                break
        if len(self._resolved) > 10_000:
            self._resolved.clear()
        self._resolved[pair] = found
        return found

    def _sensor(self, shared: tuple[str, str], now_ms: float) -> SampledRate:
        sensor = self._sensors.get(shared)
        if sensor is None:
            self._expire(now_ms)
            sensor = _Sensor(SampledRate(self.samples, self.window_ms, now_ms), now_ms)
            self._sensors[shared] = sensor
        sensor.last_used_ms = now_ms
        return sensor.rate

    def _expire(self, now_ms: float) -> None:
        if now_ms < self._next_expiry_ms:
            return
        self._next_expiry_ms = now_ms + 60_000
        idle = [
            k
            for k, s in self._sensors.items()
            if now_ms - s.last_used_ms > INACTIVE_SENSOR_S * 1000
        ]
        for key in idle:
            del self._sensors[key]

    def record(self, user: str, client_id: str, value: float) -> int:
        """Count ``value`` for the client; the throttle time in ms it earns (0: within
        its quota, or no quota)."""
        found = self.quota(user, client_id)
        if found is None:
            return 0
        bound, shared = found
        now_ms = self._clock_ms()
        rate = self._sensor(shared, now_ms)
        rate.record(value, now_ms)
        throttle = rate.throttle_ms(bound, now_ms)
        if self._max_throttle_ms is not None:
            throttle = min(throttle, self._max_throttle_ms)
        return round(throttle)

    def unrecord(self, user: str, client_id: str, value: float) -> None:
        """Take back a value recorded for a response that was not sent (a throttled Fetch)."""
        found = self.quota(user, client_id)
        if found is not None:
            now_ms = self._clock_ms()
            self._sensor(found[1], now_ms).record(-value, now_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """What the quota allows over the measured span (None: no quota)."""
        found = self.quota(user, client_id)
        if found is None:
            return None
        return found[0] * (self.samples - 1) * self.window_ms / 1000


class ClientQuotas:
    """The quotas of every client on this broker: produce, fetch and request time."""

    def __init__(
        self,
        samples: int = 11,
        window_s: int = 1,
        clock_ms: Callable[[], float] | None = None,
    ) -> None:
        clock = clock_ms or (lambda: time.monotonic() * 1000)
        window_ms = window_s * 1000.0
        self.entities: dict[QuotaEntity, dict[str, float]] = {}
        """Every configured entity and its quotas (what DescribeClientQuotas answers)."""
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, samples, window_ms, clock_ms=clock)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, samples, window_ms, clock_ms=clock)
        self.request = ClientQuotaManager(
            REQUEST_PERCENTAGE, samples, window_ms, clock_ms=clock, max_throttle_ms=window_ms
        )

    def update(self, entities: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """Replace the configured quotas (every entity, each with its keys)."""
        self.entities = {e: dict(v) for e, v in entities.items() if v}
        for manager in (self.produce, self.fetch, self.request):
            manager.set_quotas(
                {e: v[manager.key] for e, v in self.entities.items() if manager.key in v}
            )

    @staticmethod
    def requester(client_id: str | None) -> tuple[str, str]:
        """The (sanitized) user and client id of the request being served."""
        return sanitize(principal_name(request_principal.get())), sanitize(client_id or "")

    def record_produce(self, client_id: str | None, size: int) -> int:
        if not self.produce.enabled:
            return 0
        return self.produce.record(*self.requester(client_id), size)

    def record_request_time(self, client_id: str | None, seconds: float) -> int:
        """Count loop time spent on a request (as a percentage of one thread over a second)."""
        if not self.request.enabled:
            return 0
        return self.request.record(*self.requester(client_id), seconds * 100.0)
