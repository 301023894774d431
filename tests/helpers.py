"""Small builders shared by the engine tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

import framekit as fk
from framekit.testing import JudgeSimulator

API_KEY = "sk-framekit-test-SECRET-0123456789"
#: The transport ``sim_judge`` builds judges with; the ``transport`` fixture (conftest.py)
#: sets it so a whole module runs once per transport.
TRANSPORT = "auto"


def sim_judge(sim: JudgeSimulator, **options: Any) -> fk.Judge:
    """A judge pointed at the simulator (the key is a canary for leak checks)."""
    options.setdefault("api_key", API_KEY)
    if options.get("processes", 1) == 1:
        options.setdefault("transport", TRANSPORT)
    return fk.Judge("openai/sim-judge", api_base=sim.api_base, **options)


def batch_judge(sim: JudgeSimulator, model: str = "openai/gpt-4o-mini", **options: Any) -> fk.Judge:
    """A batch-mode judge at the simulator's batch API, polling it every 20 ms."""
    options.setdefault("batch_poll", 0.02)
    options.setdefault("api_key", API_KEY)
    return fk.Judge(model, api_base=sim.api_base, batch=True, **options)


def score_retrieval(df: pl.DataFrame, judge: Any, cache: Any, **kw: Any) -> pl.DataFrame:
    """``df`` scored by RetrievalRelevance with ``MAPPING``, quietly (a polars frame)."""
    from framekit.evaluators import RetrievalRelevance

    out = fk.evaluate_dataframe(
        df, [RetrievalRelevance()], MAPPING, judge=judge, cache=cache, progress=False, **kw
    )
    assert isinstance(out, pl.DataFrame)
    return out


def retrieval_frame(n: int, distinct: int | None = None, label: str | None = None) -> pl.DataFrame:
    """``n`` rows of (question, docs); ``distinct`` of them differ; an optional marker label."""
    distinct = distinct or n
    marker = f" @sim(label={label})" if label else ""
    return pl.DataFrame(
        {
            "row_id": list(range(n)),
            "question": [f"What is item {i % distinct}?{marker}" for i in range(n)],
            "docs": [[f"Item {i % distinct} is a thing.", "Unrelated text."] for i in range(n)],
        }
    )


MAPPING = {"input": "question", "context": "docs"}
#: ``MAPPING`` and RetrievalRelevance as the ``framekit evaluate`` command takes them.
RETRIEVAL_CLI_ARGS = (
    "-e",
    "retrieval_relevance",
    "--map",
    "input=question",
    "--map",
    "context=docs",
)


def assert_no_key(texts: list[str], root: Path | None = None) -> None:
    """The key scan: ``API_KEY`` (or its last 8 characters) is in none of ``texts`` nor
    in any file under ``root`` (output Parquet, the cache, anything a run left there)."""
    texts = list(texts)
    for path in root.rglob("*") if root is not None else ():
        if path.suffix == ".parquet":
            # Compressed bytes may hold the key's 8-character tail by chance: scan the
            # raw bytes for the whole key and the decoded values for the tail.
            assert API_KEY.encode() not in path.read_bytes(), path
            texts.append(str(pl.read_parquet(path).to_dicts()))
        elif path.is_file():
            texts.append(path.read_bytes().decode("latin-1"))
    for text in texts:
        assert API_KEY not in text and API_KEY[-8:] not in text, text[:300]
