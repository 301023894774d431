"""Build the run record of one run: what produced its result columns.

The judge part comes from the judge's ``cache_identity()`` (model, decoding parameters,
endpoint without credentials), which leaves out every secret keyword by design; the
record is then passed through the process-wide redaction once more, so a key that slipped
into a parameter value is masked rather than written into a file.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

import polars as pl

from framekit import _secrets
from framekit.engine.stats import RunStats
from framekit.evaluators.base import Evaluator


def _mapping(mapping: Mapping[str, Any] | None) -> dict[str, str] | None:
    """Field -> column name; an expression or callable is named, never serialised."""
    if mapping is None:
        return None
    out: dict[str, str] = {}
    for field, source in mapping.items():
        if isinstance(source, str):
            out[field] = source
        elif isinstance(source, pl.Expr):
            out[field] = f"expression {source}"
        else:
            name = getattr(source, "__qualname__", type(source).__qualname__)
            out[field] = f"callable {getattr(source, '__module__', '?')}.{name}"
    return out


def _judge(judge: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"kind": getattr(judge, "kind", "?"), "model": judge.model}
    # Model, temperature, max_tokens, params and endpoint: the judge's own list of what
    # decides an answer, which never includes api_key and friends.
    with contextlib.suppress(Exception):
        entry.update(judge.cache_identity())
    # The transport asked for (litellm, http, auto); the one used is in the run's counts.
    transport = getattr(judge, "transport", None)
    if isinstance(transport, str):
        entry["transport"] = transport
    processes = getattr(judge, "processes", None)
    if isinstance(processes, int) and processes > 1:
        entry["processes"] = processes
    return entry


def build_record(
    evaluators: Sequence[Evaluator],
    judges: Sequence[Any],
    mapping: Mapping[str, Any] | None,
    stats: RunStats,
    *,
    source: str | None = None,
    failed_rows: int | None = None,
) -> dict[str, Any]:
    """The run record of a run (see :mod:`framekit._provenance`); JSON-ready, no secrets."""
    from framekit._version import __version__

    judge_entries: list[dict[str, Any]] = []
    for ev, judge in zip(evaluators, judges, strict=True):
        entry = _judge(judge)
        same = next(
            (
                j
                for j in judge_entries
                if {**j, "evaluators": None} == {**entry, "evaluators": None}
            ),
            None,
        )
        if same is None:
            entry["evaluators"] = [ev.name]
            judge_entries.append(entry)
        else:
            same["evaluators"].append(ev.name)
    counts: dict[str, int] = {
        "rows": stats.rows,
        "evaluators": len(evaluators),
        "evaluations": stats.evaluations,
        "failed evaluations": stats.failures,
        "requests sent": stats.requests_sent,
        "cache hits": stats.cache_hits,
    }
    if failed_rows is not None:
        counts["rows with errors"] = failed_rows
    record: dict[str, Any] = {
        "framekit_version": __version__,
        "created_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "source": source,
        "judges": judge_entries,
        "evaluators": [
            {
                "name": ev.name,
                "template": ev.cache_namespace(),
                "threshold": ev.threshold,
                "direction": ev.direction,
            }
            for ev in evaluators
        ],
        "mapping": _mapping(mapping),
        # Which transports the calls went through ("http", "litellm"), where recorded.
        "transports": list(getattr(stats, "transports", None) or []),
        "counts": counts,
        "cost_usd": stats.cost_usd,
    }
    secrets = [*_secrets.registered(), *_secrets.env_secrets()]
    plain = json.loads(json.dumps(record, default=str))
    redacted: dict[str, Any] = _secrets.redact_value(plain, secrets)
    return redacted
