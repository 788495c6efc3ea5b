"""The error code a coordinator answers when writing its internal topic failed.

As Kafka 4's coordinators map a failed append to ``__consumer_offsets`` (its
``CoordinatorOperationExceptionHelper.handleOperationException``): errors that
mean "the coordinator cannot write now" become COORDINATOR_NOT_AVAILABLE or
NOT_COORDINATOR, which clients retry after finding the coordinator again; a
record too large becomes UNKNOWN_SERVER_ERROR; any other Kafka error is answered
as it is, and anything else as UNKNOWN_SERVER_ERROR.
"""

from __future__ import annotations

from samsa.errors import ErrorCode, KafkaError

_WRITE_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


def write_error_code(exc: BaseException) -> ErrorCode:
    """The code to answer for ``exc``, raised while appending to an internal topic."""
    if isinstance(exc, KafkaError):
        return _WRITE_ERRORS.get(exc.code, exc.code)
    return ErrorCode.UNKNOWN_SERVER_ERROR
