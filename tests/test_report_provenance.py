"""The run record travels with the scores: last_run, the output Parquet, the HTML report.

And the HTML report is something to act on: failed rows with their error, the lowest
scored rows with ids and explanations, a filter the page address can preset.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

import framekit as fk
from framekit.analysis import write_html_report
from framekit.evaluators import RetrievalRelevance
from tests.helpers import API_KEY, MAPPING, RETRIEVAL_CLI_ARGS, sim_judge
from tests.test_cli import assert_input_error, framekit


def rows_with_a_failure(n: int = 12) -> pl.DataFrame:
    questions = [f"What is item {i}?" for i in range(n)]
    if n > 3:
        questions[3] = "broken @sim(fault=malformed)"
    return pl.DataFrame(
        {
            "row_id": list(range(n)),
            "trace_id": [f"trace{i:04d}" for i in range(n)],
            "question": questions,
            "docs": [[f"Item {i} is a thing.", "Unrelated text."] for i in range(n)],
        }
    )


def test_run_record_is_in_the_output_parquet_without_the_key(judge_simulator, tmp_path):
    source = tmp_path / "in.parquet"
    rows_with_a_failure().write_parquet(source)
    judge = sim_judge(judge_simulator, temperature=0.0)
    run = fk.evaluate_parquet(
        source,
        tmp_path / "out.parquet",
        [RetrievalRelevance(threshold=0.7)],
        MAPPING,
        judge=judge,
        cache=False,
        progress=False,
    )
    record = fk.io.read_provenance(run.destination)
    assert record is not None and record == fk.last_run().provenance
    assert record["framekit_version"] == fk.__version__
    assert record["source"] == str(source)
    assert record["mapping"] == {"input": "question", "context": "docs"}
    (ev,) = record["evaluators"]
    assert ev["name"] == "retrieval_relevance" and ev["threshold"] == 0.7
    assert ev["template"] == RetrievalRelevance().cache_namespace()  # name and version
    (j,) = record["judges"]
    assert j["kind"] == "llm" and j["model"] == "openai/sim-judge"
    assert j["temperature"] == 0.0 and j["evaluators"] == ["retrieval_relevance"]
    assert record["counts"]["rows"] == 12 and record["counts"]["failed evaluations"] == 1
    raw = pq.read_schema(run.destination).metadata[b"framekit"].decode()
    assert API_KEY not in raw and API_KEY[-8:] not in raw and "api_key" not in raw


def test_user_written_frame_keeps_its_record_and_the_report_shows_it(judge_simulator, tmp_path):
    judge = sim_judge(judge_simulator)
    scored = fk.evaluate_dataframe(
        rows_with_a_failure(),
        [RetrievalRelevance()],
        MAPPING,
        judge=judge,
        cache=False,
        progress=False,
    )
    path = fk.io.write_parquet(scored, tmp_path / "mine.parquet")
    assert pl.read_parquet(path).equals(scored)
    record = fk.io.read_provenance(path)
    assert record is not None and record["judges"][0]["model"] == "openai/sim-judge"

    result = framekit(
        "report", "mine.parquet", "--html", "r.html", "--title", "Nightly <run>", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert "12 rows x 1 evaluator in mine.parquet" in result.stdout
    page = (tmp_path / "r.html").read_text()
    header = page[page.index('id="provenance"') : page.index('id="summary"')]
    assert "openai/sim-judge" in header and RetrievalRelevance().cache_namespace() in header
    # The judge line names the settings that decide an answer, and no empty one.
    (judge_line,) = re.findall(r"<dt>judge</dt><dd>([^<]*)</dd>", header)
    assert judge_line.startswith("openai/sim-judge (llm); ") and "temperature=0.0" in judge_line
    assert "={}" not in judge_line and "=None" not in judge_line
    assert "input=question" in header and str(fk.__version__) in header
    assert "<title>Nightly &lt;run&gt;</title>" in page
    assert API_KEY not in page and API_KEY[-8:] not in page
    # The failed row is listed with its id, its trace id and its error.
    failed = re.search(
        r'<tr data-evaluator="retrieval_relevance"[^>]*data-status="error">(.*?)</tr>', page
    )
    assert failed is not None
    assert ">3<" in failed.group(1) and "trace0003" in failed.group(1)
    error = scored.filter(pl.col("row_id") == 3)["retrieval_relevance_error"][0]
    assert html.escape(error) in failed.group(1)


def test_offline_scores_are_labelled_as_similarity_proxies(tmp_path):
    pytest.importorskip("onnxruntime")
    source = tmp_path / "in.parquet"
    rows_with_a_failure(4).with_columns(
        pl.col("question").str.replace(r" @sim.*", "")
    ).write_parquet(source)
    result = framekit(
        "evaluate",
        "in.parquet",
        *RETRIEVAL_CLI_ARGS,
        "--judge",
        "local",
        "-o",
        "out.parquet",
        "-q",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert fk.io.read_provenance(tmp_path / "out.parquet")["judges"][0]["kind"] == "local"
    report = framekit("report", "out.parquet", "--html", "r.html", cwd=tmp_path)
    assert "similarity" in report.stdout and "not an LLM verdict" in report.stdout
    page = (tmp_path / "r.html").read_text()
    assert (
        '<p class="note">Scored by the offline local judge: embedding similarity, a proxy for '
        "relevance that cannot check facts; not an LLM verdict.</p>" in page
    )
    assert "were scored" not in page  # was "These scores were scored by ..."
    (judge_line,) = re.findall(r"<dt>judge</dt><dd>([^<]*)</dd>", page)
    assert "={}" not in judge_line and "=None" not in judge_line


def test_report_without_a_record_says_so_and_groups_are_capped(tmp_path):
    n = 120
    frame = pl.DataFrame(
        {
            "question_id": [i % 40 for i in range(n)],
            "coherence_score": [(i % 5) / 4 for i in range(n)],
            "coherence_label": ["ok"] * n,
            "coherence_passed": [(i % 5) >= 2 for i in range(n)],
            "coherence_explanation": ["why"] * n,
            "coherence_error": [None] * n,
        }
    )
    out = write_html_report(frame, tmp_path / "r.html", by="question_id", max_groups=10)
    page = out.read_text()
    assert "No run record" in page
    assert "40 groups in question_id: the first 10 are shown" in page
    assert 'id="comparison"' not in page  # 780 pairs would say nothing useful
    assert '<meta name="viewport"' in page
    assert "http://" not in page and "https://" not in page  # nothing loaded from a CDN
    # The 20 lowest scores (all 0.0) are the rows to look at, lowest first.
    scores = re.findall(r'data-v="([0-9.]+)"', page)
    assert len(scores) == 20 and set(scores) == {"0.0"}


def test_unpaired_comparison_drops_null_only_columns(tmp_path):
    frame = pl.DataFrame(
        {
            "strategy": ["a", "b"] * 10,
            "rr_score": [0.1, 0.9] * 10,
            "rr_error": [None] * 20,
        }
    )
    page = write_html_report(frame, tmp_path / "r.html", by="strategy").read_text()
    comparison = page[page.index('id="comparison"') :]
    comparison = comparison[: comparison.index("</table>")]
    assert "<th>n_pairs</th>" not in comparison and "<th>unmatched</th>" not in comparison
    assert ">null<" not in comparison and "<th>winner</th>" in comparison


def test_cli_guides_in_its_own_syntax(tmp_path):
    source = tmp_path / "in.parquet"
    pl.DataFrame({"question": ["q"], "docs": [["d"]]}).write_parquet(source)
    missing = framekit(
        "evaluate", "in.parquet", "-e", "retrieval_relevance", "--dry-run", cwd=tmp_path
    )
    assert_input_error(missing, "--map input=<column>")
    assert "mapping={" not in missing.stderr
    typo = framekit(
        "evaluate", "in.parquet", "-e", "retrieval_relevanse", "--dry-run", cwd=tmp_path
    )
    assert_input_error(typo, "Did you mean 'retrieval_relevance'?")
    column = framekit(
        "evaluate",
        "in.parquet",
        "-e",
        "retrieval_relevance",
        "--map",
        "input=questoin",
        "--map",
        "context=docs",
        "--dry-run",
        cwd=tmp_path,
    )
    assert_input_error(column, "Did you mean 'question'?")
    (tmp_path / "raw.csv").write_text("question,docs\nq,d\n")
    csv = framekit("evaluate", "raw.csv", "-e", "coherence", "--dry-run", cwd=tmp_path)
    assert_input_error(csv, """--sql "select * from 'raw.csv'\"""")


def test_report_options_reach_the_html(tmp_path):
    frame = pl.DataFrame(
        {
            "q": list(range(10)) * 2,
            "strategy": ["a"] * 10 + ["b"] * 10,
            "rr_score": [0.2] * 10 + [0.8] * 10,
            "rr_error": [None] * 20,
            "other_score": [0.5] * 20,
            "other_error": [None] * 20,
        }
    )
    frame.write_parquet(tmp_path / "s.parquet")
    result = framekit(
        "report",
        "s.parquet",
        "--by",
        "strategy",
        "--on",
        "q",
        "-e",
        "rr",
        "--html",
        "r.html",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "r.html").read_text()
    assert "paired bootstrap" in page and "other" not in page.split("<nav>")[1]
    many = framekit("report", "s.parquet", "--by", "q", "--html", "q.html", cwd=tmp_path)
    assert many.returncode == 0 and "no pairwise comparison" not in many.stderr  # 10 groups
    typo = framekit("report", "s.parquet", "-e", "rrr", cwd=tmp_path)
    assert_input_error(typo, "Did you mean 'rr'?")


def test_rows_table_carries_what_the_filter_reads(tmp_path: Path):
    frame = pl.DataFrame(
        {
            "id": ["x1", "x2", "x3"],
            "span_id": ["s1", "s2", "s3"],
            "question": ["alpha", "beta", "gamma"],
            "c_score": [0.9, 0.1, None],
            "c_label": ["good", "bad", None],
            "c_passed": [True, False, None],
            "c_explanation": ["fine", "poor", None],
            "c_error": [None, None, "timeout"],
        }
    )
    page = write_html_report(frame, tmp_path / "r.html").read_text()
    rows = re.findall(r'<tr data-evaluator="c" data-label="([^"]*)" data-status="([^"]+)">', page)
    assert rows == [("", "error"), ("bad", "below threshold"), ("good", "passed")]
    assert ">span_id</th>" in page and ">input</th>" in page
    for control in ("f-evaluator", "f-label", "f-status", "f-q"):
        assert f'id="{control}"' in page


def test_dry_run_refuses_existing_result_columns_like_the_real_run(tmp_path):
    pl.DataFrame(
        {"question": ["q"], "docs": [["d"]], "retrieval_relevance_score": [0.5]}
    ).write_parquet(tmp_path / "in.parquet")
    args = (
        "evaluate",
        "in.parquet",
        *RETRIEVAL_CLI_ARGS,
        "--judge",
        "local",
        "--dry-run",
    )
    assert_input_error(framekit(*args, cwd=tmp_path), "'retrieval_relevance_score' already exists")
    assert framekit(*args, "--overwrite", cwd=tmp_path).returncode == 0


def test_an_empty_input_still_gets_its_run_record(tmp_path):
    source = tmp_path / "empty.parquet"
    pl.DataFrame(
        {"question": [], "docs": []}, schema={"question": pl.String, "docs": pl.List(pl.String)}
    ).write_parquet(source)
    fk.evaluate_parquet(
        source,
        tmp_path / "out.parquet",
        [RetrievalRelevance()],
        MAPPING,
        judge="local",
        cache=False,
        progress=False,
    )
    record = fk.io.read_provenance(tmp_path / "out.parquet")
    assert record is not None and record["counts"]["rows"] == 0
    assert pl.read_parquet(tmp_path / "out.parquet").height == 0


def test_summaries_give_exact_counts(judge_simulator, tmp_path, capsys):
    fk.evaluate_dataframe(
        rows_with_a_failure(3),
        [RetrievalRelevance()],
        MAPPING,
        judge=sim_judge(judge_simulator),
        cache=False,
        progress=True,
    )
    assert "framekit: 3 rows x 1 evaluator = 3 scores" in capsys.readouterr().err
    pl.DataFrame({"question": ["q"], "docs": [["d"]]}).write_parquet(tmp_path / "in.parquet")
    dry = framekit(
        "evaluate", "in.parquet", "-e", "retrieval_relevance,coherence", "--map",
        "input=question", "--map", "context=docs", "--map", "output=question",
        "--judge", "local", "--dry-run", cwd=tmp_path,
    )  # fmt: skip
    assert "dry run: 1 row x 2 evaluators = 2 evaluations" in dry.stdout, dry.stderr
    run = fk.evaluate_parquet(
        tmp_path / "in.parquet", tmp_path / "out.parquet", [RetrievalRelevance()], MAPPING,
        judge=sim_judge(judge_simulator), cache=False, progress=False,
    )  # fmt: skip
    assert "(1 slice)" in run.summary()


def test_report_says_when_it_caps_the_groups(tmp_path):
    pl.DataFrame(
        {"g": list(range(40)) * 2, "rr_score": [0.5] * 80, "rr_error": [None] * 80}
    ).write_parquet(tmp_path / "s.parquet")
    result = framekit("report", "s.parquet", "--by", "g", "--html", "r.html", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "40 groups in g; the HTML report shows the first 30" in result.stderr
