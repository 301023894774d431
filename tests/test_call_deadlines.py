"""One timer bounds every call of the HTTP transport (framekit._aio.Deadlines): a call that
overruns fails as a timeout did under one ``asyncio.timeout`` per call, with the same
fault and row error, and nothing else is cut short or left cancelled."""

from __future__ import annotations

import asyncio
import contextlib
import sys

import polars as pl
import pytest

import framekit as fk
from framekit._aio import Deadlines
from framekit.evaluators import RetrievalRelevance
from framekit.judges.faults import TIMEOUT
from tests.helpers import API_KEY, MAPPING, retrieval_frame

pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="Task.uncancel: 3.11+")


async def _answer(after: float, value: str) -> str:
    await asyncio.sleep(after)
    return value


def test_a_call_within_its_time_returns_and_an_overrun_one_raises_timeout() -> None:
    async def main() -> tuple[str, BaseException | None]:
        deadlines = Deadlines(0.2)
        quick = await deadlines.run(_answer(0.01, "quick"))
        try:
            await deadlines.run(_answer(5.0, "slow"))
        except TimeoutError as exc:
            return quick, exc
        finally:
            deadlines.close()
        return quick, None

    quick, error = asyncio.run(main())
    assert quick == "quick"
    assert isinstance(error, TimeoutError)


def test_each_call_gets_its_whole_time_whenever_it_started() -> None:
    # Calls started one after another: each may take nearly its whole bound from its own
    # start (the timer armed for the first must not cut the later ones early).
    # (Each call has 0.4 s to spare, so a busy machine's stalled loop cannot time one
    # out; the last ends 0.3 s after the first call's deadline.)
    async def main() -> list[str | None]:
        deadlines = Deadlines(1.0)

        async def one(start: float) -> str | None:
            await asyncio.sleep(start)
            try:
                return await deadlines.run(_answer(0.6, f"after {start}"))
            except TimeoutError:
                return None

        try:
            return await asyncio.gather(*(one(start) for start in (0.0, 0.3, 0.6, 0.7)))
        finally:
            deadlines.close()

    assert asyncio.run(main()) == ["after 0.0", "after 0.3", "after 0.6", "after 0.7"]


def test_only_the_overrun_calls_among_many_time_out() -> None:
    async def main() -> list[str | None]:
        deadlines = Deadlines(0.25)

        async def one(after: float) -> str | None:
            try:
                return await deadlines.run(_answer(after, "ok"))
            except TimeoutError:
                return None

        try:
            return await asyncio.gather(*(one(0.5 if i % 3 == 0 else 0.02) for i in range(9)))
        finally:
            deadlines.close()

    assert asyncio.run(main()) == [None, "ok", "ok"] * 3


def test_a_cancel_from_outside_stays_a_cancel() -> None:
    async def main() -> type[BaseException]:
        deadlines = Deadlines(5.0)
        task = asyncio.ensure_future(deadlines.run(_answer(5.0, "never")))
        await asyncio.sleep(0.05)
        task.cancel()
        try:
            await task
        except BaseException as exc:  # noqa: BLE001 - the kind is the point
            return type(exc)
        finally:
            deadlines.close()
        return type(None)

    assert asyncio.run(main()) is asyncio.CancelledError


def test_a_timed_out_task_is_not_left_cancelled() -> None:
    # The watchdog's cancel is taken back when it turns into TimeoutError: the task goes
    # on (a retry, a re-ask) as under asyncio.timeout.
    async def main() -> tuple[int, str]:
        deadlines = Deadlines(0.1)
        with contextlib.suppress(TimeoutError):
            await deadlines.run(_answer(5.0, "slow"))
        task = asyncio.current_task()
        assert task is not None
        after = await deadlines.run(_answer(0.01, "next"))
        deadlines.close()
        return task.cancelling(), after

    assert asyncio.run(main()) == (0, "next")


def test_a_slow_reply_fails_its_row_as_a_timeout_over_http(simulator_factory) -> None:
    # Rows the simulator answers after 3 s, at a timeout of 0.5 s: their error is the
    # timeout fault's own message; the other rows are answered.
    sim = simulator_factory()
    slow = {0, 3}
    df = retrieval_frame(6).with_columns(
        pl.when(pl.col("row_id").is_in(list(slow)))
        .then(pl.col("question") + " @sim(latency=3)")
        .otherwise(pl.col("question"))
        .alias("question")
    )
    judge = fk.Judge(
        "openai/sim-judge",
        api_base=sim.api_base,
        api_key=API_KEY,
        transport="http",
        timeout=0.5,
        max_retries=0,
    )
    out = fk.evaluate_dataframe(
        df, [RetrievalRelevance()], MAPPING, judge=judge, cache=False, progress=False
    )
    errors = out["retrieval_relevance_error"].to_list()
    assert [errors[i] for i in sorted(slow)] == [TIMEOUT, TIMEOUT]
    assert all(errors[i] is None for i in range(6) if i not in slow)
    assert out["retrieval_relevance_score"].null_count() == len(slow)
