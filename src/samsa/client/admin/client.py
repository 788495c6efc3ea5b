"""The admin client: topics, configs, groups, offsets, records, ACLs and the cluster.

:class:`AsyncAdmin` is the asyncio core; :class:`Admin` runs it on a private
event-loop thread and offers the same methods, blocking. Calls that act on
several items (topics, resources, groups, partitions) return a dict of the
error of each item (None for success) and, unless ``raise_on_error=False``,
raise the first item's error instead — a :class:`~samsa.errors.KafkaError`
subclass such as ``TopicAlreadyExistsError``. Every call retries retriable
failures (a broken connection, a moving coordinator or leader) with backoff
until ``default.api.timeout.ms`` (or its ``timeout_ms``), then raises
:class:`~samsa.client.errors.ClientTimeoutError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from samsa.client.admin.acls import AclAdmin
from samsa.client.admin.groups import GroupAdmin
from samsa.client.admin.quotas import QuotaAdmin
from samsa.client.admin.records import RecordAdmin
from samsa.client.admin.replicas import ReplicaAdmin
from samsa.client.admin.topics import TopicAdmin
from samsa.client.admin.users import UserAdmin
from samsa.client.config import ClientConfig
from samsa.client.portal import LoopThread, blocking

__all__ = ["Admin", "AsyncAdmin"]


class AsyncAdmin(
    TopicAdmin, GroupAdmin, RecordAdmin, ReplicaAdmin, UserAdmin, AclAdmin, QuotaAdmin
):
    """Kafka's admin operations, asyncio flavour. Use ``async with AsyncAdmin(config)``
    or call :meth:`start` (done on first use) and :meth:`close`."""


class Admin:
    """Kafka's admin operations, blocking: the methods of :class:`AsyncAdmin`, run on a
    private event-loop thread. Use as a context manager or call :meth:`close`."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        core = AsyncAdmin(config)  # checks the config before a thread exists
        self._portal = LoopThread(f"samsa-admin-{core.client_id}")
        self._core = core

    @property
    def config(self) -> ClientConfig:
        return self._core.config

    def close(self) -> None:
        """Close every connection and stop the client's thread."""
        if self._portal.stopped:
            return  # closed already
        try:
            self._portal.call(self._core.close())
        finally:
            self._portal.stop()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    start = blocking(AsyncAdmin.start)
    create_topics = blocking(AsyncAdmin.create_topics)
    delete_topics = blocking(AsyncAdmin.delete_topics)
    list_topics = blocking(AsyncAdmin.list_topics)
    describe_topics = blocking(AsyncAdmin.describe_topics)
    create_partitions = blocking(AsyncAdmin.create_partitions)
    describe_configs = blocking(AsyncAdmin.describe_configs)
    alter_configs = blocking(AsyncAdmin.alter_configs)
    list_groups = blocking(AsyncAdmin.list_groups)
    describe_groups = blocking(AsyncAdmin.describe_groups)
    delete_groups = blocking(AsyncAdmin.delete_groups)
    list_group_offsets = blocking(AsyncAdmin.list_group_offsets)
    alter_group_offsets = blocking(AsyncAdmin.alter_group_offsets)
    delete_group_offsets = blocking(AsyncAdmin.delete_group_offsets)
    delete_records = blocking(AsyncAdmin.delete_records)
    list_offsets = blocking(AsyncAdmin.list_offsets)
    describe_cluster = blocking(AsyncAdmin.describe_cluster)
    describe_api_versions = blocking(AsyncAdmin.describe_api_versions)
    elect_leaders = blocking(AsyncAdmin.elect_leaders)
    describe_log_dirs = blocking(AsyncAdmin.describe_log_dirs)
    create_acls = blocking(AsyncAdmin.create_acls)
    describe_acls = blocking(AsyncAdmin.describe_acls)
    delete_acls = blocking(AsyncAdmin.delete_acls)
    alter_partition_reassignments = blocking(AsyncAdmin.alter_partition_reassignments)
    list_partition_reassignments = blocking(AsyncAdmin.list_partition_reassignments)
    describe_user_scram_credentials = blocking(AsyncAdmin.describe_user_scram_credentials)
    alter_user_scram_credentials = blocking(AsyncAdmin.alter_user_scram_credentials)
    alter_client_quotas = blocking(AsyncAdmin.alter_client_quotas)
    describe_client_quotas = blocking(AsyncAdmin.describe_client_quotas)
