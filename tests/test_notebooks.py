"""The example notebooks run top to bottom on the offline judge, and their charts are PNGs."""

from __future__ import annotations

import base64
import os
import re
import struct
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("onnxruntime", reason="the offline judge needs framekit[local]")

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _execute(notebook: nbformat.NotebookNode, folder: Path) -> None:
    """Run ``notebook`` in a fresh python3 kernel, in ``folder``; its outputs are kept."""
    client = nbclient.NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
    )
    client.execute()


def _run(name: str, tmp_path: Path) -> nbformat.NotebookNode:
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    env_before = dict(os.environ)
    os.environ["FRAMEKIT_CACHE_DIR"] = str(tmp_path / "cache")
    os.environ.pop("FRAMEKIT_JUDGE", None)
    try:
        _execute(notebook, tmp_path)
    finally:
        os.environ.clear()
        os.environ.update(env_before)
    _reads_cleanly(notebook)
    return notebook


def _reads_cleanly(notebook: nbformat.NotebookNode) -> None:
    """No stderr (warnings, progress bars), no terminal escape codes, no unused import."""
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            assert output.get("name") != "stderr", (
                f"stderr in {cell.source[:60]!r}: {output.text[:300]}"
            )
            text = str(output.get("text", "")) + str(output.get("data", {}).get("text/plain", ""))
            assert "\x1b[" not in text, f"escape codes in the output of {cell.source[:60]!r}"
            assert "Config" not in text[:40], f"a cell echoes a setting: {text[:80]!r}"
    code = "\n".join(c.source for c in notebook.cells if c.cell_type == "code")
    for module in re.findall(r"^import (\w+)$", code, flags=re.M):
        assert re.search(rf"\b{module}\.", code), f"{module} is imported but never used"


def _pngs(notebook: nbformat.NotebookNode) -> list[tuple[int, int]]:
    sizes = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {}).get("image/png")
            if data:
                raw = base64.b64decode(data)
                assert raw[:8] == b"\x89PNG\r\n\x1a\n"
                sizes.append(struct.unpack(">II", raw[16:24]))
    return sizes


def test_score_traces_notebook_runs(tmp_path):
    notebook = _run("01_score_traces.ipynb", tmp_path)
    texts = "".join(
        str(o.get("data", {}).get("text/plain", ""))
        for c in notebook.cells
        for o in c.get("outputs", [])
    )
    assert "response_relevance" in texts and "mean_retrieval_relevance" in texts
    assert "gen_ai.evaluation.result" in texts  # the scores written back as OTel events


def test_compare_retrieval_notebook_runs_and_plots(tmp_path):
    notebook = _run("02_compare_retrieval.ipynb", tmp_path)
    sizes = _pngs(notebook)
    assert len(sizes) == 2
    assert all(w >= 300 and h >= 200 for w, h in sizes)


def test_judge_agreement_notebook_measures_calibrates_and_gates(tmp_path):
    notebook = _run("03_judge_agreement.ipynb", tmp_path)
    outputs = [o for c in notebook.cells for o in c.get("outputs", [])]
    texts = "".join(
        str(o.get("data", {}).get("text/plain", "")) + str(o.get("text", "")) for o in outputs
    )
    assert "spearman" in texts and "Calibration(response_relevance: threshold" in texts
    assert "exit code 1" in texts  # the CLI gate below its bar
    assert len(_pngs(notebook)) == 1  # confusion matrix + calibration, one figure


def test_cascade_notebook_escalates_calibrates_estimates_and_plots(tmp_path):
    notebook = _run("04_cascade.ipynb", tmp_path)
    texts = "".join(
        str(o.get("data", {}).get("text/plain", "")) + str(o.get("text", ""))
        for c in notebook.cells
        for o in c.get("outputs", [])
    )
    assert "framekit: cascade retrieval_relevance: local/all-MiniLM-L6-v2 decided" in texts
    assert "escalate_below=[" in texts and "lower bound" in texts  # the calibration's reason
    assert "expected share of rows reaching each stage 100%" in texts  # the dry run
    assert "ppi" in texts and "classical" in texts  # fk.estimate's table
    assert len(_pngs(notebook)) == 1  # the cost/agreement curve


def test_pairwise_notebook_ranks_both_views_and_measures_the_bias(tmp_path):
    notebook = _run("05_pairwise.ipynb", tmp_path)
    texts = "".join(
        str(o.get("data", {}).get("text/plain", "")) + str(o.get("text", ""))
        for c in notebook.cells
        for o in c.get("outputs", [])
    )
    assert "pointwise: mean difference" in texts and "pairwise: dense win rate" in texts
    assert "requests: 200 for 100 pairs" in texts  # both orders of 100 pairs
    assert "preference: position bias 0.000" in texts  # the offline judge: none
    assert re.search(r"preference: position bias 0\.[1-9]", texts)  # the biased stand-in
    assert (tmp_path / "pairs.html").exists()


@pytest.mark.parametrize(
    "name",
    [
        "01_score_traces.ipynb",
        "02_compare_retrieval.ipynb",
        "03_judge_agreement.ipynb",
        "04_cascade.ipynb",
        "05_pairwise.ipynb",
    ],
)
def test_stored_notebooks_show_their_outputs_and_read_cleanly(name):
    # GitHub and Jupyter show what is stored: every code cell that prints or draws
    # something has its output there, and nothing alarming (stderr, escape codes).
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert all(c.get("execution_count") for c in code), f"{name} was stored without running"
    assert sum(bool(c.get("outputs")) for c in code) >= len(code) // 2
    _reads_cleanly(notebook)


def test_a_first_run_in_a_fresh_kernel_warns_of_nothing(tmp_path: Path) -> None:
    # The default progress=True in a kernel without ipywidgets: tqdm.auto would warn
    # "IProgress not found"; the run prints its summary line and nothing else.
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(
            "import polars as pl\nimport framekit as fk\n"
            "from framekit.evaluators import RetrievalRelevance\n"
            "df = pl.DataFrame({'question': ['What is compost?'], "
            "'docs': [['Compost is decayed organic matter.']]})\n"
            "scored = fk.evaluate_dataframe(df, [RetrievalRelevance()], "
            "{'input': 'question', 'context': 'docs'}, judge='local', cache=False)"
        )
    ]
    _execute(notebook, tmp_path)
    stderr = "".join(
        o.get("text", "") for o in notebook.cells[0].outputs if o.get("name") == "stderr"
    )
    assert "Warning" not in stderr and "IProgress" not in stderr, stderr
    assert stderr.startswith("framekit: 1 row x 1 evaluator"), stderr
