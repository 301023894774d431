"""The first request of a shared prefix goes alone; the others follow once it is answered.

A provider caches a prompt prefix only once a request holding it has been answered
(OpenAI), or written (Anthropic). The evaluators of one row laid out for the cache
(:mod:`framekit.judges.shared_prefix`) share the row's documents as their prefix; sent at
the same instant, none of them finds it cached. So the workers take requests through a
:class:`PrefixOrder`: the first request of a prefix (its *leader*) is handed out as it
comes, the ones after it are held until the leader's outcome arrives, and meanwhile the
workers take the requests behind them (other rows' leaders), so the concurrency stays
full. Only at the end of a run, with nothing else left to send, does a worker wait for a
leader. A leader that fails releases its followers all the same (one of them warms the
cache then).

The order deals in keys, as the lookahead does: a request is rendered here only where its
shape (the plan's request without messages) says it has a shared part, and it is handed
to the worker rendered, so that it is not rendered twice. Requests without a shared
prefix, and those the cache already answers, pass straight through unrendered, so a run
without a laid-out evaluator is sent in the order it always was.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from framekit._results import Outcome
from framekit.engine.lookahead import Item
from framekit.judges.request import ChatRequest
from framekit.judges.shared_prefix import SHARED_UNTIL, prefix_key

#: What a worker takes: the key, its request where the order rendered it (else ``None``:
#: the worker renders it), and the cache's entry for it (``None``: to be sent).
Taken = tuple[str, ChatRequest | None, Any]


class Source(Protocol):
    """Where the keys come from (:class:`~framekit.engine.lookahead.LookAhead`): each
    with the cache's entry for it, ``None`` for one to send."""

    async def next(self) -> Item | None: ...

    def unanswered(self, key: str) -> None: ...


#: Prefixes whose leader has been answered, remembered so that their later requests go as
#: they come (the oldest forgotten beyond this: a request of a forgotten prefix leads
#: again, which costs only the wait of its own followers).
MAX_WARM = 65_536


class PrefixOrder:
    """The workers' queue: ``source``'s requests, the followers of a prefix held until its
    leader is answered. :meth:`done` is the sink the workers hand each outcome to; it
    passes it on to ``sink``.

    Examples
    --------
    >>> import asyncio
    >>> shape = ChatRequest([], "x", {}, extra={"shared_until": ["[END DATA: input]"]})
    >>> def request(key):  # two evaluators of one row share "docs <row>"
    ...     content = f"docs {key[0]}[END DATA: input] question"
    ...     return ChatRequest([{"role": "user", "content": content}], "x", {},
    ...                        extra=shape.extra)
    >>> class Keys:
    ...     def __init__(self, keys):
    ...         self.items = [(k, None) for k in keys]
    ...     async def next(self):
    ...         return self.items.pop(0) if self.items else None
    ...     def unanswered(self, key): ...
    >>> async def taken():
    ...     order = PrefixOrder(Keys(["1a", "1b", "2a", "2b"]), lambda key, outcome: None,
    ...                         lambda key: shape, request)
    ...     first = [(await order.next())[0], (await order.next())[0]]
    ...     order.done("1a", None)  # the leader of row 1 is answered
    ...     return first + [(await order.next())[0]]
    >>> asyncio.run(taken())
    ['1a', '2a', '1b']
    """

    def __init__(
        self,
        source: Source,
        sink: Any,
        shape: Callable[[str], ChatRequest],
        render: Callable[[str], ChatRequest],
    ) -> None:
        self._source = source
        self._sink = sink
        self._shape = shape
        self._render = render
        #: Prefix digest -> the requests held for its leader, while the leader is out.
        self._waiting: dict[bytes, list[Taken]] = {}
        #: Prefixes whose leader is answered, oldest first.
        self._warm: dict[bytes, None] = {}
        #: Leader key -> its prefix digest, until the leader is answered.
        self._leaders: dict[str, bytes] = {}
        self._ready: deque[Taken] = deque()
        self._held = 0
        self._exhausted = False
        self._changed = asyncio.Event()

    async def next(self) -> Taken | None:
        """The next request for a worker; ``None`` once there is none left."""
        while True:
            if self._ready:
                return self._ready.popleft()
            if not self._exhausted:
                item = await self._source.next()
                if item is None:
                    self._exhausted = True
                    continue
                taken = self._taken(item)
                if taken is not None:
                    return taken
                continue
            if not self._held:
                return None
            # Nothing left but followers of leaders in flight: wait for an answer.
            self._changed.clear()
            await self._changed.wait()

    def _taken(self, item: Item) -> Taken | None:
        """``item`` for a worker now, or ``None``: it is held for its prefix's leader."""
        key, entry = item
        if entry is not None:  # answered by the cache: nothing is sent
            return key, None, entry
        if not self._shape(key).extra.get(SHARED_UNTIL):  # no shared part: as it comes
            return key, None, entry
        request = self._render(key)
        taken = (key, request, entry)
        group = prefix_key(request.extra, request.messages)
        if group is None or group in self._warm:
            return taken
        held = self._waiting.get(group)
        if held is None:  # the first of its prefix: the leader
            self._waiting[group] = []
            self._leaders[key] = group
            return taken
        held.append(taken)
        self._held += 1
        return None

    def done(self, key: str, outcome: Outcome | None) -> None:
        """A worker's outcome: a leader's releases its followers; then on to the sink."""
        group = self._leaders.pop(key, None)
        if group is not None:
            held = self._waiting.pop(group)
            self._warm[group] = None
            if len(self._warm) > MAX_WARM:
                del self._warm[next(iter(self._warm))]
            self._ready.extend(held)
            self._held -= len(held)
            self._changed.set()
        self._sink(key, outcome)

    def unanswered(self, key: str) -> None:
        self._source.unanswered(key)
