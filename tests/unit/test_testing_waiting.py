"""samsa.testing.waiting: the one way tests wait for a condition."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from samsa.testing.waiting import WaitTimeout, wait_until, wait_until_async


def test_the_first_truthy_value_is_returned() -> None:
    calls = itertools.count(1)
    assert wait_until(lambda: next(calls) == 3 and "third", "the third call", interval=0) == "third"


def test_a_condition_that_never_holds_fails_naming_what_was_awaited() -> None:
    with pytest.raises(WaitTimeout, match=r"not within 0 s: the group to settle") as raised:
        wait_until(lambda: False, "the group to settle", timeout=0)
    assert isinstance(raised.value, AssertionError)  # a test failure
    assert isinstance(raised.value, TimeoutError)  # what LocalCluster.wait_until raised


def test_a_callable_description_is_asked_only_on_failure() -> None:
    asked: list[int] = []

    def described() -> str:
        asked.append(1)
        return "state 7"

    assert wait_until(lambda: True, described)
    assert not asked
    with pytest.raises(WaitTimeout, match="state 7"):
        wait_until(lambda: False, described, timeout=0)


def test_a_step_runs_between_checks_instead_of_sleeping() -> None:
    polled: list[int] = []
    wait_until(lambda: len(polled) == 3, "three polls", step=lambda: polled.append(1))
    assert polled == [1, 1, 1]


def test_the_async_variant_awaits_a_coroutine_condition() -> None:
    calls = itertools.count(1)

    async def third() -> bool:
        return next(calls) == 3

    async def scenario() -> bool:
        return await wait_until_async(third, "the third call", interval=0)

    assert asyncio.run(scenario()) is True


def test_the_async_variant_fails_naming_what_was_awaited() -> None:
    async def scenario() -> None:
        await wait_until_async(lambda: None, "a marker", timeout=0)

    with pytest.raises(WaitTimeout, match="not within 0 s: a marker"):
        asyncio.run(scenario())
