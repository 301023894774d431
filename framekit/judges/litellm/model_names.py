"""Which model strings litellm can route, decided offline when a judge is built.

``fk.Judge("gpt4o")`` or ``"openai:gpt-4o-mini"`` used to fail every call of a run with
litellm's "LLM Provider NOT provided" (281 rows, exit 0). litellm routes a model string
by its provider prefix (``openai/...``), by a model name its price map knows
(``gpt-4o-mini``), or by an ``api_base`` of a hosted provider it recognises. framekit
checks the same three when the judge is built, without importing litellm (seconds) and
without a network:

- the prefixes and the hosts from the copy in :mod:`framekit.judges.litellm.routes`
  (litellm keeps both lists in its code);
- bare names from the price map file the installed litellm ships and itself reads in
  offline mode (read as data, about 50 ms, only for a name without a prefix), with its
  routing rules, and the few name patterns litellm's code adds.

The check must never refuse a string litellm would route, so a prefix or host missing
from the copy is refused only when the installed litellm is not newer than the copy;
with a newer one, litellm's own answer at the first call stops the run
(:mod:`framekit.judges.litellm.call`), with the same message.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from framekit.judges.litellm.routes import ENDPOINT_HOSTS, LITELLM_VERSION, ROUTED_PREFIXES

#: Bare names litellm's code routes besides its price map (litellm 1.110,
#: ``get_llm_provider``): fine-tuned OpenAI models, image models, Replicate's versioned
#: ids (64 hex digits after a colon), the wildcard, Amazon Nova.
_CODE_PATTERNS = re.compile(
    r"ft:gpt-3\.5-turbo|ft:gpt-4|^gpt-image|:[0-9a-f]{64}$|^\*$|^amazon_nova", re.IGNORECASE
)
#: How a provider is written with the wrong separator: ``openai:gpt-4o``, ``openai.gpt-4o``.
_WRONG_SEPARATOR = re.compile(r"^([A-Za-z0-9_-]+)\s*(?::|\\|\.|\s|\|)\s*(\S.*)$")
_HOW = (
    "Name it as provider/model, e.g. openai/gpt-4o-mini (openai/<name> with api_base for "
    "an OpenAI-compatible server)"
)


def model_problem(
    model: str, api_base: str | None = None, kwargs: Mapping[str, Any] | None = None
) -> str | None:
    """Why litellm could route no call of ``model``, or ``None``.

    Examples
    --------
    >>> model_problem("openai/gpt-4o-mini") is None
    True
    >>> print(model_problem("openai:gpt-4o-mini"))  # doctest: +ELLIPSIS
    litellm cannot route the model 'openai:gpt-4o-mini': ... Did you mean 'openai/gpt-4o-mini'? ...
    """
    kwargs = kwargs or {}
    if kwargs.get("custom_llm_provider"):
        return None  # the caller names the provider to litellm directly
    prefix, sep, _ = model.partition("/")
    if sep and prefix in ROUTED_PREFIXES:
        return None  # the common case, decided without reading the price map
    if _name_known(model):
        return None
    if sep:
        if _newer_litellm():
            return None
        why = f"{prefix!r} is not a provider litellm {LITELLM_VERSION} routes"
        return _message(model, why, api_base)
    base = api_base or kwargs.get("api_base") or kwargs.get("base_url")
    if base and (_host(base) in ENDPOINT_HOSTS or _newer_litellm()):
        return None  # a hosted provider litellm recognises by its address
    return _message(model, "it has no provider prefix and is no model name litellm knows", base)


def not_routed(model: str | None) -> str:
    """litellm's own "LLM Provider NOT provided", said as :func:`model_problem` says it."""
    if not model:
        return f"litellm cannot tell which provider serves the model. {_HOW}."
    return _message(model, "litellm answered 'LLM Provider NOT provided'", None)


def _message(model: str, why: str, api_base: str | None) -> str:
    guess = _suggestion(model, api_base)
    hint = f" Did you mean {guess!r}?" if guess else ""
    return f"litellm cannot route the model {model!r}: {why}.{hint} {_HOW}."


def _suggestion(model: str, api_base: str | None) -> str | None:
    """The model string most likely meant, or ``None``."""
    wrong = _WRONG_SEPARATOR.match(model)
    if wrong and wrong.group(1).lower() in ROUTED_PREFIXES:
        return f"{wrong.group(1).lower()}/{wrong.group(2)}"
    prefix, sep, rest = model.partition("/")
    if sep:
        close = difflib.get_close_matches(prefix.lower(), ROUTED_PREFIXES, n=1, cutoff=0.6)
        return f"{close[0]}/{rest}" if close else None
    if api_base:
        return f"openai/{model}"  # the server's own model, spoken to as OpenAI's API
    names = _price_map_names()
    close = difflib.get_close_matches(model, names, n=1, cutoff=0.75)
    if not close:
        return None
    provider = names[close[0]]
    return f"{provider}/{close[0]}" if provider in ROUTED_PREFIXES else close[0]


def _name_known(model: str) -> bool:
    """Whether litellm routes ``model`` by the name alone: an entry of its price map (an
    alias and a prefixed image size too), a routing rule, or a pattern of its code."""
    if model in _price_map() or _CODE_PATTERNS.search(model):
        return True
    return any(rule.search(model) for rule in _routing_rules())


@functools.cache
def _price_map() -> dict[str, Any]:
    """The installed litellm's price map (``{}`` when litellm or the file is missing)."""
    try:
        spec = importlib.util.find_spec("litellm")  # locates, does not import
    except (ImportError, ValueError):
        return {}
    locations = (spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        path = Path(location) / "model_prices_and_context_window_backup.json"
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError):
            continue
        return data if isinstance(data, dict) else {}
    return {}


@functools.cache
def _price_map_names() -> dict[str, str]:
    """Model names without a prefix -> the provider the price map gives them."""
    return {
        name: str(entry["litellm_provider"])
        for name, entry in _price_map().items()
        if "/" not in name and isinstance(entry, dict) and "litellm_provider" in entry
    }


@functools.cache
def _routing_rules() -> tuple[re.Pattern[str], ...]:
    """The price map's routing rules: a regex that alone decides a name's provider."""
    block = _price_map().get("fallback_generalizations")
    rules = block.get("rules", []) if isinstance(block, dict) else []
    out = []
    for rule in rules:
        info = rule.get("model_info") if isinstance(rule, dict) else None
        if isinstance(info, dict) and list(info) == ["litellm_provider"]:
            try:
                out.append(re.compile(str(rule.get("pattern")), re.IGNORECASE))
            except re.error:
                continue
    return tuple(out)


@functools.cache
def _newer_litellm() -> bool:
    """Whether the installed litellm is newer than the copy of its routes (it may route
    prefixes and hosts the copy lacks)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("litellm")
    except PackageNotFoundError:
        return False
    return _release(installed) > _release(LITELLM_VERSION)


def _release(text: str) -> tuple[int, ...]:
    """``"1.110.2"`` -> ``(1, 110, 2)``; a suffix such as ``rc1`` ends the numbers."""
    numbers = []
    for part in text.split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        numbers.append(int(digits.group()))
    return tuple(numbers)


def _host(url: str) -> str:
    try:
        return (urlsplit(url if "://" in url else f"https://{url}").hostname or "").lower()
    except ValueError:
        return ""
