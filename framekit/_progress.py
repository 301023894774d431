"""Progress of a run: the one place framekit shows it, and one display at a time.

:class:`RunProgress` follows a run over its rows (``evaluate_dataframe``: the frame;
``evaluate_parquet``: every row of the input, resumed rows counted at once). It shows
whole rows (a row counts when all its scores are in: scores settled // evaluators), the
scores cached, failed and sending (requests on the wire now, read live from the run's
``RunStats``), and a rate and ETA from the scores that came back from requests: whatever
settles before the first answer (cache hits, rows scored without a call) is counted at
once and never speeds up the rate.

Where it goes depends on where it runs:

- a terminal (stderr is a TTY): a tqdm bar, redrawn at most 5 times a second;
- a notebook with ipywidgets importable: a ``tqdm.auto`` widget (without ipywidgets
  tqdm would warn "IProgress not found", so the notebook gets plain lines instead);
- anything else (a pipe, a log file, CI, a notebook without ipywidgets): a plain line
  at most every ``LINE_EVERY_S`` seconds, never a bar's carriage returns.

While a run's display is open, the stages inside it (provider batches, the embedding
of texts) report through it, as a note after its counts, instead of a second bar.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections.abc import Callable
from typing import Any

LINE_EVERY_S = 10.0  # a plain line at most this often
_REDRAW_EVERY_S = 0.2

#: The open displays; only the first one draws.
_open: list[RunProgress] = []


def display_kind() -> str:
    """``"widget"``, ``"bar"`` or ``"lines"``: how progress is shown here."""
    if "ipykernel" in sys.modules:
        return "widget" if importlib.util.find_spec("ipywidgets") else "lines"
    isatty = getattr(sys.stderr, "isatty", None)
    return "bar" if isatty is not None and isatty() else "lines"


def _width() -> dict[str, Any]:
    """tqdm's width option: follow the terminal, or 100 columns where it reports none (a
    pseudo-terminal of size 0x0, as under ``script -qc``, where tqdm drew nothing: no
    column for the bar, and no row for its line)."""
    try:
        columns = os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError, AttributeError):
        columns = 0
    return {"dynamic_ncols": True} if columns > 0 else {"ncols": 100, "nrows": 24}


def duration(seconds: float) -> str:
    """A short human duration: ``45 s``, ``3 min 20 s``, ``1 h 05 min``.

    Examples
    --------
    >>> duration(45.2), duration(200), duration(3900)
    ('45 s', '3 min 20 s', '1 h 05 min')
    """
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class RunProgress:
    """One run's rows, with cached / failed / sending counts, rate and ETA.

    ``report(n, kind)`` is the engine's progress callback: ``n`` scores settled as
    ``"done"``, ``"cached"`` or ``"failed"``. ``stats`` (a ``RunStats``, replaceable per
    slice) is read for the requests in flight.
    """

    def __init__(
        self,
        rows: int,
        evaluators: int,
        *,
        initial_rows: int = 0,
        stats: Any = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rows, self.per_row, self.initial = rows, max(1, evaluators), initial_rows
        self.stats = stats
        self.clock = clock
        self.counts = {"done": 0, "cached": 0, "failed": 0}
        self.note = ""
        self.started = clock()
        self._first_answer: tuple[float, int] | None = None  # (time, sent scores then)
        self._drawn = self._lined = self.started
        self.kind = "none" if _open else display_kind()
        self.bar: Any = None
        if self.kind != "none" and self.kind != "lines":
            if self.kind == "widget":
                from tqdm.auto import tqdm
            else:
                from tqdm import tqdm
            self.bar = tqdm(
                total=rows,
                initial=initial_rows,
                desc="framekit",
                unit="row",
                **_width(),
                bar_format="{desc}: {n_fmt}/{total_fmt} rows |{bar}|{postfix}",
            )
        _open.append(self)

    # -- what the engine tells ------------------------------------------------------
    def report(self, n: int, kind: str) -> None:
        """``n`` scores settled as ``kind``."""
        self.counts[kind] += n
        sent = self._sent()
        if self._first_answer is None and kind != "cached" and self._sending_began():
            self._first_answer = (self.clock(), sent)
        self._show()

    def advance(self, rows: int, failures: int) -> None:
        """A Parquet slice is written (its scores were all reported): redraw now."""
        self._show(force=True)

    def set_note(self, note: str) -> None:
        """What a stage inside the run is doing (``batch: in progress; ...``)."""
        self.note = note
        self._show()

    def close(self) -> None:
        if self in _open:
            _open.remove(self)
        if self.bar is not None:
            self.bar.n = self.done_rows
            self.bar.set_postfix_str(self.describe(final=True), refresh=False)
            self.bar.close()

    # -- what it shows --------------------------------------------------------------
    @property
    def done_rows(self) -> int:
        """Whole rows: every score of the row settled (resumed rows included)."""
        settled = sum(self.counts.values())
        return min(self.rows, self.initial + settled // self.per_row)

    def _sent(self) -> int:
        return self.counts["done"] + self.counts["failed"]

    def _sending_began(self) -> bool:
        return self.stats is None or getattr(self.stats, "requests_sent", 0) > 0

    def rate(self) -> float | None:
        """Scores per second that came back from requests, since the first answer."""
        if self._first_answer is None:
            return None
        at, base = self._first_answer
        elapsed, answered = self.clock() - at, self._sent() - base
        return answered / elapsed if elapsed > 0.5 and answered > 0 else None

    def eta(self) -> float | None:
        """Seconds left: the scores still to settle at :meth:`rate`."""
        rate = self.rate()
        if rate is None:
            return None
        left = (self.rows - self.initial) * self.per_row - sum(self.counts.values())
        return max(0, left) / rate

    def describe(self, final: bool = False) -> str:
        """The counts, then rate and ETA (``final``: the elapsed time instead)."""
        c = self.counts
        unit = "scores" if self.per_row > 1 else "rows"
        parts = [f"{c['cached']} cached, {c['failed']} failed"]
        sending = getattr(self.stats, "sending", 0) if self.stats is not None else 0
        if not final:
            parts[0] += f", {sending} sending"
        rate = self.rate()
        if final:
            parts.append(f"done in {duration(self.clock() - self.started)}")
        elif rate is not None:
            eta = self.eta()
            parts.append(f"{rate:.1f} {unit}/s, ETA {duration(eta or 0)}")
        if self.note and not final:
            parts.append(self.note)
        return "; ".join(parts)

    def line(self) -> str:
        """The plain line written where no bar can be drawn."""
        return f"framekit: {self.done_rows}/{self.rows} rows; {self.describe()}"

    def _show(self, force: bool = False) -> None:
        now = self.clock()
        if self.bar is not None:
            if force or now - self._drawn >= _REDRAW_EVERY_S:
                self._drawn = now
                self.bar.n = self.done_rows
                self.bar.set_postfix_str(self.describe(), refresh=False)
                self.bar.refresh()
        elif self.kind == "lines" and now - self._lined >= LINE_EVERY_S:
            self._lined = now
            print(self.line(), file=sys.stderr, flush=True)


def active() -> RunProgress | None:
    """The run display that is open, if any (stages report through it)."""
    return _open[0] if _open else None


class _StageBar:
    """A stage's count (texts embedded) as a note on the open run display."""

    def __init__(self, run: RunProgress, total: int, desc: str, unit: str) -> None:
        self.run, self.total, self.desc, self.unit, self.n = run, total, desc, unit, 0
        run.set_note(f"{desc} {self.n}/{total} {unit}s")

    def update(self, n: int) -> None:
        self.n += n
        self.run.set_note(f"{self.desc} {self.n}/{self.total} {self.unit}s")

    def close(self) -> None:
        self.run.set_note("")


def bar(total: float, desc: str, unit: str, **options: Any) -> Any:
    """A stage's progress: a note on the open run display, else a bar of its own in a
    terminal, else nothing (``options``: tqdm's own)."""
    run = active()
    if run is not None:
        return _StageBar(run, int(total), desc, unit)
    if display_kind() == "lines":
        return _Silent()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, dynamic_ncols=True, **options)


class _Silent:
    def update(self, n: int = 1) -> None: ...

    def close(self) -> None: ...

    def set_postfix_str(self, text: str, refresh: bool = True) -> None: ...


class BatchBar:
    """Provider batches' states and counts: a note on the run display (or a bar)."""

    def __init__(self) -> None:
        self.run = active()
        self.bar = None if self.run is not None else bar(0, "batch", "req", leave=False)
        self.states: dict[str, Any] = {}

    def update(self, batch_id: str, status: Any) -> None:
        """The latest status of one batch (``state``, ``total``, ``completed``, ``failed``)."""
        self.states[batch_id] = status
        statuses = list(self.states.values())
        done = sum(s.completed + s.failed for s in statuses)
        failed = sum(s.failed for s in statuses)
        words = sorted({s.state.replace("_", " ") for s in statuses})
        text = f"batch {'/'.join(words)}; {done - failed} completed, {failed} failed"
        if self.run is not None:
            self.run.set_note(text)
        elif self.bar is not None:
            self.bar.set_postfix_str(text)

    def close(self) -> None:
        if self.run is not None:
            self.run.set_note("")
        elif self.bar is not None:
            self.bar.close()
