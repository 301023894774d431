"""Fitting records to a judge's context window.

A record whose text fields together exceed the judge's character budget is cut to fit
rather than failed: short fields keep everything, long ones share the rest, each cut text
ends with a visible mark, and the row's explanation says what was cut. The budget comes
from the judge's context window (``Judge(context_window=...)``, else litellm's model
info, else 128k tokens).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from framekit.judges.judge import Judge

#: Context window assumed for a model litellm does not know (tokens).
DEFAULT_CONTEXT_TOKENS = 128_000
#: Characters per token when turning a window into a character budget. English runs at
#: about 4; 3 leaves room for code, numbers and other scripts.
CHARS_PER_TOKEN = 3
#: Tokens kept for the template, instructions and answer schema around the fields.
PROMPT_RESERVE_TOKENS = 1_000
#: Records with fewer characters of fields than this are not measured against a model's
#: window (that would mean importing litellm to look it up, which a fully cached run never
#: needs): every chat model of the last years takes them. Set ``judge.context_window``
#: to have every record checked.
_ALWAYS_FITS = 8_000
#: The smallest budget, however small the window: a judge needs something to read.
_MIN_BUDGET = 1_000


def context_tokens(judge: Judge) -> int:
    """The judge's context window in tokens: ``judge.context_window`` if set, else what
    litellm knows of the model, else :data:`DEFAULT_CONTEXT_TOKENS`."""
    window = getattr(judge, "context_window", None)
    if window:
        return int(window)
    from framekit.judges.litellm import litellm_module

    try:
        info = litellm_module().get_model_info(judge.model)
    except Exception:  # litellm raises for models it has no entry for
        return DEFAULT_CONTEXT_TOKENS
    return int(info.get("max_input_tokens") or info.get("max_tokens") or DEFAULT_CONTEXT_TOKENS)


def char_budget(judge: Judge) -> int:
    """Characters of field text one prompt may carry for ``judge``.

    Examples
    --------
    >>> judge = Judge("openai/my-model", max_tokens=1000)
    >>> judge.context_window = 8_000
    >>> char_budget(judge)
    18000
    """
    spare = context_tokens(judge) - judge.max_tokens - PROMPT_RESERVE_TOKENS
    return max(_MIN_BUDGET, spare * CHARS_PER_TOKEN)


async def fit_to_context(records: list[dict[str, Any]], judge: Any) -> dict[int, str]:
    """Cut over-long records to the judge's budget; notes for the explanation, by record."""
    if not isinstance(judge, Judge):
        return {}  # the local judge truncates to its model's 256 tokens by itself
    sizes = [sum(map(text_size, r.values())) for r in records]
    if getattr(judge, "context_window", None):
        budget = char_budget(judge)
    elif max(sizes, default=0) <= _ALWAYS_FITS:
        return {}
    else:
        budget = await asyncio.to_thread(char_budget, judge)
    notes = {i: fit_record(records[i], budget) for i, size in enumerate(sizes) if size > budget}
    return {i: note for i, note in notes.items() if note}


def text_size(value: Any) -> int:
    """Characters of text in a field value: a string, or the strings of a list."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, (list, tuple)):
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
