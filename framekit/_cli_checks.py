"""Checks of the command line's results that turn a silent non-answer into an error."""

from __future__ import annotations

from typing import TYPE_CHECKING

from framekit._errors import InputError

if TYPE_CHECKING:
    import polars as pl


def unpaired_key(comparison: pl.DataFrame, on: str | None, by: str) -> None:
    """Raise when ``--on`` paired nothing: no key value appears in two groups.

    Without this, every comparison reads "not enough scored rows" and the command
    succeeds, though the real problem is the key (a different id per strategy).
    """
    if on is None or comparison.height == 0 or "n_pairs" not in comparison.columns:
        return
    pairs = comparison["n_pairs"].fill_null(0)
    dropped = (
        comparison["dropped_pairs"].fill_null(0)
        if "dropped_pairs" in comparison.columns
        else pairs * 0
    )
    if (pairs == 0).all() and (dropped == 0).all():
        raise InputError(
            f"--on {on}: no value of {on!r} appears in two groups of {by!r}, so no rows "
            f"can be paired; check that {on!r} identifies the same item in every group, "
            "or leave out --on for an unpaired comparison"
        )
