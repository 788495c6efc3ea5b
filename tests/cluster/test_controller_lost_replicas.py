"""The controller and brokers that came back without a partition's log (``lost_replicas`` in
their registration): no candidates to lead it, out of its ISR, and an offline partition
stays offline until an unclean election, which takes a replica that kept its log.

The "brokers" are ZooKeeper sessions with a registration and a controller each
(:mod:`tests.zk_brokers`); a broker dies by closing its session.
"""

from __future__ import annotations

from tests.zk_brokers import Broker, create_topic, one_active, run, wait_for_state

from samsa.cluster.zk_data import NO_LEADER
from samsa.testing.waiting import wait_until_async
from samsa.types import TopicPartition

TP = TopicPartition("acked", 0)


def test_a_last_isr_member_back_without_its_log_leaves_the_partition_offline(
    zk_connect: str,
) -> None:
    async def scenario() -> None:
        brokers = {i: await Broker(zk_connect, i).start() for i in (1, 2, 3)}
        try:
            await one_active(list(brokers.values()))
            await create_topic(brokers[1].zk, "acked", {0: (1, 2, 3)})
            await wait_for_state(brokers[1].zk, "acked", 0, 1, (1, 2, 3))
            for follower in (2, 3):
                await brokers.pop(follower).die()
            await wait_for_state(brokers[1].zk, "acked", 0, 1, (1,))
            await brokers.pop(1).die()
            for follower in (2, 3):
                brokers[follower] = await Broker(zk_connect, follower).start()
            await wait_for_state(brokers[2].zk, "acked", 0, NO_LEADER, (1,))
            brokers[1] = await Broker(zk_connect, 1, lost=frozenset({TP})).start()
            controller = await one_active(list(brokers.values()))
            await controller.controller.wait_idle()
            offline = await wait_for_state(brokers[2].zk, "acked", 0, NO_LEADER, (1,))

            outcome = await controller.controller.elect_leaders([TP], unclean=True)

            assert outcome is not None and outcome[TP][0] == 0
            elected = await wait_for_state(brokers[2].zk, "acked", 0, 2, (2,))
            assert elected.leader_epoch == offline.leader_epoch + 1
        finally:
            for broker in brokers.values():
                await broker.die()

    run(scenario)


def test_a_leader_that_reports_its_log_lost_is_replaced_from_the_rest_of_the_isr(
    zk_connect: str,
) -> None:
    async def scenario() -> None:
        brokers = [await Broker(zk_connect, i).start() for i in (1, 2, 3)]
        try:
            controller = await one_active(brokers)
            await create_topic(brokers[0].zk, "acked", {0: (1, 2, 3)})
            await wait_for_state(brokers[0].zk, "acked", 0, 1, (1, 2, 3))

            # Registered again before the controller saw it go: its registration changes.
            brokers[0].lost = frozenset({TP})
            await brokers[0].zk.update_broker(brokers[0].registration())

            await wait_for_state(brokers[0].zk, "acked", 0, 2, (2, 3))
            # Its claim withdrawn (it caught up), it may lead again.
            brokers[0].lost = frozenset()
            await brokers[0].zk.update_broker(brokers[0].registration())

            async def seen() -> bool:
                context = controller.controller.context
                return context is not None and not context.live_brokers[1].lost_replicas

            await wait_until_async(seen, "the controller sees the claim withdrawn", timeout=15)
        finally:
            for broker in brokers:
                await broker.die()

    run(scenario)
