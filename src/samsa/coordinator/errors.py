"""The error code a coordinator answers when writing its internal topic failed.

As Kafka 4's coordinators map a failed append to ``__consumer_offsets`` (its
``CoordinatorOperationExceptionHelper.handleOperationException``): errors that
mean "the coordinator cannot write now" become COORDINATOR_NOT_AVAILABLE or
NOT_COORDINATOR, which clients retry after finding the coordinator again; a
record too large becomes UNKNOWN_SERVER_ERROR; any other Kafka error is answered
as it is, and anything else as UNKNOWN_SERVER_ERROR.
"""

from __future__ import annotations

from samsa.errors import KafkaError

UNKNOWN_SERVER_ERROR = -1
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16

_WRITE_ERRORS = {
    3: COORDINATOR_NOT_AVAILABLE,  # UNKNOWN_TOPIC_OR_PARTITION
    19: COORDINATOR_NOT_AVAILABLE,  # NOT_ENOUGH_REPLICAS
    7: COORDINATOR_NOT_AVAILABLE,  # REQUEST_TIMED_OUT
    6: NOT_COORDINATOR,  # NOT_LEADER_OR_FOLLOWER
    56: NOT_COORDINATOR,  # KAFKA_STORAGE_ERROR
    10: UNKNOWN_SERVER_ERROR,  # MESSAGE_TOO_LARGE
    18: UNKNOWN_SERVER_ERROR,  # RECORD_LIST_TOO_LARGE
    4: UNKNOWN_SERVER_ERROR,  # INVALID_FETCH_SIZE
}


def write_error_code(exc: BaseException) -> int:
    """The code to answer for ``exc``, raised while appending to an internal topic."""
    if isinstance(exc, KafkaError):
        return _WRITE_ERRORS.get(exc.code, exc.code)
    return UNKNOWN_SERVER_ERROR
