"""The run record ("provenance") of a scored table: stored, read back, described.

A run record says what produced the result columns: framekit's version, the time, the
input, the judge (model, transport, decoding parameters; never a credential), the
evaluators with their template versions and thresholds, the mapping, counts and cost.
The engine builds it (``framekit.engine.provenance``); this module only stores it as
JSON under the key ``"framekit"`` of a Parquet file's key-value metadata, reads it back,
and turns it into lines of text. It imports nothing of framekit, so the report (which
may read frames only) can use it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: Key of the run record in a Parquet file's key-value metadata.
METADATA_KEY = "framekit"

#: Said wherever scores of the offline judge are shown.
PROXY_NOTE = (
    "scored by the offline local judge: embedding similarity, a proxy for relevance "
    "that cannot check facts; not an LLM verdict"
)


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
        params = {k: v for k, v in judge.items() if k not in ("kind", "model", "evaluators")}
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
                f" ({ev.get('direction')})",
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
    if "cost_usd" in record:
        cost = record["cost_usd"]
        out.append(("cost", "unknown" if cost is None else f"${cost:.4f}"))
    return out
