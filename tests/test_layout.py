"""The package's layout holds: the import contract is checked and catches a bad import,
public names stay where users find them, and user-input errors are InputError."""

from __future__ import annotations

import doctest
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import framekit as fk
from framekit import InputError

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def tree_copy(tmp_path: Path) -> Path:
    """framekit's sources and its import contract, copied where a test may break them."""
    if not LINT_IMPORTS.exists():
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    shutil.copytree(
        ROOT / "framekit", tmp_path / "framekit", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    return tmp_path


def _add_line(path: Path, line: str) -> None:
    text = path.read_text()
    # After the module docstring and the __future__ import, where an import belongs.
    anchor = "from __future__ import annotations\n"
    assert anchor in text, path
    path.write_text(text.replace(anchor, anchor + line + "\n", 1))


def test_the_import_contract_holds(tree_copy: Path) -> None:
    result = _lint_imports(tree_copy)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_an_upward_import_breaks_the_contract(tree_copy: Path) -> None:
    # The column contract is a shared basic: it must not reach up into the engine.
    _add_line(tree_copy / "framekit" / "_result_columns.py", "import framekit.engine.planner")
    result = _lint_imports(tree_copy)
    assert result.returncode != 0
    assert "framekit._result_columns -> framekit.engine.planner" in result.stdout


def test_a_cycle_inside_a_package_breaks_the_contract(tree_copy: Path) -> None:
    # Two modules of one layer importing each other: only the cycle check sees it.
    _add_line(
        tree_copy / "framekit" / "evaluators" / "base.py", "import framekit.evaluators.rubric"
    )
    result = _lint_imports(tree_copy)
    assert result.returncode != 0
    assert "No cycles are allowed in framekit.evaluators" in result.stdout


def test_analysis_may_not_reach_into_the_engine(tree_copy: Path) -> None:
    _add_line(tree_copy / "framekit" / "analysis" / "plot.py", "import framekit.engine.cache")
    result = _lint_imports(tree_copy)
    assert result.returncode != 0
    assert "framekit.analysis.plot -> framekit.engine.cache" in result.stdout


def test_public_names_are_where_they_were() -> None:
    from framekit.analysis import compare, summarize, write_html_report

    assert fk.summarize is summarize
    assert fk.compare is compare
    assert fk.write_html_report is write_html_report
    assert fk.plot.means.__module__ == "framekit.analysis.plot"
    assert fk.report.summarize is summarize  # fk.report: the old home of the analysis
    import framekit.plot as fkplot  # `import framekit.plot` keeps working

    assert fkplot.distributions is fk.plot.distributions
    for name in fk.__all__:
        assert getattr(fk, name) is not None, name


def test_python_dash_m_framekit_is_the_framekit_command(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_OFFLINE_MODE": "true"}
    missing = str(tmp_path / "missing.parquet")
    results = [
        subprocess.run(
            [sys.executable, *launcher, "evaluate", missing, "-o", "x.parquet", "-e", "coherence"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )  # fmt: skip
        for launcher in (["-m", "framekit"], ["-m", "framekit.cli"])
    ]
    assert [r.returncode for r in results] == [2, 2]
    assert results[0].stderr == results[1].stderr
    assert "framekit: error:" in results[0].stderr and "Traceback" not in results[0].stderr


def test_a_judge_of_the_wrong_type_is_an_input_error() -> None:
    df = pl.DataFrame({"question": ["q"], "docs": ["d"]})
    from framekit.evaluators import RetrievalRelevance

    with pytest.raises(InputError, match="judge must be a model string") as caught:
        fk.evaluate_dataframe(
            df, [RetrievalRelevance()], {"input": "question", "context": "docs"},
            judge=42, cache=False, progress=False,  # type: ignore[arg-type]
        )  # fmt: skip
    assert isinstance(caught.value, TypeError)  # what it raised before, still caught


def test_a_bad_trace_level_or_a_missing_export_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="level must be"):
        fk.traces.load(tmp_path, level="turn")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="no such span export") as caught:
        fk.traces.load(tmp_path / "nope.jsonl")
    assert isinstance(caught.value, FileNotFoundError)  # what it raised before


def test_a_classification_evaluator_is_a_rubric_built_through_its_base() -> None:
    from framekit.evaluators import ClassificationEvaluator, RetrievalRelevance

    tone = ClassificationEvaluator("tone", "Polite?\n{output}", {"polite": 1.0, "rude": 0.0})
    builtin = RetrievalRelevance()
    # Every attribute a built-in rubric sets in __init__ is set on the custom one too.
    assert set(vars(builtin)) - {"_schema_cache"} <= set(vars(tone))
    assert tone.spec.user == "Polite?\n{output}" and tone.version == "custom"
    request = tone.build_request({"output": "thanks!"})
    assert "thanks!" in request.messages[1]["content"]
    assert request.choices == ("polite", "rude")


@pytest.mark.parametrize(
    "module",
    [
        "framekit._result_columns",
        "framekit.analysis._table",
        "framekit.analysis.report",
        "framekit.evaluators.registry",
    ],
)
def test_docstring_examples_run(module: str) -> None:
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
