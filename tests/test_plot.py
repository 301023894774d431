"""fk.plot: figures without pyplot, PNGs of the promised size, a clear error without matplotlib."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from framekit import plot
from framekit.analysis.summary import summarize
from tests import figure_layout

pytest.importorskip("matplotlib")

LEVELS = np.array([0.0, 0.25, 0.5, 0.75, 1.0])


def scored(
    n: int = 40, names: tuple[str, ...] = ("coherence", "retrieval_relevance")
) -> pl.DataFrame:
    """Two strategies, each evaluator failing on every seventh row."""
    rng = np.random.default_rng(0)
    columns: dict[str, list] = {"strategy": ["plain"] * n + ["rag"] * n}
    for name in names:
        score = [None if i % 7 == 0 else float(v) for i, v in enumerate(rng.choice(LEVELS, 2 * n))]
        columns[f"{name}_score"] = score
        columns[f"{name}_label"] = [None if s is None else f"level {s}" for s in score]
        columns[f"{name}_passed"] = [None if s is None else s >= 0.5 for s in score]
        columns[f"{name}_error"] = ["timeout" if s is None else None for s in score]
    return pl.DataFrame(columns, schema_overrides={f"{n}_score": pl.Float64 for n in names})


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert (length, kind) == (13, b"IHDR"), "IHDR must be the first chunk"
    width, height = struct.unpack(">II", data[16:24])
    assert data[-8:-4] == b"IEND", "truncated PNG"
    return width, height


def test_distributions_draws_one_panel_per_evaluator_and_counts_errors() -> None:
    df = scored()
    fig = plot.distributions(df, by="strategy")
    assert [ax.get_title().split("\n")[0] for ax in fig.axes] == [
        "coherence",
        "retrieval_relevance",
    ]
    errors = df["coherence_score"].null_count()
    assert errors > 1
    assert fig.axes[0].get_title() == f"coherence\n{2 * 40 - errors} scored, {errors} errors"
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["plain", "rag"]
    # Bar heights add up to the scored rows of each group: failures are not drawn as 0.
    heights = sum(p.get_height() for p in fig.axes[0].patches)
    assert heights == 2 * 40 - errors


def test_means_bars_are_the_summary_means_with_interval_error_bars() -> None:
    df = scored()
    fig = plot.means(df, by="strategy", n_resamples=300)
    summary = summarize(df, by="strategy", n_resamples=300)
    ax = fig.axes[0]
    heights = sorted(round(p.get_height(), 12) for p in ax.patches)
    assert heights == sorted(round(m, 12) for m in summary["mean"].to_list())
    assert [t.get_text() for t in ax.get_xticklabels()] == ["coherence", "retrieval_relevance"]
    overall = plot.means(df, by=None, evaluators="coherence", n_resamples=300)
    assert len(overall.axes[0].patches) == 1 and not overall.legends


@pytest.mark.parametrize("dpi", [50, 100])
def test_saved_png_is_a_valid_image_of_the_expected_size(tmp_path: Path, dpi: int) -> None:
    fig = plot.distributions(scored(names=("a", "b", "c", "d")))  # 3 columns, 2 rows of 4x3 in
    out = plot.save(fig, tmp_path / "dist.png", dpi=dpi)
    assert out == tmp_path / "dist.png"
    assert png_size(out) == (12 * dpi, 6 * dpi)
    means = plot.means(scored(), n_resamples=100)
    width, height = means.get_size_inches()
    assert png_size(plot.save(means, tmp_path / "means.png", dpi=dpi)) == (
        round(width * dpi),
        round(height * dpi),
    )


def test_plotting_never_imports_pyplot_and_import_is_lazy() -> None:
    code = (
        "import sys, polars as pl\n"
        "from framekit import plot\n"
        "assert 'matplotlib' not in sys.modules, 'imported matplotlib eagerly'\n"
        "df = pl.DataFrame({'x_score': [0.5, 1.0], 'x_error': [None, None]})\n"
        "plot.distributions(df); plot.means(df, by=None, n_resamples=10)\n"
        "assert 'matplotlib' in sys.modules\n"
        "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot was imported'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parents[1],
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def test_a_missing_matplotlib_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'framekit\[plot\]'"):
        plot.distributions(scored())


def test_docstring_examples_run() -> None:
    import doctest

    assert doctest.testmod(plot).failed == 0


def test_two_level_scores_get_two_ticks_not_an_empty_middle_one() -> None:
    pytest.importorskip("matplotlib")
    frame = pl.DataFrame({"r_score": [0.0, 1.0, 1.0], "r_error": [None, None, None]})
    assert list(plot.distributions(frame).axes[0].get_xticks()) == [0.0, 1.0]


def crowded(groups: tuple[str, ...] = ("bm25", "dense", "hybrid")) -> pl.DataFrame:
    """Every bar as tall as the tallest: a legend inside any panel must cover one."""
    n = len(LEVELS) * 8
    scores = [float(LEVELS[i % len(LEVELS)]) for i in range(n)]
    high = [0.9 + 0.1 * (i % 2) for i in range(n)]  # means near the top of the axis
    return pl.DataFrame(
        {
            "strategy": [g for g in groups for _ in range(n)],
            "coherence_score": scores * len(groups),
            "coherence_error": [None] * (n * len(groups)),
            "faithfulness_score": high * len(groups),
            "faithfulness_error": [None] * (n * len(groups)),
            "groundedness_score": high[::-1] * len(groups),
            "groundedness_error": [None] * (n * len(groups)),
        },
        schema_overrides={
            f"{e}_error": pl.String for e in ("coherence", "faithfulness", "groundedness")
        },
    )


@pytest.mark.parametrize("chart", ["distributions", "means"])
def test_the_group_legend_covers_no_bar_or_title_and_stays_in_the_figure(chart: str) -> None:
    if chart == "distributions":
        fig = plot.distributions(crowded(), by="strategy")
    else:
        fig = plot.means(crowded(), "strategy", ["faithfulness", "groundedness"], n_resamples=100)
    renderer = figure_layout.draw(fig)
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
    drawn = figure_layout.bars(fig, renderer)
    assert legends and len(drawn) >= 6
    for legend in legends:
        box = legend.get_window_extent(renderer)
        assert figure_layout.inside(box, fig.bbox), "a legend is cut off at the figure's edge"
        covered = [b for b in drawn if box.overlaps(b)]
        assert not covered, f"the legend {box} covers {len(covered)} bars, e.g. {covered[0]}"
        for ax in fig.axes:
            for name, text in figure_layout.texts(ax, renderer).items():
                assert not box.overlaps(text), f"the legend covers the {name} of a panel"
    # The groups are coloured alike in every panel: one legend says it for all of them.
    (legend,) = legends
    assert [t.get_text() for t in legend.get_texts()] == ["bm25", "dense", "hybrid"]
