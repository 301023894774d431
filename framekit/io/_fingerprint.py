"""The identity of a run, recorded in the manifest: which sources, which configuration.

Parts written under one identity are reused only by a run with the same identity, so a
changed file, evaluator, mapping or judge never picks up another run's results.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from framekit.engine.cache import digest
from framekit.engine.mapping import MappingValue
from framekit.evaluators.base import Evaluator
from framekit.judges.local import LocalJudge
from framekit.judges.resolve import resolve_judge


def _plain(value: Any) -> Any:
    """``value`` if it is plain JSON data (so it fingerprints stably), else ``None``."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)):
        items = [_plain(v) for v in value]
        return None if any(i is None and v is not None for i, v in zip(items, value)) else items
    if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        return {k: _plain(v) for k, v in value.items()}
    return None


def _judge_identity(judge: Any) -> dict[str, Any]:
    identity: dict[str, Any] = {"kind": getattr(judge, "kind", "?"), "model": judge.model}
    # The local model may be missing: scoring will say so, not the fingerprint.
    with contextlib.suppress(Exception):
        identity.update(judge.cache_identity())
    return identity


def _mapping_identity(mapping: Mapping[str, MappingValue] | None) -> Any:
    if mapping is None:
        return None
    out: dict[str, str] = {}
    for name, source in sorted(mapping.items()):
        if isinstance(source, str):
            out[name] = "column:" + source
        elif isinstance(source, pl.Expr):
            out[name] = "expr:" + str(source)
        else:
            code = getattr(source, "__code__", None)
            body = hashlib.sha256(code.co_code).hexdigest()[:16] if code is not None else ""
            qual = getattr(source, "__qualname__", type(source).__qualname__)
            out[name] = f"callable:{getattr(source, '__module__', '?')}.{qual}:{body}"
    return out


def _offline_method(spec: Any, ev: Evaluator) -> str | None:
    """What the offline judge reads ``ev`` with (embeddings, the likelihood scorer, or
    both by record), when it is the judge: parts scored by another method (before the
    ``lm`` extra was installed, or before framekit issue 39 moved Coherence's responses
    without a request to the proxy) are not picked up."""
    if spec is not None and spec != "local" and not isinstance(spec, LocalJudge):
        return None  # an LLM judge (or a cascade): its identity is its model
    with contextlib.suppress(Exception):
        offline = resolve_judge(spec).offline
        if offline is not None:
            return offline.method(ev)
    return None


def run_fingerprint(
    evaluators: Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None,
    judge: Any,
    *,
    details: bool,
    overwrite: bool,
) -> str:
    """A digest of everything that decides the result columns (never an API key)."""
    evs = []
    for ev in evaluators:
        attrs = {k: _plain(v) for k, v in sorted(vars(ev).items()) if k != "judge"}
        spec = ev.judge if ev.judge is not None else judge
        entry = {
            "class": f"{type(ev).__module__}.{type(ev).__qualname__}",
            "namespace": ev.cache_namespace(),
            "attrs": attrs,
            "judge": spec if isinstance(spec, str) else _judge_identity(resolve_judge(spec)),
        }
        method = _offline_method(spec, ev)
        if method is not None:
            entry["method"] = method
        evs.append(entry)
    payload = {
        "evaluators": evs,
        "mapping": _mapping_identity(mapping),
        "details": details,
        "overwrite": overwrite,
    }
    return digest(payload)


def _file_identity(files: Sequence[Path]) -> list[list[Any]]:
    out = []
    for path in files:
        st = path.stat()
        out.append([str(path), st.st_size, st.st_mtime_ns])
    return out
