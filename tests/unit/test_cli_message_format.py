"""How ``samsa console-consumer`` prints records: the bytes of Kafka's
DefaultMessageFormatter for each property, the json formatter, and deserializers."""

from __future__ import annotations

import json
import struct

import pytest

from samsa.cli.message_format import FormatError, build_formatter
from samsa.cli.session import UsageError
from samsa.client.consumer.types import ConsumerRecord

DEFAULT = "org.apache.kafka.tools.consumer.DefaultMessageFormatter"


def record(
    key: bytes | None = b"k",
    value: bytes | None = b"v",
    headers: tuple[tuple[str, bytes | None], ...] = (),
    timestamp_type: int = 0,
) -> ConsumerRecord:
    return ConsumerRecord(
        topic="orders",
        partition=2,
        offset=5,
        timestamp=1700000000000,
        timestamp_type=timestamp_type,
        key=key,
        value=value,
        headers=headers,
    )


def formatted(properties: dict[str, str], rec: ConsumerRecord, name: str = DEFAULT) -> bytes:
    return build_formatter(name, properties).format(rec)


def test_the_default_prints_the_value_and_a_line_break() -> None:
    assert formatted({}, record()) == b"v\n"


def test_every_column_in_kafkas_order_separated_by_tabs() -> None:
    props = {
        f"print.{name}": "true" for name in ("timestamp", "partition", "offset", "headers", "key")
    }
    rec = record(headers=(("trace", b"abc"), ("kind", b"x")))
    assert formatted(props, rec) == (
        b"CreateTime:1700000000000\tPartition:2\tOffset:5\ttrace:abc,kind:x\tk\tv\n"
    )


def test_log_append_time_is_named_as_kafka_names_it() -> None:
    rec = record(timestamp_type=1)
    assert formatted({"print.timestamp": "true"}, rec) == b"LogAppendTime:1700000000000\tv\n"


def test_a_record_without_headers_prints_no_headers() -> None:
    assert formatted({"print.headers": "true"}, record()) == b"NO_HEADERS\tv\n"


def test_nulls_print_as_the_null_literal() -> None:
    rec = record(key=None, value=None, headers=(("h", None),))
    props = {"print.key": "true", "print.headers": "true"}
    assert formatted(props, rec) == b"h:null\tnull\tnull\n"
    assert formatted({**props, "null.literal": "<nil>"}, rec) == b"h:<nil>\t<nil>\t<nil>\n"


def test_separators_are_taken_literally() -> None:
    props = {
        "print.key": "true",
        "print.headers": "true",
        "key.separator": " | ",
        "line.separator": "\\n",
        "headers.separator": ";",
    }
    rec = record(headers=(("a", b"1"), ("b", b"2")))
    assert formatted(props, rec) == b"a:1;b:2 | k | v\\n"


def test_without_the_value_the_last_column_ends_the_line() -> None:
    props = {"print.value": "false", "print.key": "true", "print.offset": "true"}
    assert formatted(props, record()) == b"Offset:5\tk\n"
    assert formatted({"print.value": "false"}, record()) == b""


def test_flags_are_true_only_when_they_say_true() -> None:
    assert formatted({"print.key": "TRUE ", "print.offset": "yes"}, record()) == b"k\tv\n"


def test_number_deserializers_print_numbers() -> None:
    rec = record(key=struct.pack(">i", -7), value=struct.pack(">q", 1 << 40))
    props = {
        "print.key": "true",
        "key.deserializer": "IntegerDeserializer",
        "value.deserializer": "org.apache.kafka.common.serialization.LongDeserializer",
    }
    assert formatted(props, rec) == b"-7\t1099511627776\n"


def test_a_deserializer_that_cannot_read_the_bytes_raises_format_error() -> None:
    with pytest.raises(FormatError, match="LongDeserializer is not 8"):
        formatted({"value.deserializer": "LongDeserializer"}, record(value=b"abc"))


def test_the_string_deserializer_replaces_malformed_utf8_as_java_does() -> None:
    props = {"value.deserializer": "StringDeserializer"}
    assert formatted(props, record(value=b"a\xffb")) == "a\ufffdb\n".encode()


def test_json_prints_every_field_on_one_line() -> None:
    rec = record(headers=(("trace", b"abc"), ("empty", None)), value="grüß".encode())
    line = formatted({}, rec, "json")
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert json.loads(line) == {
        "topic": "orders",
        "partition": 2,
        "offset": 5,
        "timestamp": 1700000000000,
        "timestampType": "CreateTime",
        "headers": [{"key": "trace", "value": "abc"}, {"key": "empty", "value": None}],
        "key": "k",
        "value": "grüß",
    }


def test_json_refuses_bytes_that_are_not_utf8_and_says_how_to_print_them() -> None:
    with pytest.raises(FormatError, match=r"value\.deserializer=ByteArrayDeserializer"):
        formatted({}, record(value=b"\xff\xfe"), "json")


def test_json_prints_byte_arrays_as_base64_and_numbers_as_numbers() -> None:
    rec = record(key=b"\xff\xfe", value=struct.pack(">d", 2.5))
    props = {
        "key.deserializer": "ByteArrayDeserializer",
        "value.deserializer": "DoubleDeserializer",
    }
    document = json.loads(formatted(props, rec, "json"))
    assert (document["key"], document["value"]) == ("//4=", 2.5)


@pytest.mark.parametrize(
    "name", ["kafka.tools.NoOpMessageFormatter", "NoOpMessageFormatter"], ids=["old", "short"]
)
def test_the_no_op_formatter_prints_nothing(name: str) -> None:
    assert formatted({}, record(), name) == b""


@pytest.mark.parametrize(
    ("name", "properties", "message"),
    [
        pytest.param("com.example.Fancy", {}, "unknown --formatter", id="unknown formatter"),
        pytest.param(DEFAULT, {"print.epoch": "true"}, "does not take", id="unknown property"),
        pytest.param("json", {"print.key": "true"}, "does not take", id="json print flag"),
        pytest.param(
            DEFAULT, {"key.deserializer": "AvroDeserializer"}, "unknown", id="unknown class"
        ),
    ],
)
def test_what_a_formatter_does_not_know_is_a_usage_error(
    name: str, properties: dict[str, str], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        build_formatter(name, properties)
