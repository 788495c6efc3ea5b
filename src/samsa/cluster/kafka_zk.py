"""Typed reads and writes of the cluster's state in ZooKeeper (Kafka's ``KafkaZkClient``).

Every caller goes through here: brokers register and read metadata, the
controller elects itself and writes partition states. Paths and JSON are
:mod:`samsa.cluster.zk_data`'s; the session is a :class:`ZkClient`.

Controller writes are *fenced*: each is a ZooKeeper multi whose first op checks
that ``/controller_epoch`` is still at the version this controller wrote when
it was elected. A controller that lost its place (a newer one bumped the
epoch) gets :class:`ControllerMovedError` and writes nothing — Kafka's
zombie-controller fencing. Partition-state writes are also conditional on the
state's own version, so a write based on a stale read fails instead of
overwriting a newer leader or ISR.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from samsa.acl import AccessControlEntry, PatternType, ResourcePattern, ResourceType, parse_name
from samsa.cluster import zk_data
from samsa.cluster.zk_client import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    ZkCheck,
    ZkClient,
    ZkCreate,
    ZkDelete,
    ZkOp,
    ZkSet,
)
from samsa.cluster.zk_data import (
    BrokerRegistration,
    LeaderAndIsr,
    ProducerIdBlock,
    TopicAssignment,
    ZkDataError,
)
from samsa.errors import SamsaError
from samsa.types import TopicPartition

log = logging.getLogger(__name__)

Watch = Callable[[], None] | None
"""Called once, on the client's loop, when what was read changes."""


class ControllerMovedError(SamsaError):
    """Raised when a controller write finds a newer controller epoch: this one is deposed."""


@dataclass(frozen=True, slots=True)
class ControllerEpoch:
    """The epoch a controller won and the version of ``/controller_epoch`` it wrote."""

    epoch: int
    zk_version: int

    def check(self) -> ZkCheck:
        return ZkCheck(zk_data.CONTROLLER_EPOCH, self.zk_version)


class KafkaZk:
    """The cluster's ZooKeeper state, read and written as samsa's types."""

    def __init__(self, client: ZkClient) -> None:
        self.client = client

    async def create_top_level_paths(self) -> None:
        for path in zk_data.PERSISTENT_PATHS:
            await self.client.ensure_path(path)

    # -- cluster id ---------------------------------------------------------------------

    async def get_or_create_cluster_id(self, proposed: str) -> str:
        """The cluster's id: the one in ZooKeeper, or ``proposed`` if this broker is first."""
        try:
            await self.client.create(
                zk_data.CLUSTER_ID, zk_data.encode_cluster_id(proposed), makepath=True
            )
            return proposed
        except NodeExistsError:
            data, _ = await self.client.get(zk_data.CLUSTER_ID)
            return zk_data.decode_cluster_id(data)

    async def get_or_create_secret(self, path: str, proposed: bytes) -> bytes:
        """The secret in ``path``, or ``proposed`` stored there if there is none yet (the
        first broker to ask creates it; the others read it)."""
        try:
            await self.client.create(path, proposed, makepath=True)
            return proposed
        except NodeExistsError:
            data, _ = await self.client.get(path)
            return bytes(data)

    # -- brokers ------------------------------------------------------------------------

    async def register_broker(self, registration: BrokerRegistration) -> None:
        """Create this broker's ephemeral ``/brokers/ids/<id>`` (NodeExistsError if taken)."""
        await self.client.create(
            zk_data.broker_path(registration.broker_id),
            zk_data.encode_broker(registration),
            ephemeral=True,
            makepath=True,
        )

    async def update_broker(self, registration: BrokerRegistration) -> None:
        """Rewrite this broker's registration (its lost replicas changed)."""
        await self.client.set(
            zk_data.broker_path(registration.broker_id), zk_data.encode_broker(registration)
        )

    async def get_broker_ids(self, watch: Watch = None) -> list[int]:
        children = await self.client.get_children(zk_data.BROKER_IDS, watch=watch)
        return sorted(int(child) for child in children if child.isdigit())

    async def announce_shutdown(self, broker_id: int) -> None:
        """Create the ephemeral ``/samsa/controlled_shutdown/<id>``: the controller moves
        this broker's leaderships away and takes it out of every ISR, while its
        registration, and so its place in clients' metadata, stays until it stops."""
        with contextlib.suppress(NodeExistsError):
            await self.client.create(
                zk_data.controlled_shutdown_path(broker_id), b"", ephemeral=True, makepath=True
            )

    async def get_shutting_down(self, watch: Watch = None) -> frozenset[int]:
        """The brokers in a controlled shutdown."""
        try:
            children = await self.client.get_children(zk_data.CONTROLLED_SHUTDOWN, watch=watch)
        except NoNodeError:  # a cluster whose brokers are older than this path
            await self.client.ensure_path(zk_data.CONTROLLED_SHUTDOWN)
            children = await self.client.get_children(zk_data.CONTROLLED_SHUTDOWN, watch=watch)
        return frozenset(int(child) for child in children if child.isdigit())

    async def get_brokers(
        self, watch: Callable[[int], Watch] | None = None
    ) -> dict[int, BrokerRegistration]:
        """Every live broker's registration (one that cannot be read is skipped, logged);
        ``watch(broker_id)``, when given, is the watch set on each registration read."""
        brokers: dict[int, BrokerRegistration] = {}
        for broker_id in await self.get_broker_ids():
            try:
                found = await self.client.get(
                    zk_data.broker_path(broker_id), None if watch is None else watch(broker_id)
                )
            except NoNodeError:
                continue  # gone between the listing and the read
            try:
                brokers[broker_id] = zk_data.decode_broker(broker_id, found[0])
            except ZkDataError as exc:
                log.error("ignoring broker %d: %s", broker_id, exc)
        return brokers

    # -- controller ---------------------------------------------------------------------

    async def get_controller_id(self, watch: Watch = None) -> int | None:
        """The active controller's id (None: none now); ``watch`` fires when that changes."""
        if watch is not None and not await self.client.exists(zk_data.CONTROLLER, watch=watch):
            return None
        found = await self.client.get_or_none(zk_data.CONTROLLER)
        if found is None:
            return None
        try:
            return zk_data.decode_controller(found[0])
        except ZkDataError as exc:
            log.error("unreadable %s: %s", zk_data.CONTROLLER, exc)
            return None

    async def try_become_controller(self, broker_id: int) -> ControllerEpoch | None:
        """Create ``/controller`` and bump the controller epoch; None if another broker won.

        The epoch is bumped with a write conditional on the version read, so two
        brokers racing through a stale ``/controller`` cannot both win an epoch.
        """
        try:
            await self.client.create(
                zk_data.CONTROLLER, zk_data.encode_controller(broker_id), ephemeral=True
            )
        except NodeExistsError:
            return None
        while True:
            found = await self.client.get_or_none(zk_data.CONTROLLER_EPOCH)
            try:
                if found is None:
                    await self.client.create(
                        zk_data.CONTROLLER_EPOCH, zk_data.encode_controller_epoch(1)
                    )
                    return ControllerEpoch(1, 0)
                epoch = zk_data.decode_controller_epoch(found[0]) + 1
                version = await self.client.set(
                    zk_data.CONTROLLER_EPOCH, zk_data.encode_controller_epoch(epoch), found[1]
                )
                return ControllerEpoch(epoch, version)
            except (NodeExistsError, BadVersionError):
                continue  # a deposed controller moved it meanwhile: read again

    async def resign_controller(self, broker_id: int) -> None:
        """Delete ``/controller`` if this broker holds it (a new election follows)."""
        found = await self.client.get_or_none(zk_data.CONTROLLER)
        if found is None:
            return
        try:
            if zk_data.decode_controller(found[0]) != broker_id:
                return
        except ZkDataError:
            return
        # Already gone or re-created by another broker: nothing of ours to remove.
        with contextlib.suppress(NoNodeError, BadVersionError):
            await self.client.delete(zk_data.CONTROLLER, found[1])

    async def fenced(self, epoch: ControllerEpoch, ops: Iterable[ZkOp]) -> None:
        """Apply ``ops`` only while ``epoch`` is the current controller epoch."""
        all_ops = [epoch.check(), *ops]
        try:
            await self.client.multi(all_ops)
        except BadVersionError:
            current = await self.client.get_or_none(zk_data.CONTROLLER_EPOCH)
            if current is not None and current[1] != epoch.zk_version:
                raise ControllerMovedError(
                    f"controller epoch {epoch.epoch} was superseded"
                ) from None
            raise  # a partition state moved under us: the caller reads it again

    # -- topics -------------------------------------------------------------------------

    async def get_topics(self, watch: Watch = None) -> list[str]:
        return await self.client.get_children(zk_data.TOPICS, watch=watch)

    async def get_topic(self, topic: str, watch: Watch = None) -> TopicAssignment | None:
        try:
            data, _ = await self.client.get(zk_data.topic_path(topic), watch=watch)
        except NoNodeError:
            return None
        try:
            return zk_data.decode_topic(topic, data)
        except ZkDataError as exc:
            log.error("ignoring topic %s: %s", topic, exc)
            return None

    async def create_topic(self, assignment: TopicAssignment, config: Mapping[str, str]) -> None:
        """Write a new topic's config and assignment (NodeExistsError if the topic exists).

        The config goes first, as Kafka's admin does: a broker that sees the
        assignment finds the config already there.
        """
        await self.client.multi(
            [
                ZkCreate(
                    zk_data.topic_config_path(assignment.topic), zk_data.encode_config(config)
                ),
                ZkCreate(zk_data.topic_path(assignment.topic), zk_data.encode_topic(assignment)),
            ]
        )

    async def set_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        """Replace a topic's config overrides (brokers watching the znode apply them)."""
        path = zk_data.topic_config_path(topic)
        try:
            await self.client.set(path, zk_data.encode_config(config))
        except NoNodeError:
            await self.client.create(path, zk_data.encode_config(config), makepath=True)

    async def set_topic_assignment(self, assignment: TopicAssignment) -> None:
        """Rewrite a topic's assignment (partitions added)."""
        await self.client.set(
            zk_data.topic_path(assignment.topic), zk_data.encode_topic(assignment)
        )

    async def get_topic_config(self, topic: str, watch: Watch = None) -> dict[str, str]:
        """A topic's config overrides ({} when it has none); ``watch`` fires when they change
        or the znode is created."""
        path = zk_data.topic_config_path(topic)
        try:
            found: tuple[bytes, int] | None = await self.client.get(path, watch=watch)
        except NoNodeError:
            if watch is not None and await self.client.exists(path, watch=watch):
                return await self.get_topic_config(topic)
            found = None
        if found is None:
            return {}
        try:
            return zk_data.decode_config(found[0], zk_data.topic_config_path(topic))
        except ZkDataError as exc:
            log.error("ignoring the config of topic %s: %s", topic, exc)
            return {}

    async def mark_topic_for_deletion(self, topic: str) -> None:
        with contextlib.suppress(NodeExistsError):  # already queued: deleted once
            await self.client.create(zk_data.delete_topic_path(topic))

    async def get_topics_to_delete(self, watch: Watch = None) -> list[str]:
        return await self.client.get_children(zk_data.DELETE_TOPICS, watch=watch)

    # -- entity configs (client quotas) and their change notifications ------------------

    async def get_entity_config(self, entity_path: str) -> dict[str, str]:
        """The config of ``users/<u>``, ``clients/<c>`` or ``users/<u>/clients/<c>`` ({} if
        none or unreadable, logged)."""
        path = zk_data.entity_config_path(entity_path)
        found = await self.client.get_or_none(path)
        if found is None:
            return {}
        try:
            return zk_data.decode_config(found[0], path)
        except ZkDataError as exc:
            log.error("ignoring the config of %s: %s", entity_path, exc)
            return {}

    async def get_entity_configs(self) -> dict[str, dict[str, str]]:
        """Every user, client and user-client entity with a config, by entity path."""
        found: dict[str, dict[str, str]] = {}
        paths: list[str] = []
        for user in await self._children(zk_data.USER_CONFIGS):
            paths.append(f"users/{user}")
            clients = await self._children(f"{zk_data.USER_CONFIGS}/{user}/clients")
            paths += [f"users/{user}/clients/{client}" for client in clients]
        paths += [f"clients/{c}" for c in await self._children(zk_data.CLIENT_CONFIGS)]
        for path in paths:
            config = await self.get_entity_config(path)
            if config:
                found[path] = config
        return found

    async def _children(self, path: str, watch: Watch = None) -> list[str]:
        try:
            return await self.client.get_children(path, watch=watch)
        except NoNodeError:
            return []

    async def update_entity_config(
        self, entity_path: str, edit: Callable[[dict[str, str]], dict[str, str]]
    ) -> None:
        """Change an entity's config by ``edit`` of what is stored, and announce it with a
        change notification, which every broker watches (Kafka's
        ``AdminZkClient.changeConfigs``).

        The znode is written only at the version read, and read and edited again when
        another broker wrote it meanwhile: quotas and SCRAM credentials of one user share
        a znode, so a plain write of what was read could undo another's change."""
        path = zk_data.entity_config_path(entity_path)
        while True:
            found = await self.client.get_or_none(path)
            current: dict[str, str] = {}
            if found is not None:
                try:
                    current = zk_data.decode_config(found[0], path)
                except ZkDataError as exc:
                    log.error("replacing the unreadable config of %s: %s", entity_path, exc)
            data = zk_data.encode_config(edit(current))
            try:
                if found is None:
                    await self.client.create(path, data, makepath=True)
                else:
                    await self.client.set(path, data, version=found[1])
            except (NodeExistsError, BadVersionError, NoNodeError):
                continue  # written or deleted by another since the read
            break
        await self.client.create(
            f"{zk_data.CONFIG_CHANGES}/{zk_data.CONFIG_CHANGE_PREFIX}",
            zk_data.encode_config_change(entity_path),
            sequence=True,
            makepath=True,
        )

    # -- change notifications (/config/changes, /kafka-acl-changes…) -------------------

    async def get_change_notifications(self, root: str, watch: Watch = None) -> list[str]:
        """The names of the change notifications under ``root``, oldest first; ``watch``
        fires when one is added."""
        return await self.client.get_children(root, watch=watch)

    async def get_change_notification(self, root: str, name: str) -> bytes | None:
        """A notification's data (None: purged meanwhile)."""
        found = await self.client.get_or_none(f"{root}/{name}")
        return None if found is None else found[0]

    async def purge_change_notifications(
        self, root: str, names: Iterable[str], expiry_ms: int
    ) -> int:
        """Delete those of the notifications ``names`` under ``root`` created over
        ``expiry_ms`` ago (Kafka keeps them 15 minutes); every broker may purge, so one
        already gone is skipped. Returns how many this call deleted."""
        now_ms = int(time.time() * 1000)
        deleted = 0
        for name in names:
            path = f"{root}/{name}"
            created = await self.client.created_ms(path)
            if created is None or created + expiry_ms >= now_ms:
                continue
            with contextlib.suppress(NoNodeError):
                await self.client.delete(path)
                deleted += 1
        return deleted

    # -- partition states ---------------------------------------------------------------

    async def get_partition_state(
        self, tp: TopicPartition, watch: Watch = None
    ) -> LeaderAndIsr | None:
        try:
            data, version = await self.client.get(zk_data.partition_state_path(tp), watch=watch)
        except NoNodeError:
            return None
        try:
            return zk_data.decode_leader_and_isr(tp, data, version)
        except ZkDataError as exc:
            log.error("unreadable state of %s: %s", tp, exc)
            return None

    async def ensure_partitions_path(self, topic: str) -> None:
        """``/brokers/topics/<topic>/partitions``, the parent of its partition states."""
        await self.client.ensure_path(zk_data.partitions_path(topic))

    async def delete_topic_znodes(self, epoch: ControllerEpoch, topic: str) -> None:
        """Remove a deleted topic's assignment, states, config and deletion marker."""
        partitions = (
            await self.client.get_children(zk_data.partitions_path(topic))
            if (await self.client.exists(zk_data.partitions_path(topic)))
            else []
        )
        ops: list[ZkOp] = []
        for partition in partitions:
            path = f"{zk_data.partitions_path(topic)}/{partition}"
            if await self.client.exists(f"{path}/state"):
                ops.append(ZkDelete(f"{path}/state"))
            ops.append(ZkDelete(path))
        if partitions:
            ops.append(ZkDelete(zk_data.partitions_path(topic)))
        for path in (
            zk_data.topic_path(topic),
            zk_data.topic_config_path(topic),
            zk_data.delete_topic_path(topic),
        ):
            if await self.client.exists(path):
                ops.append(ZkDelete(path))
        await self.fenced(epoch, ops)

    def create_partition_state_ops(self, tp: TopicPartition, state: LeaderAndIsr) -> list[ZkOp]:
        """The ops that create a new partition's znodes (for :meth:`fenced`)."""
        partition = zk_data.partition_state_path(tp).removesuffix("/state")
        return [
            ZkCreate(partition),
            ZkCreate(zk_data.partition_state_path(tp), zk_data.encode_leader_and_isr(state)),
        ]

    def update_partition_state_op(self, tp: TopicPartition, state: LeaderAndIsr) -> ZkOp:
        """The op writing ``state`` if the znode is still at ``state.zk_version``."""
        return ZkSet(
            zk_data.partition_state_path(tp),
            zk_data.encode_leader_and_isr(state),
            state.zk_version,
        )

    async def update_partition_state(self, tp: TopicPartition, state: LeaderAndIsr) -> int:
        """A leader's own ISR change, conditional on the version it read; the new version."""
        return await self.client.set(
            zk_data.partition_state_path(tp), zk_data.encode_leader_and_isr(state), state.zk_version
        )

    # -- producer ids -------------------------------------------------------------------

    async def allocate_producer_id_block(self, broker_id: int, size: int) -> ProducerIdBlock:
        """Take the next ``size`` producer ids for ``broker_id`` (Kafka's ZooKeeper-mode
        ``ProducerIdManager``): a write of ``/latest_producer_id_block`` conditional on the
        version read, so two brokers never get the same block."""
        while True:
            found = await self.client.get_or_none(zk_data.PRODUCER_ID_BLOCK)
            start = 0
            if found is not None and found[0]:
                try:
                    start = zk_data.decode_producer_id_block(found[0]).block_end + 1
                except ZkDataError as exc:
                    raise ZkDataError(
                        f"{exc}; fix the znode by hand: producer ids cannot be handed out safely"
                    ) from exc
            block = ProducerIdBlock(broker_id, start, start + size - 1)
            data = zk_data.encode_producer_id_block(block)
            try:
                if found is None:
                    await self.client.create(zk_data.PRODUCER_ID_BLOCK, data, makepath=True)
                else:
                    await self.client.set(zk_data.PRODUCER_ID_BLOCK, data, found[1])
            except (NodeExistsError, BadVersionError):
                continue  # another broker took a block meanwhile: read again
            return block

    # -- ACLs ---------------------------------------------------------------------------

    async def create_acl_paths(self) -> None:
        for path in zk_data.ACL_PATHS:
            await self.client.ensure_path(path)

    async def get_acls(self, pattern: ResourcePattern) -> tuple[frozenset[AccessControlEntry], int]:
        """A resource pattern's ACL entries and the znode's version (-1: no znode)."""
        path = zk_data.acl_path(pattern)
        found = await self.client.get_or_none(path)
        if found is None:
            return frozenset(), -1
        return zk_data.decode_acls(found[0], path), found[1]

    async def write_acls(
        self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry], version: int
    ) -> None:
        """Make ``entries`` the pattern's ACLs if its znode is still at ``version`` (-1: absent);
        a pattern left with none loses its znode. BadVersionError, NodeExistsError or
        NoNodeError when another broker changed it first: read it again."""
        path = zk_data.acl_path(pattern)
        if version < 0:
            if entries:
                await self.client.create(path, zk_data.encode_acls(entries), makepath=True)
        elif entries:
            await self.client.set(path, zk_data.encode_acls(entries), version)
        else:
            await self.client.delete(path, version)

    async def notify_acl_change(self, pattern: ResourcePattern) -> None:
        """Tell every broker the pattern's ACLs changed (a sequential change znode)."""
        root = zk_data.acl_change_root(pattern.pattern_type)
        await self.client.create(
            f"{root}/{zk_data.ACL_CHANGE_PREFIX}", zk_data.encode_acl_change(pattern), sequence=True
        )

    async def get_all_acls(
        self, pattern_types: Iterable[PatternType] = (PatternType.LITERAL, PatternType.PREFIXED)
    ) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        """Every resource pattern's ACLs, of ``pattern_types`` (a znode that cannot be read is
        skipped, logged)."""
        found: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        for pattern_type in pattern_types:
            root = zk_data.acl_root(pattern_type)
            with contextlib.suppress(NoNodeError):
                for type_name in await self.client.get_children(root):
                    try:
                        resource_type = parse_name(ResourceType, type_name)
                    except ValueError:
                        log.error("ignoring ACLs under %s/%s: not a resource type", root, type_name)
                        continue
                    with contextlib.suppress(NoNodeError):
                        for name in await self.client.get_children(f"{root}/{type_name}"):
                            pattern = ResourcePattern(resource_type, name, pattern_type)
                            try:
                                entries, _ = await self.get_acls(pattern)
                            except ZkDataError as exc:
                                log.error("ignoring the ACLs of %s: %s", pattern, exc)
                                continue
                            if entries:
                                found[pattern] = entries
        return found
