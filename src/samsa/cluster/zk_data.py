"""Every ZooKeeper path a samsa cluster uses, and the JSON in each: Kafka's own layout.

A Kafka operator finds what they know (Kafka 3.x in ZooKeeper mode)::

    /cluster/id                                   {"version":"1","id":"<cluster id>"}
    /controller                 ephemeral         {"version":1,"brokerid":1,"timestamp":"<ms>"}
    /controller_epoch                             "<epoch>"
    /brokers/ids/<id>           ephemeral         host, port, endpoints, rack, listener map …
    /brokers/topics/<topic>                       {"version":3,"topic_id":…,
                                                   "partitions":{"0":[1,2]},…}
    /brokers/topics/<topic>/partitions/<p>/state  {"version":1,"leader":1,"leader_epoch":0,
                                                   "isr":[1,2],"controller_epoch":1}
    /config/topics/<topic>                        {"version":1,"config":{"retention.ms":"…"}}
    /config/users/<user>                          {"version":1,"config":{"producer_byte_rate":"…"}}
    /config/users/<user>/clients/<client-id>      (the same; names URL-encoded, "<default>")
    /config/clients/<client-id>                   (the same)
    /config/changes/config_change_<seq>           {"version":2,"entity_path":"users/<user>"}
    /admin/delete_topics/<topic>                  (no data: a deletion the controller carries out)
    /isr_change_notification                      (made at start, as Kafka makes it; samsa
                                                   writes no notifications: brokers watch
                                                   the partition-state znodes)
    /latest_producer_id_block                     {"version":1,"broker":1,"block_start":"0",
                                                   "block_end":"999"}
    /kafka-acl/<Type>/<name>                      {"version":1,"acls":[{"principal":"User:a",
                                                   "permissionType":"Allow","operation":"Read",
                                                   "host":"*"}]}   (LITERAL patterns)
    /kafka-acl-extended/prefixed/<Type>/<prefix>  the same, for PREFIXED patterns
    /kafka-acl-changes/acl_changes_<seq>          "TOPIC:<name>" (a literal resource changed)
    /kafka-acl-extended-changes/acl_changes_<seq> {"version":1,"resourceType":"TOPIC",
                                                   "name":…,"patternType":"PREFIXED"}

Pure functions and value types only (no I/O), so each format is tested on its
own; the paths are joined under the chroot by the ZooKeeper client. Decoders
raise :class:`ZkDataError` on bytes that are not the format, never anything
else: a znode written by hand or by another version must not crash a broker.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from samsa.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    kafka_name,
    parse_name,
)
from samsa.errors import SamsaError
from samsa.types import TopicPartition

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
TOPIC_CONFIGS = "/config/topics"
USER_CONFIGS = "/config/users"
CLIENT_CONFIGS = "/config/clients"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
DELETE_TOPICS = "/admin/delete_topics"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
CONTROLLED_SHUTDOWN = "/samsa/controlled_shutdown"
"""Parent of an ephemeral ``<id>`` per broker in a controlled shutdown: samsa's own path,
since Kafka's brokers asked the controller with a ControlledShutdown request, which Kafka
4's message definitions no longer have."""

PERSISTENT_PATHS = (
    BROKER_IDS,
    TOPICS,
    TOPIC_CONFIGS,
    USER_CONFIGS,
    CLIENT_CONFIGS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    ISR_CHANGE_NOTIFICATION,
    "/brokers/seqid",
    CONTROLLED_SHUTDOWN,
)
"""The parents every broker makes sure exist at start (as Kafka's ``createTopLevelPaths``)."""

NO_LEADER = -1
"""``leader`` of a partition whose replicas in the ISR are all offline."""


class ZkDataError(SamsaError):
    """Raised when a znode's bytes are not the JSON its path should hold."""


def _parse(data: bytes | None, what: str) -> Any:
    if not data:
        raise ZkDataError(f"{what}: the znode is empty")
    try:
        return json.loads(data)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ZkDataError(f"{what}: not JSON ({exc})") from exc


def _encode(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _int_list(value: object, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise ZkDataError(f"{what}: expected a list of broker ids, found {value!r}")
    return tuple(value)


def _int(obj: Mapping[str, Any], key: str, what: str) -> int:
    value = obj.get(key)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ZkDataError(f"{what}: {key!r} is not an integer ({value!r})")


def _object(data: bytes | None, what: str) -> Mapping[str, Any]:
    parsed = _parse(data, what)
    if not isinstance(parsed, dict):
        raise ZkDataError(f"{what}: expected a JSON object")
    return parsed


def now_ms() -> str:
    return str(int(time.time() * 1000))


# -- /cluster/id -------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    return _encode({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | None) -> str:
    value = _object(data, CLUSTER_ID).get("id")
    if not isinstance(value, str) or not value:
        raise ZkDataError(f"{CLUSTER_ID}: no cluster id")
    return value


# -- /controller and /controller_epoch ---------------------------------------------


def encode_controller(broker_id: int) -> bytes:
    return _encode({"version": 1, "brokerid": broker_id, "timestamp": now_ms()})


def decode_controller(data: bytes | None) -> int:
    return _int(_object(data, CONTROLLER), "brokerid", CONTROLLER)


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes | None) -> int:
    try:
        return int((data or b"").decode())
    except (UnicodeDecodeError, ValueError) as exc:
        raise ZkDataError(f"{CONTROLLER_EPOCH}: not an integer ({data!r})") from exc


# -- /brokers/ids/<id> -------------------------------------------------------------


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def controlled_shutdown_path(broker_id: int) -> str:
    return f"{CONTROLLED_SHUTDOWN}/{broker_id}"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One advertised listener: ``PLAINTEXT://host:port``."""

    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    @property
    def connection_string(self) -> str:
        return f"{self.listener}://{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """What ``/brokers/ids/<id>`` says of a live broker (version 5 of Kafka's format)."""

    broker_id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None
    lost_replicas: frozenset[TopicPartition] = frozenset()
    """Partitions whose ISR names this broker while its data directories hold no log of
    them (wiped, replaced or moved while it was down): it is no candidate to lead them
    and leaves their ISRs (samsa's own key, ``lost_replicas``, which Kafka's readers
    skip; absent when empty)."""

    def endpoint(self, listener: str = "PLAINTEXT") -> Endpoint | None:
        return next((e for e in self.endpoints if e.listener == listener), None)


def encode_broker(registration: BrokerRegistration) -> bytes:
    # Top-level host/port are the first PLAINTEXT endpoint, for old readers.
    plain = next((e for e in registration.endpoints if e.security_protocol == "PLAINTEXT"), None)
    value: dict[str, object] = {
        "version": 5,
        "host": plain.host if plain else None,
        "port": plain.port if plain else -1,
        "jmx_port": -1,
        "timestamp": now_ms(),
        "endpoints": [e.connection_string for e in registration.endpoints],
        "listener_security_protocol_map": {
            e.listener: e.security_protocol for e in registration.endpoints
        },
        "features": {},
    }
    if registration.rack is not None:
        value["rack"] = registration.rack
    if registration.lost_replicas:
        lost: dict[str, list[int]] = {}
        for tp in sorted(registration.lost_replicas):
            lost.setdefault(tp.topic, []).append(tp.partition)
        value["lost_replicas"] = lost
    return _encode(value)


def _parse_endpoint(text: object, protocols: Mapping[str, str], what: str) -> Endpoint:
    if not isinstance(text, str) or "://" not in text:
        raise ZkDataError(f"{what}: endpoint {text!r} is not LISTENER://host:port")
    listener, address = text.split("://", 1)
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        raise ZkDataError(f"{what}: endpoint {text!r} has no port")
    host = host.removeprefix("[").removesuffix("]")
    return Endpoint(listener, host, int(port), protocols.get(listener, listener))


def decode_broker(broker_id: int, data: bytes | None) -> BrokerRegistration:
    what = broker_path(broker_id)
    obj = _object(data, what)
    protocols = obj.get("listener_security_protocol_map") or {}
    if not isinstance(protocols, dict):
        raise ZkDataError(f"{what}: listener_security_protocol_map is not an object")
    endpoints = obj.get("endpoints")
    if isinstance(endpoints, list):
        parsed = tuple(_parse_endpoint(e, protocols, what) for e in endpoints)
    else:  # version 1: host and port only
        parsed = (Endpoint("PLAINTEXT", str(obj.get("host")), _int(obj, "port", what)),)
    rack = obj.get("rack")
    lost = obj.get("lost_replicas") or {}
    if not isinstance(lost, dict):
        raise ZkDataError(f"{what}: lost_replicas is not an object")
    lost_replicas = frozenset(
        TopicPartition(str(topic), partition)
        for topic, partitions in lost.items()
        for partition in _int_list(partitions, what)
    )
    return BrokerRegistration(
        broker_id, parsed, rack if isinstance(rack, str) else None, lost_replicas
    )


# -- /brokers/topics/<topic> -------------------------------------------------------


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """A topic's id and the replicas of each partition, preferred leader first."""

    topic: str
    topic_id: uuid.UUID
    partitions: Mapping[int, tuple[int, ...]]
    adding_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)


def _base64_uuid(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def _uuid_from_base64(text: object, what: str) -> uuid.UUID:
    if not isinstance(text, str):
        raise ZkDataError(f"{what}: topic_id is not a string")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise ZkDataError(f"{what}: topic_id {text!r} is not base64") from exc
    if len(raw) != 16:
        raise ZkDataError(f"{what}: topic_id {text!r} is not 16 bytes")
    return uuid.UUID(bytes=raw)


def encode_topic(assignment: TopicAssignment) -> bytes:
    def by_partition(m: Mapping[int, Sequence[int]]) -> dict[str, list[int]]:
        return {str(p): list(replicas) for p, replicas in sorted(m.items()) if replicas}

    return _encode(
        {
            "version": 3,
            # Kafka writes a topic id as its base64 form (Uuid.toString).
            "topic_id": _base64_uuid(assignment.topic_id),
            "partitions": by_partition(assignment.partitions),
            "adding_replicas": by_partition(assignment.adding_replicas),
            "removing_replicas": by_partition(assignment.removing_replicas),
        }
    )


def decode_topic(topic: str, data: bytes | None) -> TopicAssignment:
    what = topic_path(topic)
    obj = _object(data, what)

    def by_partition(key: str) -> dict[int, tuple[int, ...]]:
        value = obj.get(key) or {}
        if not isinstance(value, dict):
            raise ZkDataError(f"{what}: {key} is not an object")
        out: dict[int, tuple[int, ...]] = {}
        for partition, replicas in value.items():
            if not str(partition).isdigit():
                raise ZkDataError(f"{what}: partition {partition!r} is not a number")
            out[int(partition)] = _int_list(replicas, what)
        return out

    partitions = by_partition("partitions")
    if not partitions:
        raise ZkDataError(f"{what}: no partitions")
    return TopicAssignment(
        topic,
        _uuid_from_base64(obj.get("topic_id"), what),
        partitions,
        by_partition("adding_replicas"),
        by_partition("removing_replicas"),
    )


# -- /brokers/topics/<topic>/partitions/<p>/state ----------------------------------


def partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def partition_state_path(tp: TopicPartition) -> str:
    return f"{partitions_path(tp.topic)}/{tp.partition}/state"


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """A partition's leader, leader epoch and ISR, and the controller epoch that wrote them.

    ``zk_version`` is the znode's version when read: the next conditional write
    names it, so a write based on a stale read fails instead of overwriting.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = -1


def encode_leader_and_isr(state: LeaderAndIsr) -> bytes:
    return _encode(
        {
            "version": 1,
            "leader": state.leader,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
            "controller_epoch": state.controller_epoch,
        }
    )


def decode_leader_and_isr(tp: TopicPartition, data: bytes | None, zk_version: int) -> LeaderAndIsr:
    what = partition_state_path(tp)
    obj = _object(data, what)
    return LeaderAndIsr(
        _int(obj, "leader", what),
        _int(obj, "leader_epoch", what),
        _int_list(obj.get("isr"), what),
        _int(obj, "controller_epoch", what),
        zk_version,
    )


# -- /config/topics/<topic> --------------------------------------------------------


def topic_config_path(topic: str) -> str:
    return f"{TOPIC_CONFIGS}/{topic}"


def encode_config(config: Mapping[str, str]) -> bytes:
    return _encode({"version": 1, "config": dict(config)})


def decode_config(data: bytes | None, what: str) -> dict[str, str]:
    if not data:
        return {}
    value = _object(data, what).get("config") or {}
    if not isinstance(value, dict):
        raise ZkDataError(f"{what}: config is not an object")
    return {str(k): str(v) for k, v in value.items()}


# -- /config/users, /config/clients and /config/changes -----------------------------


def entity_config_path(entity_path: str) -> str:
    """``/config/users/<user>`` and the like, of an entity path ``users/<user>``."""
    return f"/config/{entity_path}"


def encode_config_change(entity_path: str) -> bytes:
    return _encode({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes | None, what: str) -> str:
    """The entity path a change notification names."""
    value = _object(data, what).get("entity_path")
    if not isinstance(value, str) or not value:
        raise ZkDataError(f"{what}: no entity_path")
    return value


def change_sequence(name: str, prefix: str) -> int | None:
    """The sequence number of a change notification ``<prefix><seq>`` (``config_change_``,
    ``acl_changes_``); None for a child of another name."""
    digits = name.removeprefix(prefix)
    return int(digits) if digits != name and digits.isdigit() else None


# -- /admin/delete_topics ---------------------------------------------------------


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


# -- /latest_producer_id_block -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """The last block of producer ids handed out: ``[block_start, block_end]``, inclusive."""

    broker_id: int
    block_start: int
    block_end: int


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    return _encode(
        {
            "version": 1,
            "broker": block.broker_id,
            "block_start": str(block.block_start),
            "block_end": str(block.block_end),
        }
    )


def decode_producer_id_block(data: bytes | None) -> ProducerIdBlock:
    what = PRODUCER_ID_BLOCK
    obj = _object(data, what)
    return ProducerIdBlock(
        _int(obj, "broker", what), _int(obj, "block_start", what), _int(obj, "block_end", what)
    )


# -- ACLs: /kafka-acl, /kafka-acl-extended and their change notifications -------------

LITERAL_ACLS = "/kafka-acl"
PREFIXED_ACLS = "/kafka-acl-extended/prefixed"
LITERAL_ACL_CHANGES = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
ACL_PATHS = (LITERAL_ACLS, PREFIXED_ACLS, LITERAL_ACL_CHANGES, EXTENDED_ACL_CHANGES)
"""Created when the authorizer starts, as Kafka's ``AclAuthorizer`` creates them."""


def acl_root(pattern_type: PatternType) -> str:
    """Where a pattern type's resources live (LITERAL or PREFIXED)."""
    return LITERAL_ACLS if pattern_type == PatternType.LITERAL else PREFIXED_ACLS


def acl_path(pattern: ResourcePattern) -> str:
    """``/kafka-acl/Topic/orders``, ``/kafka-acl-extended/prefixed/Group/app-``."""
    return f"{acl_root(pattern.pattern_type)}/{kafka_name(pattern.resource_type)}/{pattern.name}"


def acl_change_root(pattern_type: PatternType) -> str:
    return LITERAL_ACL_CHANGES if pattern_type == PatternType.LITERAL else EXTENDED_ACL_CHANGES


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    """A resource's znode: ``{"version":1,"acls":[{"principal":…,"permissionType":"Allow",
    "operation":"Read","host":"*"}]}`` (Kafka's ``AclEntry`` JSON)."""
    return _encode({"version": 1, "acls": [
        {"principal": e.principal, "permissionType": kafka_name(e.permission_type),
         "operation": kafka_name(e.operation), "host": e.host}
        for e in sorted(entries)
    ]})  # fmt: skip


def decode_acls(data: bytes | None, what: str) -> frozenset[AccessControlEntry]:
    if not data:
        return frozenset()
    obj = _object(data, what)
    if obj.get("version") != 1 or not isinstance(obj.get("acls"), list):
        raise ZkDataError(f"{what}: expected version 1 with a list of acls")
    entries = set()
    for item in obj["acls"]:
        try:
            entries.add(AccessControlEntry(
                str(item["principal"]), str(item["host"]),
                parse_name(AclOperation, str(item["operation"])),
                parse_name(AclPermissionType, str(item["permissionType"])),
            ))  # fmt: skip
        except (KeyError, TypeError, ValueError) as exc:
            raise ZkDataError(f"{what}: malformed acl {item!r} ({exc})") from exc
    return frozenset(entries)


def encode_acl_change(pattern: ResourcePattern) -> bytes:
    """A change notification naming the resource whose ACLs changed: ``TOPIC:orders`` for a
    literal one, a JSON event for the others (Kafka's two change stores)."""
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    return _encode({"version": 1, "resourceType": pattern.resource_type.name,
                    "name": pattern.name, "patternType": pattern.pattern_type.name})  # fmt: skip


def decode_acl_change(data: bytes | None, literal: bool) -> ResourcePattern:
    try:
        if literal:
            kind, colon, name = (data or b"").decode().partition(":")
            if not colon:
                raise ValueError("expected ResourceType:name")
            return ResourcePattern(parse_name(ResourceType, kind), name, PatternType.LITERAL)
        obj = _object(data, EXTENDED_ACL_CHANGES)
        return ResourcePattern(
            parse_name(ResourceType, str(obj["resourceType"])),
            str(obj["name"]),
            parse_name(PatternType, str(obj["patternType"])),
        )
    except (KeyError, UnicodeDecodeError, ValueError) as exc:
        raise ZkDataError(f"ACL change notification {data!r}: {exc}") from exc
