"""The stream sink's two-phase commit: transactions a write task leaves open, ended on the driver.

A write task of micro-batch *b* writes its rows, and offset *b*+1 of a group
named after its ``transactional.id``, in one transaction, and leaves it open
(prepared). Its commit message carries the transaction as a
:class:`PreparedTransaction`: transactional id, producer id and epoch. Spark
calls the writer's ``commit`` on the driver only when every task of the
micro-batch succeeded, with the messages of the attempts that succeeded;
:func:`end_transactions` then ends each transaction with EndTxn under that
producer id and epoch — the way Flink's Kafka sink resumes a transaction. A
micro-batch that fails ends them aborted, or a replayed task fences them.

Why the task does not commit: when Spark fails a task upstream of the writer (a
failing UDF, a lost shuffle block), the writer's input just ends, with no error,
and looks complete. A task that committed there made a partial batch visible and
marked done, and its retry skipped the rest.

EndTxn goes to the transaction coordinator through the client's cluster layer,
at most v4 (v5 belongs to transactions version 2, which samsa's producer does
not use); each call opens and closes its own connections.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from samsa.client.cluster import COORDINATOR_ERRORS, Cluster, CoordinatorType
from samsa.client.config import ClientConfig, admin_config
from samsa.client.errors import error_for
from samsa.client.producer import Producer
from samsa.errors import ErrorCode, KafkaError, SamsaError
from samsa.protocol.api_keys import ApiKey

__all__ = [
    "PreparedTransaction",
    "SinkCommitError",
    "end_transactions",
    "prepared_transaction",
]

END_TXN_MAX_VERSION = 4  # v5 is transactions version 2, which samsa's producer does not use
# The transaction was ended or fenced under this epoch: it timed out or another attempt
# of the task took over.
LOST_CODES = frozenset(
    {
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.INVALID_TXN_STATE,
        ErrorCode.INVALID_PRODUCER_ID_MAPPING,
        ErrorCode.PRODUCER_FENCED,
    }
)

_client_ids = itertools.count(1)


class SinkCommitError(SamsaError):
    """Raised on the driver when a write task's open transaction can no longer be
    committed (it outlived ``transaction.timeout.ms``, or another attempt fenced it);
    the micro-batch fails and is written again when the query restarts."""


@dataclass(frozen=True, slots=True)
class PreparedTransaction:
    """An open transaction of a write task, as its commit message carries it."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


def prepared_transaction(producer: Producer) -> PreparedTransaction:
    """The transaction ``producer`` has open, to end from another process.

    Read from the producer itself, after its last request of the transaction: the
    coordinator's answer (DescribeTransactions) could already be another attempt's
    epoch (the producer's own identity does not change in an open transaction).
    """
    identity = producer.producer_identity
    transactional_id = producer.config["transactional.id"]
    if identity is None or not transactional_id:
        raise SamsaError("the producer has no transactional id and epoch to prepare")
    return PreparedTransaction(transactional_id, *identity)


def end_transactions(
    props: Mapping[str, Any], transactions: Sequence[PreparedTransaction], commit: bool
) -> None:
    """Commit (or abort) each of ``transactions``; an EndTxn repeated after it
    succeeded answers success, so a commit retried by Spark is harmless.

    Raises SinkCommitError when a transaction to commit was aborted or fenced; the
    others are committed all the same, so part of the micro-batch is visible until
    the query restarts and its replay writes the rest (the committed tasks skip).
    """
    if not transactions:
        return

    async def end_all(cluster: Cluster, config: ClientConfig) -> None:
        # Every one is tried (a commit that fails leaves the others committed: the rest of
        # the micro-batch is written when it is replayed), then the first error is raised.
        results = await asyncio.gather(
            *(_end(cluster, config, t, commit) for t in transactions), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result

    _run(props, end_all)


async def _end(
    cluster: Cluster, config: ClientConfig, txn: PreparedTransaction, commit: bool
) -> None:
    body = {"transactional_id": txn.transactional_id, "producer_id": txn.producer_id,
            "producer_epoch": txn.producer_epoch, "committed": commit}  # fmt: skip
    try:
        await _to_coordinator(
            cluster, config, txn.transactional_id, api_key=ApiKey.END_TXN, body=body, what="EndTxn",
            error_of=lambda r: int(r.error_code), max_version=END_TXN_MAX_VERSION,
        )  # fmt: skip
    except KafkaError as e:
        if commit and e.code in LOST_CODES:
            raise SinkCommitError(
                f"the transaction of write task {txn.transactional_id!r} (producer id "
                f"{txn.producer_id}, epoch {txn.producer_epoch}) was aborted before the "
                f"micro-batch could commit it ({e}): the micro-batch took longer than "
                "kafka.transaction.timeout.ms after the task wrote, or another attempt of "
                "the task fenced it. Its rows are not visible to read_committed readers; "
                "the micro-batch is written again when the query restarts."
            ) from e
        raise


def _run(props: Mapping[str, Any], work: Callable[[Cluster, ClientConfig], Any]) -> Any:
    config = admin_config(props)
    client_id = config["client.id"] or f"samsa-spark-txn-{os.getpid()}-{next(_client_ids)}"

    async def main() -> Any:
        cluster = Cluster(config, client_id=client_id)
        try:
            await cluster.start()
            return await work(cluster, config)
        finally:
            await cluster.close()

    return asyncio.run(main())


async def _to_coordinator(
    cluster: Cluster,
    config: ClientConfig,
    transactional_id: str,
    *,
    api_key: int,
    body: Mapping[str, Any],
    what: str,
    error_of: Callable[[Any], int],
    max_version: int | None = None,
) -> Any:
    """One request to the transaction coordinator of ``transactional_id``, retried."""
    kind = CoordinatorType.TRANSACTION

    async def attempt() -> Any:
        node = await cluster.coordinator(transactional_id, kind)
        connection = await cluster.connection(node)
        version = connection.version(api_key)
        if max_version is not None:
            version = min(version, max_version)
        try:
            response = await connection.request(api_key, body, version=version)
        except KafkaError as e:
            # The connection broke (NOT_COORDINATOR comes in the response, below).
            if e.code == ErrorCode.NETWORK_EXCEPTION:
                cluster.invalidate_coordinator(transactional_id, kind)
            raise
        code = error_of(response)
        if code in COORDINATOR_ERRORS:
            cluster.invalidate_coordinator(transactional_id, kind)
        if code:
            raise error_for(code, f"{what} for transactional id {transactional_id!r}")
        return response

    return await cluster.retrying(attempt, timeout_ms=config["default.api.timeout.ms"], what=what)
