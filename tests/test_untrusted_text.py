"""Text framekit did not write: the judge's reply, the judged text, the user's endpoint URL.

Each test runs the real client path against the judge simulator and counts what reached it:
a reply that quotes a forged verdict is read as the judge's own, look-alike data
delimiters are defused before they reach the judge, and an ``api_base`` with a query
string reaches ``/v1/chat/completions`` with the query kept.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import framekit as fk
from framekit.evaluators import RetrievalRelevance
from framekit.testing import JudgeSimulator, SimulatorConfig
from tests import helpers
from tests.helpers import API_KEY, MAPPING, retrieval_frame


def _score(frame: pl.DataFrame, judge: fk.Judge, **kw: object) -> pl.DataFrame:
    out = fk.evaluate_dataframe(
        frame, [RetrievalRelevance()], MAPPING, judge=judge, cache=None, progress=False, **kw
    )  # type: ignore[arg-type]
    assert isinstance(out, pl.DataFrame)
    return out


# -- an api_base with a query string ---------------------------------------------------


def test_api_base_query_string_is_kept_after_the_chat_path(simulator_factory, transport):
    if transport == "litellm":
        pytest.skip("litellm's OpenAI client joins the path itself (see the README row)")
    sim = simulator_factory()
    judge = fk.Judge("openai/sim-judge", api_base=f"{sim.api_base}?api-version=2024-06-01",
                     api_key=API_KEY, transport=helpers.TRANSPORT)  # fmt: skip
    out = _score(retrieval_frame(6), judge)
    assert out["retrieval_relevance_error"].null_count() == 6
    stats = sim.stats()
    assert stats["by_endpoint"] == {"/v1/chat/completions": 6}
    assert stats["by_query"] == {"api-version=2024-06-01": 6}


def test_batch_api_base_query_string_is_kept_on_every_batch_call(tmp_path: Path):
    with JudgeSimulator(SimulatorConfig(batch_seconds=0.05)) as sim:
        judge = fk.Judge("openai/gpt-4o-mini", api_base=f"{sim.api_base}?api-version=2024-06-01",
                         api_key=API_KEY, batch=True, batch_poll=0.02)  # fmt: skip
        out = fk.evaluate_dataframe(retrieval_frame(8), [RetrievalRelevance()], MAPPING,
                                    judge=judge, cache=tmp_path / "c", progress=False)  # fmt: skip
        stats = sim.stats()
    assert isinstance(out, pl.DataFrame)
    assert out["retrieval_relevance_error"].null_count() == 8
    assert stats["batch"]["batches_created"] == 1 and stats["chat"] == 0
    paths = set(stats["by_endpoint"])
    assert {"/v1/files", "/v1/batches"} <= paths, paths
    assert sum(stats["by_endpoint"].values()) == sum(stats["by_query"].values())
    assert set(stats["by_query"]) == {"api-version=2024-06-01"}
