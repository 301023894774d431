"""A probability for every rubric label, read from the judge's token log-probabilities.

An OpenAI-compatible judge asked for ``logprobs`` and ``top_logprobs`` returns, with its
answer, one entry per generated token (``choices[0].logprobs.content``): the token, its
bytes, its log-probability and the most likely alternatives at that position. This module
finds the label's tokens in that list and turns the alternatives into a probability per
label of the rubric (the judge's *confidence* is the answered label's), and computes the
probability-weighted score that G-Eval uses (Liu et al. 2023, "G-Eval: NLG Evaluation
using GPT-4 with Better Human Alignment").

How the label is found
    The tokens' bytes are joined and searched for the last ``"<field>": "`` (also the
    escaped ``\\"<field>\\": \\"`` of a JSON string inside JSON, as some servers emit for
    tool-call arguments) followed by a rubric label and its closing quote. Never by offsets
    into ``message.content``: llama.cpp's server, for one, reports tokens (a code fence)
    that the content leaves out. Labels are matched byte for byte, and case-insensitively
    (ASCII) only when no label matches exactly; alternatives are then compared the same way.

How the alternatives become probabilities
    Walking the label's tokens from the first, each position's alternatives are matched
    against the labels still possible (those that begin with the label text so far; the
    first token may carry a prefix, e.g. the opening quote, which its alternatives must
    share). An alternative that continues only one label is that label's mass; the sampled
    token's mass carries on to the next position, where the labels sharing the prefix split
    it (``"Not"`` -> ``" At"`` / ``" Generally"`` for "Not At All" / "Not Generally").
    Only the sampled path is ever reported, so an alternative on a path not taken that two
    labels share is split between them evenly. The masses at each position are renormalised
    over the label-consistent alternatives: ``top_logprobs`` are the model's raw
    distribution, before any grammar, and hold tokens no label starts with.

    **A label absent from the alternatives** where it would branch off gets the most mass
    it can have: the top-k list is sorted, so an unlisted token is no likelier than the
    last one listed, and together the unlisted tokens hold ``1 - sum(listed)``. Each absent
    label gets ``min(unlisted / absent, smallest listed)``. That is an upper bound, so the
    answered label's confidence is a lower bound: a cascade escalates a doubtful row rather
    than trusting it. ``LabelProbabilities.missing`` names those labels.

Nothing is invented: when the label cannot be located, or the first position reports no
alternatives, the answer is ``None``.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from framekit._errors import InputError

__all__ = ["LabelProbabilities", "expected_score", "label_probabilities", "logprobs_content"]


@dataclass(frozen=True)
class LabelProbabilities:
    """The judge's probability for each rubric label.

    Attributes
    ----------
    label
        The label the judge answered (spelled as in the rubric).
    probabilities
        Every rubric label -> its probability, in the rubric's order; they sum to 1.
    missing
        Labels absent from the reported alternatives, whose mass is the upper bound
        described in the module docstring.

    Examples
    --------
    >>> p = LabelProbabilities("relevant", {"relevant": 0.8, "irrelevant": 0.2}, ())
    >>> p.confidence
    0.8
    """

    label: str
    probabilities: Mapping[str, float]
    missing: tuple[str, ...] = ()

    @property
    def confidence(self) -> float:
        """The answered label's probability."""
        return self.probabilities[self.label]


def _get(obj: Any, key: str) -> Any:
    """``obj[key]`` for a mapping, ``obj.key`` for a response object, else ``None``."""
    if type(obj) is dict:  # a parsed JSON reply: every token, once per answer
        return obj.get(key)
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def logprobs_content(reply: Any) -> list[Any] | None:
    """``choices[0].logprobs.content`` of a chat completion (a JSON dict or a response
    object), or ``None`` when the reply carries no logprobs.

    Examples
    --------
    >>> logprobs_content({"choices": [{"logprobs": {"content": [{"token": "a"}]}}]})
    [{'token': 'a'}]
    >>> logprobs_content({"choices": [{"logprobs": None}]}) is None
    True
    """
    choices = _get(reply, "choices")
    if not choices:
        return None
    content = _get(_get(choices[0], "logprobs"), "content")
    return list(content) if content else None


def _token_bytes(entry: Any) -> bytes:
    raw = entry.get("bytes") if type(entry) is dict else _get(entry, "bytes")
    if isinstance(raw, (list, tuple)):
        try:
            return bytes(raw)
        except (TypeError, ValueError):
            pass
    token = _get(entry, "token")
    return str(token).encode("utf-8") if token is not None else b""


_LISTS_ONLY = {list}


def _joined(content: Sequence[Any]) -> tuple[bytes, list[int]]:
    """Every token's bytes (:func:`_token_bytes`) joined, and where each token starts (one
    offset more: the end). A parsed JSON reply's byte lists are joined in one go: this
    runs over every token of every answer."""
    raws: list[Any] = [entry.get("bytes") if type(entry) is dict else None for entry in content]
    if set(map(type, raws)) == _LISTS_ONLY:
        try:
            text = bytes(itertools.chain.from_iterable(raws))
        except (TypeError, ValueError):
            pass  # a value that is no byte: token by token, as _token_bytes reads it
        else:
            return text, list(itertools.accumulate(map(len, raws), initial=0))
    pieces = [_token_bytes(entry) for entry in content]
    return b"".join(pieces), list(itertools.accumulate(map(len, pieces), initial=0))


def _probability(entry: Any) -> float:
    value: Any = entry.get("logprob") if type(entry) is dict else _get(entry, "logprob")
    try:
        p = math.exp(value if type(value) is float else float(value))
    except (TypeError, ValueError, OverflowError):
        return 0.0
    return p if math.isfinite(p) else 0.0


class _Located(NamedTuple):
    start: int  # byte offset of the label's first byte in the joined tokens
    label: str
    encoded: dict[str, bytes]  # every label as it would be spelled at this position
    close: bytes  # the closing quote (escaped inside an escaped string)
    fold: bool


@functools.lru_cache(maxsize=1024)
def _spelled(label: str, depth: int) -> str:
    # A JSON string's content once per level of nesting (depth 1: an escaped string).
    for _ in range(depth + 1):
        label = json.dumps(label, ensure_ascii=False)[1:-1]
    return label


@functools.lru_cache(maxsize=1024)
def _encoded(labels: tuple[str, ...], depth: int, fold: bool) -> dict[str, bytes]:
    """Every label as spelled at ``depth`` (lower-cased when ``fold``), as bytes; shared
    between calls, so never changed."""
    encoded = {}
    for label in labels:
        spelled = _spelled(label, depth).encode("utf-8")
        encoded[label] = spelled.lower() if fold else spelled
    return encoded


@functools.lru_cache(maxsize=256)
def _field_pattern(field: str) -> re.Pattern[bytes]:
    """``"<field>": "`` at any depth of escaping (group 1: the backslashes)."""
    key = re.escape(json.dumps(field, ensure_ascii=False)[1:-1].encode("utf-8"))
    return re.compile(rb'(\\*)"' + key + rb'\1"\s*:\s*\1"')


def _locate(
    text: bytes, labels: tuple[str, ...], field: str, answered: str | None
) -> _Located | None:
    """The label's position: among the ``"field": "label"`` pairs in ``text``, the least
    escaped (a quote of one inside the explanation is escaped once more than the real
    one), and of those the last (the parser's rule: the verdict comes last)."""
    wanted = [label for label in labels if answered is None or label == answered]
    if not wanted:
        return None
    pattern = _field_pattern(field)
    for fold in (False, True):
        haystack = text.lower() if fold else text
        best: tuple[int, int] | None = None  # (-depth, end) of the pair kept so far
        located = None
        for match in pattern.finditer(text):
            slashes = match.end(1) - match.start(1)
            depth = (slashes + 1).bit_length() - 1  # 0, 1 (\"), 2 (\\\"), ...
            end = match.end()
            if best is not None and (-depth, end) <= best:  # more escaped: cannot win
                continue
            close = match.group(1) + b'"'
            encoded = _encoded(labels, depth, fold)
            hit = next((lb for lb in wanted if haystack.startswith(encoded[lb] + close, end)), None)
            if hit is not None:
                best, located = (-depth, end), _Located(end, hit, encoded, close, fold)
        if located is not None:
            return located
    return None


def _consistent(alternative: bytes, remainder: bytes, close: bytes) -> bool:
    """Whether a token could come next in a label whose unread part is ``remainder``."""
    if not alternative:
        return True  # consumes nothing of the label: any label can still follow
    if remainder.startswith(alternative):
        return True
    # The token finishes the label and goes on with the closing quote (``relevant"``).
    return alternative.startswith(remainder) and alternative[len(remainder) :].startswith(close[:1])


def label_probabilities(
    content: Sequence[Any] | None,
    labels: Sequence[str],
    *,
    field: str = "label",
    answered: str | None = None,
) -> LabelProbabilities | None:
    """The probability of each rubric label, from a structured answer's token logprobs.

    Parameters
    ----------
    content
        ``choices[0].logprobs.content`` of the judge's reply: entries with ``token``,
        ``bytes``, ``logprob`` and ``top_logprobs`` (JSON dicts or response objects).
        Tool-call arguments work the same way when the server reports their tokens.
    labels
        The rubric's labels.
    field
        The answer's property that holds the label.
    answered
        The label the reply was parsed as, when known: only its occurrence is read.

    Returns
    -------
    LabelProbabilities or None
        ``None`` when the label cannot be located among the tokens, or its first
        position reports no alternatives (the judge gave no confidence).

    Examples
    --------
    >>> def tok(text, logprob, alternatives):
    ...     return {"token": text, "logprob": logprob,
    ...             "top_logprobs": [{"token": t, "logprob": lp} for t, lp in alternatives]}
    >>> content = [tok('{"label": "', 0.0, [('{"label": "', 0.0)]),
    ...            tok("relevant", -0.2, [("relevant", -0.2), ("ir", -1.8), ("The", -3.0)]),
    ...            tok('"}', 0.0, [('"}', 0.0)])]
    >>> p = label_probabilities(content, ["relevant", "irrelevant"])
    >>> p.label, round(p.confidence, 4)   # e^-0.2 / (e^-0.2 + e^-1.8)
    ('relevant', 0.832)
    """
    if not content or not labels:
        return None
    text, starts = _joined(content)
    located = _locate(text, tuple(labels), field, answered)
    if located is None:
        return None
    index = bisect.bisect_right(starts, located.start) - 1
    lead = text[starts[index] : located.start]
    lead = lead.lower() if located.fold else lead
    mass = dict.fromkeys(labels, 0.0)
    missing: list[str] = []
    possible = list(labels)
    consumed, path, first = 0, 1.0, True
    while len(possible) > 1 and index < len(content):
        entry = content[index]
        reported = _get(entry, "top_logprobs") or []
        if first and not reported:
            return None
        piece = text[starts[index] : starts[index + 1]]
        alternatives, smallest = _alternatives(entry, reported, piece, located.fold)
        sampled = piece.lower() if located.fold else piece
        step = _branch(
            alternatives, smallest, sampled, lead, possible, located, consumed, path, mass, missing
        )
        if step is None:
            return None
        possible, path = step
        consumed += len(sampled) - len(lead)
        lead, first, index = b"", False, index + 1
    mass[located.label] += path if possible == [located.label] else 0.0
    if len(possible) > 1:
        # The tokens ran out before the shared prefix was resolved: split what is left.
        for label in possible:
            mass[label] += path / len(possible)
    total = sum(mass.values())
    if not total > 0:
        return None
    probabilities = {label: mass[label] / total for label in labels}
    return LabelProbabilities(located.label, probabilities, tuple(missing))


def _alternatives(
    entry: Any, reported: Sequence[Any], sampled: bytes, fold: bool
) -> tuple[list[tuple[bytes, float]], float]:
    """The reported alternatives as (bytes, probability), the sampled token included
    (a grammar may force a token the model ranked below the top k), and the smallest
    reported probability (the bound on any unlisted token)."""
    found: dict[bytes, float] = {}
    for alternative in reported:
        key = _token_bytes(alternative)
        key = key.lower() if fold else key
        found[key] = found.get(key, 0.0) + _probability(alternative)
    smallest = min(found.values(), default=0.0)
    sampled_key = sampled.lower() if fold else sampled
    if sampled_key not in found:
        found[sampled_key] = _probability(entry)
    return list(found.items()), smallest


def _branch(
    alternatives: list[tuple[bytes, float]],
    smallest: float,
    sampled: bytes,
    lead: bytes,
    possible: list[str],
    located: _Located,
    consumed: int,
    path: float,
    mass: dict[str, float],
    missing: list[str],
) -> tuple[list[str], float] | None:
    """One position: book the mass of labels that branch off here, and return the labels
    still possible after the sampled token with the probability of getting there."""
    remainder = {label: located.encoded[label][consumed:] for label in possible}

    def continues(token: bytes) -> list[str]:
        if not token.startswith(lead):
            return []
        rest = token[len(lead) :]
        return [lb for lb in possible if _consistent(rest, remainder[lb], located.close)]

    carried = continues(sampled)
    if located.label not in carried:
        return None
    direct = dict.fromkeys(possible, 0.0)
    carried_mass = 0.0
    for token, p in alternatives:
        if token == sampled:
            carried_mass = p
            continue
        share = continues(token)
        for label in share:
            direct[label] += p / len(share)
    reached = {lb for lb in possible if direct[lb] > 0} | set(carried)
    absent = [lb for lb in possible if lb not in reached]
    if absent:
        unlisted = max(0.0, 1.0 - sum(p for _, p in alternatives))
        each = min(unlisted / len(absent), smallest)
        for label in absent:
            direct[label] = each
        missing.extend(absent)
    total = carried_mass + sum(direct.values())
    if not total > 0:
        return None
    for label, p in direct.items():
        mass[label] += path * p / total
    return carried, path * carried_mass / total


def expected_score(probabilities: Mapping[str, float], scores: Mapping[str, float]) -> float:
    """The probability-weighted score: the sum of p(label) x score(label) (G-Eval).

    Parameters
    ----------
    probabilities
        Label -> probability (e.g. :attr:`LabelProbabilities.probabilities`).
    scores
        The rubric: label -> score.

    Returns
    -------
    float
        The expected score, in the rubric's range.

    Raises
    ------
    InputError
        A label with a probability that the rubric does not score, or probabilities that
        do not sum to 1.

    Examples
    --------
    >>> expected_score({"low": 0.2, "medium": 0.5, "high": 0.3},
    ...                {"low": 0.0, "medium": 0.5, "high": 1.0})
    0.55
    """
    unknown = [label for label in probabilities if label not in scores]
    if unknown:
        raise InputError(f"label {unknown[0]!r} has a probability but no score in the rubric")
    total = math.fsum(probabilities.values())
    if not math.isclose(total, 1.0, abs_tol=1e-6):
        raise InputError(f"label probabilities sum to {total:.6g}, not 1")
    return math.fsum(p * float(scores[label]) for label, p in probabilities.items())
