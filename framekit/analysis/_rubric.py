"""Reading an evaluator's rubric back out of a scored frame.

A scored frame holds ``<name>_label`` next to ``<name>_score``: the label/score pairs the
judge chose are the rubric, ordered by score. Human labels are read on that order
(case-insensitively), so "generally yes" and "Generally Yes" are one category.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from framekit._errors import InputError
from framekit._provenance import known_rubric
from framekit.analysis import _outcome as outcome


@dataclass(frozen=True)
class Rubric:
    """Labels worst first and their scores.

    Examples
    --------
    >>> Rubric(("irrelevant", "relevant"), (0.0, 1.0)).code("Relevant")
    1
    """

    labels: tuple[str, ...]
    scores: tuple[float, ...]

    def code(self, label: str) -> int | None:
        folded = label.strip().casefold()
        for i, known in enumerate(self.labels):
            if known.casefold() == folded:
                return i
        return None


def evaluator_names(frame: pl.DataFrame) -> list[str]:
    """Evaluators with results in ``frame``: ``<name>_score`` and ``<name>_error`` both present."""
    present = set(frame.columns)
    return [
        c.removesuffix("_score")
        for c in frame.columns
        if c.endswith("_score") and f"{c.removesuffix('_score')}_error" in present
    ]


def is_label_dtype(dtype: pl.DataType) -> bool:
    return dtype in (pl.String, pl.Categorical) or isinstance(dtype, pl.Enum)


def rubric_of(frame: pl.DataFrame, name: str, extra: Any = None) -> Rubric:
    """The label -> score pairs seen in ``frame`` for evaluator ``name``, plus ``extra``
    (a mapping, or an evaluator: anything with a ``choices`` mapping).

    Without ``extra``, the rubric this process last scored ``name`` with adds its labels:
    a rubric's labels are its labels whether or not the judge chose each one.
    """
    if extra is None:
        extra = known_rubric(name)
    extra = getattr(extra, "choices", extra)
    pairs: dict[str, float] = {}
    if f"{name}_label" in frame.columns:
        seen = (
            frame.select(pl.col(f"{name}_label").cast(pl.String), pl.col(f"{name}_score"))
            .drop_nulls()
            .unique()
        )
        for label, score in seen.iter_rows():
            if label in pairs and pairs[label] != score:
                raise InputError(
                    f"{name}: label {label!r} has scores {pairs[label]} and {score}; "
                    "a rubric maps each label to one score"
                )
            pairs[label] = float(score)
    for label, score in (extra or {}).items():
        pairs[label] = float(score)
    ordered = sorted(pairs.items(), key=lambda kv: (kv[1], kv[0]))
    return Rubric(tuple(k for k, _ in ordered), tuple(v for _, v in ordered))


def check_labels(frame: pl.DataFrame, column: str, name: str, scale: Rubric) -> None:
    """Raise :class:`InputError` naming the first row whose label is not on the rubric."""
    values = frame[column].cast(pl.String)
    for row, value in enumerate(values):
        if value is not None and scale.code(value) is None:
            raise InputError(
                f"row {row}: {column} = {value!r} is not a label of {name} "
                f"({', '.join(scale.labels) or 'no labels in the frame'}); "
                "pass rubric=<the evaluator> or rubric={label: score} to add it"
            )


def human_codes(frame: pl.DataFrame, column: str, scale: Rubric) -> np.ndarray:
    """Category positions of a label column already checked with :func:`check_labels`."""
    codes = [scale.code(v) for v in frame[column].cast(pl.String)]
    return np.array(codes, dtype=np.int64)


def pass_mark(frame: pl.DataFrame, name: str, threshold: float | None = None) -> float | None:
    """The score from which ``name`` passes: ``threshold`` when given, else the judge's
    own mark read off the frame (the lowest score among rows it passed; ``None`` when no
    row passed or the frame has no ``<name>_passed``).

    Examples
    --------
    >>> df = pl.DataFrame({"c_score": [0.25, 0.5, 1.0], "c_passed": [False, True, True],
    ...                    "c_error": [None, None, None]})
    >>> pass_mark(df, "c")
    0.5
    """
    if threshold is not None:
        return float(threshold)
    if f"{name}_passed" not in frame.columns:
        return None
    lowest = frame.filter(outcome.passed(name)).select(outcome.scored(name).min()).item()
    return None if lowest is None else float(lowest)
