"""Kafka's record compression codecs, through maintained packages.

gzip (zlib), snappy (cramjam; Kafka's Java client frames it the xerial way,
librdkafka writes it raw — both are read, xerial is written), lz4 (the LZ4
frame format, KIP-57) and zstd (zstandard). Decompression is bounded: a
batch never inflates past ``max_size`` bytes, so a small hostile batch cannot
make the reader allocate gigabytes.
"""

from __future__ import annotations

import io
import struct
import zlib
from typing import Final

import cramjam
import lz4.frame
import zstandard

from samsa.errors import CompressionError, DecompressionLimitError
from samsa.records.batch import CompressionType

DEFAULT_MAX_DECOMPRESSED: Final = 256 * 1024 * 1024

XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK: Final = 32 * 1024
_U32 = struct.Struct(">I")
# lz4 and zstd reserve the whole output size a read asks for: reading in steps
# keeps a 1 KiB batch from reserving ``max_size`` bytes (256 MiB by default).
_OUTPUT_STEP: Final = 1024 * 1024

_zstd_compressor = zstandard.ZstdCompressor(level=3)
_zstd_decompressor = zstandard.ZstdDecompressor()


def compress(codec: CompressionType, data: bytes | bytearray | memoryview) -> bytes:
    """Compress a records section with ``codec`` as Kafka's Java producer would."""
    if codec is CompressionType.NONE:
        return bytes(data)
    if codec is CompressionType.GZIP:
        c = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return c.compress(data) + c.flush()
    if codec is CompressionType.SNAPPY:
        return _xerial_compress(memoryview(data))
    if codec is CompressionType.LZ4:
        # Kafka's frame (KafkaLZ4BlockOutputStream): 64 KiB blocks, each compressed on its
        # own, no content size, no checksums but the header's. Readers such as Sarama's
        # (pierrec/lz4) refuse linked blocks, and Kafka's Java reader decodes every block
        # alone, so a frame past one block must not refer back into the previous one.
        return bytes(
            lz4.frame.compress(
                bytes(data), block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False,
                content_checksum=False, store_size=False,
            )
        )  # fmt: skip
    if codec is CompressionType.ZSTD:
        return bytes(_zstd_compressor.compress(data))
    raise CompressionError(f"unknown compression codec {codec!r}")


def decompress(
    codec: CompressionType,
    data: bytes | bytearray | memoryview,
    max_size: int = DEFAULT_MAX_DECOMPRESSED,
) -> bytes:
    """Inflate a records section; raise :class:`CompressionError` on bad input and
    :class:`DecompressionLimitError` past ``max_size``, having inflated at most
    ``max_size + 1`` bytes (codecs read in steps, snappy blocks by their declared size)."""
    max_size = max(max_size, 0)  # zlib and lz4 take a length of 0 or less as "no limit"
    try:
        if codec is CompressionType.NONE:
            out = bytes(data)
        elif codec is CompressionType.GZIP:
            out = _gunzip(data, max_size)
        elif codec is CompressionType.SNAPPY:
            view = memoryview(data)
            if bytes(view[: len(XERIAL_MAGIC)]) == XERIAL_MAGIC:
                out = _xerial_decompress(view, max_size)
            else:
                out = _snappy_raw(view, max_size)
        elif codec is CompressionType.LZ4:
            out = _lz4_frame(data, max_size)
        elif codec is CompressionType.ZSTD:
            out = _zstd_frame(data, max_size)
        else:
            raise CompressionError(f"unknown compression codec {codec!r}")
    except CompressionError:
        raise
    except Exception as exc:  # each codec raises its own types; all mean "bad input"
        raise CompressionError(f"{codec.name.lower()} data is corrupt: {exc}") from exc
    if len(out) > max_size:
        raise DecompressionLimitError(
            f"{codec.name.lower()} data inflates past the limit of {max_size} bytes"
        )
    return out


def _gunzip(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = d.decompress(data, max_size + 1)
    if len(out) <= max_size and not d.eof:
        raise CompressionError("gzip stream is truncated")
    return out


def _lz4_frame(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    d = lz4.frame.LZ4FrameDecompressor()
    parts = [d.decompress(bytes(data), max_length=min(_OUTPUT_STEP, max_size + 1))]
    size = len(parts[0])
    while size <= max_size and not d.eof and not d.needs_input:
        part = d.decompress(b"", max_length=min(_OUTPUT_STEP, max_size + 1 - size))
        if not part:
            break
        parts.append(part)
        size += len(part)
    if size <= max_size and not d.eof:
        raise CompressionError("lz4 frame is truncated")
    return b"".join(parts)


def _zstd_frame(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    with _zstd_decompressor.stream_reader(io.BytesIO(data)) as reader:
        while size <= max_size:
            part = reader.read(min(_OUTPUT_STEP, max_size + 1 - size))
            if not part:
                break
            parts.append(part)
            size += len(part)
    return b"".join(parts)


def _snappy_raw(data: memoryview, max_size: int) -> bytes:
    declared = int(cramjam.snappy.decompress_raw_len(bytes(data)))
    if declared > max_size:
        raise DecompressionLimitError(
            f"snappy block declares {declared} bytes, past the limit of {max_size}"
        )
    return bytes(cramjam.snappy.decompress_raw(bytes(data)))


def _xerial_compress(data: memoryview) -> bytes:
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(bytes(data[start : start + _XERIAL_BLOCK])))
        out += _U32.pack(len(block))
        out += block
    return bytes(out)


def _xerial_decompress(data: memoryview, max_size: int) -> bytes:
    pos = len(_XERIAL_HEADER)
    if len(data) < pos:
        raise CompressionError("xerial snappy header is truncated")
    out = bytearray()
    while pos < len(data):
        if len(data) - pos < 4:
            raise CompressionError("xerial snappy block length is truncated")
        (length,) = _U32.unpack_from(data, pos)
        pos += 4
        if length > len(data) - pos:
            raise CompressionError(
                f"xerial snappy block declares {length} bytes, {len(data) - pos} follow"
            )
        out += _snappy_raw(data[pos : pos + length], max_size - len(out))
        pos += length
    return bytes(out)
