"""Request decoding and response encoding with kio's schemas (no I/O).

A request frame (the bytes after the size prefix) is a request header v1 or v2
followed by the body of the API and version the header names. kio's native
reader parses the body, but only after :func:`samsa.protocol.guard.check_entity`
has walked it: kio would otherwise reserve memory from an array count before
reading an element, and a large enough count aborts the process.

The header is read here, not by kio: it is four fields (api key, api version,
correlation id, a legacy int16-length client id, plus an empty tagged-field
section in v2), and reading it by hand saves a second native call and the
conversion from kio's header type to :class:`RequestHeader`. Tests check it
against kio's header reader.

Responses are written with kio's ``entity_writer`` into a list of chunks, so
large ``records`` pass through uncopied until the single final join.

Request versions Kafka 3.9 served but kio lacks (Produce 0–2, Fetch 0–3…) are
read and answered through :mod:`samsa.protocol.legacy`: decoded into the kio
class of the lowest version kio has, answered in the old layout
(:func:`encode_response_for`).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer

from samsa.errors import SamsaError
from samsa.protocol.guard import GuardError, check_entity
from samsa.protocol.legacy import decode_legacy_request, encode_legacy_response, legacy_version

__all__ = [
    "RequestDecodeError",
    "RequestHeader",
    "decode_request",
    "encode_response",
    "encode_response_for",
    "peek_header",
    "request_class",
]


class RequestDecodeError(SamsaError):
    """Raised when a request frame cannot be decoded: an API key or version kio has no schema
    for, a truncated or malformed header or body, bytes after the body, or counts and lengths
    the bytes cannot back. The connection that sent it should be closed."""


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """The request header fields a broker uses (Kafka defines no tagged fields for it)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


_HEADER_PREFIX = struct.Struct(">hhi")  # api key, api version, correlation id
# api key, api version, correlation id, client id length: the fixed part of header v1 and v2
_HEADER = struct.Struct(">hhih")
_INT32 = struct.Struct(">i")  # the size prefix and the response header's correlation id


def peek_header(frame: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """Return ``(api_key, api_version, correlation_id)`` from a frame's first 8 bytes.

    Works for any API key and version, so a broker can still answer (or log) a request
    it cannot decode. Raises :class:`RequestDecodeError` if the frame is shorter.
    """
    try:
        api_key, api_version, correlation_id = _HEADER_PREFIX.unpack_from(frame, 0)
    except struct.error:
        raise RequestDecodeError(
            f"a {len(frame)}-byte frame is shorter than a request header"
        ) from None
    return api_key, api_version, correlation_id


_request_classes: dict[tuple[int, int], type] = {}


def request_class(api_key: int, api_version: int) -> type | None:
    """Return kio's request class for this API key and version, or None if kio has none.

    Only classes that exist are cached, so unknown pairs sent by a peer cannot grow the cache.
    """
    key = (api_key, api_version)
    cls = _request_classes.get(key)
    if cls is None:
        name = api_key_map.get(api_key)
        if name is None or api_version not in schema_name_map[name]:
            return None
        cls = _request_classes[key] = load_request_schema(api_key, api_version)
    return cls


class _RequestCodec(NamedTuple):
    request_class: type
    read_body: Callable[[bytes, int], tuple[Any, int]]
    flexible_header: bool  # header v2: the client id is followed by a tagged-field section


_request_codecs: dict[tuple[int, int], _RequestCodec] = {}


def _request_codec(api_key: int, api_version: int) -> _RequestCodec | None:
    codec = _request_codecs.get((api_key, api_version))
    if codec is None:
        cls = request_class(api_key, api_version)
        if cls is None:
            return None
        flexible_header: bool = cls.__header_schema__.__flexible__  # type: ignore[attr-defined]
        codec = _RequestCodec(cls, entity_reader(cls), flexible_header)
        _request_codecs[api_key, api_version] = codec
    return codec


def load_schemas(api_key: int, api_version: int) -> None:
    """Import the request and response classes of one API version now (kio imports a
    module per version on first use), so decoding and answering need no file later."""
    legacy = legacy_version(api_key, api_version)
    if legacy is not None:
        api_version = legacy.kio_version
    request_class(api_key, api_version)
    name = api_key_map.get(api_key)
    if name is not None and api_version in schema_name_map[name]:
        load_response_schema(api_key, api_version)


def decode_request(frame: bytes) -> tuple[RequestHeader, Any]:
    """Decode a request frame (without its size prefix) into its header and kio request body.

    ``frame`` must be ``bytes`` (kio reads only read-only buffers). Raises
    :class:`RequestDecodeError` for an unknown API key or version, a malformed or
    truncated header or body, or counts the bytes cannot back —
    including every exception kio itself raises on bad input.
    """
    try:
        api_key, api_version, correlation_id, client_id_length = _HEADER.unpack_from(frame, 0)
    except struct.error:
        raise RequestDecodeError(
            f"a {len(frame)}-byte frame is too short for a request header"
        ) from None
    codec = _request_codecs.get((api_key, api_version)) or _request_codec(api_key, api_version)
    legacy = None
    if codec is None:
        legacy = legacy_version(api_key, api_version)
        if legacy is None:
            raise RequestDecodeError(f"no schema for api key {api_key} version {api_version}")

    # The client id is a legacy int16-length string in both header v1 and v2.
    position = _HEADER.size
    if client_id_length == -1:
        client_id = None
    else:
        client_id_end = position + client_id_length
        if client_id_length < 0 or client_id_end > len(frame):
            raise RequestDecodeError(f"client id length {client_id_length} does not fit the frame")
        try:
            client_id = frame[position:client_id_end].decode()
        except UnicodeDecodeError as exc:
            raise RequestDecodeError("client id is not valid UTF-8") from exc
        position = client_id_end
    header = RequestHeader(api_key, api_version, correlation_id, client_id)
    if legacy is not None:  # every old version has request header v1
        try:
            return header, decode_legacy_request(legacy, frame[position:])
        except (SamsaError, ValueError, TypeError) as exc:
            raise RequestDecodeError(f"api key {api_key} v{api_version}: {exc}") from exc
    assert codec is not None
    if codec.flexible_header:
        # Kafka defines no tagged fields for header v2, and kio rejects tags it does not know.
        if position >= len(frame) or frame[position] != 0:
            raise RequestDecodeError("request header v2 is truncated or carries tagged fields")
        position += 1

    cls = codec.request_class
    try:
        end = check_entity(cls, frame, position)
    except GuardError as exc:
        raise RequestDecodeError(f"{cls.__name__} v{api_version}: {exc}") from exc
    # Bytes after the body are ignored, as Kafka ignores them: librdkafka 2.16 sends
    # Metadata v13 requests 3 bytes longer than the schema.
    try:
        body, size = codec.read_body(frame, position)
    except Exception as exc:  # kio raises DecodeError, ValueError, KeyError... on bad input
        raise RequestDecodeError(f"{cls.__name__} v{api_version}: {exc!r}") from exc
    if position + size != end:
        # The guard and kio disagree on the layout: refuse rather than guess which is right.
        raise RequestDecodeError(f"{cls.__name__} v{api_version}: guard and kio disagree on size")
    return header, body


class _ChunkSink:
    """A write target for kio's writers that keeps each written object, uncopied."""

    __slots__ = ("chunks", "write")

    def __init__(self, first: bytes) -> None:
        self.chunks: list[bytes] = [b"", first]  # chunks[0] becomes the size prefix
        self.write: Callable[[bytes], object] = self.chunks.append


class _ResponseCodec(NamedTuple):
    flexible_header: bool  # response header v1: correlation id + an empty tagged-field section
    write_body: Callable[[Any, Any], None]  # kio types its target as IO[bytes]; a sink will do


_response_codecs: dict[type, _ResponseCodec] = {}


def _response_codec(cls: type) -> _ResponseCodec:
    codec = _response_codecs.get(cls)
    if codec is None:
        flexible_header: bool = cls.__header_schema__.__flexible__  # type: ignore[attr-defined]
        codec = _response_codecs[cls] = _ResponseCodec(flexible_header, entity_writer(cls))
    return codec


def encode_response(correlation_id: int, response: Any) -> bytes:
    """Encode a kio response as it goes on the wire: size prefix, response header, body.

    The header version (v0 or v1) is the one ``response.__header_schema__`` names, so
    ApiVersions responses get v0 whatever their version, as Kafka requires. The
    header is packed here (an int32, plus an empty tag section in v1; tests compare it
    with kio's header writer); the body is written by kio's ``entity_writer``.
    Errors in the response object (a plain int where kio wants an ``ErrorCode``,
    a value out of range) surface as kio raises them.
    """
    return _encode_as(type(response), correlation_id, response)


def _encode_as(cls: type, correlation_id: int, response: Any) -> bytes:
    """``response`` written by ``cls``'s writer (which reads only the fields ``cls`` has)."""
    codec = _response_codecs.get(cls) or _response_codec(cls)
    header = _INT32.pack(correlation_id)
    sink = _ChunkSink(header + b"\0" if codec.flexible_header else header)
    codec.write_body(sink, response)
    chunks = sink.chunks
    chunks[0] = _INT32.pack(sum(map(len, chunks)))
    return b"".join(chunks)


_response_schema = functools.cache(load_response_schema)


def encode_response_for(
    api_key: int, api_version: int, correlation_id: int, response: Any
) -> bytes:
    """Encode ``response`` for a request of ``api_version``: as :func:`encode_response` does,
    or in the old layout when the version is one kio lacks (:mod:`samsa.protocol.legacy`).

    ``response`` may be of a newer version than the one asked (a typed handler answers
    with the newest: :mod:`samsa.protocol.versions`): the asked version's writer reads
    the fields that version has from it."""
    cls = type(response)
    if cls.__version__ == api_version:
        return _encode_as(cls, correlation_id, response)
    legacy = legacy_version(api_key, api_version)
    if legacy is None:
        return _encode_as(_response_schema(api_key, api_version), correlation_id, response)
    return encode_legacy_response(legacy, correlation_id, response)
