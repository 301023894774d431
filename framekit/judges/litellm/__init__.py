"""framekit's side of litellm: every module that knows litellm is in this package.

- here: lazy, offline-safe access to the ``litellm`` module itself. ``import litellm``
  costs seconds and hundreds of MB, and without ``LITELLM_OFFLINE_MODE`` it fetches a
  model cost map over the network; so it is imported on first use only, with the switch
  set first;
- ``transport``: the litellm transport (``Judge(transport="litellm")``);
- ``call``: one ``litellm.acompletion`` call, and the :class:`~framekit.judges.faults.Fault`
  a failed one comes to (both sides of the transport make it: this process and the
  worker processes);
- ``workers``: the worker processes of ``Judge(processes=N)``;
- ``loops``: one litellm logging worker per event loop;
- ``model_names`` and ``routes``: which model strings litellm routes, decided offline;
- ``embeddings``: embeddings from an API model (``AnswerRelevancy(embedding_model=...)``).
"""

from __future__ import annotations

import os
import threading
import warnings
from types import ModuleType
from typing import Any

_lock = threading.Lock()
_module: ModuleType | None = None


def litellm_module() -> ModuleType:
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
                from framekit.judges.litellm.loops import one_worker_per_loop

                one_worker_per_loop(lm)
                _module = lm
    return _module


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
