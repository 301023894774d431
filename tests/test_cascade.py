"""Cascades: every row to the cheap judge, only its unsure rows to the strong one.

The judges are the simulator's noisy judges (``weak`` right ~75 % of the time, ``strong``
~95 %, both reporting calibrated probabilities through their logprobs), reached through
the real client paths. Requests are counted at the simulator, per model.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import framekit as fk
from framekit.engine.dryrun import plan_requests
from framekit.evaluators import RetrievalRelevance
from framekit.testing import JudgeSimulator, NoisyJudge, SimulatorConfig
from tests import helpers
from tests.helpers import API_KEY, MAPPING, batch_judge

ROOT = Path(__file__).resolve().parents[1]
NAME = "retrieval_relevance"
LABELS = ("relevant", "irrelevant")
NOISY = {"weak": NoisyJudge(0.75, seed=1), "strong": NoisyJudge(0.95, seed=2)}


@pytest.fixture
def sim():
    with JudgeSimulator(SimulatorConfig(noisy_judges=NOISY, batch_seconds=0.05)) as s:
        yield s


def truth_frame(n: int, distinct: int | None = None, seed: int = 0, tag: str = "q") -> pl.DataFrame:
    """``n`` rows whose true label rides in a ``@sim(truth=...)`` marker; ``distinct`` of
    them differ (the rest repeat them)."""
    distinct = distinct or n
    truth = [LABELS[i] for i in np.random.default_rng(seed).integers(0, 2, distinct)]
    return pl.DataFrame(
        {
            "row_id": list(range(n)),
            "question": [
                f"What is {tag} {i % distinct}? @sim(truth={truth[i % distinct]})" for i in range(n)
            ],
            "docs": [[f"{tag} {i % distinct} is a thing."] for i in range(n)],
            "truth": [truth[i % distinct] for i in range(n)],
        }
    )


def model_judge(sim: JudgeSimulator, model: str, **options: object) -> fk.Judge:
    options.setdefault("api_key", API_KEY)
    options.setdefault("transport", helpers.TRANSPORT)
    return fk.Judge(f"openai/{model}", api_base=sim.api_base, **options)  # type: ignore[arg-type]


def score(df: pl.DataFrame, judge: object, cache: object, **kw: object) -> pl.DataFrame:
    out = fk.evaluate_dataframe(
        df, [RetrievalRelevance()], MAPPING, judge=judge, cache=cache, progress=False, **kw
    )  # type: ignore[arg-type]
    assert isinstance(out, pl.DataFrame)
    return out


# -- the type ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("judges", "below", "message"),
    [
        (["local"], [], "at least two judges"),
        ("local", [0.5], "a list of judges"),
        (["local", "openai/gpt-4o-mini"], [], "one threshold per judge but the last: 1 for 2"),
        (["local", "openai/gpt-4o-mini"], [0.5, 0.6], "1 for 2 judges, got 2"),
        (["local", "openai/gpt-4o-mini"], [1.5], "escalate_below[0] must be a confidence"),
        (["local", "openai/gpt-4o-mini"], [-0.1], "escalate_below[0] must be a confidence"),
        (["local", "openai/gpt-4o-mini"], [True], "escalate_below[0] must be a confidence"),
        (["local", "openai/gpt-4o-mini"], ["0.5"], "escalate_below[0] must be a confidence"),
        (["local", 3], [0.5], "Cascade judge 2 must be a model string"),
        (["local", ""], [0.5], "Cascade judge 2 must be a model string"),
    ],
)
def test_a_cascade_refuses_what_cannot_route(judges, below, message):
    with pytest.raises(fk.InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        fk.Cascade(judges, escalate_below=below)


def test_a_cascade_takes_judges_or_model_strings_and_is_a_judge_everywhere():
    inner = fk.Cascade(["local", "openai/gpt-4o-mini"], escalate_below=[0.8])
    with pytest.raises(fk.InputError, match="itself a cascade"):
        fk.Cascade([inner, "openai/gpt-4o"], escalate_below=[0.5])
    with pytest.raises(fk.JudgeConfigurationError):
        fk.Cascade(["local", "gpt4o"], escalate_below=[0.5])  # not a litellm model string
    assert isinstance(inner.judges[0], fk.LocalJudge) and isinstance(inner.judges[1], fk.Judge)
    assert fk.Cascade(["local", "openai/x"], escalate_below=[math.inf]).escalate_below == (
        math.inf,
    )
    assert RetrievalRelevance(judge=inner).judge is inner  # per evaluator, as judge= takes it
    assert repr(inner).startswith("Cascade([LocalJudge(), Judge('openai/gpt-4o-mini'")


# -- routing, over each transport ------------------------------------------------------


def test_only_unsure_rows_reach_the_strong_judge_and_a_second_run_is_cached(
    transport, sim, tmp_path
):
    df = truth_frame(240, distinct=200)
    cascade = fk.Cascade([model_judge(sim, "weak"), model_judge(sim, "strong")], [0.8])
    out = score(df, cascade, tmp_path, details=True)

    by_model = sim.stats()["by_model"]
    decided_by = out[f"{NAME}_judge"]
    assert by_model["weak"] == 200  # every distinct row once: dedup inside the stage
    strong_rows = out.filter(decided_by == "openai/strong")
    assert by_model["strong"] == strong_rows["question"].n_unique()
    # Measured: 118 of 200 distinct rows (0.59 per row: the weak judge's confidence is
    # uniform on [0.5, 1), and 0.8 is its 60th percentile).
    assert 0.4 * 200 < by_model["strong"] < 0.75 * 200
    assert set(decided_by.unique()) == {"openai/weak", "openai/strong"}
    weak_rows = out.filter(decided_by == "openai/weak")
    assert weak_rows[f"{NAME}_confidence"].min() >= 0.8  # trusted only when sure
    assert out[f"{NAME}_error"].null_count() == out.height
    # An escalated row paid at both stages; its latency adds both waits.
    assert (strong_rows[f"{NAME}_tokens"] > weak_rows[f"{NAME}_tokens"].max() * 1.5).all()

    stats = fk.last_run()
    assert stats is not None and stats.requests_sent == by_model["weak"] + by_model["strong"]
    first, second = stats.stages
    assert (first["judge"], first["rows"], first["requests"]) == ("openai/weak", 240, 200)
    assert first["rows_decided"] == weak_rows.height
    assert second["rows"] == second["rows_decided"] == strong_rows.height
    assert "framekit: cascade retrieval_relevance: openai/weak decided" in stats.summary()
    assert stats.provenance is not None and stats.provenance["cascade"] == stats.stages
    assert stats.provenance["judges"][0]["kind"] == "cascade"

    again = score(df, cascade, tmp_path, details=True)
    assert sim.stats()["by_model"] == by_model  # nothing sent: both stages from the cache
    assert again[f"{NAME}_cached"].all()
    assert again.drop(pl.selectors.ends_with("_latency_s", "_cached")).equals(
        out.drop(pl.selectors.ends_with("_latency_s", "_cached"))
    )


def test_the_cascade_is_more_right_than_its_weak_judge(sim, tmp_path):
    df = truth_frame(300, seed=3)
    weak = score(df, model_judge(sim, "weak"), tmp_path)
    cascade = fk.Cascade([model_judge(sim, "weak"), model_judge(sim, "strong")], [0.9])
    both = score(df, cascade, tmp_path)

    def right(out: pl.DataFrame) -> float:
        return float((out[f"{NAME}_label"] == out["truth"]).mean())  # type: ignore[arg-type]

    # Measured: weak alone 0.66, the cascade 0.937, strong requests 0.79 per row.
    assert right(weak) < 0.8 < right(both)


def test_a_verdict_without_confidence_goes_on(sim, tmp_path):
    # A threshold of inf trusts no confidence: every row goes to the last judge, as a row
    # whose first judge gives no confidence (or fails) would.
    df = truth_frame(20)
    cascade = fk.Cascade([model_judge(sim, "weak"), model_judge(sim, "strong")], [math.inf])
    out = score(df, cascade, tmp_path, details=True)
    assert sim.stats()["by_model"] == {"weak": 20, "strong": 20}
    assert out[f"{NAME}_judge"].to_list() == ["openai/strong"] * 20


def test_two_stages_of_one_model_are_told_apart_in_the_judge_column(sim, tmp_path):
    # The same model asked again (here at another temperature, as with more samples):
    # each row's _judge and each stage of the run record say which stage decided.
    df = truth_frame(60)
    again = model_judge(sim, "weak", temperature=0.7)
    cascade = fk.Cascade([model_judge(sim, "weak"), again], [0.8])
    out = score(df, cascade, tmp_path, details=True)
    decided_by = out[f"{NAME}_judge"]
    assert set(decided_by.unique()) == {"openai/weak (stage 1)", "openai/weak (stage 2)"}
    assert out.filter(decided_by == "openai/weak (stage 1)")[f"{NAME}_confidence"].min() >= 0.8
    escalated = int((decided_by == "openai/weak (stage 2)").sum())
    assert sim.stats()["by_model"] == {"weak": 60 + escalated}  # a stage 2 call per escalated row
    stats = fk.last_run()
    assert stats is not None
    assert [s["judge"] for s in stats.stages] == ["openai/weak (stage 1)", "openai/weak (stage 2)"]
    assert stats.stages[1]["rows_decided"] == escalated


def test_one_record_scored_through_a_cascade(sim, tmp_path):
    cascade = fk.Cascade([model_judge(sim, "weak"), model_judge(sim, "strong")], [math.inf])
    got = RetrievalRelevance(judge=cascade).score(
        input="What is q 1? @sim(truth=relevant)", context=["q 1 is a thing."], cache=tmp_path
    )
    assert got.metadata["judge"] == "openai/strong" and got.error is None


# -- batch mode ------------------------------------------------------------------------


def test_each_stage_of_a_batch_cascade_is_one_batch_of_its_rows(sim, tmp_path):
    df = truth_frame(120)
    cascade = fk.Cascade(
        [batch_judge(sim, "openai/weak"), batch_judge(sim, "openai/strong")], [0.8]
    )
    out = score(df, cascade, tmp_path, details=True)
    stats, by_model = fk.last_run(), sim.stats()["by_model"]
    assert stats is not None
    assert sim.stats()["batch"]["batches_created"] == 2  # one batch per stage
    assert stats.requests_sent == 0 or stats.batch_requests == by_model["weak"] + by_model["strong"]
    assert by_model["weak"] == 120
    strong_rows = int((out[f"{NAME}_judge"] == "openai/strong").sum())
    assert by_model["strong"] == strong_rows < 0.75 * 120
    assert out[f"{NAME}_error"].null_count() == out.height


def test_without_waiting_each_call_moves_a_batch_cascade_one_stage_on(tmp_path):
    # A batch here takes a second, far longer than submitting one takes even on a busy
    # machine (with the module's 0.05 s, a run under load found its new batch done
    # before it returned, and so raised nothing), and the test waits past it.
    with JudgeSimulator(SimulatorConfig(noisy_judges=NOISY, batch_seconds=1.0)) as sim:
        _moves_one_stage_per_call(sim, tmp_path)


def _moves_one_stage_per_call(sim: JudgeSimulator, tmp_path) -> None:
    df = truth_frame(40)
    stages = [batch_judge(sim, f"openai/{m}", wait=False) for m in ("weak", "strong")]
    cascade = fk.Cascade(stages, [0.8])
    for submitted in (1, 2):  # stage 1 submitted; then collected, and stage 2 submitted
        with pytest.raises(fk.BatchPending):
            score(df, cascade, tmp_path)
        assert sim.stats()["batch"]["batches_created"] == submitted
        time.sleep(1.2)
    out = score(df, cascade, tmp_path, details=True)
    assert sim.stats()["batch"]["batches_created"] == 2
    by_model = sim.stats()["by_model"]
    assert by_model["weak"] == 40
    assert by_model["strong"] == int((out[f"{NAME}_judge"] == "openai/strong").sum()) > 0


# -- calibration -----------------------------------------------------------------------


def test_calibrate_cascade_chooses_thresholds_that_hold_on_fresh_rows(sim, tmp_path):
    cascade = fk.Cascade([model_judge(sim, "weak"), model_judge(sim, "strong")], [0.0])
    labelled = truth_frame(400, seed=11, tag="cal")
    found = fk.calibrate_cascade(
        labelled, cascade, RetrievalRelevance(), MAPPING, reference="truth", cache=tmp_path
    )
    assert found.reachable and found.cascade is not None, found
    t = found.calibration.escalate_below
    assert t is not None and found.cascade.escalate_below == t
    assert found.stages.columns == [
        "stage1_label",
        "stage1_confidence",
        "stage2_label",
        "stage2_confidence",
        "reference",
    ]
    share = found.cascade.expected_share
    assert share is not None and share[0] == 1.0 and 0.0 < share[1] < 1.0

    sim.reset()
    fresh = truth_frame(400, seed=12, tag="fresh")
    out = score(fresh, found.cascade, tmp_path)
    agreement = float((out[f"{NAME}_label"] == out["truth"]).mean())  # type: ignore[arg-type]
    assert agreement >= 0.9 - 0.03  # one sample of 400 rows: sampling noise allowed
    assert sim.stats()["by_model"]["strong"] < 0.9 * 400


def test_an_overconfident_strong_judge_cannot_reach_the_target(tmp_path):
    # Both judges claim ~0.95 whatever they say; the last is right only 85 % of the time.
    overconfident = {
        "weak": NoisyJudge(0.75, calibrated=False, seed=1),
        "strong": NoisyJudge(0.85, calibrated=False, seed=2),
    }
    with JudgeSimulator(SimulatorConfig(noisy_judges=overconfident)) as sim:
        cascade = fk.Cascade([model_judge(sim, "weak"), model_judge(sim, "strong")], [0.5])
        found = fk.calibrate_cascade(
            truth_frame(300, seed=5), cascade, RetrievalRelevance(), MAPPING,
            reference="truth", cache=tmp_path,
        )  # fmt: skip
    assert not found.reachable and found.cascade is None
    assert "not reachable" in found.calibration.reason


# -- the dry run -----------------------------------------------------------------------


def test_the_dry_run_counts_every_stage_or_the_calibrated_share(sim):
    df = truth_frame(100)
    stages = [model_judge(sim, "weak"), model_judge(sim, "strong")]
    upper = plan_requests([df], [RetrievalRelevance()], MAPPING, judge=fk.Cascade(stages, [0.8]))
    assert upper.requests == 200 and upper.cascades == {NAME: None}
    assert "up to every row at every stage" in upper.describe()
    calibrated = fk.Cascade(stages, [0.8], expected_share=[1.0, 0.35])
    expected = plan_requests([df], [RetrievalRelevance()], MAPPING, judge=calibrated)
    assert expected.requests == 135
    assert "expected share of rows reaching each stage 100%, 35%" in expected.describe()
    assert sim.stats()["by_model"] == {}  # nothing sent


# -- the command line ------------------------------------------------------------------


def _framekit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_OFFLINE_MODE": "true"}
    env.pop("FRAMEKIT_JUDGE", None)
    env["FRAMEKIT_API_KEY"] = API_KEY
    return subprocess.run(
        [sys.executable, "-m", "framekit.cli", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_the_command_line_scores_through_a_cascade(sim, tmp_path):
    truth_frame(60).write_parquet(tmp_path / "in.parquet")
    base = ["evaluate", "in.parquet", "-o", "out.parquet", *helpers.RETRIEVAL_CLI_ARGS]
    flags = ["--cascade", "openai/weak,openai/strong", "--api-base", sim.api_base, "--details"]
    done = _framekit(*base, *flags, "--escalate-below", "0.8", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = pl.read_parquet(tmp_path / "out.parquet")
    assert set(out[f"{NAME}_judge"].unique()) == {"openai/weak", "openai/strong"}
    assert "cascade retrieval_relevance: openai/weak decided" in done.stderr
    assert sim.stats()["by_model"]["strong"] < 60

    for extra, message in [
        ([], "--cascade needs --escalate-below"),
        (["--escalate-below", "0.8,0.9"], "1 for 2 judges, got 2"),
        (["--escalate-below", "high"], "comma-separated numbers"),
        (["--escalate-below", "0.8", "--judge", "openai/x"], "--judge or --cascade"),
    ]:
        failed = _framekit(
            *base,
            *flags,
            *extra,
            cwd=tmp_path,
        )
        assert failed.returncode == 2 and message in failed.stderr, failed.stderr
    lonely = _framekit(*base, "--escalate-below", "0.8", cwd=tmp_path)
    assert lonely.returncode == 2 and "goes with --cascade" in lonely.stderr


# -- secrets ---------------------------------------------------------------------------


def test_a_key_scan_over_a_cascade_run_finds_nothing(sim, tmp_path, capfd):
    df = truth_frame(50)
    cascade = fk.Cascade([model_judge(sim, "weak"), model_judge(sim, "strong")], [0.8])
    source = tmp_path / "in.parquet"
    df.write_parquet(source)
    run = fk.evaluate_parquet(
        source, tmp_path / "out.parquet", [RetrievalRelevance()], MAPPING,
        judge=cascade, cache=tmp_path / "cache", details=True, progress=True,
    )  # fmt: skip
    found = fk.calibrate_cascade(
        df, cascade, RetrievalRelevance(), MAPPING, reference="truth", cache=tmp_path / "cache"
    )
    assert sim.stats()["by_model"]["strong"] > 0, "a run that reached both stages"
    captured = capfd.readouterr()
    texts = [
        repr(cascade), str(cascade.cache_identity()), repr(found), str(found.stages.to_dicts()),
        repr(run), run.summary(), str(run.stats.provenance), captured.out, captured.err,
        str(plan_requests([df], [RetrievalRelevance()], MAPPING, judge=cascade).describe()),
    ]  # fmt: skip
    helpers.assert_no_key(texts, tmp_path)
