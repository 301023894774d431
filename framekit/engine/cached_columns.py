"""A cached re-run read as columns: a share's answers looked up without a record per row.

A share whose records wait unbuilt (:attr:`Prepared.unbuilt
<framekit.engine.prepare.Prepared.unbuilt>`: every distinct row vouched for, asked of an
LLM judge by a plain template) is read here before the plan. Slice by slice, polars
renders the distinct rows' prompts (:meth:`RubricEvaluator.prompt_column
<framekit.evaluators.rubric.RubricEvaluator.prompt_column>`) and each is keyed as the
planner keys it (:class:`~framekit.engine.keys.RenderedKeys`). Then all the keys are
asked of the cache at once, which reads its whole table when they are many of its rows
(:mod:`framekit.engine.cache_table`), and every answer a plain rubric reads by its label
(:func:`plain_reading`) is written into the share's :class:`~framekit.engine.prepare.Answered`
columns. Only the other rows become records, each with the key it was asked under; the
entries found but not read by label (``odd``) go to the plan with them, which reads them
the general way and sends the rest. The cache is not asked for these keys again.

Building a record per cached row, then settling it, was a third of a fully cached
re-run's time; looking each slice's keys up through the table's index was half of what
was left."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from framekit._results import Answered, ProgressFn
from framekit.engine.cache import Cache
from framekit.engine.keys import TemplateKeys, chat_prefix, template_keys
from framekit.engine.prepare import Prepared
from framekit.judges.request import answer_text

#: Distinct records whose prompts polars renders at once: the texts of at most two slices
#: are held together (one being keyed, the next being rendered), so a million records
#: never hold all their prompts at the same time; their keys are kept.
RENDER_SLICE = 20_000


def read_cached(
    share: Prepared,
    cache: Cache,
    progress: ProgressFn,
    read: set[str],
    odd: dict[str, Any] | None = None,
) -> TemplateKeys | None:
    """Write the cached answers of ``share``'s unbuilt rows that a plain rubric reads into
    :attr:`Prepared.answered <framekit.engine.prepare.Prepared.answered>`, and build the
    records of the others; ``read`` gains the keys answered, ``odd`` the entries found
    but left to the plan's general reading (without ``odd``, their records are left
    unkeyed, and the plan asks for them again). Where anything is not as the bulk reading
    assumes, every record is built and nothing is read here. Returns the share's
    :class:`~framekit.engine.keys.TemplateKeys` where its rows were keyed by them (the
    plan keys the records left with the same, checked once)."""
    weights, distinct = share.unbuilt, share.distinct
    reading = _reading(share) if cache.enabled else None
    if reading is None or weights is None or distinct is None:
        share.build_records()
        return None
    keys = _keys(share, reading)
    if keys is None:
        share.build_records()  # polars's text is not the renderer's: nothing read
        return None
    template, scores, by_label = reading
    found_odd: dict[str, Any] = {} if odd is None else odd
    answered = Answered.empty(distinct.height)
    # Distinct rows may still ask the same prompt: each key is read into its first row,
    # and copied to the others ("twins") once the lookup is done. (The dict is built from
    # the last row up, so that each key's first row is the one it keeps.)
    first: dict[Any, int] = dict(zip(reversed(keys), range(len(keys) - 1, -1, -1)))
    first.pop(None, None)
    asked = len(keys) - keys.count(None)
    twins = [] if len(first) == asked else [
        i for i, key in enumerate(keys) if key is not None and first[key] != i
    ]  # fmt: skip
    for found in cache.lookup(first):  # (the whole table read tests its rows against it)
        rows = _read_found(found, first, answered, weights, scores, by_label, read, found_odd)
        if rows:
            progress(rows, "cached")
    twins_read = 0
    for i in twins:
        source = first[keys[i]]  # type: ignore[index]
        if answered.label[source] is not None:
            for column in answered.columns():
                column[i] = column[source]
            twins_read += weights[i]
    if twins_read:
        progress(twins_read, "cached")
    answered.count(weights)
    if answered.rows:  # (a cold run reads none: its records are built as they would have been)
        share.answered = answered
    if odd is None and found_odd:  # the caller takes no entries: the plan asks again
        keys = [None if key in found_odd else key for key in keys]
    # The rows left to records, each with the key the cache was asked for (None: a row
    # polars did not render, keyed and asked by the plan).
    label = answered.label
    unread = [(i, key) for i, key in enumerate(keys) if label[i] is None] if None in label else []
    share.build_records([i for i, _ in unread])
    for record, (_, key) in zip(share.records, unread):
        record.missed_key = key
    return template


def _read_found(
    found: dict[str, Any],
    first: dict[str, int],
    answered: Answered,
    weights: list[int],
    scores: Mapping[str, float],
    by_label: bool,
    read: set[str],
    odd: dict[str, Any],
) -> int:
    """Read the cached ``found`` entries into ``answered`` (at each key's ``first`` row);
    ``odd`` gains an entry the bulk reading leaves to the plan. Returns the rows
    answered, for the progress display. (The columns are bound to names once: this runs a
    million times in a re-run of a million rows.)"""
    value, label, explanation, confidence, tokens, cost = answered.columns()
    rows = 0
    add = read.add
    for key, entry in found.items():
        i = first[key]
        answer = plain_reading(entry)
        if answer is None or not reads(scores, by_label, answer):
            odd[key] = entry  # the plan reads it the general way
            continue
        label[i], explanation[i], confidence[i] = answer
        value[i] = scores[answer[0]]
        tokens[i], cost[i] = entry.get("tokens", 0), entry.get("cost_usd")
        rows += weights[i]
        add(key)
    return rows


def _keys(
    share: Prepared, reading: tuple[TemplateKeys, dict[str, float], bool]
) -> list[str | None] | None:
    """The cache key of each of ``share``'s distinct rows, rendered by polars
    :data:`RENDER_SLICE` rows at a time (``None``: a row whose text polars leaves to the
    renderer, keyed by the plan from its record); ``None`` when polars's first prompt is
    not the renderer's."""
    keyed, first_prompt = reading[0].keys, reading[0].prompt
    column = share.evaluator.prompt_column  # type: ignore[attr-defined]
    distinct = share.distinct
    assert distinct is not None
    keys: list[str | None] = []
    slices = [
        distinct.slice(begin, RENDER_SLICE) for begin in range(0, distinct.height, RENDER_SLICE)
    ]
    # polars renders the next slice (without the GIL) while this thread hashes the
    # prompts of the one before: at 1M rows, 2.5-2.7 µs a row for both against 2.95 one
    # after the other (a third of the rendering's 1.2 hidden, on two busy cores).
    with ThreadPoolExecutor(1, thread_name_prefix="framekit-render") as renders:
        ahead = renders.submit(column, slices[0]) if slices else None
        for n, rows in enumerate(slices):
            assert ahead is not None
            prompts: list[str | None] | None = ahead.result()
            # (one slice ahead, no more: see RENDER_SLICE)
            ahead = renders.submit(column, slices[n + 1]) if n + 1 < len(slices) else None
            if n == 0 and (prompts is None or prompts[0] != first_prompt):
                return None
            if prompts is None:
                keys.extend([None] * rows.height)
            else:
                keys.extend([keyed(user) if user is not None else None for user in prompts])
    return keys


def _reading(
    share: Prepared,
) -> tuple[TemplateKeys, dict[str, float], bool] | None:
    """What reading ``share``'s rows in bulk needs: its keys from the user message (with
    the first row's rendered prompt, to check polars's against), the label scores and whether
    a label's probability leaves the score as it is; ``None`` where the share's requests
    are not a plain template's, or its answers not read by label alone."""
    ev, judge, distinct = share.evaluator, share.judge.chat_endpoint, share.distinct
    scores = plain_scores(share)
    if scores is None or distinct is None or judge is None:
        return None
    # The mapping's values, as vouched for: preparing them would change no prompt.
    fields = dict(zip(distinct.columns, distinct.row(0)))
    template = template_keys(ev, chat_prefix(ev, judge), fields)
    if template is None:
        return None
    return template, scores, ev.scoring != "expected"


def plain_scores(share: Prepared) -> dict[str, float] | None:
    """Label -> score (clipped to [0, 1], as a settled record's value) of a share whose
    cached answers may be read in bulk (by :func:`read_cached`, or by
    :meth:`ChatPlan.receive_cached <framekit.engine.planner.ChatPlan.receive_cached>`),
    else ``None``."""
    plain = getattr(share.evaluator, "plain_verdicts", None)
    choices = plain() if plain is not None and not share.embeds_answers else None
    if choices is None:
        return None
    return {label: min(1.0, max(0.0, float(score))) for label, score in choices.items()}


def plain_reading(entry: Any) -> tuple[str, str | None, float | None] | None:
    """``(label, explanation, confidence)`` of a cached answer as a plain rubric's verdict
    and :func:`~framekit.engine.prepare.weigh` read it (the confidence is the label's
    probability, ``None`` without one); ``None`` for anything else (no string label,
    probabilities of another shape), which takes the general path.

    Examples
    --------
    >>> plain_reading({"answer": {"label": "relevant", "explanation": "It says so."},
    ...                "probabilities": {"relevant": 0.9, "irrelevant": 0.1}})
    ('relevant', 'It says so.', 0.9)
    >>> plain_reading({"answer": {"label": 1}}) is None
    True
    """
    answer = entry.get("answer") if type(entry) is dict else None
    if type(answer) is not dict:
        return None
    label = answer.get("label")
    if type(label) is not str:
        return None
    confidence = None
    probabilities = entry.get("probabilities")
    if probabilities:
        if type(probabilities) is not dict:
            return None
        if label in probabilities:
            confidence = probabilities[label]
            if type(confidence) is not float:
                return None
    explanation = answer.get("explanation")
    if explanation is not None and type(explanation) is not str:
        explanation = answer_text(explanation)
    return label, explanation, confidence


def reads(
    scores: Mapping[str, float], by_label: bool, reading: tuple[str, Any, float | None]
) -> bool:
    """Whether a share with these label ``scores`` reads ``reading`` as it stands: it
    scores the label, and a probability does not change the score (``by_label``: the
    share does not score by expectation)."""
    return reading[0] in scores and (reading[2] is None or by_label)
