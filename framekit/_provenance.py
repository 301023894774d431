"""The run record ("provenance") of a scored table: built, stored, read back, described.

A run record says what produced the result columns: framekit's version, the time, the
input, the judge (model, transport, decoding parameters; never a credential), the
evaluators with their template versions and thresholds, the mapping, counts and cost.
Every run builds one (:func:`build`, kept in its ``RunStats.provenance``); Parquet files a
run writes store it as JSON under the key ``"framekit"`` of their key-value metadata
(:func:`to_metadata`), from where :func:`read` takes it back and :func:`describe` turns it
into lines of text. It is a shared basic, so the report (which may read frames only)
reads it too.

The judge part comes from the judge's ``cache_identity()`` (model, decoding parameters,
endpoint without credentials), which leaves out every secret keyword by design; the
record is then passed through the process-wide redaction once more, so a key that slipped
into a parameter value is masked rather than written into a file.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from framekit import _secrets
from framekit._version import __version__

if TYPE_CHECKING:
    from framekit.engine.stats import RunStats

#: Key of the run record in a Parquet file's key-value metadata.
METADATA_KEY = "framekit"

#: Said wherever scores of the offline judge are shown.
PROXY_NOTE = (
    "scored by the offline local judge: embedding similarity, a proxy for relevance "
    "that cannot check facts; not an LLM verdict"
)


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
    return _masked_models(entry)


def _masked_models(value: Any) -> Any:
    """``value`` with every model string (any string) shown as :func:`_secrets.mask_keys`
    shows it: an API key given as the model is not kept in the file's footer."""
    if isinstance(value, str):
        return _secrets.mask_keys(value)
    if isinstance(value, dict):
        return {k: _masked_models(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_masked_models(v) for v in value]
    return value


def _invocation(ev: Any) -> dict[str, Any]:
    params = getattr(ev, "invocation_parameters", None)
    return dict(params) if isinstance(params, Mapping) else {}


def _evaluator(ev: Any, judge: Any, stats: RunStats) -> dict[str, Any]:
    entry = {
        "name": ev.name,
        "template": ev.cache_namespace(),
        "threshold": ev.threshold,
        "direction": ev.direction,
        **({"labels": _remember_rubric(ev)} if _choices(ev) else {}),
        "scoring": getattr(ev, "scoring", "label"),
        # Decoding given to this evaluator alone, over its judge's (also in its judge entry).
        **({"invocation_parameters": params} if (params := _invocation(ev)) else {}),
        # Where the row confidences came from and how many rows have one.
        "confidence": (getattr(stats, "confidence", None) or {}).get(ev.name),
    }
    # The offline judge says what scored it: an embedding proxy or the likelihood scorer.
    method = getattr(judge, "method", None)
    if callable(method):
        entry["method"] = method(ev)
    return entry


def build(
    evaluators: Sequence[Any],
    judges: Sequence[Any],
    mapping: Mapping[str, Any] | None,
    stats: RunStats,
    *,
    source: str | None = None,
    failed_rows: int | None = None,
) -> dict[str, Any]:
    """The run record of a run (one judge per evaluator); JSON-ready, no secrets."""
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
        "evaluators": [_evaluator(ev, judge, stats) for ev, judge in zip(evaluators, judges)],
        "mapping": _mapping(mapping),
        # Which transports the calls went through ("http", "litellm"), where recorded.
        "transports": list(getattr(stats, "transports", None) or []),
        "counts": counts,
        "cost_usd": stats.cost_usd,
    }
    figures = getattr(stats, "cost_figures", None)
    if callable(figures):  # cost per 1,000 rows, savings, budget (engine/savings.py)
        record["cost"] = figures()
    stages = getattr(stats, "stages", None)
    if stages:  # a cascade: what each stage decided, sent and cost
        record["cascade"] = stages
    secrets = [*_secrets.registered(), *_secrets.env_secrets()]
    plain = json.loads(json.dumps(record, default=str))
    redacted: dict[str, Any] = _secrets.redact_value(plain, secrets)
    return redacted


def with_pairwise(
    record: Mapping[str, Any], mapping: Mapping[str, Any] | None, pairwise: Mapping[str, Any]
) -> dict[str, Any]:
    """A pairwise run's record: the engine's record of its two-orders requests, with the
    caller's mapping (not the internal one) and a ``pairwise`` entry (``by``, ``on``,
    ``against``, ``groups``, ``pairs``, ``position_bias`` and per evaluator its counts)."""
    out = dict(record)
    out["mapping"] = _mapping(mapping)
    counts = dict(out.get("counts") or {})
    counts["pairs"] = pairwise.get("pairs")
    out["counts"] = counts
    out["pairwise"] = json.loads(json.dumps(dict(pairwise), default=str))
    return out


#: Evaluator name -> its rubric (label -> score), as the latest run in this process used
#: it: what ``fk.agreement`` reads a label on when the judge never chose that label.
_RUBRICS: dict[str, dict[str, float]] = {}


def _choices(evaluator: Any) -> dict[str, float] | None:
    choices = getattr(evaluator, "choices", None)
    return {str(k): float(v) for k, v in choices.items()} if isinstance(choices, dict) else None


def _remember_rubric(evaluator: Any) -> dict[str, float]:
    choices = _choices(evaluator) or {}
    _RUBRICS[evaluator.name] = choices
    return choices


def known_rubric(name: str, record: dict[str, Any] | None = None) -> dict[str, float] | None:
    """The labels and scores of evaluator ``name``'s rubric: from ``record`` (a run
    record) when it has them, else from the latest run of this process, else ``None``.

    Examples
    --------
    >>> known_rubric("no such evaluator") is None
    True
    """
    for ev in (record or {}).get("evaluators") or []:
        if ev.get("name") == name and isinstance(ev.get("labels"), dict):
            return {str(k): float(v) for k, v in ev["labels"].items()}
    return _RUBRICS.get(name)


def _confidence_text(evaluator: Mapping[str, Any]) -> str:
    """``; confidence by logprobs (98 of 100 rows), expected scores`` for a header."""
    conf = evaluator.get("confidence") or {}
    text = ""
    if conf.get("method"):
        text = (
            f"; confidence by {conf['method']} ({conf.get('rows_with_confidence')} of "
            f"{conf.get('scored_rows')} rows)"
        )
    if evaluator.get("scoring") == "expected":
        text += f"; expected scores ({conf.get('rows_scored_by_label', '?')} rows by label)"
    return text


def source_label(source: Any) -> str:
    """What was scored, in a few words: file paths, or the SQL query of a relation."""
    query = getattr(source, "sql_query", None)
    if callable(query):
        try:
            return "DuckDB query: " + " ".join(str(query()).split())
        except Exception:  # a relation that cannot show its query is still a relation
            return "a DuckDB relation"
    if isinstance(source, (str, os.PathLike)):
        return str(source)
    files = [str(p) for p in source] if isinstance(source, Sequence) else [str(source)]
    if len(files) > 3:
        return ", ".join(files[:3]) + f" and {len(files) - 3} more files"
    return ", ".join(files)


def to_metadata(record: Mapping[str, Any]) -> dict[bytes, bytes]:
    """The record as Parquet key-value metadata (``{b"framekit": json}``)."""
    return {METADATA_KEY.encode(): json.dumps(record, sort_keys=True, default=str).encode()}


def read(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The run record stored in a Parquet file, or ``None`` when it has none.

    Only the file footer is read, never the data.
    """
    import pyarrow.parquet as pq

    metadata = pq.read_schema(Path(path)).metadata or {}
    raw = metadata.get(METADATA_KEY.encode())
    if raw is None:
        return None
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def is_offline(record: Mapping[str, Any] | None) -> bool:
    """True when every judge of the record is the offline local judge."""
    judges = (record or {}).get("judges") or []
    return bool(judges) and all(j.get("kind") == "local" for j in judges)


def describe(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, text) pairs for a header: what made these scores."""
    out: list[tuple[str, str]] = []
    out.append(("framekit", str(record.get("framekit_version", "?"))))
    if record.get("created_utc"):
        out.append(("created (UTC)", str(record["created_utc"])))
    if record.get("source"):
        out.append(("input", str(record["source"])))
    for judge in record.get("judges") or []:
        # Settings left empty (no extra parameters, no endpoint) say nothing: not "params={}".
        params = {
            k: v
            for k, v in judge.items()
            if k not in ("kind", "model", "evaluators") and v not in (None, "", {}, [])
        }
        text = f"{judge.get('model')} ({judge.get('kind')})"
        if params:
            text += "; " + ", ".join(f"{k}={v}" for k, v in sorted(params.items()))
        if judge.get("evaluators"):
            text += "; for " + ", ".join(judge["evaluators"])
        out.append(("judge", text))
    for ev in record.get("evaluators") or []:
        out.append(
            (
                "evaluator",
                f"{ev.get('name')}: {ev.get('template')}, threshold {ev.get('threshold')}"
                f" ({ev.get('direction')})"
                + _confidence_text(ev)
                + (f", scored by {ev['method']}" if ev.get("method") else ""),
            )
        )
    if record.get("mapping"):
        mapping = record["mapping"]
        text = (
            ", ".join(f"{k}={v}" for k, v in mapping.items())
            if isinstance(mapping, dict)
            else str(mapping)
        )
        out.append(("mapping", text))
    if record.get("transports"):
        out.append(("calls via", ", ".join(record["transports"])))
    counts = record.get("counts") or {}
    if counts:
        out.append(("counts", ", ".join(f"{k} {v}" for k, v in counts.items())))
    pairwise = record.get("pairwise")
    if isinstance(pairwise, dict):
        against = pairwise.get("against")
        versus = f"against {against}" if against else "every two groups"
        out.append(
            (
                "pairwise",
                f"{pairwise.get('pairs')} pairs of {pairwise.get('by')} per "
                f"{', '.join(map(str, pairwise.get('on') or []))} ({versus}), each asked in "
                "both orders",
            )
        )
        for name, share in (pairwise.get("position_bias") or {}).items():
            shown = "unknown" if share is None else f"{share:.3f}"
            out.append(("position bias", f"{name}: {shown}"))
    if "cost_usd" in record:
        cost = record["cost_usd"]
        out.append(("cost", "unknown" if cost is None else f"${cost:.4f}"))
    out += _cost_rows(record.get("cost") or {})
    return out


#: How the report names each saving of the run record's ``cost.saved_usd``.
_SAVINGS = {
    "dedup": "identical requests sent once",
    "cache": "answers from framekit's cache",
    "batch": "batch API discount",
    "prompt_cache": "provider's cached prompt tokens",
}


def cost_line(record: Mapping[str, Any] | None) -> str | None:
    """The run record's cost figures as one line for a terminal (``None``: none kept).

    Examples
    --------
    >>> print(cost_line({"cost": {"cost_per_1000_rows_usd": 0.5, "saved_usd": {"cache": 0.2}}}))
    cost per 1,000 rows: $0.5000; saved: $0.2000 by answers from framekit's cache
    """
    rows = _cost_rows((record or {}).get("cost") or {})
    return "; ".join(f"{label}: {text}" for label, text in rows) if rows else None


def _cost_rows(cost: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The run record's cost figures (cost per 1,000 rows, savings, budget) as header rows.

    Examples
    --------
    >>> _cost_rows({"cost_per_1000_rows_usd": 0.5, "saved_usd": {"dedup": 0.1, "cache": 0.0},
    ...             "budget": {"max_cost_usd": 5.0, "spent_usd": 4.9, "rows_left": 3}})
    [('cost per 1,000 rows', '$0.5000'), ('saved', '$0.1000 by identical requests sent once'), ('budget', '$4.9000 spent of $5.0000; 3 rows left unscored')]
    """
    out: list[tuple[str, str]] = []
    per = cost.get("cost_per_1000_rows_usd")
    if per is not None:
        out.append(("cost per 1,000 rows", f"${per:.4f}"))
    saved = cost.get("saved_usd") or {}
    said = [
        f"${saved[name]:.4f} by {text}" if saved[name] is not None else f"unknown by {text}"
        for name, text in _SAVINGS.items()
        if name in saved and saved[name] != 0
    ]
    if said:
        out.append(("saved", "; ".join(said)))
    budget = cost.get("budget")
    if budget:
        spent = budget.get("spent_usd")
        shown = "unknown" if spent is None else f"${spent:.4f}"
        out.append(
            (
                "budget",
                f"{shown} spent of ${budget['max_cost_usd']:.4f}; "
                f"{budget.get('rows_left', 0)} rows left unscored",
            )
        )
    return out
