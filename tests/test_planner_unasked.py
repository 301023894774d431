"""The plan asks the cache only for keys it was not asked for before the plan.

A share read as columns (``engine/plan.read_cached``) has asked the cache for all its keys
already; its records that missed wait under those keys (``Record.missed_key``). The plan
then asks for every other key, and for none of those, whichever share planned it first.
"""

from __future__ import annotations

import asyncio

import polars as pl

import framekit as fk
from framekit.engine.cache import Cache
from framekit.engine.plan import ChatPlan, read_cached
from framekit.engine.prepare import prepare
from framekit.evaluators import RetrievalRelevance
from framekit.judges.resolve import JudgeResolver

MODEL = "openai/gpt-4o-mini"
FRAME = pl.DataFrame(
    {
        "question": [f"What is item {i}?" for i in range(4)],
        "docs": [[f"Item {i} is a thing.", "Unrelated."] for i in range(4)],
    }
)


def _plan(evaluators: list[fk.Evaluator], cache: Cache) -> tuple[ChatPlan, list[set[str]]]:
    """The plan as a run makes it, and each share's keys."""
    judge = fk.Judge(MODEL, api_base="http://127.0.0.1:9/v1", api_key="sk-test")
    mapping = {"input": "question", "context": "docs"}
    prepared = asyncio.run(prepare(FRAME, evaluators, mapping, JudgeResolver(judge)))
    read: set[str] = set()
    for share in prepared:
        if share.unbuilt is not None:
            read_cached(share, cache, lambda rows, kind: None, read)
    plan = ChatPlan(prepared)
    keys = [{k for k in plan if any(s is share for s, _ in plan[k])} for share in prepared]
    return plan, keys


def _by_columns() -> RetrievalRelevance:
    return RetrievalRelevance(name="columns")


def _by_records(temperature: float) -> RetrievalRelevance:
    # A context window keeps the share's records built (not read as columns first).
    judge = fk.Judge(MODEL, api_base="http://127.0.0.1:9/v1", api_key="sk-test",
                     context_window=100_000, temperature=temperature)  # fmt: skip
    return RetrievalRelevance(name="records", judge=judge)


def test_keys_missed_before_the_plan_are_not_asked_again(tmp_path) -> None:
    cache = Cache(tmp_path)
    plan, (missed, fresh) = _plan([_by_columns(), _by_records(0.5)], cache)
    assert len(missed) == len(fresh) == 4 and not missed & fresh
    assert plan.unasked() == [key for key in plan if key in fresh]


def test_a_key_missed_by_one_share_and_planned_afresh_by_another_is_not_asked(tmp_path) -> None:
    cache = Cache(tmp_path)
    plan, (missed, fresh) = _plan([_by_columns(), _by_records(0.0)], cache)
    assert missed == fresh and len(plan) == 4  # the same requests: one key each
    assert plan.unasked() == []
    # The other way round: the share planned afresh comes first in every waiting list.
    plan, (fresh, missed) = _plan([_by_records(0.0), _by_columns()], cache)
    assert missed == fresh and plan.unasked() == []


def test_a_plan_nothing_was_asked_for_asks_every_key(tmp_path) -> None:
    plan, _ = _plan([_by_records(0.0)], Cache(tmp_path))
    assert plan.unasked() == list(plan) and len(plan) == 4


def test_a_plan_whose_every_key_was_missed_asks_none(tmp_path) -> None:
    plan, _ = _plan([_by_columns()], Cache(tmp_path))
    assert len(plan) == 4 and plan.unasked() == []
