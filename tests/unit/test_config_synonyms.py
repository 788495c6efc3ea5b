"""The topic config table (``TOPIC_CONFIG_KEYS``) and what is made from it agree: the
broker keys DescribeConfigs names as a topic key's synonyms are the ones that set it."""

from __future__ import annotations

from typing import Any

import pytest

from samsa.broker.config import BROKER_CONFIG, BrokerConfig
from samsa.config import ConfigType
from samsa.errors import ConfigError
from samsa.storage.log_config import (
    TOPIC_CONFIG,
    TOPIC_CONFIG_KEYS,
    TOPIC_CONFIG_SYNONYMS,
    TOPIC_ONLY_CONFIGS,
    LogConfig,
    TopicConfigKey,
)

_CANDIDATES: dict[ConfigType, list[Any]] = {
    ConfigType.INT: [5, 1000, 2_000_000],
    ConfigType.LONG: [5, 1000, 2_000_000],
    ConfigType.DOUBLE: [0.25],
    ConfigType.BOOLEAN: [True, False],
    ConfigType.STRING: ["LogAppendTime", "zstd"],
    ConfigType.LIST: ["compact"],
}


def _sample(key: TopicConfigKey) -> str:
    """A valid value of ``key`` other than its default, as a property string."""
    for candidate in _CANDIDATES[key.type]:
        text = str(candidate).lower() if isinstance(candidate, bool) else str(candidate)
        try:
            value = TOPIC_CONFIG.parse_value(key.name, text)
        except ConfigError:
            continue
        if value != key.default:
            return text
    raise AssertionError(f"no sample value for {key.name}")


def test_every_topic_key_has_broker_synonyms_that_exist() -> None:
    assert set(TOPIC_CONFIG_SYNONYMS) | TOPIC_ONLY_CONFIGS == set(TOPIC_CONFIG.keys)
    assert not set(TOPIC_CONFIG_SYNONYMS) & TOPIC_ONLY_CONFIGS
    for synonyms in TOPIC_CONFIG_SYNONYMS.values():
        assert synonyms
        assert all(name in BROKER_CONFIG for name in synonyms)


def test_a_log_config_with_no_properties_has_the_tables_defaults() -> None:
    defaults = LogConfig().to_props()
    assert list(defaults) == [key.name for key in TOPIC_CONFIG_KEYS]
    for key in TOPIC_CONFIG_KEYS:
        expected = tuple(key.default) if isinstance(key.default, list) else key.default
        assert defaults[key.name] == expected


@pytest.mark.parametrize("key", [k for k in TOPIC_CONFIG_KEYS if k.synonyms], ids=lambda k: k.name)
def test_the_first_synonym_sets_the_topic_default(key: TopicConfigKey) -> None:
    synonym = key.synonyms[0]
    value = _sample(key)
    defaults = BrokerConfig.from_props({synonym.name: value}).log_defaults.to_props()
    expected = TOPIC_CONFIG.parse_value(key.name, value)
    assert synonym.scale == 1
    assert defaults[key.name] == (tuple(expected) if isinstance(expected, list) else expected)
    assert defaults[key.name] != BrokerConfig.from_props({}).log_defaults.to_props()[key.name]


@pytest.mark.parametrize(
    ("props", "retention_ms"),
    [
        ({"log.retention.hours": "2"}, 2 * 3600_000),
        ({"log.retention.minutes": "3", "log.retention.hours": "2"}, 3 * 60_000),
        ({"log.retention.ms": "7", "log.retention.minutes": "3"}, 7),
    ],
)
def test_a_broker_key_in_coarser_units_sets_the_topic_default_scaled(
    props: dict[str, str], retention_ms: int
) -> None:
    assert BrokerConfig.from_props(props).log_defaults.retention_ms == retention_ms
