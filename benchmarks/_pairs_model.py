"""Pairs frames drawn from a known Bradley-Terry model, for ``fk.rank``'s tests and benchmark.

Every key (question) holds one row per two groups, as ``evaluate_pairwise`` writes them.
The true winner of a row is drawn from ``P(i beats j) = 1 / (1 + exp(s_j - s_i))``; the
judge names it with probability ``agreement`` and otherwise answers at random (a's group,
b's or a tie); ``n_human`` rows, drawn at random, carry the true winner as a human verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import combinations

import numpy as np
import polars as pl

#: Three strategies of known quality, on the natural-log scale (centred).
STRENGTHS = {"bm25": -0.5, "dense": 0.0, "hybrid": 0.5}


def true_win_rates(strengths: Mapping[str, float]) -> dict[str, float]:
    """Each group's expected share of wins when every key pits it once against each other."""
    out = {}
    for g, s in strengths.items():
        others = [t for h, t in strengths.items() if h != g]
        out[g] = float(np.mean([1.0 / (1.0 + np.exp(t - s)) for t in others]))
    return out


def centred(strengths: Mapping[str, float]) -> dict[str, float]:
    mean = float(np.mean(list(strengths.values())))
    return {g: s - mean for g, s in strengths.items()}


def bradley_terry_pairs(
    strengths: Mapping[str, float] = STRENGTHS,
    n_keys: int = 150,
    *,
    seed: int = 0,
    agreement: float = 1.0,
    n_human: int = 0,
    name: str = "preference",
) -> pl.DataFrame:
    """A pairs frame: ``question_id``, ``a``, ``b``, ``<name>_winner``, ``<name>_error``
    and, with ``n_human``, ``human`` (the true winner on that many rows, null elsewhere)."""
    rng = np.random.default_rng(seed)
    groups = sorted(strengths)
    pairs = list(combinations(groups, 2))
    keys = np.repeat(np.arange(n_keys), len(pairs))
    a = [p[0] for _ in range(n_keys) for p in pairs]
    b = [p[1] for _ in range(n_keys) for p in pairs]
    p_a = np.array([1.0 / (1.0 + np.exp(strengths[y] - strengths[x])) for x, y in zip(a, b)])
    a_wins = rng.random(len(a)) < p_a
    truth = np.where(a_wins, a, b)
    random_answer = rng.integers(0, 3, len(a))
    noise = np.where(random_answer == 0, a, np.where(random_answer == 1, b, "tie"))
    judge = np.where(rng.random(len(a)) < agreement, truth, noise)
    columns = {
        "question_id": keys,
        "a": a,
        "b": b,
        f"{name}_winner": judge.tolist(),
        f"{name}_error": [None] * len(a),
    }
    frame = pl.DataFrame(columns, schema_overrides={f"{name}_error": pl.String})
    if n_human:
        labelled = np.zeros(len(a), dtype=bool)
        labelled[rng.choice(len(a), n_human, replace=False)] = True
        human = [t if keep else None for t, keep in zip(truth.tolist(), labelled)]
        frame = frame.with_columns(human=pl.Series(human, dtype=pl.String))
    return frame
