"""Gates count errors: a bar is met over all rows, and report and gate agree on the file.

The scored files come from real runs against the judge simulator: a row whose question
carries ``@sim(fault=refusal)`` is refused by the judge and ends as a row error, the
others are scored with the label their marker names.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

import framekit as fk
from framekit.evaluators import RetrievalRelevance
from tests.helpers import MAPPING, sim_judge
from tests.test_cli import assert_input_error, framekit

RR = "retrieval_relevance"


def scored_run(sim, path: Path, labels: list[str | None]) -> pl.DataFrame:
    """Score one row per entry of ``labels`` (None: the judge refuses that row)."""
    marks = ["fault=refusal" if label is None else f"label={label}" for label in labels]
    frame = pl.DataFrame(
        {
            "row_id": list(range(len(labels))),
            "question": [f"What is item {i}? @sim({m})" for i, m in enumerate(marks)],
            "docs": [[f"Item {i} is a thing."] for i in range(len(labels))],
        }
    )
    source = path.with_name("in-" + path.name)
    frame.write_parquet(source)
    fk.evaluate_parquet(
        source, path, [RetrievalRelevance()], MAPPING, judge=sim_judge(sim), cache=False,
        progress=False,
    )  # fmt: skip
    scored = pl.read_parquet(path)
    assert scored[f"{RR}_error"].is_not_null().sum() == labels.count(None)  # refused rows only
    return scored


def test_gate_min_mean_over_a_run_with_errors_exits_1_unless_max_failures_allows_them(
    judge_simulator, tmp_path
):
    # 9 rows scored "relevant" (1.0) and 3 refused: the mean of the scored rows is 1.0.
    labels: list[str | None] = ["relevant", "relevant", None, "relevant"] * 3
    scored_run(judge_simulator, tmp_path / "scored.parquet", labels)
    bar = ["gate", "scored.parquet", "--min-mean", f"{RR}=0.9"]

    strict = framekit(*bar, cwd=tmp_path)
    assert strict.returncode == 1, strict.stdout + strict.stderr
    assert "errors allowed per mean bar: 0 (--max-failures)" in strict.stdout
    assert f"{RR}: mean 1.000 meets 0.9, but 3 errors in 12 rows exceed the 0 allowed" in (
        strict.stdout
    )
    assert "(--max-failures)" in strict.stdout.split("gate failed:")[1]

    allowed = framekit(*bar, "--max-failures", "3", cwd=tmp_path)
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert "errors allowed per mean bar: 3" in allowed.stdout
    table = allowed.stdout.split("\n\n")[0]
    assert re.search(r"\| mean\s+\| 0\.900\s+\| 1\.000\s+\| 12\s+\| 3\s+\| 3\s+\| true", table)

    one_short = framekit(*bar, "--max-failures", "2", cwd=tmp_path)
    assert one_short.returncode == 1, one_short.stdout


def test_report_and_gate_print_the_same_pass_rate_for_the_same_file(judge_simulator, tmp_path):
    # 6 passed, 3 below threshold, 3 errors: the pass rate is 6 / 12 over all rows (the
    # summary used to say 6 / 9, the share of scored rows, while the gate said 6 / 12).
    labels: list[str | None] = ["relevant", "irrelevant", None, "relevant"] * 3
    scored = scored_run(judge_simulator, tmp_path / "scored.parquet", labels)

    report = framekit("report", "scored.parquet", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    lines = report.stdout.splitlines()
    top = next(i for i, line in enumerate(lines) if line.startswith("| evaluator"))
    header, row = lines[top], lines[top + 2]
    cells = dict(zip(header.split("|"), row.split("|"), strict=True))
    cells = {k.strip(): v.strip() for k, v in cells.items()}
    assert (cells["rows"], cells["scored"], cells["errors"]) == ("12", "9", "3")
    assert "failed" not in header  # "error" is the evaluation failing, nothing else

    gate = framekit("gate", "scored.parquet", "--min-pass-rate", f"{RR}=0.4", cwd=tmp_path)
    assert gate.returncode == 0, gate.stdout + gate.stderr
    gate_rate = re.search(r"\| pass_rate \| 0\.400\s+\| (\d\.\d{3})", gate.stdout)
    assert gate_rate is not None, gate.stdout
    assert cells["pass_rate"] == gate_rate.group(1) == "0.500"

    # The Python API agrees with both, and so does the HTML summary.
    summary = fk.summarize(scored).row(0, named=True)
    checked = fk.gate(scored, min_pass_rate={RR: 0.4}).table.row(0, named=True)
    assert summary["pass_rate"] == checked["actual"] == 0.5
    assert summary["errors"] == checked["errors"] == 3
    page = fk.write_html_report(scored, tmp_path / "r.html").read_text()
    summary_html = page[page.index('id="summary"') : page.index('id="rows-to-look-at"')]
    assert "<th>errors</th>" in summary_html and '<td class="num">0.500</td>' in summary_html


def test_a_pass_rate_bar_counts_errors_as_not_passed(judge_simulator, tmp_path):
    labels: list[str | None] = ["relevant"] * 8 + [None] * 2
    scored = scored_run(judge_simulator, tmp_path / "scored.parquet", labels)
    result = fk.gate(scored, min_pass_rate={RR: 0.9})
    assert not result
    assert f"{RR}: pass_rate 0.800 < required 0.9 (10 rows, 2 errors)" in result.describe()


def test_the_same_bar_given_twice_is_an_input_error(judge_simulator, tmp_path):
    scored_run(judge_simulator, tmp_path / "scored.parquet", ["relevant", "irrelevant"])
    twice = framekit(
        "gate", "scored.parquet", "--min-mean", f"{RR}=0.9", "--min-mean", f"{RR}=0.1",
        cwd=tmp_path,
    )  # fmt: skip
    assert_input_error(twice, f"--min-mean is given twice for '{RR}' (0.9 and 0.1)")
    assert twice.stdout == "" and len(twice.stderr.strip().splitlines()) == 1

    scored = pl.read_parquet(tmp_path / "scored.parquet")
    with pytest.raises(fk.InputError, match=f"min_pass_rate is given twice for '{RR}'"):
        fk.gate(scored, min_pass_rate=[(RR, 0.9), (RR, 0.5)])
    with pytest.raises(fk.InputError, match="max_failures must be a whole number"):
        fk.gate(scored, min_mean={RR: 0.5}, max_failures=-1)


def one_line_exit_2(result) -> str:
    """The one stderr line of a command that refused its input (nothing on stdout)."""
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    return line


def test_a_text_score_column_in_report_html_is_one_line_before_anything_is_printed(tmp_path):
    pl.DataFrame(
        {"g": ["a", "b"], "c_score": ["1.0", "0.5"], "c_passed": [True, False],
         "c_error": [None, None]},
        schema_overrides={"c_error": pl.String},
    ).write_parquet(tmp_path / "s.parquet")  # fmt: skip
    result = framekit("report", "s.parquet", "--html", "r.html", cwd=tmp_path)
    line = one_line_exit_2(result)
    assert "column 'c_score' holds String" in line and "_score columns hold a number" in line
    assert not (tmp_path / "r.html").exists()
    with pytest.raises(fk.InputError, match="column 'c_score' holds String"):
        fk.write_html_report(pl.read_parquet(tmp_path / "s.parquet"), tmp_path / "r.html")


def test_gate_on_a_text_passed_column_is_one_line(tmp_path):
    pl.DataFrame(
        {"c_score": [1.0, 0.0], "c_passed": ["true", "false"], "c_error": [None, None]},
        schema_overrides={"c_error": pl.String},
    ).write_parquet(tmp_path / "s.parquet")
    result = framekit("gate", "s.parquet", "--min-pass-rate", "c=0.5", cwd=tmp_path)
    line = one_line_exit_2(result)
    assert "column 'c_passed' holds String" in line and "_passed columns hold Boolean" in line
