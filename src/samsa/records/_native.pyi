"""Types of the optional C helper (``_native.c``; absent where it was not built)."""

from typing import Any

def scan_records(records: Any, count: int, fields: Any, /) -> int: ...
def encode_records(
    order: Any,
    offset_deltas: Any,
    key_starts: Any,
    key_sizes: Any,
    key_data: Any,
    value_starts: Any,
    value_sizes: Any,
    value_data: Any,
    starts: Any,
    /,
) -> bytes: ...
def murmur2_partitions(
    key_starts: Any, key_sizes: Any, key_data: Any, num_partitions: int, partitions: Any, /
) -> None: ...
def scan_headers(
    records: Any, header_at: Any, record_end: Any, counts: Any, spans: Any, /
) -> int: ...
def encode_records_with_headers(
    order: Any,
    offset_deltas: Any,
    key_starts: Any,
    key_sizes: Any,
    key_data: Any,
    value_starts: Any,
    value_sizes: Any,
    value_data: Any,
    header_first: Any,
    header_count: Any,
    header_key_starts: Any,
    header_key_sizes: Any,
    header_key_data: Any,
    header_value_starts: Any,
    header_value_sizes: Any,
    header_value_data: Any,
    starts: Any,
    /,
) -> bytes: ...
