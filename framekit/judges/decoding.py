"""Invocation parameters: decoding options given to one evaluator, overriding its judge's.

Phoenix keeps an evaluator's extra keywords (``temperature=0.0, max_tokens=200``) as its
``invocation_parameters`` and forwards them to its model; every framekit evaluator takes
them the same way (``evaluator.invocation_parameters``). framekit keeps decoding on the
judge, where it is part of every cache key and of the run record, so an evaluator given
such options runs on a copy of its judge with those options set:
the same thing as passing ``judge=fk.Judge(model, temperature=0.0, max_tokens=200)`` to
that evaluator, with the copy's own limits (``rpm``, ``tpm``, ``concurrency``) as every
per-evaluator judge has. The offline judge has no decoding and ignores them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from numbers import Real
from typing import TYPE_CHECKING, Any

from framekit._errors import InputError, UnknownOptionError, did_you_mean

if TYPE_CHECKING:
    from framekit.judges.judge import Judge
    from framekit.judges.local import LocalJudge

#: Decoding keywords an evaluator accepts, and what each must be.
DECODING_OPTIONS = {
    "temperature": "a number >= 0",
    "max_tokens": "an integer >= 1",
    "top_p": "a number in (0, 1]",
    "seed": "an integer",
    "stop": "a string or a list of strings",
    "presence_penalty": "a number in [-2, 2]",
    "frequency_penalty": "a number in [-2, 2]",
    "reasoning_effort": "one of 'minimal', 'low', 'medium', 'high'",
}

_EFFORTS = ("minimal", "low", "medium", "high")


def check_decoding(
    owner: str, options: Mapping[str, Any], own: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``options`` checked: each a known decoding keyword with a usable value.

    An unknown keyword raises :class:`UnknownOptionError` (an
    :class:`~framekit.InputError` that is also the ``TypeError`` Python raises for one),
    naming it, the decoding keywords and, for a near miss, the option meant.

    Examples
    --------
    >>> check_decoding("relevance", {"temperature": 0.0, "max_tokens": 200})
    {'temperature': 0.0, 'max_tokens': 200}
    >>> check_decoding("relevance", {"temprature": 0.0})
    Traceback (most recent call last):
    ...
    framekit._errors.UnknownOptionError: relevance: unexpected keyword argument 'temprature'. Did you mean 'temperature'? An evaluator takes the decoding options temperature, max_tokens, top_p, seed, stop, presence_penalty, frequency_penalty, reasoning_effort (passed to its judge); other judge settings go on fk.Judge(model, ...)
    """
    for key, value in options.items():
        if key not in DECODING_OPTIONS:
            raise UnknownOptionError(
                f"{owner}: unexpected keyword argument {key!r}."
                f"{did_you_mean(key, [*DECODING_OPTIONS, *own])} An evaluator takes the "
                f"decoding options {', '.join(DECODING_OPTIONS)} (passed to its judge); "
                "other judge settings go on fk.Judge(model, ...)"
            )
        if not _valid(key, value):
            raise InputError(
                f"{owner}: {key} must be {DECODING_OPTIONS[key]}, got {value!r} (or set it "
                f"on the judge: fk.Judge(model, {key}=...))"
            )
    return dict(options)


def _valid(key: str, value: Any) -> bool:
    number = isinstance(value, Real) and not isinstance(value, bool)
    if key == "temperature":
        return number and value >= 0
    if key == "top_p":
        return number and 0 < value <= 1
    if key.endswith("_penalty"):
        return number and -2 <= value <= 2
    if key == "reasoning_effort":
        return value in _EFFORTS
    if key in ("max_tokens", "seed"):
        return (
            isinstance(value, int) and not isinstance(value, bool) and (key == "seed" or value >= 1)
        )
    return isinstance(value, str) or (
        isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
    )


def with_decoding(judge: Judge | LocalJudge, options: Mapping[str, Any]) -> Judge | LocalJudge:
    """``judge`` with ``options`` set: a copy (the original is unchanged), or the judge
    itself when there is nothing to set or it is the offline judge."""
    from framekit.judges.judge import Judge

    if not options or not isinstance(judge, Judge):
        return judge
    rest = {k: v for k, v in options.items() if k not in ("temperature", "max_tokens")}
    decoding = replace(
        judge.decoding,
        temperature=options.get("temperature", judge.temperature),
        max_tokens=options.get("max_tokens", judge.max_tokens),
        params={**judge.decoding.params, **rest},
    )
    return judge.copy_with(decoding=decoding)
