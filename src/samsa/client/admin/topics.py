"""Admin operations on topics and configs, and what the cluster is (describe_cluster,
describe_api_versions)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from samsa.client.admin.base import (
    INTERNAL_TOPICS,
    AdminBase,
    finish,
    item_error,
)
from samsa.client.admin.types import (
    AlterConfigOp,
    AlterConfigOpType,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ConfigSynonym,
    NewTopic,
    PartitionDescription,
    ResourceType,
    TopicDescription,
)
from samsa.client.cluster import Node
from samsa.client.errors import error_for
from samsa.errors import ErrorCode, KafkaError
from samsa.protocol.api_keys import ApiKey

__all__ = ["TopicAdmin"]


class TopicAdmin(AdminBase):
    """Topics (create, delete, list, describe, add partitions), configs and the cluster."""

    # -- topics ----------------------------------------------------------------------------

    async def create_topics(
        self,
        topics: Iterable[NewTopic | str],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
        raise_on_error: bool = True,
    ) -> dict[str, KafkaError | None]:
        """Create topics (a name alone takes the broker's partition and replica defaults)."""
        new = [NewTopic(t) if isinstance(t, str) else t for t in topics]
        body = {
            "topics": [
                {
                    "name": t.name,
                    "num_partitions": -1 if t.replica_assignment else t.num_partitions,
                    "replication_factor": -1 if t.replica_assignment else t.replication_factor,
                    "assignments": [
                        {"partition_index": p, "broker_ids": ids}
                        for p, ids in sorted((t.replica_assignment or {}).items())
                    ],
                    "configs": [{"name": k, "value": v} for k, v in t.configs.items()],
                }
                for t in new
            ],
            "timeout": self._request_timeout(timeout_ms),
            "validate_only": validate_only,
        }
        response = await self._to_controller(
            ApiKey.CREATE_TOPICS, body, "create topics", timeout_ms
        )
        answers = {r.name: r for r in response.topics}
        results = {
            t.name: item_error(int(answers[t.name].error_code), f"topic {t.name!r}",
                           getattr(answers[t.name], "error_message", None))
            for t in new
        }  # fmt: skip
        return finish(results, raise_on_error)

    async def delete_topics(
        self, names: Iterable[str], *, timeout_ms: int | None = None, raise_on_error: bool = True
    ) -> dict[str, KafkaError | None]:
        """Delete topics by name."""
        names = list(names)
        body = {
            "topics": [{"name": n} for n in names],
            "topic_names": names,
            "timeout": self._request_timeout(timeout_ms),
        }
        response = await self._to_controller(
            ApiKey.DELETE_TOPICS, body, "delete topics", timeout_ms
        )
        answers = {r.name: r for r in response.responses}
        results = {
            n: item_error(int(answers[n].error_code), f"topic {n!r}",
                      getattr(answers[n], "error_message", None))
            for n in names
        }  # fmt: skip
        return finish(results, raise_on_error)

    async def list_topics(
        self, *, include_internal: bool = False, timeout_ms: int | None = None
    ) -> list[str]:
        """The names of the cluster's topics, sorted; internal ones only when asked."""
        response = await self._retrying(lambda: self._metadata(None), "list topics", timeout_ms)
        names = {
            t.name
            for t in response.topics
            if include_internal or not getattr(t, "is_internal", False)
        }
        if include_internal:
            # Kafka lists internal topics in an all-topics answer; samsa's broker leaves
            # them out, so ask for them by name as well.
            response = await self._retrying(
                lambda: self._metadata(INTERNAL_TOPICS), "list topics", timeout_ms
            )
            names.update(t.name for t in response.topics if not int(t.error_code))
        return sorted(names)

    async def describe_topics(
        self, names: Iterable[str] | None = None, *, timeout_ms: int | None = None
    ) -> dict[str, TopicDescription]:
        """Partitions, leaders and replicas of ``names`` (all topics when None).

        A topic that does not exist raises UnknownTopicOrPartitionError.
        """
        wanted = None if names is None else list(names)

        async def attempt() -> Any:
            response = await self._metadata(wanted)
            for topic in response.topics:
                if int(topic.error_code) == ErrorCode.LEADER_NOT_AVAILABLE:  # still being created
                    raise error_for(ErrorCode.LEADER_NOT_AVAILABLE, f"topic {topic.name!r}")
            return response

        response = await self._retrying(attempt, "describe topics", timeout_ms)
        descriptions: dict[str, TopicDescription] = {}
        for topic in response.topics:
            code = int(topic.error_code)
            if code:
                raise error_for(code, f"topic {topic.name!r}")
            partitions = tuple(
                sorted(
                    (
                        PartitionDescription(
                            int(p.partition_index),
                            int(p.leader_id),
                            int(getattr(p, "leader_epoch", -1)),
                            tuple(int(r) for r in p.replica_nodes),
                            tuple(int(r) for r in p.isr_nodes),
                            tuple(int(r) for r in getattr(p, "offline_replicas", ())),
                        )
                        for p in topic.partitions
                    ),
                    key=lambda p: p.partition,
                )
            )
            descriptions[topic.name] = TopicDescription(
                topic.name,
                getattr(topic, "topic_id", None),
                bool(getattr(topic, "is_internal", False)),
                partitions,
            )
        return descriptions

    async def create_partitions(
        self,
        new_counts: Mapping[str, int],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
        raise_on_error: bool = True,
    ) -> dict[str, KafkaError | None]:
        """Raise topics' partition counts to ``new_counts`` (a total, not an increment)."""
        body = {
            "topics": [
                {"name": name, "count": count, "assignments": None}
                for name, count in new_counts.items()
            ],
            "timeout": self._request_timeout(timeout_ms),
            "validate_only": validate_only,
        }
        response = await self._to_controller(ApiKey.CREATE_PARTITIONS, body, "create partitions",
                                             timeout_ms)  # fmt: skip
        answers = {r.name: r for r in response.results}
        results = {
            n: item_error(int(answers[n].error_code), f"topic {n!r}", answers[n].error_message)
            for n in new_counts
        }
        return finish(results, raise_on_error)

    # -- configs ---------------------------------------------------------------------------

    def _node_for(self, resource: ConfigResource) -> int | None:
        if resource.type in (ResourceType.BROKER, ResourceType.BROKER_LOGGER) and (
            resource.name.isdigit()
        ):
            return int(resource.name)
        return None

    async def describe_configs(
        self,
        resources: Iterable[ConfigResource],
        *,
        include_synonyms: bool = False,
        include_documentation: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        """The configs of topics and brokers, by name; a failed resource raises its error."""
        wanted = list(resources)
        results: dict[ConfigResource, dict[str, ConfigEntry]] = {}
        by_node: dict[int | None, list[ConfigResource]] = {}
        for resource in wanted:
            by_node.setdefault(self._node_for(resource), []).append(resource)
        for node_id, group in by_node.items():
            body = {
                "resources": [
                    {"resource_type": int(r.type), "resource_name": r.name,
                     "configuration_keys": None}
                    for r in group
                ],
                "include_synonyms": include_synonyms,
                "include_documentation": include_documentation,
            }  # fmt: skip

            async def attempt(node_id: int | None = node_id, body: Any = body) -> Any:
                return await self._cluster.send(node_id, ApiKey.DESCRIBE_CONFIGS, body)

            response = await self._retrying(attempt, "describe configs", timeout_ms)
            for result in response.results:
                resource = ConfigResource(ResourceType(result.resource_type), result.resource_name)
                error = item_error(int(result.error_code), f"{resource}", result.error_message)
                if error is not None:
                    raise error
                results[resource] = {c.name: _config_entry(c) for c in result.configs}
        return {r: results[r] for r in wanted if r in results}

    async def alter_configs(
        self,
        changes: Mapping[ConfigResource, Mapping[str, str | None] | Iterable[AlterConfigOp]],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
        raise_on_error: bool = True,
    ) -> dict[ConfigResource, KafkaError | None]:
        """Change configs incrementally (IncrementalAlterConfigs).

        Each resource takes a mapping name → value (None deletes the override, back to
        the default) or a list of :class:`AlterConfigOp`.
        """
        results: dict[ConfigResource, KafkaError | None] = {}
        by_node: dict[int | None, list[ConfigResource]] = {}
        for resource in changes:
            by_node.setdefault(self._node_for(resource), []).append(resource)
        for node_id, group in by_node.items():
            body = {
                "resources": [
                    {
                        "resource_type": int(r.type),
                        "resource_name": r.name,
                        "configs": [
                            {"name": op.name, "config_operation": int(op.op), "value": op.value}
                            for op in _ops(changes[r])
                        ],
                    }
                    for r in group
                ],
                "validate_only": validate_only,
            }

            async def attempt(node_id: int | None = node_id, body: Any = body) -> Any:
                return await self._cluster.send(node_id, ApiKey.INCREMENTAL_ALTER_CONFIGS, body)

            response = await self._retrying(attempt, "alter configs", timeout_ms)
            for r in response.responses:
                resource = ConfigResource(ResourceType(r.resource_type), r.resource_name)
                results[resource] = item_error(int(r.error_code), f"{resource}", r.error_message)
        return finish({r: results.get(r) for r in changes}, raise_on_error)

    async def describe_cluster(self, *, timeout_ms: int | None = None) -> ClusterDescription:
        """The cluster id, the controller and the brokers."""

        async def attempt() -> ClusterDescription:
            connection = await self._cluster.any_connection()
            if ApiKey.DESCRIBE_CLUSTER not in connection.versions:
                await self._cluster.refresh()
                cluster = self._cluster
                nodes = tuple(cluster.nodes[n] for n in sorted(cluster.nodes))
                return ClusterDescription(cluster.cluster_id, cluster.controller_id, nodes)
            response = await connection.request(
                ApiKey.DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": False}
            )
            error = item_error(int(response.error_code), "describe cluster", response.error_message)
            if error is not None:
                raise error
            nodes = tuple(
                sorted(
                    (Node(int(b.broker_id), b.host, int(b.port), b.rack) for b in response.brokers),
                    key=lambda n: n.node_id,
                )
            )
            return ClusterDescription(response.cluster_id, int(response.controller_id), nodes)

        return await self._retrying(attempt, "describe cluster", timeout_ms)

    async def describe_api_versions(
        self, node_id: int | None = None, *, timeout_ms: int | None = None
    ) -> dict[int, tuple[int, int]]:
        """The (lowest, highest) version of each API a broker serves, by API key, as its
        ApiVersions answer said (``node_id`` None: any broker). Kafka sends no software
        version on the wire: these ranges are how a client tells brokers apart."""

        async def attempt() -> dict[int, tuple[int, int]]:
            if node_id is None:
                connection = await self._cluster.any_connection()
            else:
                connection = await self._cluster.connection(node_id)
            return dict(connection.broker_versions)

        return await self._retrying(attempt, "describe api versions", timeout_ms)


def _ops(change: Mapping[str, str | None] | Iterable[AlterConfigOp]) -> list[AlterConfigOp]:
    if isinstance(change, Mapping):
        return [
            AlterConfigOp(name, value, AlterConfigOpType.SET)
            if value is not None
            else AlterConfigOp(name, None, AlterConfigOpType.DELETE)
            for name, value in change.items()
        ]
    return list(change)


def _config_entry(config: Any) -> ConfigEntry:
    return ConfigEntry(
        config.name,
        config.value,
        ConfigSource.of(int(getattr(config, "config_source", 0))),
        bool(config.read_only),
        bool(config.is_sensitive),
        tuple(
            ConfigSynonym(s.name, s.value, ConfigSource.of(int(s.source)))
            for s in getattr(config, "synonyms", ())
        ),
        getattr(config, "documentation", None),
    )
