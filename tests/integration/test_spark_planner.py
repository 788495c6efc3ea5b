"""The Spark source's planner against a real broker, without Spark: topics deleted mid-plan."""

from __future__ import annotations

import uuid

from samsa import Admin
from samsa.client.admin import NewTopic
from samsa.spark.options import SourceOptions
from samsa.spark.planning import OffsetPlanner
from samsa.testing import BrokerProcess
from samsa.types import TopicPartition


class ListedBeforeTheDeletion(Admin):
    """An admin client whose topic listing was taken before a topic was deleted.

    The planner lists topics and then describes them; a deletion between the
    two requests is what this reproduces, with a real broker answering both.
    """

    def __init__(self, config: dict[str, str], listing: list[str]) -> None:
        super().__init__(config)
        self._listing = listing

    def list_topics(self) -> list[str]:  # type: ignore[override]
        return list(self._listing)


def test_a_topic_deleted_between_listing_and_describing_is_left_out_of_the_plan(
    samsa_broker: BrokerProcess,
) -> None:
    kept, doomed = f"plan-kept-{uuid.uuid4().hex[:8]}", f"plan-doomed-{uuid.uuid4().hex[:8]}"
    config = {"bootstrap.servers": samsa_broker.bootstrap}
    with Admin(config) as admin:
        admin.create_topics([NewTopic(kept, 2), NewTopic(doomed, 1)])
        listing = admin.list_topics()
        admin.delete_topics([doomed])
    options = SourceOptions.parse(
        {"kafka.bootstrap.servers": samsa_broker.bootstrap, "subscribe": f"{kept},{doomed}"},
        streaming=True,
    )
    stale = ListedBeforeTheDeletion(config, listing)
    try:
        partitions = OffsetPlanner(options, stale).partitions()
    finally:
        stale.close()
    assert partitions == [TopicPartition(kept, 0), TopicPartition(kept, 1)]
