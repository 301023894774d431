"""Batch mode (``fk.Judge(..., batch=True)``) against the simulator's batch APIs.

Every claim is counted at the simulator: batches and files created, lines failed or
expired, and direct chat calls (which a batch run must not make).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

import framekit as fk
from framekit._errors import BatchPending, JudgeError
from framekit.evaluators import RetrievalRelevance
from framekit.judges.batch import OpenAIBatchClient
from framekit.judges.pricing import UNKNOWN_COST
from framekit.judges.providers import PROVIDERS
from framekit.testing import JudgeSimulator, SimulatorConfig
from tests.helpers import API_KEY, MAPPING, batch_judge, retrieval_frame
from tests.helpers import score_retrieval as score

PRICED = "openai/gpt-4o-mini"  # in litellm's price map, batch prices included
CLAUDE = "anthropic/claude-3-5-haiku-20241022"


@pytest.fixture
def sim():
    with JudgeSimulator(SimulatorConfig(batch_seconds=0.1)) as s:
        yield s


@pytest.fixture
def openai_is(monkeypatch: pytest.MonkeyPatch) -> Callable[[JudgeSimulator], None]:
    """Make ``sim`` stand in for OpenAI's own endpoint (the only one with OpenAI's batch
    prices: a custom ``api_base`` has none), for a judge given no ``api_base``."""

    def point(sim: JudgeSimulator) -> None:
        for name in ("FRAMEKIT_API_BASE", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
            monkeypatch.delenv(name, raising=False)
        openai = dataclasses.replace(PROVIDERS["openai"], public_base=sim.api_base)
        monkeypatch.setitem(PROVIDERS, "openai", openai)

    return point


def test_10k_rows_by_batch_make_no_chat_call_and_match_the_direct_path_at_half_price(
    sim: JudgeSimulator, tmp_path: Path, openai_is: Callable[[JudgeSimulator], None]
) -> None:
    openai_is(sim)
    df = retrieval_frame(10_000)
    judge = fk.Judge(PRICED, api_key=API_KEY, batch=True, batch_poll=0.02)
    # v1: the same prompt on both paths (v2 shows its schema in a direct call's prompt,
    # for the provider's prompt cache, and sends it as a structured-output schema in a batch)
    batched = score(df, judge, tmp_path / "batch", version="v1", details=True)
    stats = sim.stats()
    assert stats["chat"] == 0
    assert stats["batch"]["batches_created"] == 1
    assert stats["batch"]["lines"] == 10_000
    assert batched["retrieval_relevance_score"].null_count() == 0
    assert batched["retrieval_relevance_error"].null_count() == 10_000
    run = fk.last_run()
    assert run is not None and run.batch_requests == 10_000

    # The direct path on 100 of the same rows, at the same endpoint (OpenAI's own, so
    # both are at gpt-4o-mini's list prices): equal results, twice the price.
    sample = df.gather(list(range(0, 10_000, 100)))
    direct = score(
        sample, fk.Judge(PRICED, api_key=API_KEY), tmp_path / "d", version="v1", details=True
    )
    mine = batched.gather(list(range(0, 10_000, 100)))
    cols = [
        f"retrieval_relevance_{c}" for c in ("score", "label", "explanation", "passed", "error")
    ]
    assert mine.select(cols).equals(direct.select(cols))
    ratio = mine["retrieval_relevance_cost_usd"] / direct["retrieval_relevance_cost_usd"]
    assert ratio.min() == pytest.approx(0.5) and ratio.max() == pytest.approx(0.5)


def test_rerun_after_kill_9_resumes_the_same_batch(sim: JudgeSimulator, tmp_path: Path) -> None:
    sim.configure(batch_seconds=600.0)  # still in progress when the first run dies
    cache = tmp_path / "cache"
    child = textwrap.dedent(
        f"""
        import polars as pl, framekit as fk
        from framekit.evaluators import RetrievalRelevance
        from tests.helpers import retrieval_frame, MAPPING
        judge = fk.Judge({PRICED!r}, api_base={sim.api_base!r}, api_key="sk-x", batch=True,
                         batch_poll=0.05)
        fk.evaluate_dataframe(retrieval_frame(500), [RetrievalRelevance()], MAPPING,
                              judge=judge, cache={str(cache)!r}, progress=False)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen([sys.executable, "-c", child], env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while sim.stats()["batch"]["retrieves"] < 2:  # created and being polled
            assert proc.poll() is None, "the first run ended before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert sim.stats()["batch"]["batches_created"] == 1
    manifests = [json.loads(p.read_text()) for p in (cache / "batches").glob("*.json")]
    assert [m["state"] for m in manifests] == ["submitted"]

    sim.configure(batch_seconds=0.1)  # the provider finishes meanwhile
    out = score(retrieval_frame(500), batch_judge(sim, api_key="sk-x"), cache)
    stats = sim.stats()
    assert stats["batch"]["batches_created"] == 1  # resumed, not paid again
    assert stats["chat"] == 0
    assert out["retrieval_relevance_score"].null_count() == 0


@pytest.mark.parametrize(
    ("followup", "model"), [("batch", PRICED), ("direct", PRICED), ("batch", CLAUDE)]
)
def test_failed_and_expired_lines_are_retried_and_scored(
    sim: JudgeSimulator, tmp_path: Path, followup: str, model: str
) -> None:
    sim.configure(batch_failed_rate=0.03, batch_expired_rate=0.01, seed=7)
    judge = batch_judge(sim, model, batch_followup=followup)
    out = score(retrieval_frame(2_000), judge, tmp_path)
    stats = sim.stats()
    first_round = stats["batch"]["lines_failed"] + stats["batch"]["lines_expired"]
    assert stats["batch"]["lines_failed"] >= 30 and stats["batch"]["lines_expired"] >= 8
    assert out["retrieval_relevance_score"].null_count() == 0
    assert out["retrieval_relevance_error"].null_count() == 2_000
    if followup == "direct":
        assert stats["batch"]["batches_created"] == 1
        assert stats["chat"] == first_round  # exactly the failed lines, sent directly
    else:
        assert stats["batch"]["batches_created"] >= 2
        assert stats["chat"] == 0


def test_unreadable_answers_are_re_asked_then_recorded_as_one_line_errors(
    sim: JudgeSimulator, tmp_path: Path
) -> None:
    df = retrieval_frame(40).with_columns(
        pl.when(pl.col("row_id") < 10)
        .then(pl.col("question") + " @sim(label=maybe)")
        .otherwise(pl.col("question"))
        .alias("question")
    )
    out = score(df, batch_judge(sim), tmp_path)
    errors = out["retrieval_relevance_error"]
    assert errors[:10].null_count() == 0 and errors[10:].null_count() == 30
    assert all("'maybe'" in e and "after 2 re-asks" in e and "\n" not in e for e in errors[:10])
    assert out["retrieval_relevance_score"][10:].null_count() == 0
    # The first batch, then two re-ask rounds for the ten unreadable rows only.
    assert sim.stats()["batch"]["batches_created"] == 3
    assert sim.stats()["batch"]["lines"] == 40 + 10 + 10


@pytest.mark.parametrize("model", [PRICED, CLAUDE])
def test_a_batch_rejected_as_a_whole_is_one_run_error_naming_the_reason(
    sim: JudgeSimulator, tmp_path: Path, model: str
) -> None:
    sim.configure(batch_validation_error="model 'nope' does not support batches")
    with pytest.raises(JudgeError, match="does not support batches"):
        score(retrieval_frame(20), batch_judge(sim, model), tmp_path)
    assert sim.stats()["chat"] == 0
    assert not list((tmp_path / "batches").glob("*.jsonl"))  # no batch file left behind


def test_wait_false_returns_the_batch_id_and_the_same_call_collects(
    sim: JudgeSimulator, tmp_path: Path
) -> None:
    sim.configure(batch_seconds=0.5)
    df = retrieval_frame(100)
    with pytest.raises(BatchPending) as pending:
        score(df, batch_judge(sim, wait=False), tmp_path)
    assert len(pending.value.batch_ids) == 1
    assert pending.value.batch_ids[0] in str(pending.value)
    time.sleep(0.6)
    out = score(df, batch_judge(sim, wait=False), tmp_path)
    assert out["retrieval_relevance_score"].null_count() == 0
    assert sim.stats()["batch"]["batches_created"] == 1


def test_anthropic_message_batches_give_the_same_scores(
    sim: JudgeSimulator, tmp_path: Path
) -> None:
    df = retrieval_frame(300)
    claude = score(df, batch_judge(sim, CLAUDE), tmp_path / "a")
    openai = score(df, batch_judge(sim), tmp_path / "o")
    assert claude["retrieval_relevance_score"].null_count() == 0
    assert claude["retrieval_relevance_label"].equals(openai["retrieval_relevance_label"])
    assert sim.stats()["batch"]["files_uploaded"] == 1  # Anthropic takes requests inline
    assert sim.stats()["batch"]["batches_created"] == 2


def test_requests_are_split_under_the_provider_limit(
    sim: JudgeSimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(OpenAIBatchClient, "max_requests", 400)
    out = score(retrieval_frame(1_000, distinct=900), batch_judge(sim), tmp_path)
    assert sim.stats()["batch"]["batches_created"] == 3  # 900 distinct: 400 + 400 + 100
    assert sim.stats()["batch"]["lines"] == 900
    assert out["retrieval_relevance_score"].null_count() == 0


def test_a_second_run_is_served_from_the_cache(sim: JudgeSimulator, tmp_path: Path) -> None:
    df = retrieval_frame(200)
    first = score(df, batch_judge(sim), tmp_path)
    second = score(df, batch_judge(sim), tmp_path)
    assert first.equals(second)
    assert sim.stats()["batch"]["batches_created"] == 1
    assert not list((tmp_path / "batches").glob("*.jsonl"))  # spools removed once collected


def test_the_api_key_never_reaches_a_manifest_or_spool(sim: JudgeSimulator, tmp_path: Path) -> None:
    sim.configure(batch_seconds=0.3)
    with pytest.raises(BatchPending):
        score(retrieval_frame(50), batch_judge(sim, wait=False), tmp_path)
    files = list((tmp_path / "batches").iterdir())
    assert files and not any(API_KEY in p.read_text() for p in files)


def test_dry_run_prices_batch_requests_at_half(tmp_path: Path) -> None:
    from framekit.engine.dryrun import plan_requests

    df = retrieval_frame(100)
    direct = plan_requests(
        [df], [RetrievalRelevance()], MAPPING, judge=fk.Judge(PRICED), cache=False
    )
    batch = plan_requests(
        [df], [RetrievalRelevance()], MAPPING, judge=fk.Judge(PRICED, batch=True), cache=False
    )
    assert batch.cost_usd == pytest.approx(direct.cost_usd * 0.5)
    assert "batch API's 50 % price" in batch.describe()


def test_cli_lists_and_cancels_batches(
    sim: JudgeSimulator, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from framekit.cli import main

    sim.configure(batch_seconds=600.0)
    with pytest.raises(BatchPending) as pending:
        score(retrieval_frame(30), batch_judge(sim, wait=False), tmp_path)
    batch_id = pending.value.batch_ids[0]
    where = ["--cache", str(tmp_path), "--api-base", sim.api_base]
    retrieves = sim.stats()["batch"]["retrieves"]
    assert main(["batches", *where]) == 0
    listing = capsys.readouterr().out
    assert batch_id in listing and ("in_progress" in listing or "validating" in listing)
    assert sim.stats()["batch"]["retrieves"] == retrieves + 1  # refreshed from the provider
    assert main(["batches", "cancel", batch_id, *where]) == 0
    assert sim.stats()["batch"]["batches_cancelled"] == 1
    # The cancelled batch's rows end with a one-line error, not silently empty.
    out = score(retrieval_frame(30), batch_judge(sim), tmp_path)
    assert out["retrieval_relevance_error"].null_count() == 0
    assert out["retrieval_relevance_error"][0] == "batch cancelled before this request ran"


def test_parquet_in_parquet_out_submits_each_slice_once(
    sim: JudgeSimulator, tmp_path: Path
) -> None:
    source = tmp_path / "runs.parquet"
    retrieval_frame(600).write_parquet(source, row_group_size=200)
    run = fk.evaluate_parquet(
        source,
        tmp_path / "scored.parquet",
        [RetrievalRelevance()],
        MAPPING,
        judge=batch_judge(sim),
        cache=tmp_path / "cache",
        progress=False,
        slice_rows=200,
    )
    scored = pl.read_parquet(tmp_path / "scored.parquet")
    assert scored.height == 600 and scored["retrieval_relevance_score"].null_count() == 0
    assert run.failed_rows == 0
    # Submitted slice by slice up front, then collected: one batch per slice, never two.
    assert sim.stats()["batch"]["batches_created"] == 3
    assert sim.stats()["batch"]["lines"] == 600
    assert sim.stats()["chat"] == 0


def test_parquet_batch_mode_submits_every_slice_before_waiting_for_one(
    sim: JudgeSimulator, tmp_path: Path
) -> None:
    from framekit.engine.batch_manifest import ManifestStore

    sim.configure(batch_seconds=600.0)  # no batch finishes while the run waits
    source = tmp_path / "runs.parquet"
    retrieval_frame(600).write_parquet(source, row_group_size=200)
    wait_s = 3.0
    judge = batch_judge(sim, batch_timeout=wait_s / 3600)  # waits, then detaches
    with pytest.raises(BatchPending):
        fk.evaluate_parquet(source, tmp_path / "scored.parquet", [RetrievalRelevance()],
                            MAPPING, judge=judge, cache=tmp_path / "cache", progress=False,
                            slice_rows=200)  # fmt: skip
    manifests = list(ManifestStore(tmp_path / "cache" / "batches").all())
    assert sim.stats()["batch"]["batches_created"] == len(manifests) == 3
    # Every slice's batch was created before the run's first wait ended: waiting for one
    # slice after another would have spread their creation over two waits or more.
    created = [m.created for m in manifests]
    assert max(created) - min(created) < wait_s
    assert judge.batching.wait  # the caller's judge is unchanged


def test_ctrl_c_detaches_without_cancelling_and_the_rerun_collects(
    sim: JudgeSimulator, tmp_path: Path
) -> None:
    sim.configure(batch_seconds=600.0)
    cache = tmp_path / "cache"
    child = textwrap.dedent(
        f"""
        import framekit as fk
        from framekit.evaluators import RetrievalRelevance
        from tests.helpers import retrieval_frame, MAPPING
        judge = fk.Judge({PRICED!r}, api_base={sim.api_base!r}, api_key="sk-x", batch=True,
                         batch_poll=0.05)
        fk.evaluate_dataframe(retrieval_frame(100), [RetrievalRelevance()], MAPPING,
                              judge=judge, cache={str(cache)!r})
        """
    )
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen(
        [sys.executable, "-c", child], env=env, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 120
    while sim.stats()["batch"]["retrieves"] < 2:
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "detached from batch(es) batch_sim" in err and "not cancelled" in err
    assert sim.stats()["batch"]["batches_cancelled"] == 0

    sim.configure(batch_seconds=0.1)
    out = score(retrieval_frame(100), batch_judge(sim, api_key="sk-x"), cache)
    assert out["retrieval_relevance_score"].null_count() == 0
    assert sim.stats()["batch"]["batches_created"] == 1


def test_a_batch_created_but_not_yet_recorded_is_found_not_paid_again(
    sim: JudgeSimulator, tmp_path: Path
) -> None:
    # A kill between "create batch" and "record its id" leaves the manifest at uploading.
    sim.configure(batch_seconds=0.3)
    with pytest.raises(BatchPending):
        score(retrieval_frame(60), batch_judge(sim, wait=False), tmp_path)
    (path,) = (tmp_path / "batches").glob("*.json")
    manifest = json.loads(path.read_text())
    path.write_text(json.dumps({**manifest, "state": "uploading", "batch_id": None}))
    out = score(retrieval_frame(60), batch_judge(sim), tmp_path)
    assert out["retrieval_relevance_score"].null_count() == 0
    assert sim.stats()["batch"]["batches_created"] == 1
    assert sim.stats()["batch"]["files_uploaded"] == 1


def test_command_line_batch_run_and_its_dry_run(
    sim: JudgeSimulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from framekit.cli import main

    monkeypatch.setenv("FRAMEKIT_API_KEY", API_KEY)
    source = tmp_path / "runs.parquet"
    retrieval_frame(80).write_parquet(source)
    args = [
        "evaluate", str(source), "-e", "retrieval_relevance", "--map", "input=question",
        "--map", "context=docs", "--judge", PRICED, "--api-base", sim.api_base, "--batch",
        "--cache", str(tmp_path / "cache"), "-q",
    ]  # fmt: skip
    assert main([*args, "--dry-run"]) == 0
    # A custom api_base has no list price, in batch mode as on the direct path.
    assert (
        f"estimated cost: {UNKNOWN_COST}; 80 requests through the batch API"
        in capsys.readouterr().out
    )
    sim.configure(batch_seconds=0.5)
    assert main([*args, "-o", str(tmp_path / "scored.parquet"), "--no-wait"]) == 75
    assert "batch_sim" in capsys.readouterr().err
    assert not (tmp_path / "scored.parquet").exists()  # nothing half-written
    assert main([*args, "-o", str(tmp_path / "scored.parquet")]) == 0
    assert "80 answered by batch API at 50 % price" in capsys.readouterr().err
    scored = pl.read_parquet(tmp_path / "scored.parquet")
    assert scored["retrieval_relevance_score"].null_count() == 0
    assert sim.stats()["chat"] == 0 and sim.stats()["batch"]["batches_created"] == 1


def test_an_endpoint_rejecting_json_schema_gets_tool_calls_in_a_follow_up_batch(
    sim: JudgeSimulator, tmp_path: Path
) -> None:
    sim.configure(reject_response_format=True)
    judge = batch_judge(sim)
    out = score(retrieval_frame(200), judge, tmp_path)
    assert out["retrieval_relevance_score"].null_count() == 0
    assert sim.stats()["batch"]["batches_created"] == 2
    assert sim.stats()["batch"]["lines_failed"] == 200


def test_a_missing_key_for_the_provider_endpoint_stops_before_any_batch_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("FRAMEKIT_API_KEY", "OPENAI_API_KEY", "FRAMEKIT_API_BASE", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    judge = fk.Judge(PRICED, batch=True)  # OpenAI's own endpoint: never reached here
    with pytest.raises(fk.JudgeConfigurationError, match="no API key"):
        score(retrieval_frame(20), judge, tmp_path)
    # Nothing written for upload, no manifest left behind.
    assert not list(tmp_path.rglob("*.jsonl")) and not list(tmp_path.rglob("batches/*.json"))


def test_a_gateway_quoting_the_key_back_never_shows_it_in_the_error(
    sim: JudgeSimulator, tmp_path: Path
) -> None:
    secret = "sk-batch-secret-0123456789abcdef"
    sim.configure(echo_headers="error")  # every batch call: a 400 quoting its headers
    with pytest.raises(JudgeError) as info:
        score(retrieval_frame(20), batch_judge(sim, api_key=secret), tmp_path)
    message = str(info.value)
    assert "you sent POST" in message  # the gateway's quote did reach the error...
    assert secret not in message and secret[:16] not in message  # ...without the key
    assert sim.stats()["batch"]["batches_created"] == 0


@pytest.mark.parametrize("model", [PRICED, CLAUDE])
def test_a_rejected_key_at_the_batch_api_stops_the_run_as_an_authentication_error(
    sim: JudgeSimulator, tmp_path: Path, model: str
) -> None:
    # The batch clients raise only classified faults; a 401 means what it means on a chat
    # call: every other call would fail alike, so the run stops with one error.
    sim.configure(require_api_key="sk-the-right-one")
    with pytest.raises(fk.JudgeAuthenticationError, match="rejected the credentials"):
        score(retrieval_frame(20), batch_judge(sim, model, api_key="sk-a-wrong-one"), tmp_path)
    assert sim.stats()["batch"]["batches_created"] == 0 and sim.stats()["chat"] == 0
