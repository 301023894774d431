"""fk.calibrate picks the threshold the table supports; fk.gate and `framekit gate`."""

from __future__ import annotations

import subprocess
import sys

import polars as pl
import pytest

import framekit as fk
from framekit.evaluators import RetrievalRelevance


def labelled() -> pl.DataFrame:
    # Scores and people's verdicts: at t = 0.5, tp 3 fp 1 fn 1; at t = 0.6, tp 3 fp 0 fn 1.
    return pl.DataFrame(
        {
            "human": [False, False, False, True, True, True, True, False],
            "rel_score": [0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.9, 0.5],
            "rel_error": [None] * 8,
        },
        schema_overrides={"rel_error": pl.String},
    )


def test_calibrate_for_f1_picks_the_best_row_of_its_table():
    cal = fk.calibrate(labelled(), human="human", evaluator="rel")
    # t = 0.4 passes 0.4, 0.5, 0.6, 0.7, 0.9: tp 4 fp 1 fn 0 -> f1 8/9, the maximum.
    assert cal.threshold == 0.4
    assert cal.f1 == pytest.approx(8 / 9)
    assert cal.table["f1"].max() == pytest.approx(cal.f1)
    assert cal.table.height == 8 and cal.n == 8 and cal.positives == 4


def test_calibrate_for_precision_gives_the_most_recall_at_that_precision():
    cal = fk.calibrate(labelled(), human="human", evaluator="rel", target=("precision", 1.0))
    assert cal.threshold == 0.6 and cal.precision == 1.0 and cal.recall == pytest.approx(0.75)


def test_an_evaluator_accepts_the_calibrated_threshold():
    cal = fk.calibrate(labelled(), human="human", evaluator="rel", target=("recall", 1.0))
    assert RetrievalRelevance(threshold=cal.threshold).threshold == cal.threshold == 0.4
    assert "threshold 0.4" in repr(cal)


def test_calibrate_refuses_an_unreachable_target_and_one_class():
    with pytest.raises(fk.InputError, match="no threshold reaches precision"):
        fk.calibrate(
            labelled().with_columns(human=pl.Series([False, True] * 4)),
            "human",
            "rel",
            target=("precision", 1.0),
        )
    with pytest.raises(fk.InputError, match="one class only"):
        fk.calibrate(labelled().with_columns(human=pl.lit(True)), "human", "rel")


def test_calibrate_reads_human_labels_through_the_rubric():
    df = labelled().with_columns(
        human=pl.when(pl.col("human")).then(pl.lit("relevant")).otherwise(pl.lit("irrelevant"))
    )
    cal = fk.calibrate(df, "human", "rel", rubric=RetrievalRelevance())
    assert cal.threshold == 0.4


def scored(pass_share: float, n: int = 10, failed: int = 0) -> pl.DataFrame:
    passed = [i < pass_share * n for i in range(n)]
    return pl.DataFrame(
        {
            "response_relevance_score": [
                None if i < failed else (1.0 if p else 0.25) for i, p in enumerate(passed)
            ],
            "response_relevance_passed": [None if i < failed else p for i, p in enumerate(passed)],
            "response_relevance_error": ["timeout" if i < failed else None for i in range(n)],
        }
    )


def test_gate_counts_failed_rows_against_the_pass_rate():
    result = fk.gate(scored(0.9, failed=2), min_pass_rate={"response_relevance": 0.8})
    # 9 of 10 would pass, but 2 rows failed: 7/10.
    assert not result
    assert result.table.row(0, named=True)["actual"] == pytest.approx(0.7)
    assert "response_relevance: pass_rate 0.700 < required 0.8" in result.describe()


def test_gate_passes_when_every_bar_is_met():
    result = fk.gate(
        scored(0.9), min_pass_rate={"response_relevance": 0.9}, min_mean={"response_relevance": 0.9}
    )
    assert result and result.failures.height == 0


def test_gate_refuses_unknown_evaluators_and_missing_bars():
    with pytest.raises(fk.InputError, match=r"no results for evaluator\(s\) \['coherence'\]"):
        fk.gate(scored(1.0), min_mean={"coherence": 0.5})
    with pytest.raises(fk.InputError, match="at least one bar"):
        fk.gate(scored(1.0))


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from framekit.cli import main; sys.exit(main())",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_framekit_gate_exit_codes(tmp_path):
    path = tmp_path / "scored.parquet"
    scored(0.8).write_parquet(path)
    above = run_cli("gate", str(path), "--min-pass-rate", "response_relevance=0.8")
    assert above.returncode == 0, above.stderr
    assert "gate passed" in above.stdout

    below = run_cli(
        "gate",
        str(path),
        "--min-pass-rate",
        "response_relevance=0.9",
        "--min-mean",
        "response_relevance=0.5",
    )
    assert below.returncode == 1
    # The table of checks names what failed: the pass rate, not the mean (0.85 >= 0.5).
    assert "response_relevance: pass_rate 0.800 < required 0.9" in below.stdout
    assert "mean 0.850" not in below.stdout.split("gate failed:")[1]

    for bad in (
        ["gate", str(path), "--min-pass-rate", "response_relevance"],  # no value
        ["gate", str(path), "--min-mean", "coherence=0.5"],  # unknown evaluator
        ["gate", str(tmp_path / "missing.parquet"), "--min-mean", "x=0.5"],
        ["gate", str(path)],  # no bar
        ["gate"],  # argparse: no file
    ):
        result = run_cli(*bad)
        assert result.returncode == 2, (bad, result.stdout, result.stderr)
        assert "error" in result.stderr
