"""Exceptions raised by samsa, and the one table that maps them to Kafka error codes.

Every exception samsa raises derives from :class:`SamsaError`::

    SamsaError
    ├── ConfigError                 a configuration key is unknown or its value invalid
    ├── RecordFormatError           bytes are not a well-formed RecordBatch v2 or record
    │   └── CorruptRecordError      (also a KafkaError, code 2) CRC, magic or a size is wrong
    │       └── TruncatedBatchError the bytes end before the batch does
    ├── CompressionError            a codec failed, or is not one Kafka defines
    ├── StorageError                the log on disk cannot be used as asked
    │   └── LogClosedError          the log, segment or index was closed by its owner
    └── KafkaError                  anything that travels as a Kafka error code
        ├── CorruptRecordError               2  CORRUPT_MESSAGE (CRC, magic or size is wrong)
        ├── OffsetOutOfRangeError            1  OFFSET_OUT_OF_RANGE
        ├── MessageTooLargeError            10  MESSAGE_TOO_LARGE
        ├── InvalidTimestampError           32  INVALID_TIMESTAMP
        ├── InvalidRecordError              87  INVALID_RECORD
        ├── UnsupportedCompressionTypeError 76  UNSUPPORTED_COMPRESSION_TYPE
        ├── KafkaStorageError               56  KAFKA_STORAGE_ERROR
        └── … one class per code in ``_CODES``, found with :func:`for_code`

A ``KafkaError`` class carries ``code``, ``retriable`` (a client may retry the same
request) and ``invalid_metadata`` (a client should refresh metadata before
retrying), the flags of Kafka's own exception classes.
"""

from __future__ import annotations

from typing import ClassVar


class SamsaError(Exception):
    """Root of every exception samsa raises."""


class ConfigError(SamsaError):
    """Raised when a configuration key is unknown or its value is invalid."""


class RecordFormatError(SamsaError):
    """Raised when bytes are not a well-formed RecordBatch v2 or record."""


class CompressionError(SamsaError):
    """Raised when a codec fails on its input or the codec id is not Kafka's."""


class StorageError(SamsaError):
    """Raised when the on-disk log cannot do what was asked (bad offset order, bad files)."""


class LogClosedError(StorageError):
    """Raised when a log, segment or index is used after its owner closed it."""


class KafkaError(SamsaError):
    """An error that travels on the wire as a Kafka error code."""

    code: ClassVar[int] = -1
    name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"
    retriable: ClassVar[bool] = False
    invalid_metadata: ClassVar[bool] = False

    def __str__(self) -> str:
        detail = super().__str__()
        return f"[{self.name}] {detail}" if detail else f"[{self.name}]"


class UnknownServerError(KafkaError):
    """Raised for an unexpected server-side failure (code -1)."""


class OffsetOutOfRangeError(KafkaError):
    """Raised when a fetch or seek names an offset outside [log start, log end]."""

    code = 1
    name = "OFFSET_OUT_OF_RANGE"


class CorruptRecordError(RecordFormatError, KafkaError):
    """Raised when a batch fails its CRC, has the wrong magic, or its sizes disagree."""

    code = 2
    name = "CORRUPT_MESSAGE"
    retriable = True


class TruncatedBatchError(CorruptRecordError):
    """Raised when a buffer ends before the batch it starts does."""


class MessageTooLargeError(KafkaError):
    """Raised when a batch is larger than ``max.message.bytes`` allows."""

    code = 10
    name = "MESSAGE_TOO_LARGE"


class InvalidTimestampError(KafkaError):
    """Raised when a batch's timestamps are further from now than the topic allows."""

    code = 32
    name = "INVALID_TIMESTAMP"


class KafkaStorageError(KafkaError):
    """Raised when a log directory fails with an I/O error."""

    code = 56
    name = "KAFKA_STORAGE_ERROR"
    retriable = True
    invalid_metadata = True


class UnsupportedCompressionTypeError(KafkaError):
    """Raised when a batch names a compression codec that does not exist."""

    code = 76
    name = "UNSUPPORTED_COMPRESSION_TYPE"


class InvalidRecordError(KafkaError):
    """Raised when a batch is well formed but not acceptable (a client-written control batch)."""

    code = 87
    name = "INVALID_RECORD"


# code, name, retriable, invalid_metadata — Kafka's error table (Errors.java).
_CODES: tuple[tuple[int, str, bool, bool], ...] = (
    (-1, "UNKNOWN_SERVER_ERROR", False, False),
    (1, "OFFSET_OUT_OF_RANGE", False, False),
    (2, "CORRUPT_MESSAGE", True, False),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", True, True),
    (4, "INVALID_FETCH_SIZE", False, False),
    (5, "LEADER_NOT_AVAILABLE", True, True),
    (6, "NOT_LEADER_OR_FOLLOWER", True, True),
    (7, "REQUEST_TIMED_OUT", True, False),
    (8, "BROKER_NOT_AVAILABLE", False, False),
    (9, "REPLICA_NOT_AVAILABLE", True, True),
    (10, "MESSAGE_TOO_LARGE", False, False),
    (11, "STALE_CONTROLLER_EPOCH", False, False),
    (12, "OFFSET_METADATA_TOO_LARGE", False, False),
    (13, "NETWORK_EXCEPTION", True, True),
    (14, "COORDINATOR_LOAD_IN_PROGRESS", True, False),
    (15, "COORDINATOR_NOT_AVAILABLE", True, False),
    (16, "NOT_COORDINATOR", True, False),
    (17, "INVALID_TOPIC_EXCEPTION", False, False),
    (18, "RECORD_LIST_TOO_LARGE", False, False),
    (19, "NOT_ENOUGH_REPLICAS", True, False),
    (20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", True, False),
    (21, "INVALID_REQUIRED_ACKS", False, False),
    (22, "ILLEGAL_GENERATION", False, False),
    (23, "INCONSISTENT_GROUP_PROTOCOL", False, False),
    (24, "INVALID_GROUP_ID", False, False),
    (25, "UNKNOWN_MEMBER_ID", False, False),
    (26, "INVALID_SESSION_TIMEOUT", False, False),
    (27, "REBALANCE_IN_PROGRESS", False, False),
    (28, "INVALID_COMMIT_OFFSET_SIZE", False, False),
    (29, "TOPIC_AUTHORIZATION_FAILED", False, False),
    (30, "GROUP_AUTHORIZATION_FAILED", False, False),
    (31, "CLUSTER_AUTHORIZATION_FAILED", False, False),
    (32, "INVALID_TIMESTAMP", False, False),
    (33, "UNSUPPORTED_SASL_MECHANISM", False, False),
    (34, "ILLEGAL_SASL_STATE", False, False),
    (35, "UNSUPPORTED_VERSION", False, False),
    (36, "TOPIC_ALREADY_EXISTS", False, False),
    (37, "INVALID_PARTITIONS", False, False),
    (38, "INVALID_REPLICATION_FACTOR", False, False),
    (39, "INVALID_REPLICA_ASSIGNMENT", False, False),
    (40, "INVALID_CONFIG", False, False),
    (41, "NOT_CONTROLLER", True, False),
    (42, "INVALID_REQUEST", False, False),
    (43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", False, False),
    (44, "POLICY_VIOLATION", False, False),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", False, False),
    (46, "DUPLICATE_SEQUENCE_NUMBER", False, False),
    (47, "INVALID_PRODUCER_EPOCH", False, False),
    (48, "INVALID_TXN_STATE", False, False),
    (49, "INVALID_PRODUCER_ID_MAPPING", False, False),
    (50, "INVALID_TRANSACTION_TIMEOUT", False, False),
    (51, "CONCURRENT_TRANSACTIONS", True, False),
    (52, "TRANSACTION_COORDINATOR_FENCED", False, False),
    (53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", False, False),
    (54, "SECURITY_DISABLED", False, False),
    (55, "OPERATION_NOT_ATTEMPTED", False, False),
    (56, "KAFKA_STORAGE_ERROR", True, True),
    (57, "LOG_DIR_NOT_FOUND", False, False),
    (58, "SASL_AUTHENTICATION_FAILED", False, False),
    (59, "UNKNOWN_PRODUCER_ID", False, False),
    (60, "REASSIGNMENT_IN_PROGRESS", False, False),
    (61, "DELEGATION_TOKEN_AUTH_DISABLED", False, False),
    (62, "DELEGATION_TOKEN_NOT_FOUND", False, False),
    (63, "DELEGATION_TOKEN_OWNER_MISMATCH", False, False),
    (64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", False, False),
    (65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED", False, False),
    (66, "DELEGATION_TOKEN_EXPIRED", False, False),
    (67, "INVALID_PRINCIPAL_TYPE", False, False),
    (68, "NON_EMPTY_GROUP", False, False),
    (69, "GROUP_ID_NOT_FOUND", False, False),
    (70, "FETCH_SESSION_ID_NOT_FOUND", True, False),
    (71, "INVALID_FETCH_SESSION_EPOCH", True, False),
    (72, "LISTENER_NOT_FOUND", True, True),
    (73, "TOPIC_DELETION_DISABLED", False, False),
    (74, "FENCED_LEADER_EPOCH", True, True),
    (75, "UNKNOWN_LEADER_EPOCH", True, False),
    (76, "UNSUPPORTED_COMPRESSION_TYPE", False, False),
    (77, "STALE_BROKER_EPOCH", False, False),
    (78, "OFFSET_NOT_AVAILABLE", True, False),
    (79, "MEMBER_ID_REQUIRED", False, False),
    (80, "PREFERRED_LEADER_NOT_AVAILABLE", True, True),
    (81, "GROUP_MAX_SIZE_REACHED", False, False),
    (82, "FENCED_INSTANCE_ID", False, False),
    (83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", True, True),
    (84, "ELECTION_NOT_NEEDED", False, False),
    (85, "NO_REASSIGNMENT_IN_PROGRESS", False, False),
    (86, "GROUP_SUBSCRIBED_TO_TOPIC", False, False),
    (87, "INVALID_RECORD", False, False),
    (88, "UNSTABLE_OFFSET_COMMIT", True, False),
    (89, "THROTTLING_QUOTA_EXCEEDED", True, False),
    (90, "PRODUCER_FENCED", False, False),
    (91, "RESOURCE_NOT_FOUND", False, False),
    (92, "DUPLICATE_RESOURCE", False, False),
    (93, "UNACCEPTABLE_CREDENTIAL", False, False),
    (94, "INCONSISTENT_VOTER_SET", False, False),
    (95, "INVALID_UPDATE_VERSION", False, False),
    (96, "FEATURE_UPDATE_FAILED", False, False),
    (97, "PRINCIPAL_DESERIALIZATION_FAILURE", False, False),
    (98, "SNAPSHOT_NOT_FOUND", False, False),
    (99, "POSITION_OUT_OF_RANGE", False, False),
    (100, "UNKNOWN_TOPIC_ID", True, True),
    (101, "DUPLICATE_BROKER_REGISTRATION", False, False),
    (102, "BROKER_ID_NOT_REGISTERED", False, False),
    (103, "INCONSISTENT_TOPIC_ID", True, True),
    (104, "INCONSISTENT_CLUSTER_ID", False, False),
    (105, "TRANSACTIONAL_ID_NOT_FOUND", False, False),
    (106, "FETCH_SESSION_TOPIC_ID_ERROR", True, False),
    (107, "INELIGIBLE_REPLICA", False, False),
    (108, "NEW_LEADER_ELECTED", False, False),
    (109, "OFFSET_MOVED_TO_TIERED_STORAGE", False, False),
    (110, "FENCED_MEMBER_EPOCH", False, False),
    (111, "UNRELEASED_INSTANCE_ID", False, False),
    (112, "UNSUPPORTED_ASSIGNOR", False, False),
    (113, "STALE_MEMBER_EPOCH", False, False),
    (114, "MISMATCHED_ENDPOINT_TYPE", False, False),
    (115, "UNSUPPORTED_ENDPOINT_TYPE", False, False),
    (116, "UNKNOWN_CONTROLLER_ID", False, False),
    (117, "UNKNOWN_SUBSCRIPTION_ID", False, False),
    (118, "TELEMETRY_TOO_LARGE", False, False),
    (119, "INVALID_REGISTRATION", False, False),
    (120, "TRANSACTION_ABORTABLE", False, False),
    (121, "INVALID_RECORD_STATE", False, False),
    (122, "SHARE_SESSION_NOT_FOUND", True, False),
    (123, "INVALID_SHARE_SESSION_EPOCH", True, False),
    (124, "FENCED_STATE_EPOCH", False, False),
    (125, "INVALID_VOTER_KEY", False, False),
    (126, "DUPLICATE_VOTER", False, False),
    (127, "VOTER_NOT_FOUND", False, False),
)

_BY_CODE: dict[int, type[KafkaError]] = {}


def _class_name(kafka_name: str) -> str:
    words = kafka_name.removesuffix("_EXCEPTION").removesuffix("_ERROR").split("_")
    return "".join(word.capitalize() for word in words) + "Error"


def _register() -> None:
    explicit: dict[int, type[KafkaError]] = {
        cls.code: cls
        for cls in (
            UnknownServerError,
            OffsetOutOfRangeError,
            CorruptRecordError,
            MessageTooLargeError,
            InvalidTimestampError,
            KafkaStorageError,
            UnsupportedCompressionTypeError,
            InvalidRecordError,
        )
    }
    for code, name, retriable, invalid_metadata in _CODES:
        cls = explicit.get(code)
        if cls is None:
            doc = f"Raised when the peer answers with Kafka error {code} ({name})."
            attrs = {
                "code": code,
                "name": name,
                "retriable": retriable,
                "invalid_metadata": invalid_metadata,
                "__doc__": doc,
                "__module__": __name__,
            }
            cls = type(_class_name(name), (KafkaError,), attrs)
            globals()[cls.__name__] = cls
        elif (cls.name, cls.retriable, cls.invalid_metadata) != (name, retriable, invalid_metadata):
            raise AssertionError(f"error class {cls.__name__} disagrees with the code table")
        _BY_CODE[code] = cls


_register()


def for_code(code: int) -> type[KafkaError]:
    """Return the exception class for a Kafka error code (``UnknownServerError`` if unknown).

    Code 0 (NONE) is not an error and has no class: asking for it raises ``ValueError``.
    """
    if code == 0:
        raise ValueError("error code 0 (NONE) is not an error")
    return _BY_CODE.get(code, UnknownServerError)
