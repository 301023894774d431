"""``fk.plot``: charts of scored frames (they live in :mod:`framekit.analysis.plot`)."""

from framekit.analysis.plot import distributions, means, save

__all__ = ["distributions", "means", "save"]
