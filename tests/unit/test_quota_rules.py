"""Client quotas without a broker: the sampled rate and its throttle time, Kafka's
precedence between entities, entity paths, and DescribeClientQuotas filters."""

from __future__ import annotations

import pytest

from samsa.broker.quota.entity import (
    DEFAULT,
    MATCH_ANY,
    MATCH_DEFAULT,
    MATCH_EXACT,
    FilterComponent,
    QuotaEntity,
    check_filter,
    matches,
    parse_quota_value,
)
from samsa.broker.quota.manager import ClientQuotaManager, ClientQuotas
from samsa.broker.quota.rate import SampledRate
from samsa.errors import InvalidRequestError
from samsa.testing.clock import ManualClock

# -- the rate ------------------------------------------------------------------------------


def test_a_new_rate_is_measured_over_at_least_all_windows_but_one() -> None:
    rate = SampledRate(11, 1000, now_ms=0)
    rate.record(1000, now_ms=0)

    assert rate.rate(now_ms=0) == pytest.approx(100.0)  # 1000 bytes over 10 s


def test_the_throttle_time_is_how_far_over_the_quota_times_the_measured_span() -> None:
    rate = SampledRate(11, 1000, now_ms=0)
    rate.record(3000, now_ms=0)

    # 300 B/s against 100 B/s over a 10 s span: (300 - 100) / 100 * 10 s.
    assert rate.throttle_ms(100.0, now_ms=0) == pytest.approx(20_000)


def test_a_rate_within_its_quota_is_not_throttled() -> None:
    rate = SampledRate(11, 1000, now_ms=0)
    rate.record(1000, now_ms=0)

    assert rate.throttle_ms(100.0, now_ms=0) == 0


def test_a_sample_older_than_all_the_windows_no_longer_counts() -> None:
    rate = SampledRate(3, 1000, now_ms=0)
    rate.record(5000, now_ms=0)
    rate.record(10, now_ms=2500)

    # The first sample expired; the second's 0.5 s is taken as two windows' worth at least.
    assert rate.rate(now_ms=3000) == pytest.approx(10 / 2.5)


def test_an_old_client_is_measured_over_the_time_its_samples_span() -> None:
    rate = SampledRate(3, 1000, now_ms=0)
    for t in (0, 1000, 2000):
        rate.record(300, now_ms=t)

    assert rate.rate(now_ms=2500) == pytest.approx(900 / 2.5)


# -- precedence ----------------------------------------------------------------------------

ORDER = [
    QuotaEntity("alice", "app"),
    QuotaEntity("alice", DEFAULT),
    QuotaEntity("alice", None),
    QuotaEntity(DEFAULT, "app"),
    QuotaEntity(DEFAULT, DEFAULT),
    QuotaEntity(DEFAULT, None),
    QuotaEntity(None, "app"),
    QuotaEntity(None, DEFAULT),
]


@pytest.mark.parametrize("winner", range(len(ORDER)))
def test_the_most_specific_configured_entity_sets_the_quota(winner: int) -> None:
    manager = ClientQuotaManager("producer_byte_rate", 11, 1000, clock_ms=ManualClock(0))
    manager.set_quotas({entity: float(i + 1) for i, entity in enumerate(ORDER) if i >= winner})

    found = manager.quota("alice", "app")

    assert found is not None and found[0] == winner + 1


def test_a_quota_of_another_user_or_client_does_not_apply() -> None:
    manager = ClientQuotaManager("producer_byte_rate", 11, 1000, clock_ms=ManualClock(0))
    manager.set_quotas({QuotaEntity("bob", None): 1.0, QuotaEntity(None, "other"): 2.0})

    assert manager.quota("alice", "app") is None


def test_a_users_quota_is_one_rate_for_all_its_clients() -> None:
    manager = ClientQuotaManager("producer_byte_rate", 11, 1000, clock_ms=ManualClock(0))
    manager.set_quotas({QuotaEntity("alice", None): 100.0})

    assert manager.record("alice", "one", 1000) == 0  # 100 B/s over 10 s: at the quota
    assert manager.record("alice", "two", 1000) > 0  # the same rate, now at twice it


def test_a_default_client_quota_is_a_rate_per_client_id() -> None:
    manager = ClientQuotaManager("producer_byte_rate", 11, 1000, clock_ms=ManualClock(0))
    manager.set_quotas({QuotaEntity(None, DEFAULT): 100.0})

    assert manager.record("alice", "one", 1000) == 0
    assert manager.record("alice", "two", 1000) == 0


def test_the_request_quota_throttles_at_most_one_window() -> None:
    quotas = ClientQuotas(11, 1, clock_ms=ManualClock(0))
    quotas.update({QuotaEntity(None, DEFAULT): {"request_percentage": 1.0}})

    assert quotas.record_request_time("app", seconds=5.0) == 1000


def test_a_fetch_asks_at_most_what_the_quota_allows_over_the_window() -> None:
    quotas = ClientQuotas(11, 1, clock_ms=ManualClock(0))
    quotas.update({QuotaEntity(None, "app"): {"consumer_byte_rate": 1000.0}})

    assert quotas.fetch.max_value_in_window("x", "app") == pytest.approx(10_000)
    assert quotas.produce.max_value_in_window("x", "app") is None


# -- entities, values and filters -----------------------------------------------------------


def test_names_are_url_encoded_in_entity_paths_and_null_is_the_default() -> None:
    entity = QuotaEntity.from_components([("user", "CN=a b/c"), ("client-id", None)])

    assert entity.path == "users/CN%3Da%20b%2Fc/clients/<default>"
    assert QuotaEntity.from_path(entity.path) == entity
    assert entity.components() == [("user", "CN=a b/c"), ("client-id", None)]


def test_a_user_named_default_is_not_the_default_user() -> None:
    named = QuotaEntity.from_components([("user", "<default>")])

    assert named != QuotaEntity.from_components([("user", None)])
    assert named.components() == [("user", "<default>")]


@pytest.mark.parametrize(
    ("components", "strict", "expected"),
    [
        ([FilterComponent("user", MATCH_EXACT, "alice")], False, True),
        ([FilterComponent("user", MATCH_EXACT, "alice")], True, False),
        ([FilterComponent("user", MATCH_DEFAULT, None)], False, False),
        ([FilterComponent("client-id", MATCH_ANY, None)], False, True),
        ([FilterComponent("user", MATCH_ANY, None),
          FilterComponent("client-id", MATCH_DEFAULT, None)], True, True),
        ([], True, False),
        ([], False, True),
    ],
)  # fmt: skip
def test_a_filter_matches_by_name_default_or_any_and_strictly(
    components: list[FilterComponent], strict: bool, expected: bool
) -> None:
    entity = QuotaEntity("alice", DEFAULT)

    assert matches(entity, components, strict) is expected


@pytest.mark.parametrize(
    "component",
    [
        FilterComponent("ip", MATCH_ANY, None),
        FilterComponent("user", 7, None),
        FilterComponent("user", MATCH_EXACT, None),
    ],
)
def test_a_filter_kafka_refuses_is_invalid_request(component: FilterComponent) -> None:
    with pytest.raises(InvalidRequestError):
        check_filter([component])


@pytest.mark.parametrize(
    ("key", "value"),
    [("producer_byte_rate", 0.0), ("consumer_byte_rate", 1.5), ("request_percentage", -1.0),
     ("connection_creation_rate", 5.0), ("producer_byte_rate", float("nan"))],
)  # fmt: skip
def test_a_quota_value_kafka_refuses_is_invalid_request(key: str, value: float) -> None:
    with pytest.raises(InvalidRequestError):
        parse_quota_value(key, value)
