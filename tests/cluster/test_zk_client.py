"""A broker's ZooKeeper session against a real ZooKeeper server (Debian's package)."""

from __future__ import annotations

import asyncio

import pytest

from samsa.cluster.zk_client import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    ZkCheck,
    ZkClient,
    ZkCreate,
    ZkSet,
)
from samsa.testing.netproxy import LinkProxy
from samsa.testing.zookeeper import ZooKeeperServer


def run(coroutine: object) -> object:
    return asyncio.run(coroutine)  # type: ignore[arg-type]


def test_a_missing_chroot_is_created_and_paths_live_under_it(
    zookeeper: ZooKeeperServer, zk_connect: str
) -> None:
    async def scenario() -> tuple[list[str], bytes]:
        chrooted = ZkClient(zk_connect)
        plain = ZkClient(zookeeper.connect)
        await chrooted.start()
        await plain.start()
        try:
            await chrooted.create("/brokers/ids/1", b"x", makepath=True)
            chroot = zk_connect.partition("/")[2]
            return await plain.get_children(f"/{chroot}/brokers/ids"), (
                await plain.get(f"/{chroot}/brokers/ids/1")
            )[0]
        finally:
            await chrooted.close()
            await plain.close()

    assert run(scenario()) == (["1"], b"x")


def test_a_conditional_write_on_a_stale_version_fails(zk_connect: str) -> None:
    async def scenario() -> tuple[int, bytes]:
        client = ZkClient(zk_connect)
        await client.start()
        try:
            await client.create("/state", b"v0")
            _, version = await client.get("/state")
            new_version = await client.set("/state", b"v1", version)
            with pytest.raises(BadVersionError):
                await client.set("/state", b"stale", version)
            return new_version, (await client.get("/state"))[0]
        finally:
            await client.close()

    assert run(scenario()) == (1, b"v1")


def test_an_ephemeral_znode_goes_with_its_session_and_a_watch_sees_it_go(zk_connect: str) -> None:
    async def scenario() -> bool:
        owner, watcher = ZkClient(zk_connect), ZkClient(zk_connect)
        await owner.start()
        await watcher.start()
        try:
            await owner.create("/controller", b"1", ephemeral=True)
            with pytest.raises(NodeExistsError):
                await watcher.create("/controller", b"2", ephemeral=True)
            gone = asyncio.Event()
            assert await watcher.exists("/controller", watch=gone.set)
            await owner.close()
            await asyncio.wait_for(gone.wait(), 10)
            return await watcher.exists("/controller")
        finally:
            await watcher.close()

    assert run(scenario()) is False


def test_a_children_watch_fires_once_on_the_loop_when_a_child_is_added(zk_connect: str) -> None:
    async def scenario() -> list[str]:
        client = ZkClient(zk_connect)
        await client.start()
        try:
            await client.ensure_path("/brokers/ids")
            loop = asyncio.get_running_loop()
            fired: asyncio.Future[None] = loop.create_future()

            def changed() -> None:
                assert asyncio.get_running_loop() is loop  # delivered on the owner's loop
                fired.set_result(None)

            assert await client.get_children("/brokers/ids", watch=changed) == []
            await client.create("/brokers/ids/2", b"")
            await asyncio.wait_for(fired, 10)
            return await client.get_children("/brokers/ids")
        finally:
            await client.close()

    assert run(scenario()) == ["2"]


def test_a_change_after_a_dropped_connection_is_seen_by_the_watch_set_before_it(
    zookeeper: ZooKeeperServer, zk_connect: str
) -> None:
    """kazoo forgets its watches when the connection drops and does not set them again on
    the next one; the client fires them once connected again, so their owners read again."""
    chroot = "/" + zk_connect.partition("/")[2]
    proxy = LinkProxy(("127.0.0.1", zookeeper.port))

    async def scenario() -> tuple[bytes, list[str]]:
        writer = ZkClient(zk_connect)
        follower = ZkClient(f"127.0.0.1:{proxy.port}{chroot}", session_timeout_ms=20_000)
        await writer.start()
        await follower.start()
        states: list[str] = []
        follower.add_state_listener(states.append)
        seen: list[bytes] = []
        changed = asyncio.Event()

        async def read() -> None:  # what a metadata cache does: read, watching
            data, _ = await follower.get("/state", watch=lambda: asyncio.ensure_future(read()))
            seen.append(data)
            changed.set()

        try:
            await writer.create("/state", b"epoch 0")
            await read()
            proxy.cut()  # the connection drops; the session lives on
            while "SUSPENDED" not in states:
                await asyncio.sleep(0.05)
            proxy.heal()
            while states[-1] != "CONNECTED":
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)  # the watch is read again after the reconnection
            changed.clear()
            await writer.set("/state", b"epoch 1")
            await asyncio.wait_for(changed.wait(), 10)
            return seen[-1], list(states)
        finally:
            await writer.close()
            await follower.close()

    try:
        last, states = run(scenario())  # type: ignore[misc]
    finally:
        proxy.close()
    assert last == b"epoch 1"
    assert "LOST" not in states  # the same session throughout


def test_a_multi_with_a_failed_check_writes_nothing(zk_connect: str) -> None:
    async def scenario() -> tuple[bytes, bool]:
        client = ZkClient(zk_connect)
        await client.start()
        try:
            await client.create("/controller_epoch", b"1")
            await client.create("/partition", b"old")
            _, epoch_version = await client.get("/controller_epoch")
            await client.set("/controller_epoch", b"2", epoch_version)  # another controller
            with pytest.raises(BadVersionError):
                await client.multi(
                    [
                        ZkCheck("/controller_epoch", epoch_version),
                        ZkSet("/partition", b"new"),
                        ZkCreate("/other", b""),
                    ]
                )
            return (await client.get("/partition"))[0], await client.exists("/other")
        finally:
            await client.close()

    assert run(scenario()) == (b"old", False)


def test_reading_a_missing_znode_raises_no_node(zk_connect: str) -> None:
    async def scenario() -> None:
        client = ZkClient(zk_connect)
        await client.start()
        try:
            assert await client.get_or_none("/absent") is None
            with pytest.raises(NoNodeError):
                await client.get("/absent")
        finally:
            await client.close()

    run(scenario())


def test_reads_in_flight_when_the_connection_drops_are_answered_once_it_is_back(
    zookeeper: ZooKeeperServer, zk_connect: str
) -> None:
    """A stalled ZooKeeper or a lost heartbeat drops the connection under the reads being
    answered (kazoo fails them with ConnectionLoss); they are asked again once connected,
    as a broker starting up needs its reads of the cluster's state to go through."""
    chroot = "/" + zk_connect.partition("/")[2]
    proxy = LinkProxy(("127.0.0.1", zookeeper.port))
    big = b"x" * 500_000

    async def scenario() -> list[bytes]:
        writer = ZkClient(zk_connect)
        reader = ZkClient(f"127.0.0.1:{proxy.port}{chroot}", session_timeout_ms=20_000)
        await writer.start()
        await reader.start()
        states: list[str] = []
        reader.add_state_listener(states.append)
        try:
            await writer.create("/big", big)
            reads = [asyncio.ensure_future(reader.get("/big")) for _ in range(50)]
            await asyncio.wait(reads, return_when=asyncio.FIRST_COMPLETED)
            proxy.cut()  # 25 MB of answers are under way: most are cut off
            while "SUSPENDED" not in states:
                await asyncio.sleep(0.05)
            proxy.heal()
            return [data for data, _ in await asyncio.gather(*reads)]
        finally:
            await writer.close()
            await reader.close()

    try:
        answers = run(scenario())
    finally:
        proxy.close()
    assert answers == [big] * 50
