"""Lazy, offline-safe access to litellm.

``import litellm`` costs seconds and hundreds of MB, and without
``LITELLM_OFFLINE_MODE`` it fetches a model cost map over the network; so it is imported
on first use only, with the switch set first.
"""

from __future__ import annotations

import os
import threading
import warnings
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
                # litellm's pydantic models warn about ReadOnly TypedDict items when
                # they are first built (during calls, not only at import): nothing a
                # framekit user can act on, so that one message is filtered.
                warnings.filterwarnings(
                    "ignore", message=r".*using the `ReadOnly` qualifier", category=UserWarning
                )
                import litellm as lm

                lm.telemetry = False
                lm.suppress_debug_info = True
                lm.drop_params = False
                from framekit.judges._litellm_loops import one_worker_per_loop

                one_worker_per_loop(lm)
                _module = lm
    return _module


def response_cost(response: Any) -> float | None:
    """The cost litellm already priced for a response; ``None`` for an unknown model."""
    hidden = getattr(response, "_hidden_params", None) or {}
    cost = hidden.get("response_cost") if isinstance(hidden, dict) else None
    return float(cost) if isinstance(cost, (int, float)) else None


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
