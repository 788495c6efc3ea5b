"""Errors the clients raise that no Kafka error code stands for, and helpers for those that do.

Everything else a client raises is a :class:`~samsa.errors.KafkaError` subclass
found with :func:`~samsa.errors.for_code`, so a broker's answer and a client's
failure share one tree::

    SamsaError
    ├── ConfigError                 a client property is unknown or its value invalid
    ├── ClientClosedError           the client (or connection) was closed by its owner
    ├── IllegalStateError           a call out of order (commit before begin_transaction)
    ├── TransactionAbortedError     a record of a transaction aborted before it was sent
    ├── RecordDeserializationError  a consumer's key/value deserializer raised
    ├── ClientTimeoutError          a deadline passed on the client (also a TimeoutError)
    │   └── BufferExhaustedError    buffer.memory stayed full for max.block.ms
    └── KafkaError
        ├── NetworkError        13  the connection broke, could not be opened or is confused
        ├── RequestTimedOutError 7  no response within request.timeout.ms (connection closed)
        └── …                       the error code a broker answered with

Following trio: *closed* is what you did (ClientClosedError), *broken* is what the
network or the peer did (NetworkError).
"""

from __future__ import annotations

from samsa.errors import ErrorCode, KafkaError, SamsaError, for_code

__all__ = [
    "BufferExhaustedError",
    "ClientClosedError",
    "ClientTimeoutError",
    "IllegalStateError",
    "RecordDeserializationError",
    "TransactionAbortedError",
    "error_for",
    "network_error",
]


class ClientClosedError(SamsaError):
    """Raised when a producer, admin client, cluster or connection is used after close()."""


class IllegalStateError(SamsaError):
    """Raised when a call comes out of order, such as commit_transaction() before
    begin_transaction(), or a transactional call on a producer without transactional.id."""


class TransactionAbortedError(SamsaError):
    """Raised (through its future) for a record of a transaction that abort_transaction()
    aborted before the record was sent."""


class RecordDeserializationError(SamsaError):
    """Raised by a consumer's poll() when ``key.deserializer`` or ``value.deserializer``
    fails on a record; the records before it were returned and the position is the
    record's offset (``partition``, ``offset``), so a seek to ``offset + 1`` skips it."""

    def __init__(self, message: str, partition: object, offset: int) -> None:
        super().__init__(message)
        self.partition = partition
        self.offset = offset


class ClientTimeoutError(SamsaError, TimeoutError):
    """Raised when a client-side deadline passes: metadata for a topic within max.block.ms,
    delivery of a record within delivery.timeout.ms, an admin call within
    default.api.timeout.ms."""


class BufferExhaustedError(ClientTimeoutError):
    """Raised by send() when the records waiting to be sent fill buffer.memory and no
    space frees up within max.block.ms."""


def error_for(code: int, message: str | None = None) -> KafkaError:
    """The exception instance for a non-zero Kafka error code, with the broker's message."""
    return for_code(code)(message or "")


def network_error(message: str) -> KafkaError:
    """A NETWORK_EXCEPTION: retriable, and metadata should be refreshed."""
    return for_code(ErrorCode.NETWORK_EXCEPTION)(message)
