"""The Kafka wire protocol: framing, request decoding and response encoding (no I/O).

Message schemas are kio's; :mod:`samsa.protocol.guard` checks a request's counts
and lengths before kio's native reader runs on it.
"""

from samsa.protocol.codec import (
    RequestDecodeError,
    RequestHeader,
    decode_request,
    encode_response,
    peek_header,
    request_class,
)
from samsa.protocol.framing import FrameError
from samsa.protocol.guard import GuardError, check_entity

__all__ = [
    "FrameError",
    "GuardError",
    "RequestDecodeError",
    "RequestHeader",
    "check_entity",
    "decode_request",
    "encode_response",
    "peek_header",
    "request_class",
]
