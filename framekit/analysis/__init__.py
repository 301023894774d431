"""Reading scored frames: summaries, comparisons, statistics, charts and an HTML report.

Everything here reads the result columns of a scored frame (the contract in
``framekit._result_columns``) and nothing of the engine, so it works as well on a
Parquet file scored last month as on a frame scored a second ago.

- ``summary``: :func:`summarize`, :func:`compare`, :func:`failures`, :func:`describe_comparison`.
- ``_stats``: bootstrap intervals and the tests behind ``compare``.
- ``plot``: matplotlib figures (``fk.plot``).
- ``report``: :func:`write_html_report`, one self-contained HTML file (``_report_rows``:
  its section of individual rows).
- ``side_by_side``: :func:`side_by_side`, one row per key, a column group per group of
  ``by`` (``fk.side_by_side``; ``_report_side_by_side`` is its HTML view).
- ``_table``: :func:`format_table`, a summary as text for a terminal.
- ``rank``: :func:`rank`, groups ranked from a pairs frame (``fk.rank``): win rates and
  Bradley-Terry strengths (``_bradley_terry``) with bootstrap intervals; ``_pairs`` reads
  a pairs frame into arrays (and measures the judge's position bias); ``pairwise_report``:
  :func:`write_pairwise_report`, the head-to-head HTML page of a pairs frame.
- ``agreement``, ``calibrate``, ``gate``: agreement with people, calibrated thresholds,
  pass/fail gates (``fk.agreement``, ``fk.calibrate``, ``fk.gate``).
"""

from framekit.analysis._table import format_table
from framekit.analysis.pairwise_report import write_pairwise_report
from framekit.analysis.report import write_html_report
from framekit.analysis.summary import (
    compare,
    describe_comparison,
    evaluator_names,
    failures,
    summarize,
)

__all__ = [
    "compare",
    "describe_comparison",
    "evaluator_names",
    "failures",
    "format_table",
    "summarize",
    "write_html_report",
    "write_pairwise_report",
]
