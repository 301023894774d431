"""Progress on the terminal: the one place framekit draws its bars.

All of them are ``tqdm.auto`` bars (a widget in a notebook, a line in a terminal),
imported when a bar is first drawn:

- :class:`EvaluationBar`: one run of ``evaluate_dataframe``, over evaluations, with done /
  cached / failed counts;
- :class:`RowBar`: a Parquet run, over the input's rows (resumed rows count as done);
- :class:`BatchBar`: a second line while provider batches run: their states and counts;
- :func:`bar`: a plain bar (the texts an embedding stage embeds).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any


def bar(total: float, desc: str, unit: str, **options: Any) -> Any:
    """A ``tqdm.auto`` bar of ``total`` ``unit`` (``options``: tqdm's own)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, dynamic_ncols=True, **options)


class EvaluationBar:
    """Over a run's evaluations, with done / cached / failed counts."""

    def __init__(self, total: int) -> None:
        self.bar = bar(total, "framekit", "eval")
        self.counts = {"done": 0, "cached": 0, "failed": 0}
        self._last = 0.0

    def report(self, n: int, kind: str) -> None:
        """``n`` evaluations finished as ``kind`` (``"done"``, ``"cached"``, ``"failed"``)."""
        self.counts[kind] += n
        self.bar.update(n)
        now = time.monotonic()
        if now - self._last > 0.2:
            self._last = now
            self.bar.set_postfix(self.counts, refresh=False)

    def close(self) -> None:
        self.bar.set_postfix(self.counts, refresh=False)
        self.bar.close()


class RowBar:
    """Over every row of a Parquet run's input (resumed rows count as done)."""

    def __init__(self, total: int, initial: int, evaluators: int) -> None:
        self.bar = bar(total, "framekit", "row", initial=initial)
        self.rows_done = initial
        self.per_row = max(1, evaluators)

    def report(self, evaluations: int, kind: str) -> None:
        """Moves the bar within a slice, as each evaluation finishes."""
        self.bar.update(evaluations / self.per_row)

    def advance(self, rows: int, failures: int) -> None:
        """A slice is written: the bar shows exactly the rows done."""
        self.rows_done += rows
        self.bar.n = self.rows_done
        self.bar.set_postfix({"failed": failures}, refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        self.bar.close()


class BatchBar:
    """A second line: each provider batch's state and counts, elapsed time."""

    def __init__(self) -> None:
        self.bar = bar(0, "batch", "req", position=1, leave=False)
        self.states: dict[str, Any] = {}

    def update(self, batch_id: str, status: Any) -> None:
        """The latest status of one batch (``state``, ``total``, ``completed``, ``failed``)."""
        self.states[batch_id] = status
        statuses: Mapping[str, Any] = self.states
        total = sum(s.total for s in statuses.values())
        done = sum(s.completed + s.failed for s in statuses.values())
        failed = sum(s.failed for s in statuses.values())
        words = sorted({s.state.replace("_", " ") for s in statuses.values()})
        self.bar.total = total
        self.bar.n = done
        self.bar.set_postfix_str(f"{'/'.join(words)}; {done - failed} completed, {failed} failed")

    def close(self) -> None:
        self.bar.close()
