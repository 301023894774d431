"""The simulator as a pairwise judge: which of two candidates is better, with a bias for
the first one shown.

Pure functions, no I/O, deterministic: a test computes the answer from the prompt alone.

When it answers
    A request is pairwise when its answer schema's label (the first property with an
    ``enum``) offers ``"A"`` and ``"B"`` (and maybe ``"tie"``), and its subject (the user
    message holding the data blocks) holds exactly two ``@sim(quality=q)`` markers: the
    first is the quality of the candidate shown first (A), the second of the one shown
    second (B), wherever the template puts its delimiters. A ``label=`` marker still
    overrides the answer; otherwise the rest of the answer (the explanation, first) is
    built as for any rubric.

What it answers (a :class:`PairwiseJudge`, per model name, ``SimulatorConfig.pairwise_judges``)
    With probability ``bias`` the answer is ``"A"`` whatever the candidates: the judge
    followed the position. Otherwise it judges on quality: ``"tie"`` when the qualities
    are within ``tie_margin`` (and the schema allows a tie), else ``"A"`` with probability
    ``1 / (1 + exp(-slope * (q_A - q_B)))`` and ``"B"`` otherwise: a Bradley-Terry judge
    whose strength of a candidate is ``slope * quality``. The draws are seeded by the
    judge's ``seed``, the model name and the subject, so the same request is answered the
    same way (a re-ask or a cache sees one judge), and the two orders of a pair, whose
    subjects differ, are two independent draws. The label probabilities reported (as
    logprobs) are the true ones: ``P(A) = bias + (1 - bias) * p``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from framekit.testing import _sim_logprobs

__all__ = ["PairwiseJudge", "pairwise_verdict", "qualities"]

_MARKER = re.compile(r"@sim\(([^)]*)\)")
_QUALITY = re.compile(
    r"(?:^|,)\s*quality\s*=\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*(?:,|$)"
)
FIRST, SECOND, TIE = "A", "B", "tie"


@dataclass(frozen=True)
class PairwiseJudge:
    """A pairwise judge of known position bias and known taste (see the module docstring).

    Parameters
    ----------
    bias
        The share of answers that say ``"A"`` (the candidate shown first) whatever the
        candidates are.
    slope
        How sharply quality decides: ``P(A) = 1 / (1 + exp(-slope * (q_A - q_B)))`` when
        the judge looks at the candidates.
    tie_margin
        Qualities this close (``|q_A - q_B| <= tie_margin``) are a tie, when the schema
        offers one.
    seed
        Seeds the draws.

    Examples
    --------
    >>> PairwiseJudge(bias=0.3).probabilities(0.7, 0.7, allow_tie=False)
    {'A': 0.65, 'B': 0.35}
    """

    bias: float = 0.0
    slope: float = 4.0
    tie_margin: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.bias <= 1.0:
            raise ValueError(f"bias must be in [0, 1], got {self.bias!r}")
        if self.slope < 0 or self.tie_margin < 0:
            raise ValueError("slope and tie_margin must be >= 0")

    @classmethod
    def coerce(cls, value: Any) -> PairwiseJudge:
        """A :class:`PairwiseJudge` from itself or its fields as a dict (JSON config)."""
        if isinstance(value, PairwiseJudge):
            return value
        if isinstance(value, Mapping):
            return cls(**dict(value))
        raise ValueError(
            f"a pairwise judge is a PairwiseJudge or a dict of its fields, got {value!r}"
        )

    def probabilities(self, first: float, second: float, *, allow_tie: bool) -> dict[str, float]:
        """The probability of each answer for candidates of quality ``first`` (shown first)
        and ``second``."""
        if allow_tie and abs(first - second) <= self.tie_margin:
            return {FIRST: self.bias, SECOND: 0.0, TIE: 1.0 - self.bias}
        better = 1.0 / (1.0 + math.exp(-self.slope * (first - second)))
        out = {
            FIRST: self.bias + (1.0 - self.bias) * better,
            SECOND: (1.0 - self.bias) * (1 - better),
        }
        return {**out, TIE: 0.0} if allow_tie else out


def qualities(subject: str) -> tuple[float, float] | None:
    """The two candidates' qualities, in the order shown, or ``None`` unless the subject
    holds exactly two ``quality=`` markers.

    Examples
    --------
    >>> qualities("[A] good @sim(quality=0.8) [B] poor @sim(quality=0.2)")
    (0.8, 0.2)
    """
    found = [
        float(match.group(1))
        for marker in _MARKER.finditer(subject)
        if (match := _QUALITY.search(marker.group(1)))
    ]
    return (found[0], found[1]) if len(found) == 2 else None


def pairwise_verdict(
    judge: PairwiseJudge,
    schema: Mapping[str, Any],
    subject: str,
    markers: Mapping[str, Any],
    model: str,
) -> _sim_logprobs.Verdict | None:
    """The verdict of a pairwise request, or ``None`` when the request is not one (see the
    module docstring) or a ``label=`` marker decides."""
    found = _sim_logprobs.label_property(schema)
    shown = qualities(subject)
    if found is None or shown is None:
        return None
    field, labels = found
    if field in markers or not {FIRST, SECOND} <= set(labels):
        return None
    probabilities = judge.probabilities(*shown, allow_tie=TIE in labels)
    full = {name: probabilities.get(name, 0.0) for name in labels}
    draw = _sim_logprobs.uniforms(judge.seed, "pairwise", model, subject)[0]
    return _sim_logprobs.sampled(_sim_logprobs.Verdict(field, FIRST, full), draw)
