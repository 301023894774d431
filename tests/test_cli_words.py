"""What the command line and the library say in their own words: the version, the
end-of-run line, exception names, and the messages a first run is likely to meet."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import framekit as fk
from framekit.evaluators import ClassificationEvaluator, Coherence
from framekit.io._run import ParquetRun
from tests.test_cli import framekit


def test_version_and_demo_takes_o_like_evaluate(tmp_path: Path) -> None:
    version = framekit("--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.strip() == f"framekit {fk.__version__}"
    demo = framekit("demo", "--help", cwd=tmp_path)
    assert "-o DIR, --out DIR, --output DIR" in demo.stdout


def test_the_end_of_run_line_names_the_most_common_error_and_counts_in_english() -> None:
    run = ParquetRun(Path("o.parquet"), rows=1, slices=1, failed_rows=1)
    run.top_error = ("judge timed out", 1)
    line = run.summary()
    assert "wrote 1 row to" in line and "1 row with errors" in line
    assert "(most common, 1x: judge timed out)" in line


def test_parquet_runs_report_their_most_common_error(tmp_path: Path) -> None:
    pl.DataFrame({"output": ["fine", None, None]}).write_parquet(tmp_path / "in.parquet")
    run = fk.evaluate_parquet(
        tmp_path / "in.parquet", tmp_path / "out.parquet", Coherence(), judge="local", cache=False
    )
    assert run.failed_rows == 2 and run.top_error == ("field 'output' is null", 2)


def test_a_traceback_names_the_public_exception() -> None:
    code = "import framekit as fk\nraise fk.JudgeConfigurationError('bad judge')"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stderr.strip().splitlines()[-1] == "framekit.JudgeConfigurationError: bad judge"


def test_a_custom_classifier_on_the_offline_judge_says_what_to_do() -> None:
    tone = ClassificationEvaluator(
        name="tone", prompt_template="Is {output} polite?", choices={"yes": 1.0, "no": 0.0}
    )
    with pytest.raises(fk.JudgeConfigurationError, match="has no offline method.*LLM judge"):
        fk.evaluate_dataframe(
            pl.DataFrame({"output": ["a"]}), [tone], judge="local", cache=False, progress=False
        )


def test_an_empty_mapping_names_the_column_that_would_do() -> None:
    with pytest.raises(fk.MappingError, match=r"a column 'output' exists: map it with mapping="):
        fk.evaluate_dataframe(
            pl.DataFrame({"output": ["a"]}), [Coherence()], {}, judge="local", progress=False
        )
