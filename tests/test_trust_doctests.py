"""The examples in the docstrings of the trust modules run and give what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "framekit.analysis._measures",
    "framekit.analysis._rubric",
    "framekit.analysis.agreement",
    "framekit.analysis.calibrate",
    "framekit.analysis.cascade_calibration",
    "framekit.analysis.estimate",
    "framekit.analysis.review",
    "framekit.analysis._outcome",
    "framekit.analysis.gate",
    "framekit.cli.gate",
    "framekit.engine.context_window",
    "framekit.engine.prepare",
    "framekit.engine.sampling",
    "framekit.engine.stats",
    "framekit.evaluators.base",
    "framekit.judges.cascade",
    "framekit.judges.local.coherence",
    "framekit.judges.local.confidence",
    "framekit.judges.logprobs",
    "framekit.testing._sim_logprobs",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
