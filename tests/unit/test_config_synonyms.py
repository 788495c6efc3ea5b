"""The broker keys DescribeConfigs names as a topic key's synonyms are the ones that set it."""

from __future__ import annotations

from typing import Any

import pytest

from samsa.broker.config import BROKER_CONFIG, BrokerConfig
from samsa.broker.dynamic_config import TOPIC_ONLY_CONFIGS
from samsa.broker.handlers.configs import TOPIC_CONFIG_SYNONYMS
from samsa.storage.log_config import TOPIC_CONFIG

# A value other than the default for the first (most specific) synonym of each topic key.
SAMPLE_BROKER_VALUES: dict[str, Any] = {
    "log.segment.bytes": 2_000_000,
    "log.roll.ms": 12_345,
    "log.roll.jitter.ms": 777,
    "log.index.size.max.bytes": 4096,
    "log.index.interval.bytes": 1234,
    "log.retention.ms": 1000,
    "log.retention.bytes": 99_999,
    "message.max.bytes": 5000,
    "log.flush.interval.messages": 10,
    "log.flush.interval.ms": 250,
    "log.segment.delete.delay.ms": 5,
    "log.message.timestamp.type": "LogAppendTime",
    "log.message.timestamp.before.max.ms": 1111,
    "log.message.timestamp.after.max.ms": 2222,
    "log.cleanup.policy": "compact",
    "log.cleaner.delete.retention.ms": 3333,
    "log.cleaner.min.compaction.lag.ms": 4444,
    "log.cleaner.max.compaction.lag.ms": 5555,
    "log.cleaner.min.cleanable.ratio": 0.25,
    "min.insync.replicas": 2,
    "unclean.leader.election.enable": True,
    "compression.type": "zstd",
    "log.preallocate": True,
    "compression.gzip.level": 5,
    "compression.lz4.level": 4,
    "compression.zstd.level": 7,
    "log.local.retention.ms": 60_000,
    "log.local.retention.bytes": 1_000_000,
}


def test_every_topic_key_has_broker_synonyms_that_exist() -> None:
    assert set(TOPIC_CONFIG_SYNONYMS) | TOPIC_ONLY_CONFIGS == set(TOPIC_CONFIG.keys)
    assert not set(TOPIC_CONFIG_SYNONYMS) & TOPIC_ONLY_CONFIGS
    for synonyms in TOPIC_CONFIG_SYNONYMS.values():
        assert synonyms
        assert all(name in BROKER_CONFIG for name in synonyms)


@pytest.mark.parametrize("topic_key", sorted(TOPIC_CONFIG_SYNONYMS))
def test_the_first_synonym_sets_the_topic_default(topic_key: str) -> None:
    broker_key = TOPIC_CONFIG_SYNONYMS[topic_key][0]
    sample = SAMPLE_BROKER_VALUES[broker_key]
    value = str(sample).lower() if isinstance(sample, bool) else str(sample)
    defaults = BrokerConfig.from_props({broker_key: value}).log_defaults.to_props()
    expected = TOPIC_CONFIG.parse_value(topic_key, value)
    assert defaults[topic_key] == (tuple(expected) if isinstance(expected, list) else expected)
    assert defaults[topic_key] != BrokerConfig.from_props({}).log_defaults.to_props()[topic_key]
