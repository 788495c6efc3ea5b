"""Brokers' ZooKeeper side for cluster tests: a session, a registration and a controller each."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

from samsa.cluster import zk_data
from samsa.cluster.controller import Controller
from samsa.cluster.kafka_zk import KafkaZk
from samsa.cluster.zk_client import ZkClient
from samsa.cluster.zk_data import BrokerRegistration, Endpoint, TopicAssignment
from samsa.testing.waiting import wait_until_async
from samsa.types import TopicPartition


class Broker:
    """A broker's session, registration and controller."""

    def __init__(
        self,
        connect: str,
        broker_id: int,
        unclean: bool = False,
        lost: frozenset[TopicPartition] = frozenset(),
    ) -> None:
        self.connect = connect
        self.broker_id = broker_id
        self.unclean = unclean
        self.lost = lost
        """Partitions it registers as lost (it came back without their logs)."""

    async def start(self) -> Broker:
        self.client = ZkClient(self.connect, session_timeout_ms=6000)
        await self.client.start()
        self.zk = KafkaZk(self.client)
        await self.zk.create_top_level_paths()
        await self.zk.register_broker(self.registration())
        self.controller = Controller(self.zk, self.broker_id, unclean_leader_election=self.unclean)
        self.controller.start()
        return self

    def registration(self) -> BrokerRegistration:
        endpoint = Endpoint("PLAINTEXT", "127.0.0.1", 9090 + self.broker_id)
        return BrokerRegistration(self.broker_id, (endpoint,), lost_replicas=self.lost)

    async def die(self) -> None:
        await self.controller.stop()
        await self.client.close()


async def active(brokers: list[Broker]) -> list[Broker]:
    return [b for b in brokers if b.controller.is_active]


async def one_active(brokers: list[Broker]) -> Broker:
    """The one active controller, once it has seen every broker of ``brokers`` alive."""

    async def exactly_one() -> bool:
        return len(await active(brokers)) == 1

    await wait_until_async(exactly_one, "exactly one active controller", timeout=15)
    controller = (await active(brokers))[0]
    # Registrations reach the controller through a watch: a topic created before it has
    # seen a broker alive leaves that broker out of the new partitions' ISRs.
    for broker in brokers:
        await wait_until_async(
            lambda b=broker.broker_id: seen_by_controller(controller, b),
            f"broker {broker.broker_id} seen alive by the controller",
            timeout=15,
        )
    return controller


async def create_topic(
    zk: KafkaZk, topic: str, partitions: dict[int, tuple[int, ...]], **config: str
) -> None:
    await zk.create_topic(TopicAssignment(topic, uuid.uuid4(), partitions), config)


async def state_of(zk: KafkaZk, topic: str, partition: int) -> zk_data.LeaderAndIsr | None:
    return await zk.get_partition_state(TopicPartition(topic, partition))


async def wait_for_state(
    zk: KafkaZk, topic: str, partition: int, leader: int, isr: tuple[int, ...]
) -> zk_data.LeaderAndIsr:
    async def reached() -> bool:
        state = await state_of(zk, topic, partition)
        return state is not None and (state.leader, state.isr) == (leader, isr)

    await wait_until_async(
        reached, f"{topic}-{partition} led by {leader} with isr {isr}", timeout=15
    )
    state = await state_of(zk, topic, partition)
    assert state is not None
    return state


async def seen_by_controller(broker: Broker, broker_id: int) -> bool:
    context = broker.controller.context
    return context is not None and broker_id in context.live_brokers


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(scenario())
