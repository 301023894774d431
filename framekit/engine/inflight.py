"""Calls in flight, shared by every run in this process that uses one cache directory.

Two runs at once in one process (two threads of a notebook) each look the cache up, find
the same misses and would pay for every one twice. With one table per cache directory,
the second run to want an answer waits for the first run's call and takes its answer
(a failed call is made again by the waiting run, which has its own retry budget).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from typing import Any

from framekit.engine.cache import Cache, NullCache

_tables: dict[str, InFlight] = {}
_tables_lock = threading.Lock()


class InFlight:
    """Keys being answered right now, each with the future its answer will arrive on.

    Futures are ``concurrent.futures`` ones because the runs sharing a table run on
    different event loops in different threads.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[str, concurrent.futures.Future[Any]] = {}

    def claim(self, key: str) -> concurrent.futures.Future[Any] | None:
        """``None``: the caller now owns the call and must :meth:`finish` it; otherwise
        the future of the run that owns it."""
        with self._lock:
            owner = self._calls.get(key)
            if owner is not None:
                return owner
            self._calls[key] = concurrent.futures.Future()
            return None

    def finish(self, key: str, outcome: Any) -> None:
        """Publish the owner's outcome (``None``: no answer) to every waiting run."""
        with self._lock:
            future = self._calls.pop(key, None)
        if future is not None and not future.done():
            future.set_result(outcome)

    def __len__(self) -> int:
        return len(self._calls)


async def wait_for(future: concurrent.futures.Future[Any]) -> Any:
    """Await another run's call without ever cancelling it (shielded)."""
    return await asyncio.shield(asyncio.wrap_future(future))


def table_for(cache: Cache) -> InFlight | None:
    """The in-flight table of a cache directory; ``None`` without a cache."""
    if isinstance(cache, NullCache):
        return None
    path = os.path.realpath(cache.path)
    with _tables_lock:
        table = _tables.get(path)
        if table is None:
            table = _tables[path] = InFlight()
        return table
