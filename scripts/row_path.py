"""Print the framekit files one row passes through, from its frame to its columns.

One row is scored by ``fk.evaluate_dataframe`` (RetrievalRelevance, a judge on the HTTP
transport, the judge simulator in a process of its own, a fresh cache). The row carries a
unique marker: in its question, and (through an ``@sim(explanation=...)`` marker) in the
judge's answer. Every call into framekit is watched, and a function is on the row's path
when one of its arguments holds the marker: the frame, the field values, the record, the
prompt, the request, the reply, the answer, the verdict, the result or a column. ``self``
is not looked into (a method of an object that merely holds the row does not count),
nor are counters, pacing and timers, which see a token count or a coroutine, not the row.

Run it on any checkout: ``python scripts/row_path.py`` (``--functions`` also lists the
functions of each file). Files are listed in the order the row first reaches them.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

import polars as pl

import framekit as fk
from framekit.evaluators import RetrievalRelevance
from framekit.testing import SimulatorProcess

PACKAGE = Path(fk.__file__).resolve().parent
#: The simulator and the test helpers are not framekit's path.
SKIPPED = (PACKAGE / "testing",)


def holds(value: Any, marker: str, depth: int = 8) -> bool:
    """Whether ``value`` (or what it holds, a few levels down) carries ``marker``."""
    if isinstance(value, str):
        return marker in value
    if isinstance(value, (bytes, bytearray)):
        return marker.encode() in value
    if depth == 0 or value is None or isinstance(value, (int, float, bool, type)):
        return False
    if isinstance(value, pl.DataFrame):
        return any(holds(s, marker, depth - 1) for s in value.iter_columns())
    if isinstance(value, pl.Series):
        return value.dtype == pl.String and value.str.contains(marker, literal=True).any()
    if isinstance(value, dict):
        return any(holds(v, marker, depth - 1) for v in value.values())
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(holds(v, marker, depth - 1) for v in list(value)[:200])
    if callable(value):
        return False  # a function or a bound method is not the row
    fields = getattr(value, "__dict__", None)
    if fields is None and hasattr(type(value), "__slots__"):
        fields = {n: getattr(value, n, None) for n in type(value).__slots__}
    return isinstance(fields, dict) and any(holds(v, marker, depth - 1) for v in fields.values())


def trace(marker: str) -> dict[str, list[str]]:
    """File -> functions (in order) that the row's data entered."""
    path: dict[str, list[str]] = {}

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "call":
            return
        file = Path(frame.f_code.co_filename)
        if not file.is_relative_to(PACKAGE) or file.is_relative_to(*SKIPPED):
            return
        arguments = {k: v for k, v in frame.f_locals.items() if k not in ("self", "cls")}
        if any(holds(v, marker) for v in arguments.values()):
            functions = path.setdefault(str(file.relative_to(PACKAGE.parent)), [])
            if frame.f_code.co_qualname not in functions:
                functions.append(frame.f_code.co_qualname)

    with SimulatorProcess() as sim, tempfile.TemporaryDirectory() as cache:
        judge = fk.Judge(
            "openai/sim-judge", api_base=sim.api_base, api_key="sk-row-path", transport="http"
        )
        row = pl.DataFrame(
            {
                "question": [f"What is {marker}? @sim(explanation={marker})"],
                "docs": [[f"{marker} is a thing.", "Unrelated text."]],
            }
        )
        mapping = {"input": "question", "context": "docs"}
        warm = row.with_columns(pl.col("question").str.replace(marker, "warm-up", literal=True))
        fk.evaluate_dataframe(
            warm, [RetrievalRelevance()], mapping, judge=judge, cache=cache, progress=False
        )  # imports and tables built once are not the row's path
        # Threads started meanwhile (the cache's writer, which saves the answer) too.
        threading.setprofile(profile)
        sys.setprofile(profile)
        try:
            scored = fk.evaluate_dataframe(
                row, [RetrievalRelevance()], mapping, judge=judge, cache=cache, progress=False
            )
        finally:
            sys.setprofile(None)
            threading.setprofile(None)
    explanation = scored["retrieval_relevance_explanation"][0]
    assert marker in (explanation or ""), f"the marker did not reach the columns: {explanation}"
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--functions", action="store_true", help="list each file's functions")
    args = parser.parse_args()
    path = trace(f"marker{uuid.uuid4().hex[:12]}")
    print(f"{len(path)} files between fk.evaluate_dataframe and the row's columns:")
    for i, (file, functions) in enumerate(path.items(), 1):
        shown = f": {', '.join(functions)}" if args.functions else ""
        print(f"{i:3d}. {file}{shown}")


if __name__ == "__main__":
    main()
