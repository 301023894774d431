"""How the engine survives a faulty judge: retries, re-asks, rate limits, kills, secrets."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import polars as pl
import pytest

import framekit as fk
from framekit.evaluators import RetrievalRelevance
from tests import helpers
from tests.helpers import API_KEY, MAPPING, retrieval_frame, sim_judge

# Every test here runs on both judge transports (see the ``transport`` fixture).
pytestmark = pytest.mark.usefixtures("transport")

ROOT = Path(__file__).resolve().parents[1]


def _run(df, sim, tmp_path, **judge_options):
    return fk.evaluate_dataframe(
        df,
        [RetrievalRelevance()],
        MAPPING,
        judge=sim_judge(sim, **judge_options),
        cache=tmp_path / "cache",
        progress=False,
    )


def test_malformed_null_and_refusal_are_named_per_row(judge_simulator, tmp_path):
    df = pl.DataFrame(
        {
            "question": [
                "fine @sim(label=relevant)",
                "a @sim(fault=malformed)",
                "b @sim(fault=null)",
                "c @sim(fault=refusal)",
                "fine too @sim(label=irrelevant)",
            ],
            "docs": ["x"] * 5,
        }
    )
    out = _run(df, judge_simulator, tmp_path)
    errors = out["retrieval_relevance_error"].to_list()
    assert errors[0] is None and errors[4] is None
    assert "not valid JSON" in errors[1] and "after 2 re-asks" in errors[1]
    assert "content: null" in errors[2]
    assert errors[3].startswith("judge refused")
    assert out["retrieval_relevance_score"].to_list() == [1.0, None, None, None, 0.0]
    # A refusal is deterministic: no re-ask. Malformed and null are re-asked twice.
    assert judge_simulator.stats()["chat"] == 2 + 3 + 3 + 1


def test_label_outside_rubric_is_reasked_then_recorded(judge_simulator, tmp_path):
    df = pl.DataFrame({"question": ["q @sim(label=maybe)"], "docs": ["x"]})
    out = _run(df, judge_simulator, tmp_path)
    assert out["retrieval_relevance_error"][0].startswith(
        "judge answered label 'maybe', not one of"
    )
    assert judge_simulator.stats()["chat"] == 3
    reask = judge_simulator.requests[-1]["messages"][-1]["content"]
    assert "relevant, irrelevant" in reask


def test_label_is_matched_case_insensitively(judge_simulator, tmp_path):
    df = pl.DataFrame({"question": ["q @sim(label=Relevant)"], "docs": ["x"]})
    out = _run(df, judge_simulator, tmp_path)
    assert out["retrieval_relevance_label"][0] == "relevant"


def test_transient_errors_are_retried_until_success(judge_simulator, tmp_path):
    df = pl.DataFrame(
        {"question": ["q @sim(fault=500, first=2) @sim(label=relevant)"], "docs": ["x"]}
    )
    out = _run(df, judge_simulator, tmp_path)
    assert out["retrieval_relevance_score"][0] == 1.0
    assert judge_simulator.stats()["by_status"] == {500: 2, 200: 1}


def test_bad_request_fails_the_row_without_retry(judge_simulator, tmp_path):
    df = pl.DataFrame({"question": ["q @sim(fault=400)", "ok"], "docs": ["x", "y"]})
    out = _run(df, judge_simulator, tmp_path)
    assert out["retrieval_relevance_error"][0].startswith("BadRequestError")
    assert out["retrieval_relevance_error"][1] is None
    assert judge_simulator.stats()["by_status"].get(400) == 1


def test_falls_back_to_tool_calls_when_response_format_is_rejected(simulator_factory, tmp_path):
    sim = simulator_factory(reject_response_format=True)
    out = _run(retrieval_frame(5, label="relevant"), sim, tmp_path)
    assert out["retrieval_relevance_score"].to_list() == [1.0] * 5
    assert sim.stats()["by_status"][400] >= 1
    assert "tools" in sim.requests[-1] and "response_format" not in sim.requests[-1]


def test_500s_and_hangs_leave_no_row_without_score_or_error(simulator_factory, tmp_path):
    sim = simulator_factory(error_500_rate=0.2, hang_rate=0.05, hang_seconds=30, seed=7)
    df = retrieval_frame(120)
    out = _run(df, sim, tmp_path, timeout=1.0, concurrency=32, max_retries=6)
    scored = out["retrieval_relevance_score"].is_not_null()
    errored = out["retrieval_relevance_error"].is_not_null()
    assert (scored ^ errored).all(), "every row has exactly one of score and error"
    assert scored.sum() >= 115
    assert sim.stats()["faults"].get("500", 0) > 0 and sim.stats()["faults"].get("hang", 0) > 0


def test_rate_limited_server_loses_no_rows(simulator_factory, tmp_path):
    # The server allows 600 RPM; the judge is told twice that.
    sim = simulator_factory(rpm=600)
    df = retrieval_frame(60)
    out = _run(df, sim, tmp_path, rpm=1200, concurrency=16)
    assert out["retrieval_relevance_score"].null_count() == 0
    stats = sim.stats()
    assert stats["by_status"][200] == 60
    assert stats["by_status"].get(429, 0) / stats["total"] < 0.25


def test_retry_after_as_http_date_is_honoured(simulator_factory, tmp_path):
    sim = simulator_factory(rpm=120, retry_after="http-date")
    out = _run(retrieval_frame(6), sim, tmp_path, concurrency=6)
    assert out["retrieval_relevance_score"].null_count() == 0


def test_unauthorised_stops_the_run_without_retry_storm(simulator_factory, tmp_path):
    sim = simulator_factory(require_api_key="sk-the-right-key", latency=0.01)
    started = time.monotonic()
    with pytest.raises(fk.JudgeAuthenticationError) as info:
        _run(retrieval_frame(200), sim, tmp_path, concurrency=4)
    assert time.monotonic() - started < 10
    assert sim.stats()["total"] <= 4
    assert API_KEY not in str(info.value) and API_KEY[-8:] not in str(info.value)


def test_api_key_never_reaches_cache_or_output(simulator_factory, tmp_path):
    sim = simulator_factory(error_500_rate=0.3, refusal_rate=0.1, seed=1)
    df = retrieval_frame(40)
    out = fk.evaluate_dataframe(
        df,
        [RetrievalRelevance()],
        MAPPING,
        judge=sim_judge(sim, max_retries=1),
        cache=tmp_path / "cache",
        progress=False,
        details=True,
    )
    assert out["retrieval_relevance_error"].null_count() < 40  # some rows failed
    secret = API_KEY.encode()
    for path in (tmp_path / "cache").rglob("*"):
        if path.is_file():
            assert secret not in path.read_bytes(), path
    assert API_KEY not in str(out.drop("docs").write_csv()) and API_KEY not in str(out.to_dicts())
    assert API_KEY not in repr(sim_judge(sim))


KILL_SCRIPT = textwrap.dedent(
    """
    import sys
    import polars as pl
    import framekit as fk
    import framekit.engine.cache
    from framekit.evaluators import RetrievalRelevance
    from tests.helpers import MAPPING, retrieval_frame

    api_base, cache, transport = sys.argv[1], sys.argv[2], sys.argv[3]
    # At most this many answers wait for the writer thread: what a kill can lose besides
    # the calls in flight (the default, 1,024, would make the bound below say nothing).
    framekit.engine.cache.WRITE_GROUP_MAX = int(sys.argv[4])
    judge = fk.Judge("openai/sim-judge", api_base=api_base, api_key="sk-x", concurrency=8,
                     transport=transport)
    fk.evaluate_dataframe(retrieval_frame(200), [RetrievalRelevance()], MAPPING,
                          judge=judge, cache=cache, progress=False)
    """
)


def test_sigkill_halfway_then_rerun_pays_at_most_in_flight_and_one_write_group_twice(
    simulator_factory, tmp_path
):
    sim = simulator_factory(latency=0.02)
    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    group = 4
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            KILL_SCRIPT,
            sim.api_base,
            str(cache),
            helpers.TRANSPORT,
            str(group),
        ],  # fmt: skip
        cwd=ROOT,
        env=env,
    )
    deadline = time.monotonic() + 60
    while sim.stats()["by_status"].get(200, 0) < 100:
        assert proc.poll() is None, "the run finished before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    first = sim.stats()["total"]
    assert first < 200
    out = _run(retrieval_frame(200), sim, tmp_path, concurrency=8)
    assert out["retrieval_relevance_score"].null_count() == 0
    # Paid twice: the calls in flight (concurrency 8) and the answers not yet written.
    assert sim.stats()["total"] <= 200 + 8 + group
