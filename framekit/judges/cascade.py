"""``fk.Cascade``: judges tried in order, each later one asked only about the rows the one
before was unsure of.

A cascade is accepted wherever a judge is (``judge=`` of a run or of an evaluator, the
command line's ``--cascade``). It is a description, not a transport: its stages are
ordinary judges, and the engine (:mod:`framekit.engine.cascade`) runs each stage as an
ordinary run of that judge over the rows still undecided, so caching, deduplication,
rate limits and batch mode are each stage's own. The routing rule, stated once here and
used by the engine and by :func:`framekit.calibrate_cascade` alike: a row whose verdict at
stage ``k`` has a confidence below ``escalate_below[k]``, or no confidence at all, or no
verdict (a failed call), goes on to stage ``k + 1``; the last stage's verdict stands.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Real
from typing import Any

from framekit import _secrets
from framekit._errors import InputError, JudgeSpecError
from framekit.judges.judge import Judge
from framekit.judges.local import LocalJudge

StageJudge = Judge | LocalJudge


def judge_of(spec: Any, owner: str = "judge") -> StageJudge:
    """One judge from what ``judge=`` accepts for a single judge: a :class:`Judge`, a
    :class:`LocalJudge`, ``"local"`` or a litellm model string.

    Examples
    --------
    >>> judge_of("local")
    LocalJudge()
    >>> judge_of("openai/gpt-4o-mini").model
    'openai/gpt-4o-mini'
    """
    if isinstance(spec, (Judge, LocalJudge)):
        return spec
    if isinstance(spec, str) and spec.strip():
        return LocalJudge() if spec.strip().lower() == "local" else Judge(spec.strip())
    raise JudgeSpecError(
        f"{owner} must be a model string, 'local', fk.Judge or fk.LocalJudge, not {spec!r}"
    )


def escalates(confidence: float | None, threshold: float, decided: bool = True) -> bool:
    """Whether a verdict goes on to the next stage: no verdict, no confidence, or a
    confidence below ``threshold``.

    Examples
    --------
    >>> escalates(0.8, 0.9), escalates(0.95, 0.9), escalates(None, 0.0), escalates(1.0, math.inf)
    (True, False, True, True)
    """
    return not decided or confidence is None or confidence < threshold


class Cascade:
    """Judges tried in order: every row goes to the first; a row whose confidence is below
    ``escalate_below[k]`` (or has none) goes on to judge ``k + 1``; the last judge's
    verdict stands.

    Parameters
    ----------
    judges
        Two or more judges, cheapest first: :class:`Judge` objects, ``"local"`` (the
        offline judge, whose calibrated confidence makes it a free first stage) or
        litellm model strings (as ``judge=`` takes them).
    escalate_below
        One threshold per judge but the last, each in [0, 1] (``math.inf``: every row
        goes on). A row stays with judge ``k`` when its confidence there is at least
        ``escalate_below[k]``. :func:`framekit.calibrate_cascade` chooses them with a
        guarantee on agreement.
    expected_share
        Optional: the share of rows expected to *reach* each stage (the first is 1),
        as a calibration measured it; the dry run prices the cascade with it. Without
        it, the dry run counts every row at every stage ("up to").

    Attributes
    ----------
    judges
        The judges, resolved (a model string became a :class:`Judge`).
    escalate_below
        The thresholds, a tuple of floats.
    kind, model
        ``"cascade"`` and a name listing the stages' models, as a judge has them.

    Raises
    ------
    InputError
        Fewer than two judges, a judge of the wrong type (or another cascade), a
        threshold count other than ``len(judges) - 1``, or a threshold outside [0, 1].

    Examples
    --------
    >>> import framekit as fk
    >>> cascade = fk.Cascade(["local", "openai/gpt-4o-mini"], escalate_below=[0.8])
    >>> cascade.model
    'cascade(local/all-MiniLM-L6-v2 -> openai/gpt-4o-mini)'
    >>> cascade.escalate_below
    (0.8,)
    >>> fk.Cascade(["local"], escalate_below=[])
    Traceback (most recent call last):
    ...
    framekit.InputError: a cascade needs at least two judges, got 1
    """

    kind = "cascade"

    def __init__(
        self,
        judges: Sequence[Judge | LocalJudge | str],
        escalate_below: Sequence[float],
        *,
        expected_share: Sequence[float] | None = None,
    ) -> None:
        if isinstance(judges, (str, Judge, LocalJudge)) or not isinstance(judges, Sequence):
            raise InputError("Cascade takes a list of judges, cheapest first")
        if len(judges) < 2:
            raise InputError(f"a cascade needs at least two judges, got {len(judges)}")
        stages = []
        for k, spec in enumerate(judges):
            if isinstance(spec, Cascade):
                raise InputError(f"Cascade judge {k + 1} is itself a cascade: list its judges")
            stages.append(judge_of(spec, f"Cascade judge {k + 1}"))
        self.judges: tuple[StageJudge, ...] = tuple(stages)
        self.escalate_below: tuple[float, ...] = _thresholds(escalate_below, len(stages))
        self.expected_share: tuple[float, ...] | None = (
            None if expected_share is None else _shares(expected_share, len(stages))
        )

    @property
    def model(self) -> str:
        """The stages' models, in order."""
        return "cascade(" + " -> ".join(j.model for j in self.judges) + ")"

    @property
    def stage_names(self) -> tuple[str, ...]:
        """What each stage is called in the ``_judge`` column and the run record: its
        model, and ``" (stage k)"`` after a model that more than one stage uses (the same
        model asked again with more samples, say), so that every stage is told apart.

        Examples
        --------
        >>> Cascade(["openai/m", "openai/m", "openai/big"], [0.8, 0.9]).stage_names
        ('openai/m (stage 1)', 'openai/m (stage 2)', 'openai/big')
        """
        models = [_secrets.mask_keys(j.model) for j in self.judges]  # a key as the model
        return tuple(
            f"{m} (stage {k + 1})" if models.count(m) > 1 else m for k, m in enumerate(models)
        )

    # -- what the engine asks of every kind of judge ------------------------------------
    #: Its stages embed, not the cascade (each stage's share is run as its own).
    embeds_locally = False
    #: How it gives a row's confidence: each stage its own way (the run record lists
    #: the stages' methods).
    confidence_method = "cascade"

    @property
    def chat_endpoint(self) -> None:
        """The one LLM endpoint its requests go to: none (each stage has its own)."""
        return None

    @property
    def offline(self) -> None:
        """The offline judge it is: none (a stage may be one)."""
        return None

    @property
    def cascade(self) -> Cascade:
        """The cascade it is: itself."""
        return self

    def stages(self) -> tuple[Judge | LocalJudge, ...]:
        """The judges asked in turn, cheapest first."""
        return tuple(self.judges)

    def scores_likelihood(self, evaluator: Any) -> bool:
        """Whether the cascade itself reads ``evaluator`` by likelihood: never (a stage
        may, on its own share)."""
        return False

    @property
    def secrets(self) -> list[str]:
        """Every stage's credentials, for redaction."""
        return [s for j in self.judges for s in j.secrets]

    def cache_identity(self) -> dict[str, Any]:
        """Each stage's identity and the thresholds (what decides a cascade's results)."""
        return {
            "stages": [{"kind": j.kind, **_identity(j)} for j in self.judges],
            "escalate_below": [_number(t) for t in self.escalate_below],
        }

    def with_thresholds(
        self, escalate_below: Sequence[float], expected_share: Sequence[float] | None = None
    ) -> Cascade:
        """The same judges with other thresholds (and expected shares per stage)."""
        return Cascade(self.judges, escalate_below, expected_share=expected_share)

    def __repr__(self) -> str:
        stages = ", ".join(repr(j) for j in self.judges)
        below = ", ".join(_number(t) for t in self.escalate_below)
        return f"Cascade([{stages}], escalate_below=[{below}])"


def _identity(judge: StageJudge) -> dict[str, Any]:
    try:
        return {"model": judge.model, **judge.cache_identity()}
    except Exception:  # the offline model is missing: scoring will say so, not this
        return {"model": judge.model}


def _number(value: float) -> str:
    return "inf" if math.isinf(value) else f"{value:g}"


def _thresholds(values: Sequence[float], stages: int) -> tuple[float, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise InputError(f"escalate_below must be a list of {stages - 1} number(s), got {values!r}")
    if len(values) != stages - 1:
        raise InputError(
            f"escalate_below needs one threshold per judge but the last: {stages - 1} for "
            f"{stages} judges, got {len(values)}"
        )
    out: list[float] = []
    for k, value in enumerate(values):
        number = float(value) if isinstance(value, Real) and not isinstance(value, bool) else None
        if number is None or not (0.0 <= number <= 1.0 or number == math.inf):
            raise InputError(
                f"escalate_below[{k}] must be a confidence in [0, 1] (or math.inf: every row "
                f"goes on), got {value!r}"
            )
        out.append(number)
    return tuple(out)


def _shares(values: Sequence[float], stages: int) -> tuple[float, ...]:
    shares = tuple(float(v) for v in values)
    if len(shares) != stages or any(not 0.0 <= s <= 1.0 for s in shares):
        raise InputError(
            f"expected_share: the share of rows reaching each of the {stages} stages, each "
            f"in [0, 1], got {list(values)!r}"
        )
    return shares
