"""Exceptions raised by samsa, and the one table that maps them to Kafka error codes.

Every exception samsa raises derives from :class:`SamsaError`::

    SamsaError
    ├── ConfigError                 a configuration key is unknown or its value invalid
    ├── RecordFormatError           bytes are not a well-formed RecordBatch v2 or record
    │   └── CorruptRecordError      (also a KafkaError, code 2) CRC, magic or a size is wrong
    │       └── TruncatedBatchError the bytes end before the batch does
    ├── CompressionError            a codec failed, or is not one Kafka defines
    │   └── DecompressionLimitError data inflates past the limit it was read with
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
        └── … one class per :class:`ErrorCode`, found with :func:`for_code`

:class:`ErrorCode` is the one table of Kafka's error numbers: code that sends or
reads an error code names it there (``ErrorCode.NOT_COORDINATOR``), never by its
number. A ``KafkaError`` class carries ``code``, ``name`` (the code's Kafka name),
``retriable`` (a client may retry the same request) and ``invalid_metadata`` (a
client should refresh metadata before retrying), the flags of Kafka's own
exception classes. The classes below the hand-written ones were generated once
from Kafka's table; ``tests/unit/test_errors.py`` checks them against it (as kio
carries it).
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar


class ErrorCode(IntEnum):
    """Kafka's error codes by their Kafka names (``Errors.java``); ``NONE`` is success."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128
    REBOOTSTRAP_REQUIRED = 129
    STREAMS_INVALID_TOPOLOGY = 130
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131
    STREAMS_TOPOLOGY_FENCED = 132
    SHARE_SESSION_LIMIT_REACHED = 133


class SamsaError(Exception):
    """Root of every exception samsa raises."""


class ConfigError(SamsaError):
    """Raised when a configuration key is unknown or its value is invalid."""


class RecordFormatError(SamsaError):
    """Raised when bytes are not a well-formed RecordBatch v2 or record."""


class CompressionError(SamsaError):
    """Raised when a codec fails on its input or the codec id is not Kafka's."""


class DecompressionLimitError(CompressionError):
    """Raised when compressed data inflates past the limit it is read with: decompression
    stops there, so a small hostile input never allocates more than the limit."""


class StorageError(SamsaError):
    """Raised when the on-disk log cannot do what was asked (bad offset order, bad files)."""


class LogClosedError(StorageError):
    """Raised when a log, segment or index is used after its owner closed it."""


class KafkaError(SamsaError):
    """An error that travels on the wire as a Kafka error code."""

    code: ClassVar[ErrorCode] = ErrorCode.UNKNOWN_SERVER_ERROR
    name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"
    retriable: ClassVar[bool] = False
    invalid_metadata: ClassVar[bool] = False

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        cls.name = cls.code.name

    def __str__(self) -> str:
        detail = super().__str__()
        return f"[{self.name}] {detail}" if detail else f"[{self.name}]"


class UnknownServerError(KafkaError):
    """Raised for an unexpected server-side failure (code -1)."""

    code = ErrorCode.UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(KafkaError):
    """Raised when a fetch or seek names an offset outside [log start, log end]."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE


class CorruptRecordError(RecordFormatError, KafkaError):
    """Raised when a batch fails its CRC, has the wrong magic, or its sizes disagree."""

    code = ErrorCode.CORRUPT_MESSAGE
    retriable = True


class TruncatedBatchError(CorruptRecordError):
    """Raised when a buffer ends before the batch it starts does."""


class MessageTooLargeError(KafkaError):
    """Raised when a batch is larger than ``max.message.bytes`` allows."""

    code = ErrorCode.MESSAGE_TOO_LARGE


class InvalidTimestampError(KafkaError):
    """Raised when a batch's timestamps are further from now than the topic allows."""

    code = ErrorCode.INVALID_TIMESTAMP


class KafkaStorageError(KafkaError):
    """Raised when a log directory fails with an I/O error."""

    code = ErrorCode.KAFKA_STORAGE_ERROR
    retriable = True
    invalid_metadata = True


class UnsupportedCompressionTypeError(KafkaError):
    """Raised when a batch names a compression codec that does not exist."""

    code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


class InvalidRecordError(KafkaError):
    """Raised when a batch is well formed but not acceptable (a client-written control batch)."""

    code = ErrorCode.INVALID_RECORD


class UnknownTopicOrPartitionError(KafkaError):
    """Raised when the peer answers with Kafka error 3 (UNKNOWN_TOPIC_OR_PARTITION)."""

    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    retriable = True
    invalid_metadata = True


class InvalidFetchSizeError(KafkaError):
    """Raised when the peer answers with Kafka error 4 (INVALID_FETCH_SIZE)."""

    code = ErrorCode.INVALID_FETCH_SIZE


class LeaderNotAvailableError(KafkaError):
    """Raised when the peer answers with Kafka error 5 (LEADER_NOT_AVAILABLE)."""

    code = ErrorCode.LEADER_NOT_AVAILABLE
    retriable = True
    invalid_metadata = True


class NotLeaderOrFollowerError(KafkaError):
    """Raised when the peer answers with Kafka error 6 (NOT_LEADER_OR_FOLLOWER)."""

    code = ErrorCode.NOT_LEADER_OR_FOLLOWER
    retriable = True
    invalid_metadata = True


class RequestTimedOutError(KafkaError):
    """Raised when the peer answers with Kafka error 7 (REQUEST_TIMED_OUT)."""

    code = ErrorCode.REQUEST_TIMED_OUT
    retriable = True


class BrokerNotAvailableError(KafkaError):
    """Raised when the peer answers with Kafka error 8 (BROKER_NOT_AVAILABLE)."""

    code = ErrorCode.BROKER_NOT_AVAILABLE


class ReplicaNotAvailableError(KafkaError):
    """Raised when the peer answers with Kafka error 9 (REPLICA_NOT_AVAILABLE)."""

    code = ErrorCode.REPLICA_NOT_AVAILABLE
    retriable = True
    invalid_metadata = True


class StaleControllerEpochError(KafkaError):
    """Raised when the peer answers with Kafka error 11 (STALE_CONTROLLER_EPOCH)."""

    code = ErrorCode.STALE_CONTROLLER_EPOCH


class OffsetMetadataTooLargeError(KafkaError):
    """Raised when the peer answers with Kafka error 12 (OFFSET_METADATA_TOO_LARGE)."""

    code = ErrorCode.OFFSET_METADATA_TOO_LARGE


class NetworkError(KafkaError):
    """Raised when the peer answers with Kafka error 13 (NETWORK_EXCEPTION)."""

    code = ErrorCode.NETWORK_EXCEPTION
    retriable = True
    invalid_metadata = True


class CoordinatorLoadInProgressError(KafkaError):
    """Raised when the peer answers with Kafka error 14 (COORDINATOR_LOAD_IN_PROGRESS)."""

    code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    retriable = True


class CoordinatorNotAvailableError(KafkaError):
    """Raised when the peer answers with Kafka error 15 (COORDINATOR_NOT_AVAILABLE)."""

    code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    retriable = True


class NotCoordinatorError(KafkaError):
    """Raised when the peer answers with Kafka error 16 (NOT_COORDINATOR)."""

    code = ErrorCode.NOT_COORDINATOR
    retriable = True


class InvalidTopicError(KafkaError):
    """Raised when the peer answers with Kafka error 17 (INVALID_TOPIC_EXCEPTION)."""

    code = ErrorCode.INVALID_TOPIC_EXCEPTION


class RecordListTooLargeError(KafkaError):
    """Raised when the peer answers with Kafka error 18 (RECORD_LIST_TOO_LARGE)."""

    code = ErrorCode.RECORD_LIST_TOO_LARGE


class NotEnoughReplicasError(KafkaError):
    """Raised when the peer answers with Kafka error 19 (NOT_ENOUGH_REPLICAS)."""

    code = ErrorCode.NOT_ENOUGH_REPLICAS
    retriable = True


class NotEnoughReplicasAfterAppendError(KafkaError):
    """Raised when the peer answers with Kafka error 20 (NOT_ENOUGH_REPLICAS_AFTER_APPEND)."""

    code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    retriable = True


class InvalidRequiredAcksError(KafkaError):
    """Raised when the peer answers with Kafka error 21 (INVALID_REQUIRED_ACKS)."""

    code = ErrorCode.INVALID_REQUIRED_ACKS


class IllegalGenerationError(KafkaError):
    """Raised when the peer answers with Kafka error 22 (ILLEGAL_GENERATION)."""

    code = ErrorCode.ILLEGAL_GENERATION


class InconsistentGroupProtocolError(KafkaError):
    """Raised when the peer answers with Kafka error 23 (INCONSISTENT_GROUP_PROTOCOL)."""

    code = ErrorCode.INCONSISTENT_GROUP_PROTOCOL


class InvalidGroupIdError(KafkaError):
    """Raised when the peer answers with Kafka error 24 (INVALID_GROUP_ID)."""

    code = ErrorCode.INVALID_GROUP_ID


class UnknownMemberIdError(KafkaError):
    """Raised when the peer answers with Kafka error 25 (UNKNOWN_MEMBER_ID)."""

    code = ErrorCode.UNKNOWN_MEMBER_ID


class InvalidSessionTimeoutError(KafkaError):
    """Raised when the peer answers with Kafka error 26 (INVALID_SESSION_TIMEOUT)."""

    code = ErrorCode.INVALID_SESSION_TIMEOUT


class RebalanceInProgressError(KafkaError):
    """Raised when the peer answers with Kafka error 27 (REBALANCE_IN_PROGRESS)."""

    code = ErrorCode.REBALANCE_IN_PROGRESS


class InvalidCommitOffsetSizeError(KafkaError):
    """Raised when the peer answers with Kafka error 28 (INVALID_COMMIT_OFFSET_SIZE)."""

    code = ErrorCode.INVALID_COMMIT_OFFSET_SIZE


class TopicAuthorizationFailedError(KafkaError):
    """Raised when the peer answers with Kafka error 29 (TOPIC_AUTHORIZATION_FAILED)."""

    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED


class GroupAuthorizationFailedError(KafkaError):
    """Raised when the peer answers with Kafka error 30 (GROUP_AUTHORIZATION_FAILED)."""

    code = ErrorCode.GROUP_AUTHORIZATION_FAILED


class ClusterAuthorizationFailedError(KafkaError):
    """Raised when the peer answers with Kafka error 31 (CLUSTER_AUTHORIZATION_FAILED)."""

    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


class UnsupportedSaslMechanismError(KafkaError):
    """Raised when the peer answers with Kafka error 33 (UNSUPPORTED_SASL_MECHANISM)."""

    code = ErrorCode.UNSUPPORTED_SASL_MECHANISM


class IllegalSaslStateError(KafkaError):
    """Raised when the peer answers with Kafka error 34 (ILLEGAL_SASL_STATE)."""

    code = ErrorCode.ILLEGAL_SASL_STATE


class UnsupportedVersionError(KafkaError):
    """Raised when the peer answers with Kafka error 35 (UNSUPPORTED_VERSION)."""

    code = ErrorCode.UNSUPPORTED_VERSION


class TopicAlreadyExistsError(KafkaError):
    """Raised when the peer answers with Kafka error 36 (TOPIC_ALREADY_EXISTS)."""

    code = ErrorCode.TOPIC_ALREADY_EXISTS


class InvalidPartitionsError(KafkaError):
    """Raised when the peer answers with Kafka error 37 (INVALID_PARTITIONS)."""

    code = ErrorCode.INVALID_PARTITIONS


class InvalidReplicationFactorError(KafkaError):
    """Raised when the peer answers with Kafka error 38 (INVALID_REPLICATION_FACTOR)."""

    code = ErrorCode.INVALID_REPLICATION_FACTOR


class InvalidReplicaAssignmentError(KafkaError):
    """Raised when the peer answers with Kafka error 39 (INVALID_REPLICA_ASSIGNMENT)."""

    code = ErrorCode.INVALID_REPLICA_ASSIGNMENT


class InvalidConfigError(KafkaError):
    """Raised when the peer answers with Kafka error 40 (INVALID_CONFIG)."""

    code = ErrorCode.INVALID_CONFIG


class NotControllerError(KafkaError):
    """Raised when the peer answers with Kafka error 41 (NOT_CONTROLLER)."""

    code = ErrorCode.NOT_CONTROLLER
    retriable = True


class InvalidRequestError(KafkaError):
    """Raised when the peer answers with Kafka error 42 (INVALID_REQUEST)."""

    code = ErrorCode.INVALID_REQUEST


class UnsupportedForMessageFormatError(KafkaError):
    """Raised when the peer answers with Kafka error 43 (UNSUPPORTED_FOR_MESSAGE_FORMAT)."""

    code = ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT


class PolicyViolationError(KafkaError):
    """Raised when the peer answers with Kafka error 44 (POLICY_VIOLATION)."""

    code = ErrorCode.POLICY_VIOLATION


class OutOfOrderSequenceNumberError(KafkaError):
    """Raised when the peer answers with Kafka error 45 (OUT_OF_ORDER_SEQUENCE_NUMBER)."""

    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class DuplicateSequenceNumberError(KafkaError):
    """Raised when the peer answers with Kafka error 46 (DUPLICATE_SEQUENCE_NUMBER)."""

    code = ErrorCode.DUPLICATE_SEQUENCE_NUMBER


class InvalidProducerEpochError(KafkaError):
    """Raised when the peer answers with Kafka error 47 (INVALID_PRODUCER_EPOCH)."""

    code = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(KafkaError):
    """Raised when the peer answers with Kafka error 48 (INVALID_TXN_STATE)."""

    code = ErrorCode.INVALID_TXN_STATE


class InvalidProducerIdMappingError(KafkaError):
    """Raised when the peer answers with Kafka error 49 (INVALID_PRODUCER_ID_MAPPING)."""

    code = ErrorCode.INVALID_PRODUCER_ID_MAPPING


class InvalidTransactionTimeoutError(KafkaError):
    """Raised when the peer answers with Kafka error 50 (INVALID_TRANSACTION_TIMEOUT)."""

    code = ErrorCode.INVALID_TRANSACTION_TIMEOUT


class ConcurrentTransactionsError(KafkaError):
    """Raised when the peer answers with Kafka error 51 (CONCURRENT_TRANSACTIONS)."""

    code = ErrorCode.CONCURRENT_TRANSACTIONS
    retriable = True


class TransactionCoordinatorFencedError(KafkaError):
    """Raised when the peer answers with Kafka error 52 (TRANSACTION_COORDINATOR_FENCED)."""

    code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


class TransactionalIdAuthorizationFailedError(KafkaError):
    """Raised when the peer answers with Kafka error 53 (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)."""

    code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


class SecurityDisabledError(KafkaError):
    """Raised when the peer answers with Kafka error 54 (SECURITY_DISABLED)."""

    code = ErrorCode.SECURITY_DISABLED


class OperationNotAttemptedError(KafkaError):
    """Raised when the peer answers with Kafka error 55 (OPERATION_NOT_ATTEMPTED)."""

    code = ErrorCode.OPERATION_NOT_ATTEMPTED


class LogDirNotFoundError(KafkaError):
    """Raised when the peer answers with Kafka error 57 (LOG_DIR_NOT_FOUND)."""

    code = ErrorCode.LOG_DIR_NOT_FOUND


class SaslAuthenticationFailedError(KafkaError):
    """Raised when the peer answers with Kafka error 58 (SASL_AUTHENTICATION_FAILED)."""

    code = ErrorCode.SASL_AUTHENTICATION_FAILED


class UnknownProducerIdError(KafkaError):
    """Raised when the peer answers with Kafka error 59 (UNKNOWN_PRODUCER_ID)."""

    code = ErrorCode.UNKNOWN_PRODUCER_ID


class ReassignmentInProgressError(KafkaError):
    """Raised when the peer answers with Kafka error 60 (REASSIGNMENT_IN_PROGRESS)."""

    code = ErrorCode.REASSIGNMENT_IN_PROGRESS


class DelegationTokenAuthDisabledError(KafkaError):
    """Raised when the peer answers with Kafka error 61 (DELEGATION_TOKEN_AUTH_DISABLED)."""

    code = ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED


class DelegationTokenNotFoundError(KafkaError):
    """Raised when the peer answers with Kafka error 62 (DELEGATION_TOKEN_NOT_FOUND)."""

    code = ErrorCode.DELEGATION_TOKEN_NOT_FOUND


class DelegationTokenOwnerMismatchError(KafkaError):
    """Raised when the peer answers with Kafka error 63 (DELEGATION_TOKEN_OWNER_MISMATCH)."""

    code = ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH


class DelegationTokenRequestNotAllowedError(KafkaError):
    """Raised when the peer answers with Kafka error 64 (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)."""

    code = ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED


class DelegationTokenAuthorizationFailedError(KafkaError):
    """Raised when the peer answers with Kafka error 65 (DELEGATION_TOKEN_AUTHORIZATION_FAILED)."""

    code = ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED


class DelegationTokenExpiredError(KafkaError):
    """Raised when the peer answers with Kafka error 66 (DELEGATION_TOKEN_EXPIRED)."""

    code = ErrorCode.DELEGATION_TOKEN_EXPIRED


class InvalidPrincipalTypeError(KafkaError):
    """Raised when the peer answers with Kafka error 67 (INVALID_PRINCIPAL_TYPE)."""

    code = ErrorCode.INVALID_PRINCIPAL_TYPE


class NonEmptyGroupError(KafkaError):
    """Raised when the peer answers with Kafka error 68 (NON_EMPTY_GROUP)."""

    code = ErrorCode.NON_EMPTY_GROUP


class GroupIdNotFoundError(KafkaError):
    """Raised when the peer answers with Kafka error 69 (GROUP_ID_NOT_FOUND)."""

    code = ErrorCode.GROUP_ID_NOT_FOUND


class FetchSessionIdNotFoundError(KafkaError):
    """Raised when the peer answers with Kafka error 70 (FETCH_SESSION_ID_NOT_FOUND)."""

    code = ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    retriable = True


class InvalidFetchSessionEpochError(KafkaError):
    """Raised when the peer answers with Kafka error 71 (INVALID_FETCH_SESSION_EPOCH)."""

    code = ErrorCode.INVALID_FETCH_SESSION_EPOCH
    retriable = True


class ListenerNotFoundError(KafkaError):
    """Raised when the peer answers with Kafka error 72 (LISTENER_NOT_FOUND)."""

    code = ErrorCode.LISTENER_NOT_FOUND
    retriable = True
    invalid_metadata = True


class TopicDeletionDisabledError(KafkaError):
    """Raised when the peer answers with Kafka error 73 (TOPIC_DELETION_DISABLED)."""

    code = ErrorCode.TOPIC_DELETION_DISABLED


class FencedLeaderEpochError(KafkaError):
    """Raised when the peer answers with Kafka error 74 (FENCED_LEADER_EPOCH)."""

    code = ErrorCode.FENCED_LEADER_EPOCH
    retriable = True
    invalid_metadata = True


class UnknownLeaderEpochError(KafkaError):
    """Raised when the peer answers with Kafka error 75 (UNKNOWN_LEADER_EPOCH)."""

    code = ErrorCode.UNKNOWN_LEADER_EPOCH
    retriable = True


class StaleBrokerEpochError(KafkaError):
    """Raised when the peer answers with Kafka error 77 (STALE_BROKER_EPOCH)."""

    code = ErrorCode.STALE_BROKER_EPOCH


class OffsetNotAvailableError(KafkaError):
    """Raised when the peer answers with Kafka error 78 (OFFSET_NOT_AVAILABLE)."""

    code = ErrorCode.OFFSET_NOT_AVAILABLE
    retriable = True


class MemberIdRequiredError(KafkaError):
    """Raised when the peer answers with Kafka error 79 (MEMBER_ID_REQUIRED)."""

    code = ErrorCode.MEMBER_ID_REQUIRED


class PreferredLeaderNotAvailableError(KafkaError):
    """Raised when the peer answers with Kafka error 80 (PREFERRED_LEADER_NOT_AVAILABLE)."""

    code = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    retriable = True
    invalid_metadata = True


class GroupMaxSizeReachedError(KafkaError):
    """Raised when the peer answers with Kafka error 81 (GROUP_MAX_SIZE_REACHED)."""

    code = ErrorCode.GROUP_MAX_SIZE_REACHED


class FencedInstanceIdError(KafkaError):
    """Raised when the peer answers with Kafka error 82 (FENCED_INSTANCE_ID)."""

    code = ErrorCode.FENCED_INSTANCE_ID


class EligibleLeadersNotAvailableError(KafkaError):
    """Raised when the peer answers with Kafka error 83 (ELIGIBLE_LEADERS_NOT_AVAILABLE)."""

    code = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    retriable = True
    invalid_metadata = True


class ElectionNotNeededError(KafkaError):
    """Raised when the peer answers with Kafka error 84 (ELECTION_NOT_NEEDED)."""

    code = ErrorCode.ELECTION_NOT_NEEDED
    retriable = True
    invalid_metadata = True


class NoReassignmentInProgressError(KafkaError):
    """Raised when the peer answers with Kafka error 85 (NO_REASSIGNMENT_IN_PROGRESS)."""

    code = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


class GroupSubscribedToTopicError(KafkaError):
    """Raised when the peer answers with Kafka error 86 (GROUP_SUBSCRIBED_TO_TOPIC)."""

    code = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC


class UnstableOffsetCommitError(KafkaError):
    """Raised when the peer answers with Kafka error 88 (UNSTABLE_OFFSET_COMMIT)."""

    code = ErrorCode.UNSTABLE_OFFSET_COMMIT
    retriable = True


class ThrottlingQuotaExceededError(KafkaError):
    """Raised when the peer answers with Kafka error 89 (THROTTLING_QUOTA_EXCEEDED)."""

    code = ErrorCode.THROTTLING_QUOTA_EXCEEDED
    retriable = True


class ProducerFencedError(KafkaError):
    """Raised when the peer answers with Kafka error 90 (PRODUCER_FENCED)."""

    code = ErrorCode.PRODUCER_FENCED


class ResourceNotFoundError(KafkaError):
    """Raised when the peer answers with Kafka error 91 (RESOURCE_NOT_FOUND)."""

    code = ErrorCode.RESOURCE_NOT_FOUND


class DuplicateResourceError(KafkaError):
    """Raised when the peer answers with Kafka error 92 (DUPLICATE_RESOURCE)."""

    code = ErrorCode.DUPLICATE_RESOURCE


class UnacceptableCredentialError(KafkaError):
    """Raised when the peer answers with Kafka error 93 (UNACCEPTABLE_CREDENTIAL)."""

    code = ErrorCode.UNACCEPTABLE_CREDENTIAL


class InconsistentVoterSetError(KafkaError):
    """Raised when the peer answers with Kafka error 94 (INCONSISTENT_VOTER_SET)."""

    code = ErrorCode.INCONSISTENT_VOTER_SET


class InvalidUpdateVersionError(KafkaError):
    """Raised when the peer answers with Kafka error 95 (INVALID_UPDATE_VERSION)."""

    code = ErrorCode.INVALID_UPDATE_VERSION


class FeatureUpdateFailedError(KafkaError):
    """Raised when the peer answers with Kafka error 96 (FEATURE_UPDATE_FAILED)."""

    code = ErrorCode.FEATURE_UPDATE_FAILED


class PrincipalDeserializationFailureError(KafkaError):
    """Raised when the peer answers with Kafka error 97 (PRINCIPAL_DESERIALIZATION_FAILURE)."""

    code = ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE


class SnapshotNotFoundError(KafkaError):
    """Raised when the peer answers with Kafka error 98 (SNAPSHOT_NOT_FOUND)."""

    code = ErrorCode.SNAPSHOT_NOT_FOUND


class PositionOutOfRangeError(KafkaError):
    """Raised when the peer answers with Kafka error 99 (POSITION_OUT_OF_RANGE)."""

    code = ErrorCode.POSITION_OUT_OF_RANGE


class UnknownTopicIdError(KafkaError):
    """Raised when the peer answers with Kafka error 100 (UNKNOWN_TOPIC_ID)."""

    code = ErrorCode.UNKNOWN_TOPIC_ID
    retriable = True
    invalid_metadata = True


class DuplicateBrokerRegistrationError(KafkaError):
    """Raised when the peer answers with Kafka error 101 (DUPLICATE_BROKER_REGISTRATION)."""

    code = ErrorCode.DUPLICATE_BROKER_REGISTRATION


class BrokerIdNotRegisteredError(KafkaError):
    """Raised when the peer answers with Kafka error 102 (BROKER_ID_NOT_REGISTERED)."""

    code = ErrorCode.BROKER_ID_NOT_REGISTERED


class InconsistentTopicIdError(KafkaError):
    """Raised when the peer answers with Kafka error 103 (INCONSISTENT_TOPIC_ID)."""

    code = ErrorCode.INCONSISTENT_TOPIC_ID
    retriable = True
    invalid_metadata = True


class InconsistentClusterIdError(KafkaError):
    """Raised when the peer answers with Kafka error 104 (INCONSISTENT_CLUSTER_ID)."""

    code = ErrorCode.INCONSISTENT_CLUSTER_ID


class TransactionalIdNotFoundError(KafkaError):
    """Raised when the peer answers with Kafka error 105 (TRANSACTIONAL_ID_NOT_FOUND)."""

    code = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


class FetchSessionTopicIdError(KafkaError):
    """Raised when the peer answers with Kafka error 106 (FETCH_SESSION_TOPIC_ID_ERROR)."""

    code = ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    retriable = True


class IneligibleReplicaError(KafkaError):
    """Raised when the peer answers with Kafka error 107 (INELIGIBLE_REPLICA)."""

    code = ErrorCode.INELIGIBLE_REPLICA


class NewLeaderElectedError(KafkaError):
    """Raised when the peer answers with Kafka error 108 (NEW_LEADER_ELECTED)."""

    code = ErrorCode.NEW_LEADER_ELECTED


class OffsetMovedToTieredStorageError(KafkaError):
    """Raised when the peer answers with Kafka error 109 (OFFSET_MOVED_TO_TIERED_STORAGE)."""

    code = ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE


class FencedMemberEpochError(KafkaError):
    """Raised when the peer answers with Kafka error 110 (FENCED_MEMBER_EPOCH)."""

    code = ErrorCode.FENCED_MEMBER_EPOCH


class UnreleasedInstanceIdError(KafkaError):
    """Raised when the peer answers with Kafka error 111 (UNRELEASED_INSTANCE_ID)."""

    code = ErrorCode.UNRELEASED_INSTANCE_ID


class UnsupportedAssignorError(KafkaError):
    """Raised when the peer answers with Kafka error 112 (UNSUPPORTED_ASSIGNOR)."""

    code = ErrorCode.UNSUPPORTED_ASSIGNOR


class StaleMemberEpochError(KafkaError):
    """Raised when the peer answers with Kafka error 113 (STALE_MEMBER_EPOCH)."""

    code = ErrorCode.STALE_MEMBER_EPOCH


class MismatchedEndpointTypeError(KafkaError):
    """Raised when the peer answers with Kafka error 114 (MISMATCHED_ENDPOINT_TYPE)."""

    code = ErrorCode.MISMATCHED_ENDPOINT_TYPE


class UnsupportedEndpointTypeError(KafkaError):
    """Raised when the peer answers with Kafka error 115 (UNSUPPORTED_ENDPOINT_TYPE)."""

    code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE


class UnknownControllerIdError(KafkaError):
    """Raised when the peer answers with Kafka error 116 (UNKNOWN_CONTROLLER_ID)."""

    code = ErrorCode.UNKNOWN_CONTROLLER_ID


class UnknownSubscriptionIdError(KafkaError):
    """Raised when the peer answers with Kafka error 117 (UNKNOWN_SUBSCRIPTION_ID)."""

    code = ErrorCode.UNKNOWN_SUBSCRIPTION_ID


class TelemetryTooLargeError(KafkaError):
    """Raised when the peer answers with Kafka error 118 (TELEMETRY_TOO_LARGE)."""

    code = ErrorCode.TELEMETRY_TOO_LARGE


class InvalidRegistrationError(KafkaError):
    """Raised when the peer answers with Kafka error 119 (INVALID_REGISTRATION)."""

    code = ErrorCode.INVALID_REGISTRATION


class TransactionAbortableError(KafkaError):
    """Raised when the peer answers with Kafka error 120 (TRANSACTION_ABORTABLE)."""

    code = ErrorCode.TRANSACTION_ABORTABLE


class InvalidRecordStateError(KafkaError):
    """Raised when the peer answers with Kafka error 121 (INVALID_RECORD_STATE)."""

    code = ErrorCode.INVALID_RECORD_STATE


class ShareSessionNotFoundError(KafkaError):
    """Raised when the peer answers with Kafka error 122 (SHARE_SESSION_NOT_FOUND)."""

    code = ErrorCode.SHARE_SESSION_NOT_FOUND
    retriable = True


class InvalidShareSessionEpochError(KafkaError):
    """Raised when the peer answers with Kafka error 123 (INVALID_SHARE_SESSION_EPOCH)."""

    code = ErrorCode.INVALID_SHARE_SESSION_EPOCH
    retriable = True


class FencedStateEpochError(KafkaError):
    """Raised when the peer answers with Kafka error 124 (FENCED_STATE_EPOCH)."""

    code = ErrorCode.FENCED_STATE_EPOCH


class InvalidVoterKeyError(KafkaError):
    """Raised when the peer answers with Kafka error 125 (INVALID_VOTER_KEY)."""

    code = ErrorCode.INVALID_VOTER_KEY


class DuplicateVoterError(KafkaError):
    """Raised when the peer answers with Kafka error 126 (DUPLICATE_VOTER)."""

    code = ErrorCode.DUPLICATE_VOTER


class VoterNotFoundError(KafkaError):
    """Raised when the peer answers with Kafka error 127 (VOTER_NOT_FOUND)."""

    code = ErrorCode.VOTER_NOT_FOUND


class InvalidRegularExpressionError(KafkaError):
    """Raised when the peer answers with Kafka error 128 (INVALID_REGULAR_EXPRESSION)."""

    code = ErrorCode.INVALID_REGULAR_EXPRESSION


class RebootstrapRequiredError(KafkaError):
    """Raised when the peer answers with Kafka error 129 (REBOOTSTRAP_REQUIRED)."""

    code = ErrorCode.REBOOTSTRAP_REQUIRED


class StreamsInvalidTopologyError(KafkaError):
    """Raised when the peer answers with Kafka error 130 (STREAMS_INVALID_TOPOLOGY)."""

    code = ErrorCode.STREAMS_INVALID_TOPOLOGY


class StreamsInvalidTopologyEpochError(KafkaError):
    """Raised when the peer answers with Kafka error 131 (STREAMS_INVALID_TOPOLOGY_EPOCH)."""

    code = ErrorCode.STREAMS_INVALID_TOPOLOGY_EPOCH


class StreamsTopologyFencedError(KafkaError):
    """Raised when the peer answers with Kafka error 132 (STREAMS_TOPOLOGY_FENCED)."""

    code = ErrorCode.STREAMS_TOPOLOGY_FENCED


class ShareSessionLimitReachedError(KafkaError):
    """Raised when the peer answers with Kafka error 133 (SHARE_SESSION_LIMIT_REACHED)."""

    code = ErrorCode.SHARE_SESSION_LIMIT_REACHED
    retriable = True


def _by_code() -> dict[int, type[KafkaError]]:
    # The direct subclasses defined here, in order: CorruptRecordError, not its
    # TruncatedBatchError subclass, answers for code 2.
    table: dict[int, type[KafkaError]] = {}
    for cls in KafkaError.__subclasses__():
        if cls.__module__ == __name__:
            table.setdefault(cls.code, cls)
    return table


_BY_CODE = _by_code()


def is_expected_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a condition a running broker or client expects — one of samsa's
    own errors, or the operating system's (I/O, a timeout) — rather than a programming
    error. A log line about an unexpected one carries its traceback."""
    return isinstance(exc, SamsaError | OSError)


def for_code(code: int) -> type[KafkaError]:
    """Return the exception class for a Kafka error code (``UnknownServerError`` if unknown).

    Code 0 (NONE) is not an error and has no class: asking for it raises ``ValueError``.
    """
    if code == ErrorCode.NONE:
        raise ValueError("error code 0 (NONE) is not an error")
    return _BY_CODE.get(code, UnknownServerError)
