"""summarize, compare and the HTML report, on synthetic scored frames with known truths."""

from __future__ import annotations

import base64
import html
import math
import re
import struct

import numpy as np
import polars as pl
import pytest

from framekit._errors import InputError
from framekit.analysis import (
    _stats,
    compare,
    describe_comparison,
    evaluator_names,
    failures,
    summarize,
    write_html_report,
)

LEVELS = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
LABELS = np.array(
    ["Not At All", "Not Generally", "Neutral/Mixed", "Generally Yes", "Completely Yes"]
)


def scored_frame(
    effects: dict[str, float],
    n: int = 60,
    seed: int = 0,
    fail_rate: float = 0.0,
    details: bool = False,
    name: str = "response_relevance",
    shared_difficulty: bool = True,
) -> pl.DataFrame:
    """What evaluate_dataframe returns for ``n`` questions answered by each strategy.

    A question's difficulty is shared by all strategies (so paired tests have something to
    gain) unless ``shared_difficulty`` is False; a strategy's effect shifts the latent
    quality, in rubric steps; failed rows get a null score and an error, as the engine
    records them.
    """
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(0.0, 1.0, n)
    parts = []
    for strategy, effect in effects.items():
        if not shared_difficulty:
            difficulty = rng.normal(0.0, 1.0, n)
        level = np.clip(np.round(2.0 + difficulty + effect + rng.normal(0, 0.7, n)), 0, 4)
        level = level.astype(int)
        failed = rng.random(n) < fail_rate
        score = [None if f else float(LEVELS[i]) for i, f in zip(level, failed, strict=True)]
        columns = {
            "question": [f"q{i}" for i in range(n)],
            "strategy": [strategy] * n,
            f"{name}_score": score,
            f"{name}_label": [
                None if f else str(LABELS[i]) for i, f in zip(level, failed, strict=True)
            ],
            f"{name}_explanation": ["because"] * n,
            f"{name}_passed": [None if s is None else s >= 0.5 for s in score],
            f"{name}_error": ["judge timed out" if f else None for f in failed],
        }
        if details:
            columns[f"{name}_tokens"] = [120] * n
            columns[f"{name}_cost_usd"] = [None if i % 2 else 0.001 for i in range(n)]
            columns[f"{name}_cached"] = [False] * n
            columns[f"{name}_latency_s"] = [0.5] * n
        parts.append(
            pl.DataFrame(
                columns,
                schema_overrides={
                    f"{name}_score": pl.Float64,
                    f"{name}_error": pl.String,
                    f"{name}_label": pl.String,
                },
            )
        )
    return pl.concat(parts)


def aligned(frame: pl.DataFrame, a: str, b: str, name: str = "response_relevance") -> tuple:
    """Scores of strategies a and b for the questions both scored, in the same order."""
    wide = frame.pivot(on="strategy", index="question", values=f"{name}_score").drop_nulls()
    return wide[a].to_numpy(), wide[b].to_numpy()


# --------------------------------------------------------------------------- summarize


def test_errors_are_counted_not_averaged_as_zero_and_do_not_pass() -> None:
    df = pl.DataFrame(
        {
            "coherence_score": [1.0, 0.5, None, None],
            "coherence_label": ["yes", "mixed", None, None],
            "coherence_passed": [True, True, None, None],
            "coherence_error": [None, None, "rate limited", "refused"],
        }
    )
    row = summarize(df).row(0, named=True)
    assert (row["rows"], row["scored"], row["errors"]) == (4, 2, 2)
    assert row["mean"] == 0.75  # (1.0 + 0.5) / 2, not / 4
    assert row["pass_rate"] == 0.5  # 2 of 4 rows passed: an error is not a pass
    assert 0.5 <= row["ci_low"] <= row["ci_high"] <= 1.0


def test_summarize_by_group_columns_and_values() -> None:
    df = scored_frame({"plain": 0.0, "rag": 1.0}, n=40, fail_rate=0.1, details=True)
    s = summarize(df, by="strategy", n_resamples=500)
    assert s.columns == [
        "evaluator",
        "strategy",
        "rows",
        "scored",
        "errors",
        "mean",
        "ci_low",
        "ci_high",
        "pass_rate",
        "label_counts",
        "tokens",
        "cost_usd",
    ]
    assert s["strategy"].to_list() == ["plain", "rag"]
    for row in s.iter_rows(named=True):
        part = df.filter(pl.col("strategy") == row["strategy"])
        scores = part["response_relevance_score"].drop_nulls()
        assert row["rows"] == 40
        assert row["errors"] == part["response_relevance_error"].is_not_null().sum() > 0
        assert row["scored"] + row["errors"] == row["rows"]
        assert row["mean"] == pytest.approx(scores.mean())
        assert row["ci_low"] < row["mean"] < row["ci_high"]
        assert row["pass_rate"] == pytest.approx((scores >= 0.5).sum() / row["rows"])
        assert row["tokens"] == 120 * 40
        assert row["cost_usd"] == pytest.approx(0.001 * 20)  # unknown (null) costs skipped
        counts = row["label_counts"]
        assert sum(c["count"] for c in counts) == row["scored"]
        assert [c["count"] for c in counts] == sorted((c["count"] for c in counts), reverse=True)
        expected = part["response_relevance_label"].drop_nulls().value_counts()
        assert {c["label"]: c["count"] for c in counts} == dict(expected.iter_rows())


def test_label_counts_explode_into_a_tidy_table() -> None:
    df = scored_frame({"plain": 0.0}, n=30)
    tidy = summarize(df).explode("label_counts").unnest("label_counts")
    assert tidy.columns[-2:] == ["label", "count"] or {"label", "count"} <= set(tidy.columns)
    assert tidy["count"].sum() == 30


def test_summarize_is_reproducible_and_depends_on_the_seed() -> None:
    df = scored_frame({"plain": 0.0, "rag": 0.5}, n=50)
    first = summarize(df, by="strategy", n_resamples=300, seed=1)
    assert first.equals(summarize(df, by="strategy", n_resamples=300, seed=1))
    other = summarize(df, by="strategy", n_resamples=300, seed=2)
    assert not first.select("ci_low", "ci_high").equals(other.select("ci_low", "ci_high"))


def test_summarize_ci_matches_the_bootstrap_of_the_scored_rows() -> None:
    df = scored_frame({"plain": 0.0}, n=200, fail_rate=0.2)
    row = summarize(df, confidence=0.9, n_resamples=10_000).row(0, named=True)
    scores = df["response_relevance_score"].drop_nulls().to_numpy()
    st = pytest.importorskip("scipy.stats")
    ref = st.bootstrap(
        (scores,),
        np.mean,
        confidence_level=0.9,
        method="percentile",
        n_resamples=10_000,
        random_state=0,
    ).confidence_interval
    # Monte Carlo noise plus one step of the lattice the means of 0.25-multiples sit on.
    tolerance = 0.1 * scores.std() / math.sqrt(scores.size) + 0.25 / scores.size
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((ref.low, ref.high), abs=tolerance)


def test_summarize_accepts_pandas_and_lazy_frames() -> None:
    df = scored_frame({"plain": 0.0, "rag": 1.0}, n=20, fail_rate=0.2)
    expected = summarize(df, by="strategy", n_resamples=200)
    assert summarize(df.lazy(), by="strategy", n_resamples=200).equals(expected)
    pandas = pytest.importorskip("pandas")
    pdf = df.to_pandas()
    assert isinstance(pdf, pandas.DataFrame)
    assert summarize(pdf, by="strategy", n_resamples=200).equals(expected)


def test_several_evaluators_in_column_order_and_without_optional_columns() -> None:
    df = (
        scored_frame({"plain": 0.0}, n=10, name="coherence")
        .hstack(
            scored_frame({"plain": 0.0}, n=10, name="retrieval_relevance", details=True).select(
                pl.col("^retrieval_relevance_.*$")
            )
        )
        .with_columns(pl.lit(0.3).alias("latency_score"))
    )  # no latency_error: not an evaluator
    assert evaluator_names(df) == ["coherence", "retrieval_relevance"]
    s = summarize(df, n_resamples=100)
    assert s["evaluator"].to_list() == ["coherence", "retrieval_relevance"]
    assert s["tokens"].to_list() == [None, 1200]
    only = summarize(df, evaluators="coherence", n_resamples=100)
    assert only["evaluator"].to_list() == ["coherence"]
    assert "tokens" not in only.columns


def test_unknown_names_are_input_errors() -> None:
    df = scored_frame({"plain": 0.0}, n=5)
    with pytest.raises(InputError, match="coherence"):
        summarize(df, evaluators=["coherence"])
    with pytest.raises(InputError, match="model"):
        summarize(df, by="model")
    with pytest.raises(InputError, match="no evaluator results"):
        summarize(pl.DataFrame({"x": [1]}))


def test_failures_counts_error_messages() -> None:
    df = scored_frame({"plain": 0.0}, n=50, fail_rate=0.3)
    out = failures(df)
    assert out.columns == ["evaluator", "error", "count"]
    assert out.rows() == [
        ("response_relevance", "judge timed out", df["response_relevance_score"].null_count())
    ]


# --------------------------------------------------------------------------- compare


@pytest.mark.parametrize("test", ["bootstrap", "wilcoxon", "t"])
@pytest.mark.parametrize("paired", [True, False])
def test_compare_finds_a_known_difference_and_names_the_winner(test: str, paired: bool) -> None:
    df = scored_frame({"plain": 0.0, "rag": 0.8}, n=80, seed=3)
    c = compare(df, by="strategy", on="question" if paired else None, test=test, n_resamples=1000)
    row = c.row(0, named=True)
    assert (row["group_a"], row["group_b"]) == ("plain", "rag")
    assert row["p_value"] < 0.05
    assert row["winner"] == "rag"
    assert row["diff"] > 0 and row["diff_ci_low"] > 0
    if paired:
        assert row["n_pairs"] == 80
    # The same difference, when lower is better, makes the other group the winner.
    flipped = compare(
        df,
        by="strategy",
        on="question" if paired else None,
        test=test,
        n_resamples=1000,
        direction={"response_relevance": "minimize"},
    )
    assert flipped["winner"].to_list() == ["plain"]


@pytest.mark.parametrize(
    ("test", "paired"), [("wilcoxon", True), ("t", False), ("bootstrap", True)]
)
def test_without_a_difference_about_5_percent_of_seeds_find_one(test: str, paired: bool) -> None:
    found = 0
    for seed in range(200):
        # Unpaired tests assume independent groups: no shared difficulty for them.
        df = scored_frame({"plain": 0.0, "rag": 0.0}, n=50, seed=seed, shared_difficulty=paired)
        c = compare(
            df,
            by="strategy",
            on="question" if paired else None,
            test=test,
            n_resamples=200,
            seed=seed,
        )
        found += c["winner"][0] is not None
    assert 0.01 <= found / 200 <= 0.10, found


def test_paired_results_agree_with_scipy() -> None:
    st = pytest.importorskip("scipy.stats")
    df = scored_frame({"plain": 0.0, "rag": 0.3}, n=60, seed=5, fail_rate=0.1)
    a, b = aligned(df, "plain", "rag")
    w = compare(df, on="question", test="wilcoxon").row(0, named=True)
    assert w["n_pairs"] == a.size
    assert w["p_value"] == pytest.approx(st.wilcoxon(b, a).pvalue, rel=1e-9)
    t = compare(df, on="question", test="t").row(0, named=True)
    ref = st.ttest_rel(b, a)
    assert t["p_value"] == pytest.approx(ref.pvalue, rel=1e-8)
    ci = ref.confidence_interval()
    assert (t["diff_ci_low"], t["diff_ci_high"]) == pytest.approx((ci.low, ci.high), rel=1e-8)
    boot = compare(df, on="question", n_resamples=20_000).row(0, named=True)
    ref_ci = st.bootstrap(
        (a, b),
        lambda x, y, axis: np.mean(y - x, axis=axis),
        paired=True,
        method="percentile",
        n_resamples=20_000,
        random_state=0,
    ).confidence_interval
    # Differences are multiples of 0.25, so bootstrap means sit on a lattice and the two
    # quantile conventions (order statistic here, interpolation in scipy) may differ by a step.
    tolerance = 0.1 * (b - a).std() / math.sqrt(a.size) + 0.25 / a.size
    assert boot["diff"] == pytest.approx((b - a).mean())
    assert (boot["diff_ci_low"], boot["diff_ci_high"]) == pytest.approx(
        (ref_ci.low, ref_ci.high), abs=tolerance
    )


def test_unpaired_results_agree_with_scipy() -> None:
    st = pytest.importorskip("scipy.stats")
    df = scored_frame({"plain": 0.0, "rag": 0.3}, n=60, seed=6, fail_rate=0.1)
    a = df.filter(pl.col("strategy") == "plain")["response_relevance_score"].drop_nulls().to_numpy()
    b = df.filter(pl.col("strategy") == "rag")["response_relevance_score"].drop_nulls().to_numpy()
    t = compare(df, test="t").row(0, named=True)
    ref = st.ttest_ind(b, a, equal_var=False)
    assert t["p_value"] == pytest.approx(ref.pvalue, rel=1e-8)
    assert (t["n_a"], t["n_b"]) == (a.size, b.size)
    u = compare(df, test="wilcoxon").row(0, named=True)
    assert u["p_value"] == pytest.approx(st.mannwhitneyu(b, a).pvalue, rel=1e-9)
    assert u["test"] == "mann-whitney u" and t["test"] == "welch t"


def test_pairs_with_a_null_score_are_dropped_and_counted() -> None:
    df = scored_frame({"plain": 0.0, "rag": 0.0}, n=30, seed=1, fail_rate=0.2)
    df = df.filter(~((pl.col("strategy") == "rag") & (pl.col("question") == "q0")))
    row = compare(df, on="question", n_resamples=200).row(0, named=True)
    plain = df.filter(pl.col("strategy") == "plain")
    rag = df.filter(pl.col("strategy") == "rag")
    joined = plain.join(rag, on="question")
    both = joined.drop_nulls(["response_relevance_score", "response_relevance_score_right"])
    assert row["n_pairs"] == both.height
    assert row["dropped_pairs"] == joined.height - both.height > 0
    assert row["unmatched"] == 1  # q0 has no rag row
    assert row["n_a"] == plain["response_relevance_score"].drop_nulls().len()


def test_a_key_repeated_within_a_group_is_an_input_error() -> None:
    df = scored_frame({"plain": 0.0, "rag": 0.0}, n=5)
    with pytest.raises(InputError, match="more than once"):
        compare(pl.concat([df, df.head(1)]), on="question")


def test_three_groups_compare_all_pairs_with_holm() -> None:
    df = scored_frame({"a": 0.0, "b": 0.1, "c": 1.2}, n=60, seed=2)
    c = compare(df, on="question", test="wilcoxon", n_resamples=300)
    assert list(zip(c["group_a"], c["group_b"], strict=True)) == [
        ("a", "b"),
        ("a", "c"),
        ("b", "c"),
    ]
    assert c["p_adjusted"].to_list() == pytest.approx(_stats.holm(c["p_value"].to_numpy()).tolist())
    assert (c["p_adjusted"] >= c["p_value"]).all()
    for row in c.iter_rows(named=True):
        assert (row["winner"] is not None) == (row["p_adjusted"] < 0.05)
    assert c.filter(pl.col("group_b") == "c")["winner"].to_list() == ["c", "c"]
    baseline = compare(df, on="question", baseline="b", n_resamples=300)
    assert list(zip(baseline["group_a"], baseline["group_b"], strict=True)) == [
        ("b", "a"),
        ("b", "c"),
    ]


def test_compare_group_intervals_equal_summarize_by_group() -> None:
    df = scored_frame({"plain": 0.0, "rag": 0.5}, n=40, fail_rate=0.1)
    c = compare(df, n_resamples=400, seed=9).row(0, named=True)
    s = summarize(df, by="strategy", n_resamples=400, seed=9)
    plain, rag = s.rows(named=True)
    assert (c["mean_a"], c["ci_low_a"], c["ci_high_a"]) == (
        plain["mean"],
        plain["ci_low"],
        plain["ci_high"],
    )
    assert (c["mean_b"], c["ci_low_b"], c["ci_high_b"]) == (
        rag["mean"],
        rag["ci_low"],
        rag["ci_high"],
    )


def test_group_dtype_is_kept_and_one_group_is_an_error() -> None:
    df = scored_frame({"1": 0.0, "2": 1.0}, n=40).with_columns(pl.col("strategy").cast(pl.Int64))
    c = compare(df, test="t")
    assert c.schema["group_a"] == pl.Int64 and c.schema["winner"] == pl.Int64
    assert c["winner"].to_list() == [2]
    with pytest.raises(InputError, match="at least two groups"):
        compare(df.filter(pl.col("strategy") == 1))


def test_rows_without_a_group_are_left_out_and_one_pair_proves_nothing() -> None:
    df = pl.DataFrame(
        {
            "strategy": ["a", "b", None, None],
            "q": [1, 1, 1, 2],
            "x_score": [0.25, 1.0, 0.0, 0.0],
            "x_error": [None, None, None, None],
        }
    )
    for test in ("bootstrap", "wilcoxon", "t"):
        c = compare(df, on="q", test=test)
        assert c.select("group_a", "group_b", "n_pairs", "diff").rows() == [("a", "b", 1, 0.75)]
        assert c["winner"][0] is None
    assert describe_comparison(compare(df, on="q")) == "x: a vs b: not enough scored rows to test."


def test_describe_comparison_reads_as_a_sentence() -> None:
    df = scored_frame({"plain": 0.0, "rag": 0.8}, n=80, seed=3)
    text = describe_comparison(compare(df, on="question", n_resamples=500))
    assert text.startswith(
        "response_relevance: rag is better than plain (mean difference rag - plain +"
    )
    assert "95% CI" in text and "80 pairs" in text
    same = scored_frame({"plain": 0.0, "rag": 0.0}, n=20, seed=4)
    assert "no significant difference" in describe_comparison(compare(same, test="t"))


# --------------------------------------------------------------------------- HTML


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_html_report_has_tables_an_embedded_image_and_escaped_data(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    df = scored_frame({"<script>alert(1)</script>": 0.0, "rag & co": 1.0}, n=30, fail_rate=0.1)
    df = df.with_columns(
        pl.when(pl.col("response_relevance_error").is_not_null())
        .then(pl.lit('bad <json> & "quotes"'))
        .alias("response_relevance_error")
    )
    out = write_html_report(
        df, tmp_path / "report.html", by="strategy", on="question", title="Run <1>"
    )
    assert out == tmp_path / "report.html"
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    # summary, by strategy, comparison (its brief table, every column behind a click), failures
    assert text.count("<table>") == 5
    assert "<title>Run &lt;1&gt;</title>" in text
    # One script: the report's own filter; the data's <script> is text.
    assert text.count("<script>") == 1 and "<script>alert" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "rag &amp; co" in text
    assert html.escape('bad <json> & "quotes"') in text
    assert "Completely Yes: " in text  # label counts rendered readably
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', text)
    assert len(images) == 2  # distributions and means
    width, height = png_size(base64.b64decode(images[0]))
    assert width > 100 and height > 100
    assert "http://" not in text and "https://" not in text  # no external assets


def test_html_report_without_matplotlib_still_has_the_tables(tmp_path, monkeypatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    df = scored_frame({"plain": 0.0}, n=10)
    with pytest.warns(UserWarning, match="framekit\\[plot\\]"):
        out = write_html_report(df, tmp_path / "r.html")
    text = out.read_text(encoding="utf-8")
    assert "<table>" in text and "data:image/png" not in text
    assert "pip install" in text


def test_docstring_examples_run() -> None:
    import doctest

    from framekit.analysis import _stats as stats_module
    from framekit.analysis import summary

    for module in (summary, stats_module):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, module.__name__
