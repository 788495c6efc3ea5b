"""The fault-injection checker finds each anomaly it counts, in histories made by hand."""

from __future__ import annotations

from samsa.testing.history import Ack, Failed, Final, History, Poll, check

T = "writes"


def _history() -> History:
    history = History()
    history.groups["readers"] = T
    return history


def _clean() -> tuple[History, Final]:
    """Two acknowledged writes, polled and committed: nothing to report."""
    history = _history()
    history.ack(T, 0, 0, "w-0")
    history.ack(T, 0, 1, "w-1")
    history.polled("readers", "r0", T, 0, offset=0, value="w-0")
    history.polled("readers", "r0", T, 0, offset=1, value="w-1")
    history.committed("readers", T, 0, 2)
    history.end()
    final = Final(
        {(T, 0): [(0, "w-0"), (1, "w-1")]},
        {(T, 0): {1: [(0, b"w-0"), (1, b"w-1")], 2: [(0, b"w-0"), (1, b"w-1")]}},
        {"readers": {(T, 0): 2}},
    )
    return history, final


def test_a_clean_history_has_no_anomaly() -> None:
    history, final = _clean()
    report = check(history, final)
    assert report.anomalies == 0, report.table()
    assert report.counts["acknowledged"] == 2


def test_an_acknowledged_write_missing_is_lost() -> None:
    history, final = _clean()
    history.ack(T, 0, 2, "w-2")
    report = check(history, final)
    assert report.lost == 1
    assert "w-2" in report.examples["lost"][0]


def test_a_value_at_two_offsets_is_a_duplicate() -> None:
    history, final = _clean()
    final.logs[(T, 0)].append((2, "w-1"))
    assert check(history, final).duplicates == 1


def test_an_offset_seen_with_two_values() -> None:
    history, final = _clean()
    history.polled("readers", "r1", T, 0, offset=1, value="w-9")
    report = check(history, final)
    assert report.two_values == 1
    history, final = _clean()
    final.logs[(T, 0)][1] = (1, "w-9")  # the acknowledged record replaced in the log
    report = check(history, final)
    assert report.two_values == 1
    assert report.lost == 1


def test_replicas_that_differ_at_an_offset_or_in_length() -> None:
    history, final = _clean()
    final.replicas[(T, 0)][2][1] = (1, b"other")
    assert check(history, final).replicas_differ == 1
    history, final = _clean()
    final.replicas[(T, 0)][2].pop()
    assert check(history, final).replicas_differ == 1


def test_records_of_an_aborted_transaction_seen() -> None:
    history, final = _clean()
    history.transaction("copier", False, ["w-0|1"])
    history.transaction("copier", None, ["w-1|2"])  # unknown outcome: no claim either way
    history.polled("auditors", "a0", "copies", 0, offset=0, value="w-0|1")
    final.logs[("copies", 0)] = [(0, "w-0|1"), (2, "w-1|2")]
    assert check(history, final).aborted_seen == 2  # polled, and in the final read


def test_committed_offsets_going_backwards() -> None:
    history, final = _clean()
    history.committed("readers", T, 0, 1)
    report = check(history, final)
    assert report.offsets_backwards == 1
    assert "2 then 1" in report.examples["backwards"][0]


def test_a_copy_loop_losing_or_duplicating_its_input() -> None:
    history, final = _clean()
    history.copies["copies"] = (T, "copiers")
    history.transaction("copier", True, ["w-0|1", "w-1|1"])
    final.logs[("copies", 0)] = [(0, "w-0|1"), (1, "w-1|1"), (3, "w-0|2")]
    final.committed["copiers"] = {(T, 0): 2}
    report = check(history, final)
    assert report.duplicates == 1  # w-0 copied twice
    assert report.lost == 0
    final.logs[("copies", 0)] = [(0, "w-0|1")]
    report = check(history, final)
    assert report.lost == 1  # w-1 consumed (committed 2) but never copied
    assert report.duplicates == 0


def test_a_consumer_stuck_while_records_wait() -> None:
    history = _history()
    history.acks += [Ack(1.0, T, 0, 0, "w-0"), Ack(5.0, T, 0, 1, "w-1")]
    history.polls.append(Poll(2.0, "readers", "r0", T, 0, 0, "w-0"))
    history.ended = 100.0  # w-1 waited from 5 s to the end: 95 s unpolled
    final = Final({(T, 0): [(0, "w-0"), (1, "w-1")]})
    assert check(history, final, stuck_after=30).stuck == 1
    assert check(history, final, stuck_after=99).stuck == 0
    history.polls.append(Poll(20.0, "readers", "r0", T, 0, 1, "w-1"))
    assert check(history, final, stuck_after=30).stuck == 0  # polled 15 s after


def test_no_stuck_consumer_while_nothing_was_written() -> None:
    history = _history()
    history.end()
    history.ended = 100.0
    assert check(history, Final({}), stuck_after=30).stuck == 0


def test_availability_counts_seconds_with_an_acknowledgement() -> None:
    history = _history()
    history.failures.append(Failed(0.2, T, "w-0", "timed out"))
    history.acks += [Ack(t, T, 0, 0, "x") for t in (1.5, 2.5, 3.2)]
    history.ended = 4.0  # seconds 0, 1, 2 and 3: three with an acknowledgement
    assert check(history, Final({(T, 0): [(0, "x")]})).availability == 3 / 4
