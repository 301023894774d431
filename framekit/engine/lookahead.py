"""The requests a run's workers take: claimed and looked up a few at a time, just before
they are sent; those another process is asking are waited for aside.

The cache is asked again just before requests go out where it may have changed since
the run's plan asked it (another run of this process wrote to it, or another process
claimed in it: the run's first look may be minutes old), :data:`LOOK_AHEAD` keys per
query; otherwise the plan's answer stands and a key is looked up once. With cross-process claims (:mod:`framekit.engine.claims`) the same few keys are
claimed first, in one transaction, and only then looked up, so an answer written (and
its claim given up) by another process meanwhile is found rather than paid for again.

A key another live process holds is not waited for by a worker: it is set aside, polled
every :data:`~framekit.engine.claims.POLL_S` seconds in a task of its own, and comes back
to the workers with its answer (from the cache), or to be sent by this run when the
other process gave it up (its call failed) or its lease lapsed (the process was killed).
A worker never blocks on another process, so two processes holding keys the other wants
cannot wait for each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from framekit.engine.cache import Cache
from framekit.engine.claims import POLL_S, Claims

#: Keys the cache is asked for (and claimed) at once just before they are sent: one query
#: (and one claims transaction) per this many requests.
LOOK_AHEAD = 32

#: One request for a worker: its key, and what the cache holds for it.
Item = tuple[str, Any]


class LookAhead:
    """The run's request keys, each with the cache's entry for it as of just before
    sending. It deals in keys only: the worker renders a request it is to send.

    ``size`` keys are looked up (and claimed, with ``claims``) at a time; ``lookup=False``
    hands requests out without either (a sampled judge looks up and asks each sample
    itself). The keys claimed are given up once answered and written (:meth:`written`,
    from the cache writer's thread), at once when a call ends without an answer
    (:meth:`unanswered`), and whatever is left when the run ends (:meth:`close`).
    """

    def __init__(
        self,
        keys: Iterable[str],
        cache: Cache,
        claims: Claims | None,
        size: int,
        lookup: bool = True,
        stale: Callable[[], bool] | None = None,
    ) -> None:
        self.cache = cache
        self.claims = claims if lookup else None
        #: Whether the cache may have changed since the run's plan asked it (``None``:
        #: always ask again): where it has not, the plan's answer stands and the cache is
        #: not asked a second time for a key.
        self._stale = stale
        self._items = self._looked_up(iter(keys), max(1, min(LOOK_AHEAD, size)), lookup)
        self._back: deque[Item] = deque()  # set-aside keys, answered or now this run's
        self._aside: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Event()
        #: Keys this run claimed and has not given up yet (the writer's thread gives
        #: some up: changed under the lock).
        self.claimed: set[str] = set()
        self._claimed_lock = threading.Lock()

    def _looked_up(
        self, pending: Iterator[str], size: int, lookup: bool
    ) -> Iterator[tuple[str, Any, bool]]:
        """``(key, entry, held)``, ``held`` meaning another process asks it."""
        while keys := list(itertools.islice(pending, size)):
            if not lookup:
                yield from ((key, None, False) for key in keys)
                continue
            held: set[str] = set()
            claims = self.claims
            if claims is not None:
                held = claims.take(keys)  # first: see the module docstring
                with self._claimed_lock:
                    self.claimed.update(key for key in keys if key not in held)
            stale = self._stale
            found = self.cache.get_many(keys) if stale is None or stale() else {}
            if found and claims is not None:
                self.release([key for key in found if key in self.claimed])
            for key in keys:
                yield key, found.get(key), key in held

    async def next(self) -> Item | None:
        """The next request for a worker; ``None`` once there is none left."""
        while True:
            if self._back:
                return self._back.popleft()
            item = next(self._items, None)
            if item is not None:
                key, entry, held = item
                if not held or entry is not None:  # (answered, not yet given up)
                    return key, entry
                self._aside.add(asyncio.create_task(self._wait_elsewhere(key)))
                continue
            if not self._aside:
                return None
            self._changed.clear()
            await self._changed.wait()

    async def _wait_elsewhere(self, key: str) -> None:
        """Poll a key another process holds until its answer is in the cache, or the
        claim is given up or lapsed and this run takes it; then hand it back."""
        claims = self.claims
        assert claims is not None
        try:
            while True:
                await asyncio.sleep(POLL_S)
                entry = self.cache.get(key)
                if entry is not None:
                    break
                if claims.held_elsewhere([key]) or claims.take([key]):
                    continue
                with self._claimed_lock:
                    self.claimed.add(key)
                entry = self.cache.get(key)  # answered just before it was given up?
                if entry is not None:
                    self.release([key])
                break
            self._back.append((key, entry))
        finally:
            # Out of the set before the workers wake (a done callback would run after
            # them): a worker finding nothing left must not wait for this task.
            self._aside.discard(asyncio.current_task())  # type: ignore[arg-type]
            self._changed.set()

    def unanswered(self, key: str) -> None:
        """A call of this run ended without an answer: another process may ask it."""
        if self.claims is not None and key in self.claimed:
            self.release([key])

    def written(self, keys: list[str]) -> None:
        """Answers are in the cache: their claims are given up (the writer's thread)."""
        if self.claims is not None:
            with self._claimed_lock:
                mine = [key for key in keys if key in self.claimed]
            self.release(mine)

    def release(self, keys: list[str]) -> None:
        """Give up this run's claims on ``keys``."""
        if keys and self.claims is not None:
            with self._claimed_lock:
                self.claimed.difference_update(keys)
            self.claims.release(keys)

    async def close(self) -> None:
        """Stop waiting for other processes and give up every claim left (a run that
        ends early: its keys are not this process's to keep)."""
        for task in list(self._aside):
            task.cancel()
        for task in list(self._aside):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        with self._claimed_lock:
            left = list(self.claimed)
        self.release(left)
