"""Prices per token, looked up once per model through litellm's public price table.

The one place framekit prices a call: the HTTP transport (per answer), the batch path
(at the providers' batch prices) and the dry run (an estimate) all ask here. litellm is
imported on the first lookup, never on the hot path: the HTTP transport asks
:func:`price_per_token` once per run (in a thread, so the event loop is not blocked by
the import) and multiplies ``usage`` by the answer. A judge on a custom ``api_base``
(self-hosted, a proxy, another provider) has no known price: OpenAI's list prices would
be wrong there, so its cost stays unknown rather than invented.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

#: OpenAI, Azure OpenAI and Anthropic bill batch requests at half price, where the price
#: table gives no batch price of its own.
BATCH_DISCOUNT = 0.5


@dataclass(frozen=True)
class Price:
    """US dollars per prompt token and per completion token."""

    prompt: float
    completion: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return prompt_tokens * self.prompt + completion_tokens * self.completion


@functools.lru_cache(maxsize=64)
def price_per_token(model: str) -> Price | None:
    """The list price of ``model`` (a litellm model string), or ``None`` when unknown.

    Examples
    --------
    >>> price = price_per_token("openai/gpt-4o-mini")  # doctest: +SKIP
    >>> price.cost(1000, 100)  # doctest: +SKIP
    0.00021
    """
    from framekit.judges.litellm import litellm_module

    lm = litellm_module()
    try:
        prompt, completion = lm.cost_per_token(model=model, prompt_tokens=1, completion_tokens=1)
    except Exception:  # litellm raises for a model missing from its table
        return None
    return Price(float(prompt), float(completion))


@functools.lru_cache(maxsize=64)
def batch_price_per_token(model: str) -> Price | None:
    """The batch-API price of ``model``: the table's own batch price
    (``input_cost_per_token_batches``), else half the list price; ``None`` when unknown.

    Examples
    --------
    >>> batch_price_per_token("openai/gpt-4o-mini").cost(1_000_000, 0)  # doctest: +SKIP
    0.075
    """
    from framekit.judges.litellm import litellm_module

    listed = price_per_token(model)
    if listed is None:
        return None
    table = getattr(litellm_module(), "model_cost", None) or {}
    entry = table.get(model) or table.get(model.split("/", 1)[-1]) or {}
    prompt = entry.get("input_cost_per_token_batches")
    answer = entry.get("output_cost_per_token_batches")
    return Price(
        float(prompt) if prompt is not None else listed.prompt * BATCH_DISCOUNT,
        float(answer) if answer is not None else listed.completion * BATCH_DISCOUNT,
    )


def cost(
    model: str, prompt_tokens: int, completion_tokens: int, *, batch: bool = False
) -> float | None:
    """US dollars for one call of ``model`` (at the batch price with ``batch``); ``None``
    when the model has no known price."""
    price = batch_price_per_token(model) if batch else price_per_token(model)
    return None if price is None else price.cost(prompt_tokens, completion_tokens)
