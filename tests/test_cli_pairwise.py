"""``framekit pairwise`` and ``framekit report pairs.parquet --html``, run as a user runs
them (a subprocess), against the simulator's pairwise judge."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from framekit import _provenance
from tests.helpers import API_KEY, assert_no_key
from tests.test_cli import framekit

QUALITY = {"bm25": 0.45, "dense": 0.5, "hybrid": 0.9}
SCRIPT = "<script>alert('x')</script>"


def runs(path: Path, questions: int = 20) -> Path:
    rows = [
        {
            "question_id": q,
            "strategy": s,
            "question": f"Question {q}: is a {SCRIPT} tag safe?",
            "answer": f"Answer {q} by {s} {SCRIPT} @sim(quality={quality})",
        }
        for q in range(questions)
        for s, quality in QUALITY.items()
    ]
    pl.DataFrame(rows).write_parquet(path)
    return path


def test_pairwise_writes_the_pairs_file_and_report_shows_the_head_to_head(
    tmp_path, judge_simulator
):
    runs(tmp_path / "runs.parquet")
    args = [
        "pairwise", "runs.parquet", "-o", "pairs.parquet", "--by", "strategy",
        "--on", "question_id", "--map", "input=question", "--map", "output=answer",
        "--judge", "openai/sim", "--api-base", judge_simulator.api_base, "--cache", "cache",
    ]  # fmt: skip
    env = {"FRAMEKIT_API_KEY": API_KEY}
    done = framekit(*args, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert judge_simulator.stats()["chat"] == 2 * 60
    pairs = pl.read_parquet(tmp_path / "pairs.parquet")
    assert pairs.height == 60
    assert pairs.columns[:4] == ["question_id", "a", "b", "question"]
    record = _provenance.read(tmp_path / "pairs.parquet")
    assert record is not None and record["pairwise"]["by"] == "strategy"
    assert record["mapping"] == {"input": "question", "output": "answer"}
    bias = record["pairwise"]["position_bias"]["preference"]
    assert bias is not None and 0 <= bias <= 1
    # The ranking printed: hybrid, far better, first; the position bias said.
    table = done.stdout.split("preference: 60 pairs")[1]
    assert table.index("| hybrid") < table.index("| dense")
    assert "position bias:" in done.stdout and "position bias" in done.stderr

    again = framekit(*args, cwd=tmp_path, env=env)
    assert again.returncode == 0, again.stderr
    assert judge_simulator.stats()["chat"] == 2 * 60  # the re-run sent nothing

    report = framekit("report", "pairs.parquet", "--html", "pairs.html", cwd=tmp_path, env=env)
    assert report.returncode == 0, report.stderr
    assert "| hybrid" in report.stdout and "position bias" in report.stdout
    page = (tmp_path / "pairs.html").read_text()
    for heading in ("strengths", "win matrix", "position bias", "pairs the judge flipped on"):
        assert f"preference: {heading}" in page
    assert f"{bias:.3f}" in page
    flipped = pairs.filter(~pl.col("preference_consistent")).height
    assert flipped > 0  # bm25 and dense are close: the judge flips on some
    assert f"{flipped} pair(s) on which the two orders named different winners" in page
    # Both answers of a flipped pair, side by side, escaped.
    row = pairs.filter(~pl.col("preference_consistent")).row(0, named=True)
    answer_a = f"Answer {row['question_id']} by {row['a']} "
    answer_b = f"Answer {row['question_id']} by {row['b']} "
    assert answer_a in page and answer_b in page
    assert SCRIPT not in page and "&lt;script&gt;" in page
    assert_no_key([done.stdout, done.stderr, report.stdout, report.stderr], tmp_path)


def test_pairwise_refuses_a_pointwise_evaluator_and_a_missing_column(tmp_path):
    runs(tmp_path / "runs.parquet", questions=2)
    common = ["pairwise", "runs.parquet", "-o", "pairs.parquet", "--map", "input=question",
              "--map", "output=answer", "--judge", "local"]  # fmt: skip
    wrong = framekit(*common, "--by", "strategy", "--on", "question_id", "-e", "coherence",
                     cwd=tmp_path)  # fmt: skip
    assert wrong.returncode == 2 and "use `framekit evaluate`" in wrong.stderr
    missing = framekit(*common, "--by", "method", "--on", "question_id", cwd=tmp_path)
    assert missing.returncode == 2 and "by='method': no such column" in missing.stderr
    assert not (tmp_path / "pairs.parquet").exists()


def test_report_without_the_compared_file_shows_the_pairs_and_says_why_no_answers(tmp_path):
    runs(tmp_path / "runs.parquet", questions=4)
    done = framekit(
        "pairwise", "runs.parquet", "-o", "pairs.parquet", "--by", "strategy", "--on",
        "question_id", "--map", "input=question", "--map", "output=answer", "--judge",
        "local", "-q", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (tmp_path / "runs.parquet").unlink()
    report = framekit("report", "pairs.parquet", "--html", "pairs.html", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert "not there" in report.stderr
    assert "offline local judge" in report.stdout
    assert "win matrix" in (tmp_path / "pairs.html").read_text()


def test_pairwise_max_cost_exits_1_and_a_larger_budget_asks_exactly_the_rest(
    tmp_path, judge_simulator
):
    runs(tmp_path / "runs.parquet", questions=10)  # 30 pairs, 60 requests
    args = [
        "pairwise", "runs.parquet", "-o", "pairs.parquet", "--by", "strategy",
        "--on", "question_id", "--map", "input=question", "--map", "output=answer",
        "--judge", "openai/sim", "--api-base", judge_simulator.api_base, "--cache", "cache",
        "--concurrency", "2", "--price", "input=2,output=8", "-q",
    ]  # fmt: skip
    env = {"FRAMEKIT_API_KEY": API_KEY}
    # Each request holds its prompt and 1,024 answer tokens (about $0.009) while in flight.
    short = framekit(*args, "--max-cost", "0.05", cwd=tmp_path, env=env)
    assert short.returncode == 1, short.stderr
    assert "framekit: budget reached:" in short.stderr
    sent = judge_simulator.stats()["chat"]
    assert 0 < sent < 60
    pairs = pl.read_parquet(tmp_path / "pairs.parquet")
    unasked = pairs["preference_error"].str.contains("budget reached").fill_null(False)
    assert 0 < int(unasked.sum()) < 30  # the pairs the budget left say so; the rest ranked

    done = framekit(*args, "--max-cost", "5", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert judge_simulator.stats()["chat"] == 60  # exactly the orders left were asked
    assert pl.read_parquet(tmp_path / "pairs.parquet")["preference_error"].null_count() == 30
