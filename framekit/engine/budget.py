"""A run's spending limit (``max_cost_usd``): no request goes out that could pass it.

The policy, in one place:

- Before each request (each attempt: a retry or a re-ask is a request too) the run
  reserves what the request could cost at most: its prompt at about 4 characters a token
  (the messages and the answer schema) plus the judge's ``max_tokens`` of answer, at the
  judge's price (:meth:`Judge.pricing <framekit.judges.judge.Judge.pricing>`); once replies
  show the endpoint counting more prompt tokens than that estimate (a tokenizer that reads
  fewer characters a token: code, JSON, other scripts), later reservations are scaled up
  by the largest ratio seen (:data:`MAX_SCALE` at most). It goes out
  only if what was spent, plus what is reserved by the requests in flight, plus this
  reservation stays within the budget. When its reply arrives the reservation is replaced
  by what the reply cost (a failed call costs nothing).
- The first request that does not fit closes the budget: no request is sent after it,
  even a smaller one, so the rows left are exactly the rows after the stop. Each of them
  carries :func:`budget_error` in ``<name>_error``. An error is never cached (only
  answers are), so a re-run with a higher budget sends exactly those rows; the rows
  already answered come from the cache.
- A budget with a judge whose price is unknown is an :class:`~framekit.InputError` before
  any call (:func:`check_priced`): an unpriced run cannot be held to a sum.
- Batch mode (``Judge(batch=True)``) reserves each line at the batch price as the batch
  is written; lines that do not fit are not submitted and are left as above.

One :class:`Budget` spans a whole call of an entry point (every slice of
``evaluate_parquet``, every stage of a cascade): the entry point opens it with
:func:`spending_limit` and the executors find it through :func:`current_budget`. On Ray
every worker asks one budget actor instead (:mod:`framekit.ray._budget`), which has the
same two methods.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import math
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from framekit._errors import InputError
from framekit._fault import Fault
from framekit._result_columns import column
from framekit.engine.savings import batch_saving, prompt_cache_saving
from framekit.judges.pricing import UNKNOWN_COST
from framekit.judges.usage import CHARS_PER_TOKEN, Price

#: How every budget error begins (the rows left are found by it).
BUDGET_REACHED = "budget reached"
#: Tokens a chat message costs beyond its text (role and separators), rounded up.
MESSAGE_OVERHEAD_TOKENS = 4
#: The most a reservation's prompt estimate is scaled up by what replies counted: one
#: token a character, for text at 4 characters a token.
MAX_SCALE = 4.0


def budget_error(limit: float) -> str:
    """The error a row left by the budget carries (one line, the same for every row).

    Examples
    --------
    >>> budget_error(5.0)[:60]
    'budget reached: not sent, as it could have taken the run pas'
    """
    return (
        f"{BUDGET_REACHED}: not sent, as it could have taken the run past max_cost_usd="
        f"{limit:g}; run again with a higher budget to score it (answers already paid "
        "for come from the cache)"
    )


def check_budget(max_cost_usd: Any) -> float | None:
    """``max_cost_usd`` checked: a positive, finite number of US dollars, or ``None``.

    Examples
    --------
    >>> check_budget(5)
    5.0
    >>> check_budget(-1)
    Traceback (most recent call last):
    ...
    framekit.InputError: max_cost_usd must be a positive number of US dollars, got -1
    """
    if max_cost_usd is None:
        return None
    ok = isinstance(max_cost_usd, (int, float)) and not isinstance(max_cost_usd, bool)
    if not ok or not math.isfinite(max_cost_usd) or max_cost_usd <= 0:
        raise InputError(
            f"max_cost_usd must be a positive number of US dollars, got {max_cost_usd!r}"
        )
    return float(max_cost_usd)


class Spending(Protocol):
    """What an executor asks of a budget: this process's :class:`Budget`, or a Ray
    worker's proxy of the cluster's budget actor."""

    limit: float

    async def reserve(self, amount: float) -> bool:
        """Hold ``amount`` for a request about to go; ``False``: it does not fit (and
        from now on nothing does)."""

    def take(self, amount: float) -> bool:
        """:meth:`reserve`, without waiting on an event loop (a batch file being written)."""

    def settle(self, held: float, cost: float) -> None:
        """A request that held ``held`` is over and cost ``cost``."""


class Budget:
    """Spent and held money against a limit, for every executor of one run.

    Thread-safe: two slices, or a notebook's two threads, may share it.

    Examples
    --------
    >>> budget = Budget(1.0)
    >>> budget.take(0.6), budget.take(0.6), budget.take(0.1)
    (True, False, False)
    >>> budget.settle(0.6, 0.2); round(budget.spent, 2), budget.reached
    (0.2, True)
    """

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.spent = 0.0
        self.held = 0.0
        self.reached = False
        self._lock = threading.Lock()

    def take(self, amount: float) -> bool:
        """Hold ``amount`` if it fits; the first that does not closes the budget."""
        with self._lock:
            if self.reached:
                return False
            if self.spent + self.held + amount > self.limit:
                self.reached = True
                return False
            self.held += amount
            return True

    async def reserve(self, amount: float) -> bool:
        return self.take(amount)

    def settle(self, held: float, cost: float) -> None:
        with self._lock:
            self.held = max(0.0, self.held - held)
            self.spent += cost


_current: contextvars.ContextVar[Spending | None] = contextvars.ContextVar(
    "framekit_budget", default=None
)


def current_budget() -> Spending | None:
    """The budget of the run this code is part of (``None``: no limit)."""
    return _current.get()


@contextlib.contextmanager
def spending_limit(
    max_cost_usd: float | None = None, budget: Spending | None = None
) -> Iterator[Spending | None]:
    """Run the body under a budget of ``max_cost_usd`` (or the given ``budget``, e.g. a Ray
    worker's proxy); with neither, under the budget already in force, if any. Entry points
    wrap a whole call in it, so its slices, stages and executors share one budget."""
    limit = check_budget(max_cost_usd)
    chosen = budget if budget is not None else (Budget(limit) if limit is not None else None)
    if chosen is None:
        yield _current.get()
        return
    token = _current.set(chosen)
    try:
        yield chosen
    finally:
        _current.reset(token)


async def check_priced(judges: Iterable[Any]) -> None:
    """Under a budget, :func:`require_prices` of the run's judges, in a thread (a list
    price imports litellm); nothing without one."""
    if current_budget() is not None:
        await asyncio.to_thread(require_prices, list(judges))


def require_prices(judges: Iterable[Any]) -> None:
    """Every LLM judge among ``judges`` (judges of any kind; each stage of a cascade too)
    has a price, else an :class:`~framekit.InputError` naming the first that has none:
    an unpriced run cannot be held to a sum."""
    seen: set[int] = set()
    for judge in judges:
        for stage in judge.stages():
            endpoint = stage.chat_endpoint
            if endpoint is None or id(endpoint) in seen:
                continue
            seen.add(id(endpoint))
            if endpoint.pricing() is None:
                raise InputError(
                    f"max_cost_usd needs a price for the judge {endpoint.model!r}; its "
                    f"cost is {UNKNOWN_COST}"
                )


def rows_left(frame: Any, names: Iterable[str]) -> int:
    """Rows of a scored polars frame that an evaluator left because the budget was
    reached (their ``<name>_error`` says so)."""
    import polars as pl

    left = [pl.col(column(name, "error")).str.starts_with(BUDGET_REACHED) for name in names]
    if not left or frame.height == 0:
        return 0
    return int(frame.select(pl.any_horizontal(left).fill_null(False).sum()).item() or 0)


def prompt_tokens(messages: list[dict[str, Any]], schema: Any = None) -> int:
    """An estimate of a request's prompt tokens: its messages' text and its answer
    schema at :data:`CHARS_PER_TOKEN`, plus :data:`MESSAGE_OVERHEAD_TOKENS` a message.

    Examples
    --------
    >>> prompt_tokens([{"role": "user", "content": "x" * 400}])
    104
    """
    chars = sum(len(str(m.get("content") or "")) for m in messages)
    if schema is not None:
        chars += len(json.dumps(schema))
    return -(-chars // CHARS_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS * len(messages)


@dataclass
class Ticket:
    """One request's reservation: what it holds, or why it may not go (``refused``)."""

    held: float = 0.0
    refused: str | None = None
    #: The prompt tokens estimated for it (see :attr:`Gate.scale`).
    tokens: int = 0


#: The ticket of a request sent without a budget: nothing held.
UNLIMITED = Ticket()


class Gate:
    """An executor's door to the run's budget: :meth:`reserve` before each request,
    :meth:`settle` after its reply. Without a budget, :meth:`reserve` lets every request
    go; :meth:`settle` also counts what the provider's prompt cache saved on the reply
    (:func:`framekit.engine.savings.prompt_cache_saving`) into the run's ``stats``."""

    def __init__(self, judge: Any, stats: Any, *, batch: bool = False) -> None:
        self.judge = judge
        self.stats = stats
        self.budget = current_budget()
        self.batch = batch
        self._price: Price | None = None
        self._priced = False
        #: Prompt tokens the endpoint counted per token estimated, the most seen (>= 1).
        self.scale = 1.0

    def _pricing(self) -> Price | None:
        """The judge's price, looked up on first use only (not once a reply)."""
        if not self._priced:
            self._price, self._priced = self.judge.pricing(batch=self.batch), True
        return self._price

    @property
    def limited(self) -> bool:
        """Whether the run has a budget (without one, no request needs a reservation)."""
        return self.budget is not None

    async def reserve(self, messages: list[dict[str, Any]], schema: Any = None) -> Ticket:
        """Hold the most this request could cost, or a refusal saying the budget is
        reached."""
        budget = self.budget
        if budget is None:
            return UNLIMITED
        if not self._priced:  # looked up once, off the loop (a list price imports litellm)
            await asyncio.to_thread(self._pricing)
        price = self._pricing()
        tokens = prompt_tokens(messages, schema)
        scaled = round(tokens * self.scale)
        most = 0.0 if price is None else price.cost(scaled, self.judge.max_tokens)
        if await budget.reserve(most):
            return Ticket(most, tokens=tokens)
        return Ticket(refused=budget_error(budget.limit))

    def settle(self, ticket: Ticket, reply: Any) -> None:
        """The request of ``ticket`` is over: ``reply`` is its raw reply, a
        :class:`~framekit._fault.Fault` or ``None`` (cancelled: nothing known billed)."""
        billed = reply is not None and not isinstance(reply, Fault)
        if billed and (reply.cached_tokens or reply.written_tokens):
            self.stats.saved_prompt_cache_usd += prompt_cache_saving(reply, self._pricing())
        if self.budget is None or ticket.refused is not None:
            return
        cost = 0.0
        if billed:  # an answer of unknown cost (never, under a budget) counts as held
            cost = ticket.held if reply.cost_usd is None else reply.cost_usd
            if ticket.tokens and reply.prompt_tokens > ticket.tokens * self.scale:
                self.scale = min(MAX_SCALE, reply.prompt_tokens / ticket.tokens)
        self.budget.settle(ticket.held, cost)


def budget_reached(stats: Any, where: Any) -> str:
    """The command line's one line when a run left rows for want of budget (exit 1).

    Examples
    --------
    >>> from framekit.engine.stats import RunStats
    >>> print(budget_reached(RunStats(cost_usd=4.98, budget_usd=5.0, rows_left=120),
    ...                      "out.parquet"))
    framekit: budget reached: $4.9800 spent of --max-cost $5.00; 120 rows left unscored in out.parquet (their *_error says so): the same command with a higher --max-cost scores exactly those
    """
    spent = stats.cost_usd or 0.0
    rows = f"{stats.rows_left} row{'' if stats.rows_left == 1 else 's'}"
    return (
        f"framekit: {BUDGET_REACHED}: ${spent:.4f} spent of --max-cost ${stats.budget_usd:.2f}; "
        f"{rows} left unscored in {where} (their *_error says so): the same command with a "
        "higher --max-cost scores exactly those"
    )


def estimate_fits(plan: Any, limit: float) -> tuple[bool, str]:
    """Whether a dry run's estimate fits ``--max-cost``, and the line that says so.

    ``plan`` is a :class:`~framekit.engine.dryrun.RequestPlan`. The estimate assumes
    answers of the dry run's typical length; a run reserves each request's ``max_tokens``
    while it is in flight, so a run near its budget stops a little before it.

    Examples
    --------
    >>> from framekit.engine.dryrun import RequestPlan
    >>> estimate_fits(RequestPlan(requests=100, cost_usd=2.0), 5.0)[1]
    '  budget: the estimated cost $2.0000 fits within --max-cost $5.00'
    >>> print(estimate_fits(RequestPlan(requests=100, cost_usd=8.0), 5.0)[1])
      budget: the estimated cost $8.0000 is over --max-cost $5.00: a run would stop at the budget and leave about 38 of the 100 requests unsent (the same command with a higher --max-cost sends them)
    """
    if not plan.cost_known:
        return False, (
            f"  budget: --max-cost ${limit:.2f} cannot be checked: the cost is {UNKNOWN_COST}; "
            "a run would refuse it"
        )
    cost = plan.cost_usd or 0.0
    if cost <= limit:
        return True, f"  budget: the estimated cost ${cost:.4f} fits within --max-cost ${limit:.2f}"
    left = round(plan.requests * (1.0 - limit / cost))
    return False, (
        f"  budget: the estimated cost ${cost:.4f} is over --max-cost ${limit:.2f}: a run "
        f"would stop at the budget and leave about {left} of the {plan.requests} requests "
        "unsent (the same command with a higher --max-cost sends them)"
    )


class BatchGate(Gate):
    """A batch executor's door to the run's budget: each line is held at the batch price
    as the batch file is written (:meth:`admit`), and settled as its result is read
    (:meth:`settle_line`). Lines that do not fit are not submitted; the policy is the
    direct path's (see the module docstring). Also counts what batch mode saved
    (:func:`framekit.engine.savings.batch_saving`)."""

    def __init__(self, judge: Any, stats: Any) -> None:
        super().__init__(judge, stats, batch=True)
        self._held: dict[str, float] = {}

    def admit(
        self, lines: Iterable[tuple[str, list[dict[str, Any]], Any]], refuse: Any
    ) -> Iterator[tuple[str, list[dict[str, Any]], Any]]:
        """The ``(key, messages, shape)`` lines that fit, held as they pass; each that does
        not is handed to ``refuse(key, error)`` instead."""
        budget = self.budget
        if budget is None:
            yield from lines
            return
        price = self.judge.pricing(batch=True)  # known: check_priced ran before the run
        for key, messages, shape in lines:
            most = 0.0
            if price is not None:
                tokens = prompt_tokens(messages, getattr(shape, "schema", None))
                most = price.cost(tokens, self.judge.max_tokens)
            if budget.take(most):
                self._held[key] = self._held.get(key, 0.0) + most
                yield key, messages, shape
            else:
                refuse(key, budget_error(budget.limit))

    def settle_line(self, key: str, reply: Any) -> None:
        """Line ``key``'s result was read: ``reply`` is its raw reply or a fault."""
        billed = reply is not None and not isinstance(reply, Fault)
        if billed:
            self.stats.saved_batch_usd += batch_saving(
                reply,
                self.judge.pricing(batch=False),
                reply.cost_at(self.judge.pricing(batch=True)),
            )
        held = self._held.pop(key, 0.0)
        self.settle(Ticket(held), reply)
