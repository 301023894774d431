"""Records cut to fit the judge's context window, rather than failed.

A record whose text fields together exceed the judge's character budget
(:meth:`Judge.char_budget <framekit.judges.judge.Judge.char_budget>`, from its context
window) is cut: short fields keep everything, long ones share the rest, each cut text
ends with a visible mark (:data:`TRUNCATION_MARK`), and the row's explanation says what
was cut (:func:`fit_record`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from framekit._results import Record
from framekit.judges.cascade import Cascade
from framekit.judges.judge import Judge
from framekit.judges.local import LocalJudge

#: Records with fewer characters of fields than this are not measured against a model's
#: window (that would mean importing litellm to look it up, which a fully cached run never
#: needs): every chat model of the last years takes them. Set ``judge.context_window``
#: to have every record checked.
ALWAYS_FITS = 8_000


async def fit_to_context(
    records: Sequence[Record], judge: Judge | LocalJudge | Cascade, most: int | None = None
) -> None:
    """Cut the fields of over-long ``records`` (in place) to the judge's character
    budget, each with the note for its explanation (a cascade's: every stage's, so the
    smallest window decides). ``most``: no record has more characters of text than this
    (:func:`~framekit.engine.records.most_text`), so none is measured when that always fits."""
    for stage in judge.stages():
        # (The offline judge truncates to its model's 256 tokens by itself.)
        endpoint = stage.chat_endpoint
        if endpoint is not None:
            await _fit_to_window(records, endpoint, most)


def needs_fitting(judge: Judge | LocalJudge | Cascade, most: int | None) -> bool:
    """Whether any record of a share could exceed ``judge``'s window, told from the most
    text a row holds (:func:`~framekit.engine.records.most_text`, read off whole columns;
    ``None``: not known): only then are its records measured one by one.

    Examples
    --------
    >>> needs_fitting(Judge("openai/gpt-4o-mini"), 300), needs_fitting(Judge("openai/x"), None)
    (False, True)
    """
    return any(
        stage.chat_endpoint is not None
        and (stage.chat_endpoint.context_window or most is None or most > ALWAYS_FITS)
        for stage in judge.stages()
    )


async def _fit_to_window(records: Sequence[Record], judge: Judge, most: int | None) -> None:
    """:func:`fit_to_context` for one LLM judge: its window, measured only when it may
    matter (a window set, or more text than always fits)."""
    if not judge.context_window and most is not None and most <= ALWAYS_FITS:
        return
    unsettled = [r for r in records if r.fields is not None]
    sizes = [sum(map(text_size, r.fields.values())) for r in unsettled if r.fields is not None]
    if judge.context_window:
        budget = judge.char_budget()
    elif max(sizes, default=0) <= ALWAYS_FITS:
        return
    else:  # litellm's figure: imported (seconds) off the event loop
        budget = await asyncio.to_thread(judge.char_budget)
    for record, size in zip(unsettled, sizes):
        if size > budget and record.fields is not None:
            record.note = fit_record(record.fields, budget) or record.note


def text_size(value: Any) -> int:
    """Characters of text in a field value: a string, or the strings of a list."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, (list, tuple)):
        if all(type(v) is str for v in value):  # the usual list: documents
            return sum(map(len, value))
        return sum(text_size(v if not isinstance(v, Mapping) else v.get("content")) for v in value)
    return 0


def _shares(sizes: list[int], budget: int) -> list[int]:
    """Per-item limits within ``budget``: short items keep all, long ones split the rest."""
    limits = [0] * len(sizes)
    left = budget
    order = sorted(range(len(sizes)), key=sizes.__getitem__)
    for k, i in enumerate(order):
        limits[i] = min(sizes[i], left // (len(sizes) - k))
        left -= limits[i]
    return limits


TRUNCATION_MARK = "\n[... cut by framekit to fit the judge's context window ...]"


def _cut(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + TRUNCATION_MARK
    if isinstance(value, (list, tuple)):
        limits = _shares([text_size([v]) for v in value], limit)
        out = []
        for item, lim in zip(value, limits):
            if isinstance(item, Mapping) and isinstance(item.get("content"), str):
                item = {**item, "content": _cut(item["content"], lim)}
            elif isinstance(item, str):
                item = _cut(item, lim)
            out.append(item)
        return out
    return value


def fit_record(record: dict[str, Any], budget: int) -> str | None:
    """Cut the text fields of ``record`` (in place) to ``budget`` characters in total.

    Fields shorter than an even share keep everything; the longer ones share the rest, and
    each cut text ends with a visible mark so the judge knows it is partial. Returns the
    note for the explanation column, or ``None`` when nothing was cut.

    Examples
    --------
    >>> record = {"input": "short question", "output": "x" * 100}
    >>> fit_record(record, 50)
    "[framekit: cut to fit the judge's context window: output 100 -> 36 characters]"
    >>> len(record["output"]) > 36, record["input"]
    (True, 'short question')
    """
    sizes = {f: text_size(v) for f, v in record.items()}
    if sum(sizes.values()) <= budget:
        return None
    limits = dict(zip(sizes, _shares(list(sizes.values()), budget)))
    cuts = []
    for f, size in sizes.items():
        if size > limits[f]:
            record[f] = _cut(record[f], limits[f])
            cuts.append(f"{f} {size:,} -> {limits[f]:,}")
    return f"[framekit: cut to fit the judge's context window: {'; '.join(cuts)} characters]"
