"""The message browser page of a topic, and "produce a message" from it.

The browser's query string says what to read (``partition``, ``mode``, ``offset``,
``timestamp``, ``limit``, ``filter``) and how to show bytes (``format``); producing posts
a key, a value, headers (``name=value`` lines) and optionally a partition, then comes
back to the browser showing the newest records. With ``export=jsonl`` or ``export=csv``
the records the query finds are downloaded instead: one JSON object (or CSV row) per
record, a key, value or header value as UTF-8 text when it is, else base64 (its
``*_encoding`` field says which).
"""

from __future__ import annotations

import base64
import csv
import io
import json
from collections.abc import Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from samsa.client.consumer import ConsumerRecord
from samsa.console.browse import MODES, BrowseRequest, browse
from samsa.console.render import (
    FORMATS,
    format_timestamp,
    key_value_lines,
    parse_timestamp,
    show_bytes,
)
from samsa.console.state import audit, clients_of, int_param, redirect, render
from samsa.errors import SamsaError

__all__ = ["messages_page", "produce"]

MAX_LIMIT = 500
EXPORTS = {"jsonl": "application/x-ndjson", "csv": "text/csv"}
CSV_FIELDS = ("topic", "partition", "offset", "timestamp", "timestamp_type", "key",
              "key_encoding", "value", "value_encoding", "headers")  # fmt: skip


def _encoded(data: bytes | None) -> tuple[str | None, str | None]:
    """Bytes as (text, encoding): UTF-8 text when they are, else base64; None for null."""
    if data is None:
        return None, None
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"


def _exported(record: ConsumerRecord) -> dict[str, Any]:
    key, key_encoding = _encoded(record.key)
    value, value_encoding = _encoded(record.value)
    headers = []
    for name, data in record.headers:
        text, encoding = _encoded(data)
        headers.append({"key": name, "value": text, "encoding": encoding})
    return {
        "topic": record.topic, "partition": record.partition, "offset": record.offset,
        "timestamp": record.timestamp, "timestamp_type": record.timestamp_type,
        "key": key, "key_encoding": key_encoding,
        "value": value, "value_encoding": value_encoding, "headers": headers,
    }  # fmt: skip


def _export(name: str, kind: str, records: Sequence[ConsumerRecord]) -> Response:
    rows = [_exported(r) for r in records]
    if kind == "jsonl":
        body = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    else:
        out = io.StringIO()
        writer = csv.DictWriter(out, CSV_FIELDS, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, "headers": json.dumps(row["headers"], ensure_ascii=False)})
        body = out.getvalue()
    disposition = f'attachment; filename="{name}.{kind}"'
    return Response(body, media_type=EXPORTS[kind],
                    headers={"Content-Disposition": disposition})  # fmt: skip


async def messages_page(request: Request) -> Response:
    clients = clients_of(request)
    name = request.path_params["topic"]
    params = request.query_params
    topic = (await clients.admin.describe_topics([name]))[name]
    count = len(topic.partitions)
    partition_text = params.get("partition", "all")
    partition = None if partition_text in ("", "all") else int_param(partition_text, 0, 0, count)
    mode = params.get("mode", "newest")
    mode = mode if mode in MODES else "newest"
    fmt = params.get("format", "auto")
    fmt = fmt if fmt in FORMATS else "auto"
    timestamp_text = params.get("timestamp", "")
    error = ""
    timestamp_ms = 0
    if mode == "timestamp":
        try:
            timestamp_ms = parse_timestamp(timestamp_text)
        except ValueError:
            error = f"{timestamp_text!r} is not a time: use 2026-01-31T12:00 (UTC) or epoch ms"
    wanted = BrowseRequest(
        None if partition is None else [partition],
        mode,
        offset=int_param(params.get("offset"), 0, 0, 1 << 62),
        timestamp_ms=timestamp_ms,
        limit=int_param(params.get("limit"), 50, 1, MAX_LIMIT),
        text_filter=params.get("filter", ""),
    )
    result = None
    if not error:
        result = await browse(clients.reader_properties, name, count, wanted)
        export = params.get("export", "")
        if export in EXPORTS:
            return _export(name, export, result.records)
    records = [
        {
            "record": r,
            "time": format_timestamp(r.timestamp),
            "key": show_bytes(r.key, fmt),
            "value": show_bytes(r.value, fmt),
            "headers": [(h, show_bytes(v, "text" if fmt == "auto" else fmt)) for h, v in r.headers],
        }
        for r in (result.records if result else [])
    ]
    return render(
        request,
        "messages.html",
        error=error or request.query_params.get("error", ""),
        topic=topic,
        records=records,
        result=result,
        request_=wanted,
        partition=partition,
        mode=mode,
        fmt=fmt,
        formats=FORMATS,
        modes=MODES,
        timestamp_text=timestamp_text,
        max_limit=MAX_LIMIT,
    )


async def produce(request: Request) -> Response:
    clients = clients_of(request)
    name = request.path_params["topic"]
    form = await request.form()
    back = f"/topics/{name}/messages"
    try:
        headers: list[tuple[str, bytes | None]] = [
            (header, value.encode())
            for header, value in key_value_lines(str(form.get("headers", "")), "header")
        ]
    except ValueError as exc:
        return redirect(back, error=str(exc))
    key_text = str(form.get("key", ""))
    partition_text = str(form.get("partition", "")).strip()
    try:
        producer = await clients.producer()
        metadata = await producer.send_and_wait(
            name,
            str(form.get("value", "")).encode(),
            key=key_text.encode() if key_text else None,
            headers=headers,
            partition=int(partition_text) if partition_text.isdigit() else None,
        )
    except SamsaError as exc:
        audit(request, "failed to produce a record to topic %r: %s", name, exc)
        return redirect(back, error=f"the record was not written: {exc}")
    audit(request, "produced a record to topic %r partition %d at offset %d",
          name, metadata.partition, metadata.offset)  # fmt: skip
    return redirect(
        back,
        notice=f"Produced a record to partition {metadata.partition} at offset {metadata.offset}.",
    )
