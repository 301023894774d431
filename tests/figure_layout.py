"""Where a matplotlib figure's parts land once drawn: boxes in pixels, from the renderer.

A chart test asks what a reader would see: does the legend cover a bar, does one panel's
title run into another panel's axis label, is any text cut off at the figure's edge.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # matplotlib is an extra: imported when a figure is drawn
    from matplotlib.figure import Figure
    from matplotlib.transforms import Bbox


def draw(fig: Figure) -> Any:
    """Lay the figure out and draw it (constrained layout runs at draw time); the renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def bars(fig: Figure, renderer: Any) -> list[Bbox]:
    """The box of every bar drawn (rectangles of some height) in every panel."""
    return [
        p.get_window_extent(renderer)
        for ax in fig.axes
        for p in ax.patches
        if p.get_visible() and p.get_height() > 0
    ]


def texts(ax: Any, renderer: Any) -> dict[str, Bbox]:
    """A panel's title, axis labels and tick labels by name, for those with text."""
    parts = {"title": ax.title, "xlabel": ax.xaxis.label, "ylabel": ax.yaxis.label}
    for name, axis in (("xtick", ax.xaxis), ("ytick", ax.yaxis)):
        low, high = sorted(axis.get_view_interval())
        # Ticks outside the view keep a label that is never drawn.
        drawn = zip(axis.get_ticklocs(), axis.get_ticklabels(), strict=True)
        parts |= {f"{name} {t.get_text()}": t for at, t in drawn if low <= at <= high}
    return {
        name: t.get_window_extent(renderer)
        for name, t in parts.items()
        if t.get_visible() and t.get_text()
    }


def inside(box: Bbox, outer: Bbox, slack: float = 0.5) -> bool:
    """``box`` lies within ``outer`` (to half a pixel of rounding)."""
    return (
        box.x0 >= outer.x0 - slack
        and box.y0 >= outer.y0 - slack
        and box.x1 <= outer.x1 + slack
        and box.y1 <= outer.y1 + slack
    )
