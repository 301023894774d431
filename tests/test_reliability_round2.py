"""What a hostile endpoint and a careless user found (issue 12), each against the simulator.

Secrets echoed back, missing or malformed credentials, two runs at once in one process,
two servers behind one model name, unwritable destinations, and the smaller faults.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import polars as pl
import pytest

import framekit as fk
from framekit.evaluators import RetrievalRelevance
from framekit.judges.request import ChatRequest, parse_answer
from tests import helpers
from tests.helpers import API_KEY, MAPPING, retrieval_frame, sim_judge

ROOT = Path(__file__).resolve().parents[1]


def _score(df, judge, cache, **kwargs):
    return fk.evaluate_dataframe(
        df, [RetrievalRelevance()], MAPPING, judge=judge, cache=cache, progress=False, **kwargs
    )


@pytest.fixture
def no_keys(monkeypatch):
    """No key in the environment (the developer's own must not make a test pass)."""
    for name in list(os.environ):
        if name.endswith("_API_KEY"):
            monkeypatch.delenv(name)


def _cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    environ.update(PYTHONPATH=str(ROOT), LITELLM_OFFLINE_MODE="true", **(env or {}))
    environ.pop("FRAMEKIT_JUDGE", None)
    return subprocess.run(
        [sys.executable, "-m", "framekit.cli", *args],
        cwd=cwd, env=environ, capture_output=True, text=True, timeout=180,
    )  # fmt: skip


# -- secrets ----------------------------------------------------------------------------


@pytest.mark.usefixtures("transport")
def test_key_echoed_inside_an_answer_never_reaches_the_cache_or_the_output(
    simulator_factory, tmp_path, caplog
):
    caplog.set_level(logging.DEBUG, logger="LiteLLM")
    sim = simulator_factory(echo_headers="answer")
    cache = tmp_path / "cache"
    out = _score(retrieval_frame(6), sim_judge(sim), cache)
    explanations = out["retrieval_relevance_explanation"].to_list()
    assert all("authorization: Bearer ***" in e for e in explanations)
    stored = "".join(p.read_bytes().decode("latin-1") for p in cache.rglob("*") if p.is_file())
    assert "authorization: Bearer ***" in stored  # the answer was cached, redacted
    # A later run under another key reads the cached answers: still no key in them.
    rerun = _score(retrieval_frame(6), sim_judge(sim, api_key="sk-another-key-0000"), cache)
    assert sim.stats()["total"] == 6
    for text in [*explanations, stored, str(rerun.to_dicts()), caplog.text]:
        assert API_KEY not in text and API_KEY[-8:] not in text


@pytest.mark.usefixtures("transport")
def test_key_from_openai_api_key_echoed_in_error_bodies_is_redacted(
    simulator_factory, monkeypatch, no_keys
):
    # The key reaches the endpoint only through litellm reading OPENAI_API_KEY.
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    sim = simulator_factory(echo_headers="error")
    judge = fk.Judge("openai/sim-judge", api_base=sim.api_base, transport=helpers.TRANSPORT)
    out = _score(retrieval_frame(4), judge, False)
    errors = out["retrieval_relevance_error"].to_list()
    assert all(e.startswith("BadRequestError: you sent POST") for e in errors)
    assert all(API_KEY not in e and API_KEY[-8:] not in e for e in errors)


@pytest.mark.usefixtures("transport")
def test_credentials_in_api_base_never_appear_in_the_unreachable_error(no_keys, closed_port):
    judge = fk.Judge(
        "openai/sim-judge",
        api_base=f"http://127.0.0.1:{closed_port}/v1?key={API_KEY}",
        api_key="x-none",
        transport=helpers.TRANSPORT,
    )
    with pytest.raises(fk.JudgeError, match=r"cannot reach the judge at .*\?key=\*\*\*") as info:
        _score(retrieval_frame(5), judge, False)
    assert API_KEY not in str(info.value) and API_KEY[-8:] not in str(info.value)


# -- configuration errors ---------------------------------------------------------------


def test_missing_api_key_is_a_configuration_error_before_any_call(judge_simulator, no_keys):
    # litellm's OpenAI client refuses to send without a key, even to a custom api_base.
    judge = fk.Judge("openai/sim-judge", api_base=judge_simulator.api_base, transport="litellm")
    started = time.monotonic()
    with pytest.raises(fk.JudgeConfigurationError, match="no API key for 'openai/sim-judge'"):
        _score(retrieval_frame(20), judge, False)
    assert time.monotonic() - started < 5.0  # not an outage ridden out for a minute
    assert judge_simulator.stats()["total"] == 0
    assert issubclass(fk.JudgeConfigurationError, fk.InputError)


def test_missing_key_on_the_http_transport_matters_only_for_openai_itself(
    judge_simulator, no_keys, monkeypatch
):
    for name in ("FRAMEKIT_API_BASE", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)
    # A keyless self-hosted server: the http transport sends without a key, and it works.
    keyless = fk.Judge("openai/sim-judge", api_base=judge_simulator.api_base, transport="http")
    assert keyless.configuration_problem() is None
    out = _score(retrieval_frame(4), keyless, False)
    assert out["retrieval_relevance_error"].null_count() == 4
    assert judge_simulator.stats()["total"] == 4
    # OpenAI's own endpoint needs one: refused before any call (nothing leaves the machine).
    default = fk.Judge("openai/gpt-4o-mini", transport="http")
    with pytest.raises(fk.JudgeConfigurationError, match="no API key for 'openai/gpt-4o-mini'"):
        _score(retrieval_frame(2), default, False)


@pytest.mark.parametrize(
    ("key", "needle"),
    [
        ("sk-abc123\n", "whitespace"),
        ("sk-abc 123", "cannot carry"),
        ("sk-abcé123", "cannot carry"),
    ],
)
def test_malformed_api_key_is_a_configuration_error(judge_simulator, key, needle):
    judge = fk.Judge("openai/sim-judge", api_base=judge_simulator.api_base, api_key=key)
    with pytest.raises(fk.JudgeConfigurationError, match=needle) as info:
        _score(retrieval_frame(3), judge, False)
    assert key.strip() not in str(info.value)
    assert judge_simulator.stats()["total"] == 0


def test_api_base_with_credentials_is_a_configuration_error_not_an_outage(judge_simulator):
    host = judge_simulator.api_base.split("://")[1]
    judge = fk.Judge("openai/sim-judge", api_base=f"http://me:{API_KEY}@{host}", api_key="x-none")
    with pytest.raises(fk.JudgeConfigurationError, match="carries credentials") as info:
        _score(retrieval_frame(3), judge, False)
    assert API_KEY not in str(info.value)
    assert judge_simulator.stats()["total"] == 0


def test_cli_missing_key_exits_2_with_one_line_and_dry_run_warns(tmp_path, judge_simulator):
    retrieval_frame(5).write_parquet(tmp_path / "in.parquet")
    # anthropic/ goes through litellm, whose client refuses to send without a key (an
    # openai/ model with --api-base goes over http, where a keyless server is fine).
    common = ["in.parquet", "-e", "retrieval_relevance", "--map", "input=question",
              "--map", "context=docs", "--judge", "anthropic/sim-judge",
              "--api-base", judge_simulator.base_url]  # fmt: skip
    run = _cli("evaluate", *common, "-o", "out.parquet", "-q", cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.startswith("framekit: error")]
    assert len(lines) == 1 and "no API key" in lines[0] and "Traceback" not in run.stderr
    dry = _cli("evaluate", *common, "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0 and "warning: no API key" in dry.stdout
    assert judge_simulator.stats()["total"] == 0 and not (tmp_path / "out.parquet").exists()


# -- concurrency and the cache key -------------------------------------------------------


def test_two_threads_on_one_cache_pay_once_and_print_nothing(simulator_factory, tmp_path, capfd):
    sim = simulator_factory(latency=0.02)
    cache = tmp_path / "cache"
    frames = [retrieval_frame(120), retrieval_frame(240).slice(60, 120)]  # 60 rows shared
    outs: dict[int, pl.DataFrame] = {}
    judges = [sim_judge(sim, concurrency=8) for _ in frames]

    def run(i: int) -> None:
        outs[i] = _score(frames[i], judges[i], cache)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(out["retrieval_relevance_error"].null_count() == 120 for out in outs.values())
    distinct, in_flight = 180, 8 + 8
    assert sim.stats()["total"] <= distinct + in_flight
    err = capfd.readouterr().err
    for alarming in ("Traceback", "Task was destroyed", "LoggingWorker", "never awaited"):
        assert alarming not in err, err[:2000]


def test_two_servers_behind_one_model_name_do_not_share_answers(simulator_factory, tmp_path):
    first, second = simulator_factory(), simulator_factory()
    cache = tmp_path / "cache"
    _score(retrieval_frame(5), sim_judge(first), cache)
    _score(retrieval_frame(5), sim_judge(second), cache)
    assert first.stats()["total"] == 5 and second.stats()["total"] == 5
    _score(retrieval_frame(5), sim_judge(second, api_key="sk-rotated-key-1234"), cache)
    assert second.stats()["total"] == 5  # a new key is the same endpoint: cached


# -- command-line destinations -------------------------------------------------------------


@pytest.mark.parametrize("output", ["/proc/x.parquet", "in.parquet/x.parquet"])
def test_unwritable_output_exits_2_before_any_call(tmp_path, judge_simulator, output):
    retrieval_frame(5).write_parquet(tmp_path / "in.parquet")
    run = _cli("evaluate", "in.parquet", "-o", output, "-e", "retrieval_relevance",
               "--map", "input=question", "--map", "context=docs", "--judge", "openai/sim-judge",
               "--api-base", judge_simulator.api_base, cwd=tmp_path,
               env={"FRAMEKIT_API_KEY": API_KEY})  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert output in run.stderr
    assert judge_simulator.stats()["total"] == 0


def test_report_html_into_a_missing_directory_exits_2_before_the_summary(tmp_path):
    scored = retrieval_frame(4).with_columns(
        pl.lit(0.5).alias("retrieval_relevance_score"),
        pl.lit(None, pl.String).alias("retrieval_relevance_error"),
    )
    scored.write_parquet(tmp_path / "scored.parquet")
    run = _cli("report", "scored.parquet", "--html", "missing_dir/r.html", cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert run.stdout == "" and "Traceback" not in run.stderr
    assert "missing_dir" in run.stderr and len(run.stderr.strip().splitlines()) == 1


def test_compare_on_a_key_no_group_shares_names_the_problem(tmp_path):
    scored = pl.DataFrame(
        {
            "question_id": [f"bm25-{i}" for i in range(10)] + [f"dense-{i}" for i in range(10)],
            "strategy": ["bm25"] * 10 + ["dense"] * 10,
            "retrieval_relevance_score": [0.2, 0.4] * 5 + [0.8, 1.0] * 5,
            "retrieval_relevance_error": [None] * 20,
        },
        schema_overrides={"retrieval_relevance_error": pl.String},
    )
    scored.write_parquet(tmp_path / "scored.parquet")
    run = _cli("compare", "scored.parquet", "--by", "strategy", "--on", "question_id",
               cwd=tmp_path)  # fmt: skip
    assert run.returncode == 2, run.stdout + run.stderr
    assert "--on question_id" in run.stderr and "appears in two groups" in run.stderr


# -- smaller ---------------------------------------------------------------------------


def test_unknown_judge_keyword_names_the_closest_parameter():
    with pytest.raises(fk.InputError, match="'concurency'; did you mean 'concurrency'"):
        fk.Judge("openai/gpt-4o-mini", concurency=64)
    with pytest.raises(fk.InputError, match="did you mean 'max_retries'"):
        fk.Judge("openai/gpt-4o-mini", max_retry=2)
    # litellm's own (and provider-specific) arguments pass through untouched.
    judge = fk.Judge("openai/gpt-4o-mini", seed=7, top_p=0.9, api_version="2024-06-01")
    assert judge.litellm_kwargs == {"seed": 7, "top_p": 0.9, "api_version": "2024-06-01"}


_REQUEST = ChatRequest(
    messages=[],
    schema_name="r",
    schema={"required": ["label"], "properties": {}},
    choices=("relevant", "irrelevant"),
)


def test_fenced_json_followed_by_prose_with_braces_is_read():
    reply = (
        'Here is my answer:\n```json\n{"explanation": "on topic", "label": "relevant"}\n```\n'
        "Note: I ignored the {placeholder} in the document."
    )
    assert parse_answer(reply, None, _REQUEST)["label"] == "relevant"
    prose = 'Verdict {"label": "irrelevant"} -- see {this} and {that}.'
    assert parse_answer(prose, None, _REQUEST)["label"] == "irrelevant"


def test_explanation_returned_as_an_object_is_stored_as_json_and_nan_as_null():
    ev = RetrievalRelevance()
    verdict = ev.verdict({}, {"label": "relevant", "explanation": {"why": "on topic", "p": 0.9}})
    assert verdict.explanation == '{"why": "on topic", "p": 0.9}'
    assert ev.verdict({}, {"label": "relevant", "explanation": float("nan")}).explanation is None


def test_cache_directory_deleted_mid_run_warns_and_keeps_later_answers(simulator_factory, tmp_path):
    import shutil

    sim = simulator_factory(latency=0.05)
    cache = tmp_path / "cache"

    def delete_when_busy() -> None:
        while sim.stats()["by_status"].get(200, 0) < 10:
            time.sleep(0.005)
        shutil.rmtree(cache)

    deleter = threading.Thread(target=delete_when_busy)
    deleter.start()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _score(retrieval_frame(60), sim_judge(sim, concurrency=2), cache)
    deleter.join()
    messages = [str(w.message) for w in caught if "deleted during the run" in str(w.message)]
    assert len(messages) == 1, [str(w.message) for w in caught]
    assert len(fk.Cache(cache)) >= 60 - 10 - 2 - 2  # later answers were kept


def test_a_url_the_http_client_refuses_at_call_time_is_classified_as_configuration():
    # The judge refuses such an api_base before calling; this is the second line of
    # defence, for a client that refuses a URL framekit's own check let through.
    import asyncio

    from framekit.judges.litellm.call import call_litellm, classify

    params = {"model": "openai/m", "api_base": f"http://me:{API_KEY}@127.0.0.1:9/v1",
              "api_key": "x-none", "num_retries": 0, "max_retries": 0, "timeout": 5}  # fmt: skip
    call = {"messages": [{"role": "user", "content": "hi"}]}
    try:
        asyncio.run(call_litellm(params, call))
    except Exception as exc:  # the client's own refusal, whatever litellm wraps it in
        fault = classify(exc, [API_KEY])
    assert fault.kind == "config", fault
    assert "api_base" in fault.reason and API_KEY not in fault.reason
