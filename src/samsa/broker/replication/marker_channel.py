"""Transaction markers to partition leaders wherever they are (Kafka's marker channel).

The transaction coordinator ends a transaction by writing a COMMIT or ABORT
marker to every partition in it. :class:`TxnMarkerChannel` writes one: into
the local log when this broker leads the partition, else as a WriteTxnMarkers
request to the partition's leader, over one connection per broker kept open
between markers. The answer is the partition's error code; the coordinator
retries the retriable ones (no leader yet, a leader that moved:
NOT_LEADER_OR_FOLLOWER; a broker that cannot be reached: NETWORK_EXCEPTION),
so a marker reaches a partition whose leader failed over once the new leader
is known.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from samsa.broker.metadata.metadata_cache import MetadataCache
from samsa.broker.replication.replica_manager import ReplicaManager
from samsa.client.connection import BrokerConnection
from samsa.client.security import ClientSecurity
from samsa.errors import BrokerNotAvailableError, ErrorCode, KafkaError
from samsa.protocol.api_keys import ApiKey
from samsa.types import TopicPartition

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 1


class TxnMarkerChannel:
    """Writes transaction markers to each partition's leader (one owner: the loop)."""

    def __init__(
        self,
        local_id: int,
        replica_manager: ReplicaManager,
        metadata: MetadataCache,
        endpoint_of: Callable[[int], tuple[str, int] | None],
        *,
        request_timeout_ms: int = 30_000,
        security: ClientSecurity | None = None,
    ) -> None:
        self.local_id = local_id
        self._security = security
        self._replicas = replica_manager
        self._metadata = metadata
        self._endpoint_of = endpoint_of
        self._request_timeout_ms = request_timeout_ms
        self._connections: dict[int, BrokerConnection] = {}

    async def write(
        self,
        tp: TopicPartition,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
    ) -> int:
        """Write one marker; the partition's error code (NONE when written and replicated)."""
        state = self._metadata.leadership(tp)
        if state is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if state.leader == self.local_id or state.leader < 0:
            # Led here (or by nobody now: the local answer says why, and it is retried).
            return await self._replicas.write_txn_marker(
                tp, producer_id, producer_epoch, commit, coordinator_epoch
            )
        try:
            connection = await self._connection(state.leader)
            response = await connection.request(
                ApiKey.WRITE_TXN_MARKERS,
                {
                    "markers": [
                        {
                            "producer_id": producer_id,
                            "producer_epoch": producer_epoch,
                            "transaction_result": commit,
                            "topics": [{"name": tp.topic, "partition_indexes": [tp.partition]}],
                            "coordinator_epoch": coordinator_epoch,
                        }
                    ]
                },
                version=WRITE_TXN_MARKERS_VERSION,
            )
        except KafkaError as exc:
            self._drop(state.leader)
            log.info("marker for %s to broker %d failed: %s", tp, state.leader, exc)
            return exc.code
        for marker in response.markers:
            for topic in marker.topics:
                for partition in topic.partitions:
                    if topic.name == tp.topic and partition.partition_index == tp.partition:
                        return int(partition.error_code)
        return ErrorCode.UNKNOWN_SERVER_ERROR

    async def _connection(self, broker: int) -> BrokerConnection:
        connection = self._connections.get(broker)
        if connection is not None and connection.usable:
            return connection
        endpoint = self._endpoint_of(broker)
        if endpoint is None:
            raise BrokerNotAvailableError(f"broker {broker} is not registered")
        connection = BrokerConnection(
            endpoint[0],
            endpoint[1],
            node_id=broker,
            client_id=f"samsa-txn-markers-{self.local_id}",
            request_timeout_ms=self._request_timeout_ms,
            security=self._security,
        )
        self._connections[broker] = connection
        return await connection.open()

    def _drop(self, broker: int) -> None:
        self._connections.pop(broker, None)

    async def close(self) -> None:
        for connection in self._connections.values():
            await connection.close()
        self._connections.clear()
