"""What a judge's calls cost: the one place framekit prices a call.

A judge's price is the one its user gave (``Judge(price={"input": 2.0, "output": 8.0,
"cached_input": 0.5})``, US dollars per million tokens, for any endpoint), else the
model's list price in litellm's public price table (its cached-input and cache-write
rates included) when the calls go to the provider's own endpoint, else unknown: a
custom ``api_base`` (self-hosted, a proxy, another provider) would be priced wrong by
OpenAI's list. :func:`judge_price` decides it, and every reader asks it: the HTTP and
litellm transports (each answer), the batch path (each result line, at
:data:`BATCH_DISCOUNT` of the same price) and the dry run (its estimate). An unknown
price reads :data:`UNKNOWN_COST` wherever it is shown.

A call's cost counts its prompt tokens in three parts (:mod:`framekit.judges.usage`):
those read from the provider's prompt cache (OpenAI's
``prompt_tokens_details.cached_tokens``, Anthropic's ``cache_read_input_tokens``) at the
cached-input rate, those written to it (Anthropic's ``cache_creation_input_tokens``) at
the cache-write rate, the rest at the input rate.

litellm is imported on the first list-price lookup only (seconds: the transports ask
once per run, in a thread), never for a judge given a price or at a custom endpoint.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from framekit._errors import InputError
from framekit.judges.providers import (
    Provider,
    batch_provider,
    first_set,
    openai_speaker,
    provider,
)
from framekit.judges.usage import Price

if TYPE_CHECKING:
    from framekit.judges.endpoint import Endpoint

#: OpenAI, Azure OpenAI and Anthropic bill batch requests at half price: a given price,
#: and a list price where the table gives no batch price of its own, are discounted so.
BATCH_DISCOUNT = 0.5
#: ``Judge(price=...)`` keys: US dollars per million tokens of prompt input, of output, of
#: prompt input read from the provider's cache, of prompt input written to it.
PRICE_KEYS = ("input", "output", "cached_input", "cache_write")
#: What a run, a batch run and a dry run all say of a cost they cannot know.
UNKNOWN_COST = (
    "unknown (no price for this judge's endpoint: give the judge "
    "price={'input': ..., 'output': ...} or --price input=...,output=..., "
    "in USD per million tokens)"
)
_PER_MILLION = 1e-6


def price_from(given: Any, where: str = "price") -> Price:
    """``Judge(price=...)`` (US dollars per million tokens) as a :class:`Price`, or an
    :class:`~framekit.InputError` naming the key that is wrong.

    Examples
    --------
    >>> price_from({"input": 2, "output": 8}).completion
    8e-06
    >>> price_from({"input": 2, "ouput": 8})
    Traceback (most recent call last):
    ...
    framekit.InputError: price: unknown key 'ouput' (known: input, output, cached_input, cache_write)
    """
    if not isinstance(given, Mapping):
        raise InputError(
            f"{where} must map {', '.join(PRICE_KEYS)} to US dollars per million tokens, "
            f"e.g. {{'input': 2.0, 'output': 8.0}}; got {type(given).__name__}"
        )
    rates: dict[str, float] = {}
    for key, value in given.items():
        if key not in PRICE_KEYS:
            raise InputError(f"{where}: unknown key {key!r} (known: {', '.join(PRICE_KEYS)})")
        number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        if number is None or not math.isfinite(number) or number < 0:
            raise InputError(
                f"{where}[{key!r}] must be a non-negative number of US dollars per million "
                f"tokens, got {value!r}"
            )
        rates[key] = float(number) * _PER_MILLION
    missing = [k for k in ("input", "output") if k not in rates]
    if missing:
        raise InputError(f"{where}: {' and '.join(repr(k) for k in missing)} missing")
    return Price(
        rates["input"], rates["output"], rates.get("cached_input"), rates.get("cache_write")
    )


def per_million(price: Price) -> dict[str, float]:
    """``price`` as ``Judge(price=...)`` takes it (US dollars per million tokens).

    Examples
    --------
    >>> per_million(price_from({"input": 2.0, "output": 8.0, "cached_input": 0.5}))
    {'input': 2.0, 'output': 8.0, 'cached_input': 0.5}
    """
    rates = {"input": price.prompt, "output": price.completion}
    if price.cached is not None:
        rates["cached_input"] = price.cached
    if price.written is not None:
        rates["cache_write"] = price.written
    return {k: round(v / _PER_MILLION, 9) for k, v in rates.items()}


def judge_price(endpoint: Endpoint, *, transport: str, batch: bool) -> Price | None:
    """The price of a judge's calls (batch lines with ``batch``), ``None`` when unknown:
    the given price (discounted by :data:`BATCH_DISCOUNT` for batch lines), else the list
    price where :func:`list_price_applies`, else none. Imports litellm only for a list
    price.

    Examples
    --------
    >>> from framekit.judges.endpoint import Endpoint
    >>> mine = Endpoint("openai/my-model", "http://127.0.0.1:8000/v1",
    ...                 price=price_from({"input": 2.0, "output": 8.0}))
    >>> judge_price(mine, transport="http", batch=True).cost(1_000_000, 0)
    1.0
    >>> judge_price(Endpoint("openai/gpt-4o-mini", "http://127.0.0.1:8000/v1"),
    ...             transport="http", batch=False) is None
    True
    """
    given = endpoint.price
    if given is not None:
        return given.discounted(BATCH_DISCOUNT) if batch else given
    if not list_price_applies(endpoint, transport=transport, batch=batch):
        return None
    return batch_list_price(endpoint.model) if batch else list_price(endpoint.model)


def list_price_applies(endpoint: Endpoint, *, transport: str, batch: bool) -> bool:
    """Whether calls of ``endpoint`` go to the provider whose list price the model has.

    They do when no ``api_base`` is given nor set in the provider's variables (its public
    endpoint); or, on the litellm transport, for a provider that is reached only through an
    ``api_base`` of its own (an Azure resource). An ``api_base`` in front of a model of a
    provider with a public endpoint, or any ``api_base`` spoken to in OpenAI's format (the
    HTTP transport, a batch API), is someone else's server: its price is not the list's.
    """
    via: Provider | None
    if batch:
        via = batch_provider(endpoint.model)
    elif transport == "http":
        via = openai_speaker(endpoint.model)
    else:
        via = provider(endpoint.model)
    base = endpoint.base or (first_set(via.base_vars) if via is not None else None)
    if base is None:
        return True
    return (
        transport == "litellm"
        and not batch
        and via is not None
        and via.public_base is None
        and not via.speaks_openai
    )


@functools.lru_cache(maxsize=64)
def list_price(model: str) -> Price | None:
    """The list price of ``model`` (a litellm model string) in litellm's price table, its
    cached-input and cache-write rates included; ``None`` when the table lacks it.

    Examples
    --------
    >>> price = list_price("openai/gpt-4o-mini")  # doctest: +SKIP
    >>> price.cost(1000, 100)  # doctest: +SKIP
    0.00021
    """
    entry = _table_entry(model)
    if entry is None:
        return None
    prompt, completion = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
    if not isinstance(prompt, (int, float)) or not isinstance(completion, (int, float)):
        return None
    return Price(
        float(prompt),
        float(completion),
        _rate(entry.get("cache_read_input_token_cost")),
        _rate(entry.get("cache_creation_input_token_cost")),
    )


@functools.lru_cache(maxsize=64)
def batch_list_price(model: str) -> Price | None:
    """The batch-API price of ``model``: the table's own batch prices
    (``input_cost_per_token_batches``...), else :data:`BATCH_DISCOUNT` of the list price;
    ``None`` when unknown.

    Examples
    --------
    >>> batch_list_price("openai/gpt-4o-mini").cost(1_000_000, 0)  # doctest: +SKIP
    0.075
    """
    listed = list_price(model)
    if listed is None:
        return None
    entry = _table_entry(model) or {}
    half = listed.discounted(BATCH_DISCOUNT)
    prompt = _rate(entry.get("input_cost_per_token_batches"))
    completion = _rate(entry.get("output_cost_per_token_batches"))
    return replace(
        half,
        prompt=half.prompt if prompt is None else prompt,
        completion=half.completion if completion is None else completion,
    )


def _table_entry(model: str) -> dict[str, Any] | None:
    """litellm's price-table entry for ``model`` (imports litellm), ``None`` if absent."""
    from framekit.judges.litellm import litellm_module

    lm = litellm_module()
    try:
        info = lm.get_model_info(model)
    except Exception:  # litellm raises for a model missing from its table
        return None
    return dict(info) if isinstance(info, Mapping) else None


def _rate(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
