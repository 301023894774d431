"""Small builders shared by the engine tests."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
from collections.abc import Iterator
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


def score_retrieval(
    df: pl.DataFrame, judge: Any, cache: Any, version: str | None = None, **kw: Any
) -> pl.DataFrame:
    """``df`` scored by RetrievalRelevance (its template ``version``, default its default)
    with ``MAPPING``, quietly (a polars frame)."""
    from framekit.evaluators import RetrievalRelevance

    ev = RetrievalRelevance(version=version)
    out = fk.evaluate_dataframe(df, [ev], MAPPING, judge=judge, cache=cache, progress=False, **kw)
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


# A RAG frame as a team has it: three strategies per question, a list of retrieved
# documents, many rows tied at 0.0, long error messages. Question 7 has the one gap of 1.0.
STRATEGIES = ("bm25", "dense", "hybrid")
RAG_ERROR = (
    "judge timed out after 3 retries: the endpoint answered 504 Gateway Timeout every time "
    "(last attempt 61.2 s after the first)"
)


def rag_frame(questions: int = 30) -> pl.DataFrame:
    rows = []
    for q in range(questions):
        for s, strategy in enumerate(STRATEGIES):
            score = {7: (0.0, 1.0, 0.5)}.get(q, (0.0, 0.25 * ((q + s) % 3), 0.0))[s]
            failed = q % 9 == 4 and strategy == "hybrid"
            rows.append(
                {
                    "question_id": q,
                    "strategy": strategy,
                    "question": f"Question {q}: how long does a compost pile take to mature "
                    "when it is turned every week in a cold climate?",
                    "answer": f"Answer {q} by {strategy}: " + "it depends on the mix. " * 12,
                    "documents": [
                        f"Doc {q}.{strategy}.{d}: " + "a compost pile needs air and water. " * 8
                        for d in range(3)
                    ],
                    "rr_score": None if failed else score,
                    "rr_label": None if failed else ("relevant" if score >= 0.5 else "irrelevant"),
                    "rr_passed": None if failed else score >= 0.5,
                    "rr_explanation": None if failed else "the documents " + "say little. " * 20,
                    "rr_error": RAG_ERROR if failed else None,
                }
            )
    return pl.DataFrame(rows)


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


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """Make ``path`` read-only for this process; as root (which ignores modes) by also
    acting as the unprivileged user "nobody" meanwhile."""
    entries = [path, *path.rglob("*")]
    modes = {p: p.stat().st_mode for p in entries}
    for p in entries:
        p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        if os.geteuid() == 0:
            os.seteuid(65534)
            try:
                yield
            finally:
                os.seteuid(0)
        else:
            yield
    finally:
        for p, mode in modes.items():
            p.chmod(mode)


class RawClient:
    """Keep-alive raw HTTP to one simulator's chat endpoint, for tests of the simulator
    itself: thousands of requests in a second or two, no client library in between."""

    def __init__(self, sim: JudgeSimulator) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=10)

    def post(self, payload: dict[str, Any]) -> tuple[int, Any]:
        """``(status, decoded body)`` of one ``POST /v1/chat/completions``."""
        self.connection.request(
            "POST",
            "/v1/chat/completions",
            json.dumps(payload),
            {"content-type": "application/json"},
        )
        response = self.connection.getresponse()
        return response.status, json.loads(response.read())
