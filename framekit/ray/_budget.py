"""One budget for the whole cluster: an actor holding the run's :class:`Budget` and the
worker-side proxy every worker's executors ask.

``max_cost_usd`` on Ray means what it means in one process (:mod:`framekit.engine.budget`):
each request, on any worker, reserves the most it could cost from the one actor before it
goes, and settles with what it cost. A reservation is one actor round trip (a few
milliseconds, next to a judge call's hundreds); a settlement is sent without waiting
(calls from one worker to the actor run in the order they were made). The actor belongs
to the run that made it (not named, not detached): another job has a budget of its own.
"""

from __future__ import annotations

from typing import Any

import ray

from framekit.engine.budget import Budget


class _BudgetActor:
    """The run's budget, in one place for every worker (runs as a Ray actor)."""

    def __init__(self, limit: float) -> None:
        self.budget = Budget(limit)

    def take(self, amount: float) -> bool:
        return self.budget.take(amount)

    def settle(self, held: float, cost: float) -> None:
        self.budget.settle(held, cost)

    def spent(self) -> float:
        return self.budget.spent


def budget_actor(limit: float | None) -> Any:
    """The actor holding a budget of ``limit`` US dollars (``None``: no budget)."""
    if limit is None:
        return None
    return ray.remote(_BudgetActor).options(num_cpus=0).remote(limit)


class RemoteBudget:
    """Stands in for a :class:`~framekit.engine.budget.Budget` on a worker (the same
    methods: :class:`~framekit.engine.budget.Spending`), asking the run's actor."""

    def __init__(self, actor: Any, limit: float) -> None:
        self._actor = actor
        self.limit = limit

    async def reserve(self, amount: float) -> bool:
        return bool(await self._actor.take.remote(amount))

    def take(self, amount: float) -> bool:
        return bool(ray.get(self._actor.take.remote(amount)))

    def settle(self, held: float, cost: float) -> None:
        self._actor.settle.remote(held, cost)  # fire and forget: in order per worker
