"""framekit report on files it did not write, or that hold hostile text: one group, terminal
escape sequences, markup in the data, and a run whose endpoint echoed the API key."""

from __future__ import annotations

import html
import re

import polars as pl
import pytest

import framekit as fk
from framekit.evaluators import RetrievalRelevance
from tests.helpers import API_KEY, MAPPING, retrieval_frame
from tests.test_cli import framekit


def grouped(groups: list[str | None], labels: list[str] | None = None) -> pl.DataFrame:
    n = len(groups)
    return pl.DataFrame(
        {
            "g": groups,
            "q": list(range(n)),
            "c_score": [(i % 3) / 2 for i in range(n)],
            "c_label": labels or ["ok"] * n,
            "c_passed": [(i % 3) > 0 for i in range(n)],
            "c_explanation": ["why"] * n,
            "c_error": [None] * n,
        },
        schema_overrides={"c_error": pl.String, "g": pl.String},
    )


def test_report_by_a_column_with_one_group_is_written_without_a_comparison(tmp_path):
    grouped(["a"] * 6 + [None] * 2).write_parquet(tmp_path / "s.parquet")
    result = framekit("report", "s.parquet", "--by", "g", "--html", "r.html", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (note,) = [line for line in result.stderr.splitlines() if line.strip()]
    assert (
        note
        == "note: a comparison needs two groups; 'g' has one ('a') and nulls, so the report has none"
    )
    page = (tmp_path / "r.html").read_text()
    assert 'id="by"' in page and 'id="comparison"' not in page
    assert "a comparison needs two groups" in page
    assert "wrote r.html" in result.stdout


def test_group_names_with_escape_sequences_are_printed_escaped(tmp_path):
    hostile = ["\x1b[2J\x1b[31mred", "b\x07\u202eevil", "\x9b31mcsi"]
    grouped([hostile[i % 3] for i in range(12)]).write_parquet(tmp_path / "s.parquet")
    for command in (["report", "s.parquet", "--by", "g"], ["compare", "s.parquet", "--by", "g"]):
        result = framekit(*command, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        printed = result.stdout + result.stderr
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]", printed), command
        assert "\\x1b[2J\\x1b[31mred" in printed and "b\\x07\\u202eevil" in printed
        assert "\\x9b31mcsi" in printed


def test_markup_in_the_data_is_escaped_in_the_html_report(tmp_path):
    script = "<script>alert(1)</script>"
    frame = grouped([script, "\x1b[31mb"] * 4, labels=['"><img src=x onerror=alert(2)>'] * 8)
    page = fk.write_html_report(frame, tmp_path / "r.html", by="g").read_text()
    assert script not in page and html.escape(script) in page
    assert "<img src=x" not in page and "onerror=alert(2)>" not in page
    # The only scripts are the report's own: the rows table's filter.
    assert page.count("<script>") == 1


@pytest.mark.parametrize("source", ["argument", "FRAMEKIT_API_KEY", "header"])
def test_the_html_report_of_a_run_that_echoed_the_key_holds_no_key(
    source, simulator_factory, tmp_path, monkeypatch
):
    monkeypatch.delenv("FRAMEKIT_API_KEY", raising=False)
    options: dict = {"api_key": API_KEY, "max_retries": 1}
    if source == "FRAMEKIT_API_KEY":
        monkeypatch.setenv(source, API_KEY)
        options.pop("api_key")
    elif source == "header":
        options.update(api_key="placeholder", extra_headers={"x-api-key": API_KEY})
    frame = retrieval_frame(8).with_columns(
        # Half the rows fail at an endpoint echoing the request (the key among its headers)
        # in its error, the others are answered by one echoing it inside the answer.
        trace_id=pl.format("trace{}", pl.col("row_id"))
    )
    frame.write_parquet(tmp_path / "in.parquet")
    texts = []
    for mode in ("error", "answer"):
        sim = simulator_factory(echo_headers=mode)
        judge = fk.Judge("openai/sim-judge", api_base=sim.api_base, **options)
        out = tmp_path / f"scored-{mode}.parquet"
        fk.evaluate_parquet(tmp_path / "in.parquet", out, [RetrievalRelevance()], MAPPING,
                            judge=judge, cache=False, progress=False, details=True)  # fmt: skip
        report = framekit("report", out.name, "--html", f"r-{mode}.html", cwd=tmp_path,
                          env={"FRAMEKIT_API_KEY": API_KEY})  # fmt: skip
        assert report.returncode == 0, report.stderr
        page = (tmp_path / f"r-{mode}.html").read_text()
        assert "you sent POST" in page, "the echo reached the page: the scan means something"
        record = fk.io.read_provenance(out)
        assert record is not None
        again = fk.write_html_report(pl.read_parquet(out), tmp_path / "py.html", provenance=record)
        texts += [page, report.stdout, report.stderr, again.read_text()]
    for text in texts:
        assert API_KEY not in text and API_KEY[-8:] not in text
