"""Text for a terminal: ``format_table`` (a summary or comparison as a compact table) and
``terminal_safe`` (data shown without letting it drive the terminal)."""

from __future__ import annotations

import re

import polars as pl

# C0 and C1 controls (ESC, CSI, BEL, CR...), DEL, and the bidirectional overrides that
# reorder what a reader sees. Group names and labels come from the data: printed raw, an
# ESC sequence recolours or rewrites the terminal.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    r"""``text`` with every control character written as its escape (``\x1b``), per line.

    Examples
    --------
    >>> terminal_safe("\x1b[31mred\x1b[0m\nb\x07")
    '\\x1b[31mred\\x1b[0m\nb\\x07'
    """
    return "\n".join(_cell_safe(line) for line in text.split("\n"))


def _cell_safe(text: str) -> str:
    """``text`` on one line: every control character (newlines too) as its escape."""
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def format_table(frame: pl.DataFrame) -> str:
    r"""A compact text table for a terminal (floats to 3 decimals, label counts inline,
    control characters in text escaped).

    Examples
    --------
    >>> print(format_table(pl.DataFrame({"evaluator": ["coherence"], "mean": [0.75]})))
    | evaluator | mean  |
    |-----------|-------|
    | coherence | 0.750 |
    >>> print(format_table(pl.DataFrame({"g": ["\x1b[2Jwiped"]})))
    | g            |
    |--------------|
    | \x1b[2Jwiped |
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
    texts = [
        c
        for c, dtype in shown.schema.items()
        if dtype in (pl.String, pl.Categorical) or isinstance(dtype, pl.Enum)
    ]
    shown = shown.with_columns(
        pl.col(c).cast(pl.String).map_elements(_cell_safe, return_dtype=pl.String, skip_nulls=True)
        for c in texts
    ).rename(_cell_safe)
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
