"""Batch mode over a Parquet source: submit every slice's batch before waiting for one.

Scoring slice by slice would wait for each slice's batch in turn (each up to 24 hours).
So a batch judge first goes over the pending slices with ``wait=False``: each slice's
requests are planned and submitted (recorded in the cache's batch manifests), and the
ordinary slice loop that follows resumes those batches, which the provider has been
working on side by side.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from framekit._errors import BatchPending
from framekit.evaluate import evaluate_with_stats


async def submit_all_slices(
    judge: Any,
    slices: Sequence[tuple[int, int]],
    done: set[int] | Sequence[int],
    read_slice: Callable[[int, int], Any],
    **evaluate: Any,
) -> None:
    """Plan and submit the batches of every slice not yet done; wait for none."""
    endpoint = judge.chat_endpoint
    if endpoint is None or not endpoint.batch or len(slices) - len(done) < 2:
        return
    eager = copy.copy(judge)
    eager.batching = replace(judge.batching, wait=False)
    for i, (offset, length) in enumerate(slices):
        if i in done:
            continue
        try:
            await evaluate_with_stats(
                read_slice(offset, length), judge=eager, progress=False, **evaluate
            )
        except BatchPending:
            continue
