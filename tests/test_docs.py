"""The manual: every Python example runs, the site builds with --strict, and the API
reference lists every public name (a deliberately wrong example and a broken link fail)."""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import framekit as fk
from framekit.testing import SimulatorProcess
from tests.doc_examples import ROOT, Block, make_sandbox, manual_pages, python_blocks, run_blocks

PAGES = [p for p in manual_pages() if python_blocks(p)]


@pytest.fixture(scope="module")
def sandbox_template(tmp_path_factory):
    return make_sandbox(tmp_path_factory.mktemp("docs-sandbox"))


@pytest.fixture(scope="module")
def simulator():
    sim = SimulatorProcess(startup_timeout=60).start()  # a busy machine starts it slowly
    yield sim
    sim.stop()


@pytest.fixture
def sandbox(sandbox_template, tmp_path):
    folder = tmp_path / "sandbox"
    shutil.copytree(sandbox_template, folder)
    return folder


def test_the_manual_has_examples_on_its_task_pages():
    pages = {b.page for p in manual_pages() for b in python_blocks(p)}
    task_pages = [
        "README.md",
        "docs/index.md",
        "docs/scoring.md",
        "docs/bulk.md",
        "docs/batch.md",
        "docs/ray.md",
        "docs/traces.md",
        "docs/trust.md",
        "docs/reports.md",
    ]
    task_pages += [f"docs/evaluators/{p.name}" for p in (ROOT / "docs/evaluators").glob("*-*.md")]
    assert not [p for p in task_pages if p not in pages], "task pages without an example"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_python_example_runs(page, sandbox, simulator):
    blocks = python_blocks(page)
    result = run_blocks(blocks, sandbox, simulator.api_base)
    assert result.returncode == 0, result.stderr[-4000:]
    assert f"ran {len(blocks)} blocks" in result.stdout


def test_a_wrong_example_fails_naming_its_page_and_line(sandbox):
    page = sandbox / "wrong.md"
    page.write_text(
        "# A page\n\n```python\nimport framekit as fk\n```\n\ntext\n\n"
        "```python\nfk.evaluate_dataframe(fk.data.load_sample(), [], {}, jugde='local')\n```\n"
    )
    blocks = python_blocks(page)
    assert [b.line for b in blocks] == [4, 10]
    result = run_blocks(blocks, sandbox, None)
    assert result.returncode == 1
    assert "example at wrong.md, line 10, failed" in result.stderr
    assert "jugde" in result.stderr


def test_indented_blocks_in_lists_are_examples_too(tmp_path):
    page = tmp_path / "list.md"
    page.write_text("- a step:\n\n    ```python\n    x = 1\n    print(x)\n    ```\n")
    assert python_blocks(page) == [Block("list.md", 4, "x = 1\nprint(x)")]


# --- the site -----------------------------------------------------------------------

mkdocs_missing = importlib.util.find_spec("mkdocs") is None


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


@pytest.mark.skipif(mkdocs_missing, reason="mkdocs is not installed: pip install 'framekit[docs]'")
def test_the_manual_builds_strict(tmp_path):
    result = build(ROOT, tmp_path / "site")
    assert result.returncode == 0, result.stderr[-4000:]
    assert (tmp_path / "site" / "reference" / "scoring" / "index.html").exists()
    html = (tmp_path / "site" / "reference" / "scoring" / "index.html").read_text()
    assert "evaluate_dataframe" in html and "on_error" in html  # rendered from the docstring


@pytest.mark.skipif(mkdocs_missing, reason="mkdocs is not installed: pip install 'framekit[docs]'")
def test_a_broken_link_fails_the_build(tmp_path):
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", copy)
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copytree(ROOT / "framekit", copy / "framekit")
    index = copy / "docs" / "index.md"
    index.write_text(index.read_text() + "\nSee [the missing page](no-such-page.md).\n")
    result = build(copy, tmp_path / "site")
    assert result.returncode != 0
    assert "no-such-page.md" in result.stderr


def reference_targets() -> set[int]:
    """ids of the objects the API reference pages document (``::: path`` and their
    ``members:`` lists)."""
    found: set[int] = set()
    for page in (ROOT / "docs" / "reference").glob("*.md"):
        text = page.read_text()
        for match in re.finditer(r"^::: ([\w.]+)(?:\n(?:    .*\n)*)?", text, re.M):
            path = match.group(1)
            module_name, _, attr = path.rpartition(".")
            try:
                target = importlib.import_module(path)
            except ImportError:
                target = getattr(importlib.import_module(module_name), attr)
            found.add(id(target))
            members = re.search(r"members: \[([^\]]*)\]", match.group(0))
            for name in members.group(1).split(",") if members else []:
                found.add(id(getattr(target, name.strip())))
    return found


def test_the_api_reference_lists_every_public_name():
    documented = reference_targets()
    public = [
        n
        for n in fk.__all__
        if n not in {"plot", "traces", "evaluators", "testing", "data", "io", "report", "ray"}
    ]
    missing = [n for n in public if id(getattr(fk, n)) not in documented]
    from framekit import evaluators, testing

    missing += [
        f"evaluators.{n}"
        for n in evaluators.__all__
        if id(getattr(evaluators, n)) not in documented
    ]
    missing += [
        f"testing.{n}"
        for n in ("JudgeSimulator", "SimulatorConfig", "assert_meets")
        if id(getattr(testing, n)) not in documented
    ]
    assert not missing, f"not in docs/reference/: {missing}"
