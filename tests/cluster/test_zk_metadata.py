"""A broker's metadata cache follows what the controller writes to a real ZooKeeper."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from tests.zk_brokers import Broker, create_topic, one_active, run

from samsa.cluster.zk_data import BrokerRegistration, LeaderAndIsr
from samsa.cluster.zk_metadata import ZkMetadataCache
from samsa.testing.waiting import wait_until_async
from samsa.types import TopicPartition


class Recorder:
    """The listener's calls, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []

    def on_brokers_changed(self, brokers: Mapping[int, BrokerRegistration]) -> None:
        self.calls.append(("brokers", tuple(sorted(brokers))))

    def on_partition_changed(
        self,
        tp: TopicPartition,
        replicas: tuple[int, ...],
        state: LeaderAndIsr,
        topic_id: uuid.UUID,
    ) -> None:
        self.calls.append(("partition", str(tp), replicas, state.leader, state.isr))

    def on_topic_deleted(self, topic: str) -> None:
        self.calls.append(("deleted", topic))

    def on_config_changed(self, topic: str) -> None:
        self.calls.append(("config", topic))

    def partitions(self, tp: str) -> list[tuple[object, ...]]:
        return [c for c in self.calls if c[0] == "partition" and c[1] == tp]


def test_the_cache_sees_new_topics_leaders_moving_and_deletions_in_order(zk_connect: str) -> None:
    async def scenario() -> None:
        brokers = [await Broker(zk_connect, i).start() for i in (1, 2)]
        recorder = Recorder()
        cache = ZkMetadataCache(brokers[0].zk, recorder)
        try:
            await cache.start()
            assert recorder.calls == [("brokers", (1, 2))]
            controller = await one_active(brokers)
            await create_topic(controller.zk, "orders", {0: (2, 1)})

            async def led_by(leader: int, isr: tuple[int, ...]) -> bool:
                return bool(recorder.partitions("orders-0")) and recorder.partitions("orders-0")[
                    -1
                ][3:] == (leader, isr)

            await wait_until_async(lambda: led_by(2, (2, 1)), "orders-0 led by 2", timeout=15)
            assert cache.leader(TopicPartition("orders", 0)) == 2
            orders = cache.get("orders")
            assert orders is not None and cache.by_id(orders.topic_id) == orders
            changes = cache.leadership_changes  # Metadata answers are kept until it moves

            # The cache reads through broker 1's session; broker 2 dies (controller or not).
            second = next(b for b in brokers if b.broker_id == 2)
            await second.die()
            brokers.remove(second)
            await wait_until_async(
                lambda: led_by(1, (1,)), "orders-0 led by 1 after broker 2 died", timeout=15
            )
            assert cache.leadership_changes > changes
            assert ("brokers", (1,)) in recorder.calls

            await brokers[0].zk.mark_topic_for_deletion("orders")

            async def deleted() -> bool:
                return ("deleted", "orders") in recorder.calls

            await wait_until_async(deleted, "orders deleted", timeout=15)
            assert TopicPartition("orders", 0) not in cache.states
            assert cache.by_id(orders.topic_id) is None
        finally:
            await cache.stop()
            for broker in brokers:
                await broker.die()

    run(scenario)


def test_a_partition_added_to_a_topic_reaches_the_cache(zk_connect: str) -> None:
    async def scenario() -> None:
        broker = await Broker(zk_connect, 1).start()
        recorder = Recorder()
        cache = ZkMetadataCache(broker.zk, recorder)
        try:
            await cache.start()
            await one_active([broker])
            await create_topic(broker.zk, "t", {0: (1,)})

            async def has(tp: str) -> bool:
                return bool(recorder.partitions(tp))

            await wait_until_async(lambda: has("t-0"), "t-0 seen", timeout=15)
            assignment = await broker.zk.get_topic("t")
            assert assignment is not None
            grown = type(assignment)("t", assignment.topic_id, {0: (1,), 1: (1,)})
            await broker.zk.set_topic_assignment(grown)
            await wait_until_async(lambda: has("t-1"), "t-1 seen", timeout=15)
        finally:
            await cache.stop()
            await broker.die()

    run(scenario)


def test_leaders_may_take_into_an_isr_only_registered_brokers_not_shutting_down(
    zk_connect: str,
) -> None:
    async def scenario() -> None:
        brokers = [await Broker(zk_connect, i).start() for i in (1, 2, 3)]
        cache = ZkMetadataCache(brokers[0].zk, Recorder())
        try:
            await cache.start()
            assert not {1, 2, 3} & _barred(cache)
            await brokers[1].zk.announce_shutdown(2)

            async def stopping() -> bool:
                return _barred(cache) == {2, 4}

            await wait_until_async(stopping, "broker 2 barred while it stops", timeout=15)
            await brokers[2].die()

            async def gone() -> bool:
                return _barred(cache) == {2, 3, 4}

            await wait_until_async(
                gone, "broker 3 barred once its registration is gone", timeout=15
            )
        finally:
            await cache.stop()
            for broker in brokers:
                await broker.die()

    run(scenario)


def _barred(cache: ZkMetadataCache) -> set[int]:
    barred = cache.barred_from_isr()
    return {broker for broker in (1, 2, 3, 4) if broker in barred}
