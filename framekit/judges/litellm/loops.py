"""One litellm logging worker per event loop.

litellm hands the success-logging coroutine of every call to one process-wide
``GLOBAL_LOGGING_WORKER``, whose queue and worker task belong to one event loop. Each
framekit run has its own loop, so two runs at once (two threads of a notebook) make the
worker jump between loops on every call: it moves its queue to the newer loop and
"revives" coroutines the other loop is already running, which then fail with "cannot
reuse already awaited coroutine", leave "Task was destroyed but it is pending" behind,
and print a thousand tracebacks. litellm's design assumes one loop per process; the fix
is to give it one worker per loop, behind the same name.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from types import ModuleType
from typing import Any


def _retiring(factory: type) -> type:
    """litellm's ``LoggingWorker``, able to retire once its loop has closed.

    Each worker registers a flush of its queue to run at exit, which holds the worker
    (and its closed loop) for the life of the process; a retired worker leaves that list.
    The flush is ``LoggingWorker._flush_on_exit`` (litellm 1.110), named only here.
    """

    class RetiringWorker(factory):  # type: ignore[misc,valid-type]
        def retire(self) -> None:
            """Leave the exit hooks: the loop is closed, nothing of it is left to flush."""
            atexit.unregister(self._flush_on_exit)

    return RetiringWorker


class _WorkerPerLoop:
    """Stands in for ``GLOBAL_LOGGING_WORKER``: each running loop gets its own worker."""

    def __init__(self, first: Any, factory: type) -> None:
        self._first = first  # litellm's own instance serves the first loop that asks
        self._factory = factory
        self._workers: dict[int, tuple[asyncio.AbstractEventLoop, Any]] = {}
        self._lock = threading.Lock()

    def _current(self) -> Any:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return self._first
        entry = self._workers.get(id(loop))
        if entry is not None and entry[0] is loop:
            return entry[1]
        with self._lock:
            entry = self._workers.get(id(loop))
            if entry is not None and entry[0] is loop:
                return entry[1]
            # Forget the workers of loops that have closed (each run closes its loop).
            for key, (old_loop, worker) in list(self._workers.items()):
                if old_loop.is_closed():
                    del self._workers[key]
                    if worker is not self._first:
                        worker.retire()
            in_use = any(w is self._first for _, w in self._workers.values())
            worker = self._factory() if in_use else self._first
            self._workers[id(loop)] = (loop, worker)
            return worker

    def ensure_initialized_and_enqueue(self, async_coroutine: Any) -> None:
        self._current().ensure_initialized_and_enqueue(async_coroutine)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._current(), name)


def one_worker_per_loop(lm: ModuleType) -> None:
    """Install :class:`_WorkerPerLoop` in litellm (idempotent; no-op if litellm changes)."""
    try:
        from litellm.litellm_core_utils import logging_worker
    except ImportError:
        return
    current = getattr(logging_worker, "GLOBAL_LOGGING_WORKER", None)
    factory = getattr(logging_worker, "LoggingWorker", None)
    if current is None or factory is None or isinstance(current, _WorkerPerLoop):
        return
    per_loop = _WorkerPerLoop(current, _retiring(factory))
    logging_worker.GLOBAL_LOGGING_WORKER = per_loop  # type: ignore[misc,assignment]
