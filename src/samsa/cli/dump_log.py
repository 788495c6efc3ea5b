"""``samsa dump-log``: what a partition directory's files hold, as kafka-dump-log.sh prints it.

Kafka's DumpLogSegments dispatches on the file suffix, and so does this:

- ``.log``: ``Log starting offset: N``, then one line per batch with Kafka's
  field names in Kafka's order (baseOffset … isvalid). With ``--deep-iteration``
  one ``|``-prefixed line per record follows its batch (offset, timestamp,
  keySize, valueSize, sequence, headerKeys; a control record's marker type and
  coordinator epoch); ``--print-data-log`` adds keys and payloads as UTF-8.
- ``.index``: ``offset: N position: P`` per entry; ``.timeindex``:
  ``timestamp: T offset: N``.
- ``.txnindex``: one line per aborted transaction; ``.snapshot``: one line per
  producer of a producer state snapshot.

Deliberate differences from Kafka's tool: a file that is corrupt or ends inside a
batch or an entry stops with one line on stderr naming the file and byte position
(after the lines that could be read) and exit code 1, where Kafka prints "Found N
invalid bytes" or a stack trace. Only RecordBatch v2 (magic 2) is read. There is no
``--verify-index-only`` or ``--index-sanity-check``: indexes are listed, not checked
against their log. Keys and payloads are shown as UTF-8 text (invalid bytes
replaced), as Kafka's default StringDecoder shows them, unless a decoder is named:

- ``--offsets-decoder``: records of ``__consumer_offsets`` (offset commits and group
  metadata, a consumer group's subscriptions and assignments decoded too);
- ``--transaction-log-decoder``: records of ``__transaction_state``.

Either implies ``--print-data-log`` and prints Kafka's JSON, ``key: {"type":"1",
"data":{…}} payload: {"version":"3","data":{…}}``; a deleted entry's payload is
``<DELETE>``. A record the decoder cannot read is reported on stderr ("Error at
offset N, skipping.", "Unknown record type N at offset M, skipping.") and printed
without its key and payload.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from samsa.coordinator.group.records import (
    GROUP_METADATA_KEY_VERSION,
    decode_group_metadata_key,
    decode_group_metadata_value,
    decode_offset_key,
    decode_offset_value,
    key_version,
)
from samsa.coordinator.transaction.records import (
    decode_transaction_log_key,
    decode_transaction_log_value,
)
from samsa.errors import SamsaError
from samsa.records.batch import (
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_POS,
    NO_SEQUENCE,
    CompressionType,
    RecordBatchView,
    TimestampType,
    batch_size_at,
)
from samsa.records.control import (
    ControlRecordType,
    control_record_type,
    parse_end_transaction_marker,
)
from samsa.records.reader import iter_records
from samsa.records.record import Record
from samsa.storage.index import OffsetIndex, TimeIndex
from samsa.storage.producer_state import SNAPSHOT_SUFFIX, ProducerStateManager
from samsa.storage.txn_index import CURRENT_VERSION, ENTRY_SIZE, TransactionIndex

PROG = "samsa dump-log"
_SEQUENCE_MODULUS = 1 << 31
_TIMESTAMP_TYPE_NAMES = {
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}


class DumpError(Exception):
    """Raised when a file cannot be read on: its message says where and why."""


@dataclass(frozen=True, slots=True)
class DumpOptions:
    deep_iteration: bool = False
    print_data_log: bool = False
    skip_record_metadata: bool = False
    max_bytes: int | None = None
    decoder: str | None = None  # "offsets" or "transaction-log"


def run(args: argparse.Namespace) -> int:
    """Dump every file named; 1 if any could not be read to its end, 2 if none was named."""
    paths = list(args.paths)
    if args.files:
        paths += [name for name in args.files.split(",") if name]
    if not paths:
        print(f"{PROG}: name the files to dump, as arguments or with --files a.log,b.index",
              file=sys.stderr)  # fmt: skip
        return 2
    if args.offsets_decoder and args.transaction_log_decoder:
        print(f"{PROG}: give one decoder: --offsets-decoder or --transaction-log-decoder",
              file=sys.stderr)  # fmt: skip
        return 2
    decoder = (
        "offsets" if args.offsets_decoder
        else "transaction-log" if args.transaction_log_decoder
        else None
    )  # fmt: skip
    options = DumpOptions(
        deep_iteration=args.deep_iteration or args.print_data_log or decoder is not None,
        print_data_log=args.print_data_log or decoder is not None,
        skip_record_metadata=args.skip_record_metadata,
        max_bytes=args.max_bytes,
        decoder=decoder,
    )
    status = 0
    try:
        for name in paths:
            if not dump_file(Path(name), options, sys.stdout, sys.stderr):
                status = 1
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader (``| head``) left: stop quietly, and keep Python from
        # complaining when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return status


def dump_file(path: Path, options: DumpOptions, out: TextIO, err: TextIO) -> bool:
    """Print one file's contents to ``out``; False (and a line on ``err``) if it is unreadable."""
    out.write(f"Dumping {path}\n")
    dumper = _DUMPERS.get(path.suffix)
    if dumper is None:
        err.write(f"{PROG}: ignoring {path}: not a .log, .index, .timeindex, .txnindex "
                  "or .snapshot file\n")  # fmt: skip
        return True
    try:
        dumper(path, options, out, err)
    except DumpError as exc:
        out.flush()
        err.write(f"{PROG}: {path}: {exc}\n")
        return False
    except OSError as exc:
        out.flush()
        err.write(f"{PROG}: {path}: cannot read it: {exc.strerror or exc}\n")
        return False
    return True


# -- segments ------------------------------------------------------------------------------


def _dump_log(path: Path, options: DumpOptions, out: TextIO, err: TextIO) -> None:
    stem = path.name.split(".")[0]
    if stem.isdigit():
        out.write(f"Log starting offset: {int(stem)}\n")
    gaps: list[tuple[int, int]] = []
    last_offset: int | None = None
    with open(path, "rb") as file:
        file_size = os.fstat(file.fileno()).st_size
        end = file_size if options.max_bytes is None else min(file_size, options.max_bytes)
        position = 0
        while position < end:
            batch = _read_batch(file, position, file_size)
            if position + batch.size > end:
                break  # --max-bytes cut the file inside this batch: not an error
            out.write(_batch_line(batch, position) + "\n")
            if options.deep_iteration:
                for record in _records(batch, position):
                    if last_offset is not None and record.offset != last_offset + 1:
                        gaps.append((last_offset, record.offset))
                    last_offset = record.offset
                    out.write(_record_line(batch, record, options, err) + "\n")
            position += batch.size
    if gaps:
        # Kafka reports these too; compaction makes them on purpose.
        err.write(f"Non-consecutive offsets in {path}\n")
        err.writelines(f"  {first} is followed by {second}\n" for first, second in gaps)


def _read_batch(file: BinaryIO, position: int, file_size: int) -> RecordBatchView:
    """The batch at ``position``, which is where ``file`` reads next; checks framing, not CRC."""
    header = file.read(LOG_OVERHEAD)
    if len(header) < LOG_OVERHEAD:
        raise DumpError(
            f"truncated: {file_size - position} bytes at position {position} "
            f"are too few for a batch header"
        )
    try:
        size = batch_size_at(header)
    except SamsaError as exc:
        raise DumpError(f"corrupt batch at position {position}: {_reason(exc)}") from exc
    assert size is not None
    if position + size > file_size:
        raise DumpError(
            f"truncated: the batch at position {position} declares {size} bytes "
            f"but the file ends {file_size - position} bytes after its start"
        )
    data = header + file.read(size - LOG_OVERHEAD)
    if len(data) < max(size, MAGIC_POS + 1):
        raise DumpError(
            f"truncated: the file ended while the batch at position {position} was read"
        )
    if data[MAGIC_POS] != MAGIC:
        raise DumpError(
            f"corrupt batch at position {position}: magic {data[MAGIC_POS]}, "
            f"and only magic {MAGIC} (Kafka 0.11 and later) can be read"
        )
    return RecordBatchView(memoryview(data))


def _records(batch: RecordBatchView, position: int) -> list[Record]:
    # Decoded whole before any is printed, so a bad batch prints no partial records.
    try:
        return list(iter_records(batch))
    except SamsaError as exc:
        raise DumpError(
            f"corrupt records in the batch at position {position} "
            f"(offsets {batch.base_offset} to {batch.last_offset}): {_reason(exc)}"
        ) from exc


def _reason(exc: BaseException) -> str:
    """An exception's own message, without a Kafka error name prefix."""
    return str(exc.args[0]) if exc.args else str(exc)


def _java_bool(value: bool) -> str:
    return "true" if value else "false"


def _optional_long(value: int | None) -> str:
    """How Java prints an OptionalLong, which Kafka's tool shows as is."""
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def _codec_name(batch: RecordBatchView) -> str:
    codec_id = batch.attributes & 0x07
    try:
        return CompressionType(codec_id).name.lower()
    except ValueError:
        return f"unknown({codec_id})"


def _batch_line(batch: RecordBatchView, position: int) -> str:
    delete_horizon = batch.base_timestamp if batch.has_delete_horizon else None
    return (
        f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} "
        f"count: {batch.record_count} baseSequence: {batch.base_sequence} "
        f"lastSequence: {batch.last_sequence} producerId: {batch.producer_id} "
        f"producerEpoch: {batch.producer_epoch} "
        f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
        f"isTransactional: {_java_bool(batch.is_transactional)} "
        f"isControl: {_java_bool(batch.is_control)} "
        f"deleteHorizonMs: {_optional_long(delete_horizon)} position: {position} "
        f"{_TIMESTAMP_TYPE_NAMES[batch.timestamp_type]}: {batch.max_timestamp} "
        f"size: {batch.size} magic: {batch.magic} compresscodec: {_codec_name(batch)} "
        f"crc: {batch.crc} isvalid: {_java_bool(batch.is_valid())}"
    )


def _record_line(batch: RecordBatchView, record: Record, options: DumpOptions, err: TextIO) -> str:
    parts = ["|"]
    if not options.skip_record_metadata:
        sequence = NO_SEQUENCE
        if batch.base_sequence != NO_SEQUENCE:
            sequence = (batch.base_sequence + record.offset - batch.base_offset) % _SEQUENCE_MODULUS
        parts.append(
            f"offset: {record.offset} "
            f"{_TIMESTAMP_TYPE_NAMES[batch.timestamp_type]}: {record.timestamp} "
            f"keySize: {_size(record.key)} valueSize: {_size(record.value)} "
            f"sequence: {sequence} headerKeys: [{','.join(key for key, _ in record.headers)}]"
        )
        if batch.is_control:
            parts.append(_control_fields(record))
    if options.print_data_log and not batch.is_control and options.decoder is not None:
        decoded = _decode_coordinator_record(record, options.decoder, err)
        if decoded is not None:
            parts += [f"key: {decoded[0]}", f"payload: {decoded[1]}"]
    elif options.print_data_log and not batch.is_control:
        if record.key is not None:
            parts.append(f"key: {_text(record.key)}")
        if record.value is not None:
            parts.append(f"payload: {_text(record.value)}")
    return " ".join(parts)


def _control_fields(record: Record) -> str:
    try:
        kind = control_record_type(record)
        if kind in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
            marker = parse_end_transaction_marker(record)
            return f"endTxnMarker: {kind.name} coordinatorEpoch: {marker.coordinator_epoch}"
        return f"controlType: {kind.name}({int(kind)})"
    except SamsaError as exc:
        raise DumpError(f"control record at offset {record.offset}: {_reason(exc)}") from exc


def _size(field: bytes | None) -> int:
    return -1 if field is None else len(field)


def _text(field: bytes) -> str:
    return field.decode("utf-8", errors="replace")


# -- decoders of the coordinators' topics -----------------------------------------------------


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _b64(data: bytes | None) -> str | None:
    """Bytes as Kafka's generated JSON writes them: base64, null for null."""
    return None if data is None else base64.b64encode(data).decode()


def _topic_partitions_json(pairs: tuple[tuple[str, tuple[int, ...]], ...]) -> list[object]:
    return [{"topic": topic, "partitions": list(ids)} for topic, ids in pairs]


def _subscription_json(data: bytes) -> object:
    from samsa.protocol.consumer_protocol import parse_subscription

    sub = parse_subscription(data)
    version = min(sub.version, 3)
    fields: dict[str, object] = {"topics": list(sub.topics), "userData": _b64(sub.user_data)}
    if version >= 1:
        fields["ownedPartitions"] = _topic_partitions_json(sub.owned_partitions)
    if version >= 2:
        fields["generationId"] = sub.generation_id
    if version >= 3:
        fields["rackId"] = sub.rack_id
    return fields


def _assignment_json(data: bytes) -> object:
    from samsa.protocol.consumer_protocol import parse_assignment

    assignment = parse_assignment(data)
    return {
        "assignedPartitions": _topic_partitions_json(assignment.partitions),
        "userData": _b64(assignment.user_data),
    }


def _group_metadata_json(version: int, data: bytes) -> dict[str, object]:
    value = decode_group_metadata_value(data)
    consumer = value.protocol_type == "consumer"
    fields: dict[str, object] = {
        "protocolType": value.protocol_type,
        "generation": value.generation,
        "protocol": value.protocol,
        "leader": value.leader,
    }
    if version >= 2:
        fields["currentStateTimestamp"] = value.current_state_timestamp
    members = []
    for m in value.members:
        member: dict[str, object] = {"memberId": m.member_id}
        if version >= 3:
            member["groupInstanceId"] = m.group_instance_id
        member.update(clientId=m.client_id, clientHost=m.client_host)
        if version >= 1:
            member["rebalanceTimeout"] = m.rebalance_timeout
        member["sessionTimeout"] = m.session_timeout
        member["subscription"] = (
            _subscription_json(m.subscription) if consumer else _b64(m.subscription)
        )
        member["assignment"] = _assignment_json(m.assignment) if consumer else _b64(m.assignment)
        members.append(member)
    fields["members"] = members
    return fields


def _offsets_record(key: bytes, value: bytes | None) -> tuple[str, str]:
    version = key_version(key)
    if version == GROUP_METADATA_KEY_VERSION:
        key_json = {"type": str(version), "data": {"group": decode_group_metadata_key(key)}}
        if value is None:
            return _json(key_json), "<DELETE>"
        value_version = key_version(value)
        payload: dict[str, Any] = {"version": str(value_version)}
        payload["data"] = _group_metadata_json(value_version, value)
        return _json(key_json), _json(payload)
    if version not in (0, 1):
        raise _UnknownType(version)
    offset_key = decode_offset_key(key)
    key_json = {
        "type": str(version),
        "data": {"group": offset_key.group, "topic": offset_key.topic,
                 "partition": offset_key.partition},
    }  # fmt: skip
    if value is None:
        return _json(key_json), "<DELETE>"
    value_version = key_version(value)
    offset = decode_offset_value(value)
    data: dict[str, object] = {"offset": offset.offset}
    if value_version >= 3:
        data["leaderEpoch"] = offset.leader_epoch
    data.update(metadata=offset.metadata, commitTimestamp=offset.commit_timestamp)
    return _json(key_json), _json({"version": str(value_version), "data": data})


def _transaction_record(key: bytes, value: bytes | None) -> tuple[str, str]:
    version = key_version(key)
    if version != 0:
        raise _UnknownType(version)
    key_json = {"type": "0", "data": {"transactionalId": decode_transaction_log_key(key)}}
    if value is None:
        return _json(key_json), "<DELETE>"
    state = decode_transaction_log_value(value)
    partitions = state.transaction_partitions
    data: dict[str, object] = {
        "producerId": state.producer_id,
        "producerEpoch": state.producer_epoch,
        "transactionTimeoutMs": state.transaction_timeout_ms,
        "transactionStatus": state.transaction_status,
        "transactionPartitions": None if partitions is None else [
            {"topic": topic, "partitionIds": list(ids)} for topic, ids in partitions
        ],
        "transactionLastUpdateTimestampMs": state.last_update_timestamp_ms,
        "transactionStartTimestampMs": state.start_timestamp_ms,
    }  # fmt: skip
    # Version 1's tagged fields, written only when they differ from their defaults.
    for name, current, default in (
        ("previousProducerId", state.previous_producer_id, -1),
        ("nextProducerId", state.next_producer_id, -1),
        ("clientTransactionVersion", state.client_transaction_version, 0),
        ("nextProducerEpoch", state.next_producer_epoch, -1),
    ):
        if current != default:
            data[name] = current
    return _json(key_json), _json({"version": str(key_version(value)), "data": data})


class _UnknownType(Exception):
    """Raised for a key version the chosen decoder does not know."""

    def __init__(self, version: int) -> None:
        super().__init__(version)
        self.version = version


def _decode_coordinator_record(record: Record, decoder: str, err: TextIO) -> tuple[str, str] | None:
    """``(key, payload)`` as Kafka's parser prints them, or None (said on ``err``) if unreadable."""
    if record.key is None:
        raise DumpError(
            f"Failed to decode message at offset {record.offset} using the specified decoder "
            "(message had a missing key)"
        )
    parse = _offsets_record if decoder == "offsets" else _transaction_record
    try:
        return parse(record.key, record.value)
    except _UnknownType as exc:
        err.write(f"Unknown record type {exc.version} at offset {record.offset}, skipping.\n")
    except (SamsaError, ValueError) as exc:
        err.write(f"Error at offset {record.offset}, skipping. {_reason(exc)}\n")
    return None


# -- indexes and producer state ----------------------------------------------------------------


def _base_offset(path: Path) -> int:
    stem = path.name.split(".")[0]
    if not stem.isdigit():
        raise DumpError(
            "cannot tell the segment's base offset: index files are named for it "
            "(00000000000000000042.index)"
        )
    return int(stem)


def _dump_entries(
    path: Path, index_type: type[OffsetIndex] | type[TimeIndex], line: str, out: TextIO
) -> None:
    """Each entry of an offset or time index, formatted by ``line`` from the entry's pair."""
    base_offset = _base_offset(path)
    file_size = path.stat().st_size
    entry_size = index_type.ENTRY.size
    index = index_type(path, base_offset, max(file_size, entry_size), writable=False)
    try:
        if not index.entries:
            out.write(f"{path} is empty.\n")
        for n in range(index.entries):
            out.write(line.format(*index.entry(n)) + "\n")
    finally:
        index.close()
    _check_whole_entries(file_size, entry_size)


def _check_whole_entries(file_size: int, entry_size: int) -> None:
    torn = file_size % entry_size
    if torn:
        raise DumpError(
            f"truncated: the {torn} bytes at position {file_size - torn} "
            f"are not a whole {entry_size}-byte entry"
        )


def _dump_offset_index(path: Path, options: DumpOptions, out: TextIO, err: TextIO) -> None:
    _dump_entries(path, OffsetIndex, "offset: {0} position: {1}", out)


def _dump_time_index(path: Path, options: DumpOptions, out: TextIO, err: TextIO) -> None:
    _dump_entries(path, TimeIndex, "timestamp: {0} offset: {1}", out)


def _dump_txn_index(path: Path, options: DumpOptions, out: TextIO, err: TextIO) -> None:
    file_size = path.stat().st_size
    try:
        entries = TransactionIndex(path).entries()
    except SamsaError as exc:
        raise DumpError(_reason(exc)) from exc
    for txn in entries:
        out.write(
            f"version: {CURRENT_VERSION} producerId: {txn.producer_id} "
            f"firstOffset: {txn.first_offset} lastOffset: {txn.last_offset} "
            f"lastStableOffset: {txn.last_stable_offset}\n"
        )
    _check_whole_entries(file_size, ENTRY_SIZE)


def _dump_producer_snapshot(path: Path, options: DumpOptions, out: TextIO, err: TextIO) -> None:
    stem = path.name[: -len(SNAPSHOT_SUFFIX)]
    if not (stem.isdigit() and path.name == f"{int(stem):020d}{SNAPSHOT_SUFFIX}"):
        raise DumpError(
            "producer snapshots are named for their offset in 20 digits "
            "(00000000000000000042.snapshot)"
        )
    state = ProducerStateManager(path.parent)
    try:
        state.load_snapshot(int(stem))
    except SamsaError as exc:
        raise DumpError(_reason(exc)) from exc
    for entry in state.producers.values():
        txn_first_offset = entry.current_txn_first_offset
        line = (
            f"producerId: {entry.producer_id} producerEpoch: {entry.epoch} "
            f"coordinatorEpoch: {entry.coordinator_epoch} currentTxnFirstOffset: "
            f"{_optional_long(None if txn_first_offset < 0 else txn_first_offset)} "
            f"lastTimestamp: {entry.last_timestamp}"
        )
        if entry.batches:
            last = entry.batches[-1]
            line += (
                f" firstSequence: {last.first_sequence} lastSequence: {last.last_sequence} "
                f"lastOffset: {last.last_offset} "
                f"offsetDelta: {last.last_offset - last.first_offset} "
                f"timestamp: {last.timestamp}"
            )
        out.write(line + "\n")


_DUMPERS: dict[str, Callable[[Path, DumpOptions, TextIO, TextIO], None]] = {
    ".log": _dump_log,
    ".index": _dump_offset_index,
    ".timeindex": _dump_time_index,
    ".txnindex": _dump_txn_index,
    SNAPSHOT_SUFFIX: _dump_producer_snapshot,
}
