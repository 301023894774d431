"""Run the Python examples of the README and the manual (``docs/``), page by page.

A page's ``python`` code blocks run in order in one fresh interpreter, sharing one
namespace (a later block may use what an earlier one defined, as a reader would), in a
folder prepared by :func:`make_sandbox` with the files the examples name. The judge the
examples call by name (``openai/...``) is the judge simulator: the runner sets
``OPENAI_BASE_URL`` and a placeholder key, so an example reads as it would for a user.

A block that fails stops its page with the page, the block's first line and the
traceback, so a renamed argument breaks the build at the line that uses it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```(\w*)[^\n]*$")
PYTHON_FENCES = {"python", "py", "pycon"}


@dataclass(frozen=True)
class Block:
    """One fenced Python block: where it starts (1-based line of its first code line)."""

    page: str
    line: int
    code: str


def python_blocks(page: Path) -> list[Block]:
    """Every fenced ``python`` block of a Markdown page, in order (indented fences too)."""
    blocks: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    name = str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else page.name
    i = 0
    while i < len(lines):
        stripped = lines[i].lstrip()
        indent = len(lines[i]) - len(stripped)
        match = FENCE.match(stripped)
        if match is None:
            i += 1
            continue
        start, i = i + 1, i + 1
        while i < len(lines) and not lines[i].strip().startswith("```"):
            i += 1
        if match.group(1) in PYTHON_FENCES:
            code = "\n".join(line[indent:] for line in lines[start:i])
            blocks.append(Block(name, start + 1, code))
        i += 1
    return blocks


def manual_pages() -> list[Path]:
    """The README and every page under ``docs/``."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


# The interpreter a page runs in: each block is compiled under its page and line, so a
# traceback points into the Markdown file.
_DRIVER = """
import json, sys, traceback
blocks = json.load(sys.stdin)
namespace = {"__name__": "__main__"}
for block in blocks:
    try:
        exec(compile(block["code"], f"{block['page']}:{block['line']}", "exec"), namespace)
    except BaseException:
        print(f"example at {block['page']}, line {block['line']}, failed:", file=sys.stderr)
        traceback.print_exc()
        sys.exit(1)
print(f"ran {len(blocks)} blocks")
"""


def run_blocks(
    blocks: list[Block], sandbox: Path, judge_base_url: str | None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run ``blocks`` in one fresh interpreter inside ``sandbox``; the result is returned,
    not raised, so a test can check that a wrong example fails."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FRAMEKIT_", "OPENAI_"))}
    env.update(
        FRAMEKIT_CACHE_DIR=str(sandbox / "cache"),
        MPLBACKEND="Agg",
        PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p),
        # A placeholder: the examples' judge is the local simulator.
        OPENAI_API_KEY="sk-docs-example-0000",
    )
    if judge_base_url:
        env["OPENAI_BASE_URL"] = judge_base_url
    payload = json.dumps([block.__dict__ for block in blocks])
    return subprocess.run(
        [sys.executable, "-c", _DRIVER],
        input=payload,
        capture_output=True,
        text=True,
        cwd=sandbox,
        env=env,
        timeout=timeout,
    )


def make_sandbox(folder: Path) -> Path:
    """The files the examples name, made from the bundled sample:

    - ``runs.parquet``: the sample (question, answer, documents, strategy, ...);
    - ``exports/part-0.parquet``, ``exports/part-1.parquet``: the sample in two files;
    - ``traces/``: the bundled sample of span exports;
    - ``scored.parquet``: the sample scored by the offline judge (response_relevance,
      retrieval_relevance), with its run record;
    - ``labelled.parquet``: the labelled sample scored the same way, with its human labels.
    """
    import framekit as fk
    from framekit.evaluators import ResponseRelevance, RetrievalRelevance

    folder.mkdir(parents=True, exist_ok=True)
    sample = fk.data.load_sample()
    sample.write_parquet(folder / "runs.parquet")
    (folder / "exports").mkdir(exist_ok=True)
    half = sample.height // 2
    sample.head(half).write_parquet(folder / "exports" / "part-0.parquet")
    sample.tail(sample.height - half).write_parquet(folder / "exports" / "part-1.parquet")
    (folder / "traces").mkdir(exist_ok=True)
    shutil.copy(
        fk.data.SAMPLE_TRACES_PATH, folder / "traces" / Path(fk.data.SAMPLE_TRACES_PATH).name
    )
    mapping = {"input": "question", "output": "answer", "context": "documents"}
    evaluators = [ResponseRelevance(), RetrievalRelevance()]
    cache = folder / "cache"
    scored = fk.evaluate_dataframe(
        sample, evaluators, mapping, judge="local", cache=cache, progress=False
    )
    fk.io.write_parquet(scored, folder / "scored.parquet")
    labelled = fk.data.load_labelled_sample()
    scored_labelled = fk.evaluate_dataframe(
        labelled, evaluators, mapping, judge="local", cache=cache, progress=False
    )
    scored_labelled.write_parquet(folder / "labelled.parquet")
    return folder
