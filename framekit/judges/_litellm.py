"""Lazy, offline-safe access to litellm.

``import litellm`` costs seconds and hundreds of MB, and without
``LITELLM_OFFLINE_MODE`` it fetches a model cost map over the network; so it is imported
on first use only, with the switch set first.
"""

from __future__ import annotations

import os
import threading
from types import ModuleType
from typing import Any

_lock = threading.Lock()
_module: ModuleType | None = None


def litellm() -> ModuleType:
    """The litellm module, imported once with offline mode and telemetry off."""
    global _module
    if _module is None:
        with _lock:
            if _module is None:
                os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
                os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
                import litellm as lm

                lm.telemetry = False
                lm.suppress_debug_info = True
                lm.drop_params = False
                _module = lm
    return _module


def cost_usd(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """Cost from litellm's bundled price map; ``None`` for a model it does not know."""
    if model in _unknown_models:
        return None
    try:
        p, c = litellm().cost_per_token(
            model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
        )
    except Exception:  # litellm raises a bare Exception for unmapped models
        _unknown_models.add(model)
        return None
    return float(p + c)


_unknown_models: set[str] = set()


def header(exc: BaseException, name: str) -> str | None:
    """A response header of a litellm/OpenAI exception, if any."""
    response: Any = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        value = headers.get(name)
    except Exception:
        return None
    return None if value is None else str(value)
