"""The simulator's label probabilities: noisy judges, and token logprobs for an answer.

Pure functions, no I/O, deterministic: a test computes what the simulator will say from
the prompt alone (:func:`noisy_verdict`, :func:`expected_confidence`).

Which label, with what probability
    The answer's label is the first property of the schema with an ``enum`` (a rubric's
    ``label``). Without a noisy judge it is the usual choice (a ``label=`` marker, else the
    sha256 choice of the subject) and its probability is ``@sim(confidence=c)`` or
    :func:`expected_confidence`. A :class:`NoisyJudge` for the request's model instead
    picks the label itself: right (the ``@sim(truth=...)`` label, else the sha256 choice)
    with a probability ``c`` drawn per request, and says so (calibrated) or says it is
    sure (miscalibrated). The other labels share ``1 - c`` evenly, so the answered label
    is always the likeliest one.

Tokens
    The answer text is split like a byte-pair tokenizer would: a word with its leading
    space, a run of digits, a run of punctuation (``{"``, ``":``, `` "``). The label starts
    on a token boundary and a multi-word label is several tokens ("Not At All" is ``Not``
    `` At`` `` All``). At each token of the label, ``top_logprobs`` holds the next token of
    every label still possible, with the probability of the labels behind it given the
    prefix so far: the first token of every label at the first position ("Not" standing
    for "Not At All" and "Not Generally" together), `` At`` / `` Generally`` after "Not".
    Every other token is certain (logprob 0, itself its only alternative). The list is cut
    at ``top_logprobs``, so a small ``k`` leaves labels out, as real endpoints do.
    Tool-call answers get the tokens of their arguments (as llama.cpp's server reports;
    OpenAI reports none for tool calls).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "NoisyJudge",
    "Verdict",
    "expected_confidence",
    "label_distribution",
    "logprobs_content",
    "label_property",
    "noisy_verdict",
    "tokenize",
    "uniforms",
]

_TOKEN = re.compile(r"\s?[A-Za-z]+|\s?\d+|\s?[^\sA-Za-z\d]+|\s+")
#: What a miscalibrated judge reports: uniform in [0.9, 1), right or wrong.
_OVERCONFIDENT = (0.9, 1.0)


@dataclass(frozen=True)
class NoisyJudge:
    """A judge that is right only some of the time, and says how sure it is.

    Per request, a confidence ``c = 1/K + (1 - 1/K) * v ** (1/m - 1)`` is drawn above
    chance (``1/K`` for ``K`` labels; ``v`` uniform on [0, 1); ``m`` chosen so that the mean
    of ``c`` is ``accuracy``: uniform on [1/2, 1) for a binary judge right 75 % of the time,
    bunched near 1 for one right 95 %); the answer is the true label with probability
    ``c``, else one of the others (uniformly). Draws are seeded by ``seed``, the model name and the request's subject,
    so the same request gets the same answer (caching and re-asks see one judge) and two
    models judge independently.

    Parameters
    ----------
    accuracy
        The share of right answers, at least ``1/K``.
    calibrated
        True: the reported probability is ``c`` (among answers reported at ``c``, about
        ``c`` are right). False: it reports uniform in [0.9, 1) whether right or wrong
        (high confidence on wrong answers).
    seed
        Seeds the draws.

    Examples
    --------
    >>> NoisyJudge(accuracy=0.75).calibrated
    True
    """

    accuracy: float
    calibrated: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 < self.accuracy <= 1.0:
            raise ValueError(f"accuracy must be in (0, 1], got {self.accuracy!r}")

    @classmethod
    def coerce(cls, value: Any) -> NoisyJudge:
        """A :class:`NoisyJudge` from itself or its fields as a dict (JSON config)."""
        if isinstance(value, NoisyJudge):
            return value
        if isinstance(value, Mapping):
            return cls(**dict(value))
        raise ValueError(f"a noisy judge is a NoisyJudge or a dict of its fields, got {value!r}")


@dataclass(frozen=True)
class Verdict:
    """The label an answer gives, under which property, and every label's probability
    (``None`` when the label is not one of the enum's: a test provoking a bad answer)."""

    field: str
    label: Any
    probabilities: dict[str, float] | None


def uniforms(*parts: Any) -> list[float]:
    """Four uniforms on [0, 1) fixed by ``parts`` (one sha256 digest, 64 bits each)."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8")).digest()
    return [int.from_bytes(digest[i : i + 8], "big") / 2.0**64 for i in range(0, 32, 8)]


def expected_confidence(subject: str) -> float:
    """The probability the simulator gives its label when no noisy judge or
    ``confidence=`` marker says otherwise: in [0.5, 1), fixed by the subject.

    Examples
    --------
    >>> 0.5 <= expected_confidence("Is the sky blue?") < 1.0
    True
    """
    return 0.5 + 0.5 * uniforms("confidence", subject)[0]


def label_distribution(labels: Sequence[str], chosen: str, confidence: float) -> dict[str, float]:
    """``chosen`` at ``confidence`` (at least ``1/K``), the other labels sharing the rest.

    Examples
    --------
    >>> label_distribution(["a", "b", "c"], "b", 0.6)
    {'a': 0.2, 'b': 0.6, 'c': 0.2}
    """
    others = len(labels) - 1
    if others == 0:
        return {chosen: 1.0}
    confidence = min(1.0, max(float(confidence), 1.0 / len(labels)))
    rest = (1.0 - confidence) / others
    return {label: confidence if label == chosen else rest for label in labels}


def noisy_verdict(
    judge: NoisyJudge, model: str, subject: str, labels: Sequence[str], truth: str
) -> tuple[str, dict[str, float], bool]:
    """What a noisy judge answers: (label, probability of each label, right?).

    Raises ``ValueError`` when ``truth`` is not a label, or the accuracy is below chance.

    Examples
    --------
    >>> label, probs, right = noisy_verdict(NoisyJudge(1.0), "m", "q", ["yes", "no"], "no")
    >>> label, probs, right
    ('no', {'yes': 0.0, 'no': 1.0}, True)
    """
    if truth not in labels:
        raise ValueError(f"@sim truth={truth!r} is not one of the labels {list(labels)}")
    chance = 1.0 / len(labels)
    if judge.accuracy < chance - 1e-12:
        raise ValueError(
            f"a noisy judge's accuracy {judge.accuracy} is below chance for {len(labels)} labels"
        )
    spread, coin, pick, report = uniforms(judge.seed, model, subject)
    above = 1.0 if len(labels) == 1 else (judge.accuracy - chance) / (1.0 - chance)
    draw = 1.0 if above >= 1.0 else 0.0 if above <= 0.0 else spread ** (1.0 / above - 1.0)
    confidence = chance + (1.0 - chance) * draw
    right = coin < confidence
    others = [label for label in labels if label != truth]
    label = truth if right or not others else others[int(pick * len(others))]
    if not judge.calibrated:
        low, high = _OVERCONFIDENT
        confidence = low + (high - low) * report
    return label, label_distribution(labels, label, confidence), right


def sampled(verdict: Verdict, draw: float) -> Verdict:
    """The verdict with its label drawn from its probabilities by the uniform ``draw``
    (labels in order, each taking its share of [0, 1)); the probabilities stay the
    model's, so the logprobs then report a label that was not the likeliest.

    Examples
    --------
    >>> v = Verdict("label", "yes", {"yes": 0.7, "no": 0.3})
    >>> sampled(v, 0.5).label, sampled(v, 0.8).label
    ('yes', 'no')
    """
    assert verdict.probabilities is not None
    total = 0.0
    for label, p in verdict.probabilities.items():
        total += p
        if draw < total:
            return Verdict(verdict.field, label, verdict.probabilities)
    return Verdict(verdict.field, list(verdict.probabilities)[-1], verdict.probabilities)


def label_property(schema: Mapping[str, Any]) -> tuple[str, list[str]] | None:
    """The answer's label: the first property with an ``enum`` of strings, and its labels."""
    for name, sub in (schema.get("properties") or {}).items():
        enum = sub.get("enum") if isinstance(sub, Mapping) else None
        if isinstance(enum, list) and enum and all(isinstance(v, str) for v in enum):
            return str(name), list(enum)
    return None


def judge(
    value: dict[str, Any],
    schema: Mapping[str, Any],
    subject: str,
    markers: Mapping[str, Any],
    model: str,
    noisy: NoisyJudge | None,
) -> Verdict | None:
    """Settle the answer's label (a noisy judge may change ``value`` in place) and its
    probabilities. ``None`` when the schema has no label property."""
    found = label_property(schema)
    if found is None:
        return None
    field, labels = found
    marked = markers.get("confidence")
    if field not in markers and noisy is not None:
        truth = markers.get("truth", value.get(field))
        label, probabilities, _ = noisy_verdict(noisy, model, subject, labels, str(truth))
        value[field] = label
        if isinstance(marked, (int, float)):
            probabilities = label_distribution(labels, label, float(marked))
        return Verdict(field, label, probabilities)
    label = markers.get(field, value.get(field))
    if label not in labels:
        return Verdict(field, label, None)
    confidence = float(marked) if isinstance(marked, (int, float)) else None
    if confidence is None:
        confidence = expected_confidence(subject)
    return Verdict(field, label, label_distribution(labels, str(label), confidence))


def tokenize(text: str) -> list[str]:
    """The simulator's tokens: words with their leading space, digits, punctuation runs.

    Examples
    --------
    >>> tokenize('{"label": "Not At All"}')
    ['{"', 'label', '":', ' "', 'Not', ' At', ' All', '"}']
    """
    return _TOKEN.findall(text)


def _entry(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8"))}


def _certain(token: str, top: int) -> dict[str, Any]:
    entry = _entry(token, 0.0)
    entry["top_logprobs"] = [_entry(token, 0.0)] if top else []
    return entry


def _log(p: float) -> float:
    return math.log(p) if p > 0 else -9999.0


def logprobs_content(text: str, verdict: Verdict | None, top: int) -> list[dict[str, Any]]:
    """``choices[0].logprobs.content`` for an answer ``text`` whose label ``verdict``
    gives (see the module docstring); ``top`` alternatives per token at most."""
    span = _label_span(text, verdict)
    if span is None or verdict is None or verdict.probabilities is None:
        return [_certain(token, top) for token in tokenize(text)]
    start, end = span
    probabilities = verdict.probabilities
    words = {label: tokenize(json.dumps(label)[1:-1]) for label in probabilities}
    chosen = words[str(verdict.label)]
    after = tokenize(text[end:]) or [""]
    content = [_certain(token, top) for token in tokenize(text[:start])]
    possible = list(probabilities)
    for position, token in enumerate(chosen):
        groups: dict[str, float] = {}
        for label in possible:
            # A label already complete continues with what follows the answered label.
            nxt = words[label][position] if position < len(words[label]) else after[0]
            groups[nxt] = groups.get(nxt, 0.0) + probabilities[label]
        total = sum(groups.values())
        ranked = sorted(groups.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
        entry = _entry(token, _log(groups[token] / total) if total else 0.0)
        entry["top_logprobs"] = [_entry(t, _log(p / total)) for t, p in ranked if total]
        content.append(entry)
        possible = [
            label
            for label in possible
            if position < len(words[label]) and words[label][position] == token
        ]
    content.extend(_certain(token, top) for token in after)
    return content


def _label_span(text: str, verdict: Verdict | None) -> tuple[int, int] | None:
    """Where the label's characters are in ``text`` (its last ``"field": "label"``)."""
    if verdict is None or not isinstance(verdict.label, str):
        return None
    # Tool-call arguments and text answers are json.dumps output: the label appears as
    # its JSON string (an escaped form inside a reply template is not looked for).
    key = json.dumps(verdict.field) + ": " + json.dumps(verdict.label)
    at = text.rfind(key)
    if at < 0:
        return None
    start = at + len(key) - len(json.dumps(verdict.label)) + 1
    return start, start + len(json.dumps(verdict.label)) - 2
