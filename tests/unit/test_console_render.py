"""How the web console shows record bytes, times and long lists (samsa.console.render)."""

from __future__ import annotations

import pytest

from samsa.console.render import (
    format_bytes,
    format_duration_ms,
    format_timestamp,
    key_value_lines,
    paginate,
    parse_timestamp,
    show_bytes,
)


def test_json_values_are_pretty_printed() -> None:
    shown = show_bytes(b'{"order":1,"items":["lamp"]}')
    assert shown.form == "json"
    assert shown.text == '{\n  "order": 1,\n  "items": [\n    "lamp"\n  ]\n}'


def test_utf8_text_that_is_not_json_is_shown_as_text() -> None:
    shown = show_bytes("{not json} ünïcode".encode())
    assert (shown.text, shown.form) == ("{not json} ünïcode", "text")


def test_bytes_that_are_not_utf8_are_shown_as_hex_rows_of_sixteen() -> None:
    shown = show_bytes(bytes(range(250, 256)) + bytes(16))
    assert shown.form == "hex"
    assert shown.text.splitlines() == [
        "00000000  fa fb fc fd fe ff 00 00 00 00 00 00 00 00 00 00",
        "00000010  00 00 00 00 00 00",
    ]


def test_hex_format_shows_even_text_as_hex() -> None:
    assert show_bytes(b"hi", "hex").text == "00000000  68 69"


def test_a_null_key_is_shown_as_null() -> None:
    assert (show_bytes(None).text, show_bytes(None).form) == ("null", "null")


def test_timestamps_are_shown_in_utc_with_milliseconds() -> None:
    assert format_timestamp(1767225600123) == "2026-01-01 00:00:00.123 UTC"
    assert format_timestamp(-1) == "-"


def test_a_time_without_a_zone_is_read_as_utc_and_digits_as_epoch_ms() -> None:
    assert parse_timestamp("2026-01-01T00:00") == 1767225600000
    assert parse_timestamp("2026-01-01T01:00+01:00") == 1767225600000
    assert parse_timestamp("1767225600000") == 1767225600000
    with pytest.raises(ValueError):
        parse_timestamp("yesterday")


def test_sizes_are_shown_in_binary_units() -> None:
    assert [format_bytes(n) for n in (0, 1023, 1536, 5 * 1024**3, -1)] == [
        "0 B", "1023 B", "1.5 KiB", "5.0 GiB", "-"
    ]  # fmt: skip


def test_retention_is_shown_in_the_largest_unit_it_fills() -> None:
    values = ["604800000", "5400000", "1800000", "500", "-1", None, "abc"]
    assert [format_duration_ms(v) for v in values] == [
        "7 d", "1.5 h", "30 min", "500 ms", "forever", "-", "abc"
    ]  # fmt: skip


def test_a_page_number_past_the_end_shows_the_last_page() -> None:
    page = paginate(list(range(1001)), 99, 50)
    assert (page.number, page.pages, page.first, page.last) == (21, 21, 1001, 1001)
    assert list(page.items) == [1000]


def test_an_empty_list_has_one_empty_page() -> None:
    page = paginate([], 1, 50)
    assert (page.number, page.pages, page.first, page.last, page.total) == (1, 1, 0, 0, 0)


def test_form_lines_are_read_as_name_value_pairs_and_a_line_without_equals_is_refused() -> None:
    assert key_value_lines("a=1\r\n\n b = x=y \n", "config") == [("a", "1"), ("b", "x=y")]
    with pytest.raises(ValueError, match="header line 'oops' is not NAME=VALUE"):
        key_value_lines("oops", "header")
