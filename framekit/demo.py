"""``framekit demo``: score the bundled sample with every built-in evaluator, offline.

The sample (``framekit.data.load_sample()``) is 200 answers of a small RAG application
under two retrieval strategies. The demo scores it with the seven built-in evaluators on
the offline local judge (or on ``$FRAMEKIT_JUDGE`` through litellm when that is set),
prints a summary per evaluator and per strategy, and writes ``scored.parquet`` and two
PNG charts into the output directory. Answers and embeddings are cached, so a second run
is immediate.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from framekit.evaluators.registry import available_evaluators
from framekit.judges.resolve import JudgeLike

if TYPE_CHECKING:
    import polars as pl

    from framekit.engine.cache import Cache
    from framekit.evaluators.base import Evaluator

#: How the sample's columns feed the evaluators' fields.
DEMO_MAPPING = {
    "input": "question",
    "output": "answer",
    "context": "documents",
    "history": "history",
    "reference": "reference",
}


@dataclass
class DemoResult:
    """What :func:`run_demo` produced."""

    scored: pl.DataFrame
    scored_path: Path
    charts: list[Path]
    summary: pl.DataFrame
    by_strategy: pl.DataFrame
    evaluators: list[str]
    missing: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0


def run_demo(
    out_dir: str | os.PathLike[str] = "demo-out",
    judge: JudgeLike | None = None,
    *,
    cache: Cache | str | bool | None = None,
    evaluators: list[Evaluator] | None = None,
    echo: bool = True,
    likelihood: bool = False,
) -> DemoResult:
    """Score the bundled sample and write ``scored.parquet`` and charts to ``out_dir``.

    Parameters
    ----------
    out_dir
        Output directory (created).
    judge
        ``None``: ``$FRAMEKIT_JUDGE`` if set, else the offline local judge.
    cache
        As for :func:`framekit.evaluate_dataframe` (default: the user cache directory).
    evaluators
        Default: every built-in evaluator, default-configured (AnswerRelevancy then
        embeds its questions offline, even with an LLM judge).
    echo
        Print progress, the summaries and the paths written.
    likelihood
        On the offline judge, read Groundedness, ContextRecall and Coherence with the
        ``lm`` extra's likelihood scorer (``framekit demo --lm``): minutes instead of
        seconds, so the demo leaves it out by default and says how to turn it on.

    Returns
    -------
    DemoResult
        The scored frame, the files written and the two summaries.

    Examples
    --------
    >>> from framekit.demo import run_demo
    >>> result = run_demo("demo-out")  # doctest: +SKIP
    >>> result.scored.height  # doctest: +SKIP
    200
    """
    import polars as pl

    from framekit._aio import run_sync
    from framekit.analysis import format_table, report
    from framekit.data import load_sample
    from framekit.engine.stats import record_last
    from framekit.evaluate import evaluate_with_stats
    from framekit.io import write_parquet

    started = time.perf_counter()
    say = print if echo else (lambda *a, **k: None)
    out = Path(out_dir)
    missing: list[str] = []
    if evaluators is None:
        evaluators, missing = available_evaluators()
    if missing:
        say(f"framekit demo: not in this version, skipped: {', '.join(missing)}", file=sys.stderr)
    judge = _demo_judge(judge, likelihood)
    sample = load_sample()
    say(
        f"framekit demo: scoring {sample.height} sample answers with "
        f"{', '.join(ev.name for ev in evaluators)}",
        file=sys.stderr,
    )
    scored, stats = run_sync(
        evaluate_with_stats(
            sample, evaluators, DEMO_MAPPING, judge=judge, cache=cache, progress=echo
        )
    )
    record_last(stats)
    assert isinstance(scored, pl.DataFrame)

    # Only now: a run that stopped (a missing offline model) leaves nothing behind.
    out.mkdir(parents=True, exist_ok=True)
    scored_path = write_parquet(scored, out / "scored.parquet", stats.provenance)

    summary = report.summarize(scored)
    by_strategy = report.summarize(scored, by="strategy")
    say("\nPer evaluator:\n")
    say(format_table(summary))
    say("\nPer retrieval strategy:\n")
    say(format_table(by_strategy))
    _explain_failures(scored, evaluators, say)
    say(_offline_note(stats, evaluators))

    charts = _charts(scored, out, say)
    elapsed = time.perf_counter() - started
    say(f"\nwrote {scored_path}" + "".join(f", {c}" for c in charts) + f" in {elapsed:.1f}s")
    say(_next_steps(scored_path))
    return DemoResult(
        scored=scored,
        scored_path=scored_path,
        charts=charts,
        summary=summary,
        by_strategy=by_strategy,
        evaluators=[ev.name for ev in evaluators],
        missing=missing,
        elapsed_s=elapsed,
    )


def _next_steps(scored_path: Path) -> str:
    """The commands to try next, on the file just written."""
    html = scored_path.with_name("report.html")
    return (
        "\nnext:\n"
        f"  framekit report {scored_path} --by strategy --on question_id --html {html}\n"
        f"  framekit compare {scored_path} --by strategy --on question_id\n"
        "  framekit evaluate YOUR.parquet -e retrieval_relevance --map input=<column> "
        "--map context=<column> --dry-run"
    )


def _demo_judge(judge: JudgeLike | None, likelihood: bool) -> JudgeLike:
    """The run's judge: the offline judge the demo picks (``None``, ``"local"``) reads
    likelihoods only when asked; a judge object given is used as it is."""
    from framekit.judges.local import LocalJudge
    from framekit.judges.resolve import resolve_judge

    resolved = resolve_judge(judge)
    if resolved.offline is not None and not isinstance(judge, LocalJudge):
        return LocalJudge(likelihood=likelihood)
    return resolved


def _offline_note(stats: Any, evaluators: list[Evaluator]) -> str:
    """How the offline judge measured "is it supported?", and what the lm extra adds."""
    from framekit._dependencies import install_command
    from framekit.evaluators._offline_support import calibration
    from framekit.judges.local.likelihood import likelihood_available, uses_likelihood

    record = stats.provenance or {}
    offline = {e["name"]: str(e.get("method") or "") for e in record.get("evaluators") or []}
    names = [ev.name for ev in evaluators if uses_likelihood(ev) and offline.get(ev.name)]
    if not names:
        return ""
    if all(offline[n].startswith("likelihood") for n in names):
        return f"\noffline: {', '.join(names)} read by the likelihood scorer (lm extra)"
    fits = calibration()
    proxy = fits["groundedness"]["similarity"]["figure"]
    lm = fits["groundedness"].get("likelihood", {}).get("figure")
    figures = f" (SummEval consistency Spearman {lm:.2f} vs {proxy:.2f})" if lm else ""
    how = (
        "installed here: `framekit demo --lm` uses it (about 1 text/s), and so does "
        "judge='local' in your own runs"
        if likelihood_available()
        else install_command("lm")
    )
    return (
        f"\noffline: {', '.join(names)} ran on embedding proxies. The likelihood scorer of "
        f"the lm extra agrees better with expert ratings{figures}: {how}"
    )


def _explain_failures(scored: pl.DataFrame, evaluators: list[Evaluator], say: Any) -> None:
    """Name the most common error, so a broken setup is not mistaken for bad scores."""
    from framekit.analysis import failures

    errors = failures(scored, evaluators=[ev.name for ev in evaluators])
    if errors.height:
        top = errors.row(0, named=True)
        say(
            f"\n{int(errors['count'].sum())} evaluations failed; most common "
            f"({top['evaluator']}, {top['count']}x): {top['error']}"
        )


def _charts(scored: pl.DataFrame, out: Path, say: Any) -> list[Path]:
    try:
        from framekit.analysis import plot

        return plot.save_charts(scored, out, by="strategy")
    except ModuleNotFoundError as exc:
        say(f"\nno charts: {exc}", file=sys.stderr)
        return []
