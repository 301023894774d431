"""What a run says about its confidences: per evaluator, where they came from and how many
rows have one, and how many rows ``scoring="expected"`` had to score by their label."""

from __future__ import annotations

from typing import Any

from framekit.engine.prepare import Prepared
from framekit.judges.cascade import Cascade
from framekit.judges.local import LocalJudge


def confidence_method(share: Prepared) -> str:
    """How the judge of ``share`` gives a confidence: ``"calibrated offline"`` (the
    offline judge's fitted map), ``"self-consistency k=N"`` (``samples=N``), or
    ``"logprobs"`` (token log-probabilities, where the endpoint reports them)."""
    judge = share.judge
    if isinstance(judge, LocalJudge):
        return "calibrated offline"
    if isinstance(judge, Cascade):  # its stages' methods: see framekit.engine.cascade
        return "cascade"
    if judge.samples > 1:
        return f"self-consistency k={judge.samples}"
    return "logprobs"


def confidence_summary(share: Prepared) -> dict[str, Any]:
    """One evaluator's confidence figures for the run record.

    ``method`` is ``None`` when no row got a confidence (a judge without logprobs, an
    evaluator without labels): nothing is reported that the judge did not give.
    """
    scored = [r for r in share.records if r.value is not None]
    rows = sum(r.weight for r in scored)
    confident = sum(r.weight for r in scored if r.confidence is not None)
    entry: dict[str, Any] = {
        "method": confidence_method(share) if confident else None,
        "scored_rows": rows,
        "rows_with_confidence": confident,
        "scoring": share.evaluator.scoring,
    }
    if share.evaluator.scoring == "expected":
        entry["rows_scored_by_label"] = sum(r.weight for r in scored if not r.weighted)
    return entry
