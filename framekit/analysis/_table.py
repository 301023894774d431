"""``format_table``: a summary or comparison frame as a compact text table for a terminal."""

from __future__ import annotations

import polars as pl


def format_table(frame: pl.DataFrame) -> str:
    """A compact text table for a terminal (floats to 3 decimals, label counts inline).

    Examples
    --------
    >>> print(format_table(pl.DataFrame({"evaluator": ["coherence"], "mean": [0.75]})))
    | evaluator | mean  |
    |-----------|-------|
    | coherence | 0.750 |
    """
    shown = frame
    if "label_counts" in frame.columns:
        text = frame["label_counts"].map_elements(
            lambda counts: ", ".join(f"{c['label']}: {c['count']}" for c in counts),
            return_dtype=pl.String,
            skip_nulls=True,
        )
        shown = frame.with_columns(text.alias("labels"))
        shown = shown.drop("label_counts")
    with pl.Config(
        tbl_rows=-1,
        tbl_cols=-1,
        float_precision=3,
        tbl_hide_dataframe_shape=True,
        tbl_hide_column_data_types=True,
        tbl_formatting="ASCII_MARKDOWN",
        fmt_str_lengths=60,
        tbl_width_chars=200,
    ):
        return str(shown)
