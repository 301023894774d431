"""``fk.plot``: charts of scored frames (they live in :mod:`framekit.analysis.plot` and
:mod:`framekit.analysis.plot_agreement`)."""

from framekit.analysis.plot import distributions, means, save
from framekit.analysis.plot_agreement import agreement

__all__ = ["agreement", "distributions", "means", "save"]
