"""The controller against a real ZooKeeper: election, new topics, failover, fencing, deletion.

Each "broker" here is what a samsa broker brings to the controller: its own
ZooKeeper session, its ephemeral registration and a :class:`Controller`. A
broker dies by closing its session (its ephemeral znodes go at once, as after
a session timeout).
"""

from __future__ import annotations

import pytest
from tests.zk_brokers import (
    Broker,
    create_topic,
    one_active,
    run,
    seen_by_controller,
    state_of,
    wait_for_state,
)

from samsa.cluster import zk_data
from samsa.cluster.kafka_zk import ControllerMovedError
from samsa.cluster.zk_data import NO_LEADER
from samsa.testing.waiting import wait_until_async
from samsa.types import TopicPartition


def test_exactly_one_broker_becomes_controller_and_the_epoch_starts_at_one(zk_connect: str) -> None:
    async def scenario() -> None:
        brokers = [await Broker(zk_connect, i).start() for i in (1, 2, 3)]
        try:
            winner = await one_active(brokers)
            assert winner.controller.epoch == 1
            assert await brokers[0].zk.get_controller_id() == winner.broker_id
        finally:
            for broker in brokers:
                await broker.die()

    run(scenario)


def test_when_the_controller_dies_another_broker_takes_over_with_the_next_epoch(
    zk_connect: str,
) -> None:
    async def scenario() -> None:
        brokers = [await Broker(zk_connect, i).start() for i in (1, 2, 3)]
        try:
            first = await one_active(brokers)
            await first.die()
            rest = [b for b in brokers if b is not first]
            second = await one_active(rest)
            assert second.controller.epoch == 2
            brokers = rest
        finally:
            for broker in brokers:
                await broker.die()

    run(scenario)


def test_a_new_topic_gets_its_first_live_replica_as_leader_and_live_replicas_in_sync(
    zk_connect: str,
) -> None:
    async def scenario() -> None:
        brokers = [await Broker(zk_connect, i).start() for i in (1, 2)]
        try:
            await one_active(brokers)
            await create_topic(brokers[0].zk, "orders", {0: (1, 2), 1: (2, 1), 2: (3, 1, 2)})
            state = await wait_for_state(brokers[0].zk, "orders", 0, 1, (1, 2))
            assert state.leader_epoch == 0
            await wait_for_state(brokers[0].zk, "orders", 1, 2, (2, 1))
            await wait_for_state(brokers[0].zk, "orders", 2, 1, (1, 2))  # broker 3 is not alive
        finally:
            for broker in brokers:
                await broker.die()

    run(scenario)


def test_a_dead_leader_is_replaced_from_the_isr_and_leaves_it(zk_connect: str) -> None:
    async def scenario() -> None:
        brokers = [await Broker(zk_connect, i).start() for i in (1, 2, 3)]
        try:
            controller = await one_active(brokers)
            victim = next(b for b in brokers if b is not controller)
            others = [b.broker_id for b in brokers if b is not victim]
            replicas = (victim.broker_id, *others)
            await create_topic(controller.zk, "t", {0: replicas})
            before = await wait_for_state(controller.zk, "t", 0, victim.broker_id, replicas)
            await victim.die()
            brokers.remove(victim)
            after = await wait_for_state(controller.zk, "t", 0, others[0], tuple(others))
            assert after.leader_epoch == before.leader_epoch + 1
            assert after.controller_epoch == controller.controller.epoch
        finally:
            for broker in brokers:
                await broker.die()

    run(scenario)


def test_a_partition_whose_isr_died_waits_for_an_isr_member_not_a_live_replica(
    zk_connect: str,
) -> None:
    async def scenario() -> None:
        observer = await Broker(zk_connect, 9).start()
        brokers = [observer]
        try:
            await one_active(brokers)
            await create_topic(observer.zk, "t", {0: (1, 2)})
            await observer.controller.wait_idle()
            assert await state_of(observer.zk, "t", 0) is None  # new until a replica lives
            one = await Broker(zk_connect, 1).start()
            brokers.append(one)
            await wait_for_state(observer.zk, "t", 0, 1, (1,))
            await one.die()
            brokers.remove(one)
            await wait_for_state(observer.zk, "t", 0, NO_LEADER, (1,))
            two = await Broker(zk_connect, 2).start()
            brokers.append(two)
            await wait_until_async(
                lambda: seen_by_controller(observer, 2), "broker 2 seen", timeout=15
            )
            await observer.controller.wait_idle()
            state = await state_of(observer.zk, "t", 0)
            assert state is not None and (state.leader, state.isr) == (NO_LEADER, (1,))
            one = await Broker(zk_connect, 1).start()
            brokers.append(one)
            await wait_for_state(observer.zk, "t", 0, 1, (1,))
        finally:
            for broker in brokers:
                await broker.die()

    run(scenario)


def test_unclean_election_lets_a_live_replica_outside_the_isr_lead(zk_connect: str) -> None:
    async def scenario() -> None:
        observer = await Broker(zk_connect, 9).start()
        brokers = [observer]
        try:
            await one_active(brokers)
            one = await Broker(zk_connect, 1).start()
            brokers.append(one)
            await create_topic(
                observer.zk, "t", {0: (1, 2)}, **{"unclean.leader.election.enable": "true"}
            )
            await wait_for_state(observer.zk, "t", 0, 1, (1,))
            await one.die()
            brokers.remove(one)
            brokers.append(await Broker(zk_connect, 2).start())
            await wait_for_state(observer.zk, "t", 0, 2, (2,))
        finally:
            for broker in brokers:
                await broker.die()

    run(scenario)


def test_a_deposed_controller_can_write_nothing(zk_connect: str) -> None:
    async def scenario() -> None:
        broker = await Broker(zk_connect, 1).start()
        try:
            await one_active([broker])
            context = broker.controller.context
            assert context is not None
            stale = context.epoch
            # Another controller won an epoch (as after this one's session was cut off).
            _, version = await broker.client.get(zk_data.CONTROLLER_EPOCH)
            await broker.client.set(zk_data.CONTROLLER_EPOCH, b"99", version)
            await broker.client.ensure_path(zk_data.partitions_path("t"))
            tp = TopicPartition("t", 0)
            ops = broker.zk.create_partition_state_ops(tp, zk_data.LeaderAndIsr(1, 0, (1,), 1))
            with pytest.raises(ControllerMovedError):
                await broker.zk.fenced(stale, ops)
            assert await broker.zk.get_partition_state(tp) is None
        finally:
            await broker.die()

    run(scenario)


def test_a_topic_marked_for_deletion_is_removed_from_zookeeper(zk_connect: str) -> None:
    async def scenario() -> None:
        broker = await Broker(zk_connect, 1).start()
        try:
            await one_active([broker])
            await create_topic(broker.zk, "doomed", {0: (1,), 1: (1,)}, **{"retention.ms": "1"})
            await wait_for_state(broker.zk, "doomed", 1, 1, (1,))
            await broker.zk.mark_topic_for_deletion("doomed")

            async def gone() -> bool:
                return (
                    await broker.zk.get_topic("doomed") is None
                    and not await broker.client.exists(zk_data.topic_config_path("doomed"))
                    and await broker.zk.get_topics_to_delete() == []
                )

            await wait_until_async(gone, "topic doomed deleted", timeout=15)
        finally:
            await broker.die()

    run(scenario)
