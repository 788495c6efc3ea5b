"""A topic whose name is as long as Kafka allows (249 characters) can be deleted and its
name used again: the renamed directory a deletion leaves fits in a file name."""

from __future__ import annotations

from tests.rawclient import create_topic, exchange

from samsa.testing import BrokerProcess


def test_a_topic_with_the_longest_name_is_deleted_and_created_again(
    samsa_broker: BrokerProcess,
) -> None:
    name = "l" * 249
    create_topic(samsa_broker.bootstrap, name)
    deleted = exchange(samsa_broker.bootstrap, 20, 6, {
        "topics": [{"name": name, "topic_id": None}], "timeout": 10_000})  # fmt: skip
    assert [r.error_code for r in deleted.responses] == [0]
    create_topic(samsa_broker.bootstrap, name)
    leftovers = [p.name for p in samsa_broker.data_dir.iterdir() if p.name.startswith("lll")]
    assert all(len(n.encode()) <= 255 for n in leftovers)
